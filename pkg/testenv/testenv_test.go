/*
Copyright The gpu-inventory-operator Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package testenv

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// fakeEtcdEnv makes the test binary act as an etcd that only answers /health (see TestMain).
const fakeEtcdEnv = "TESTENV_FAKE_ETCD"

func TestMain(m *testing.M) {
	if os.Getenv(fakeEtcdEnv) != "" {
		serveFakeEtcd(os.Args[1:])
		return
	}
	os.Exit(m.Run())
}

// serveFakeEtcd answers /health on the --listen-client-urls address until killed.
func serveFakeEtcd(args []string) {
	for i, arg := range args {
		if arg == "--listen-client-urls" && i+1 < len(args) {
			u, err := url.Parse(args[i+1])
			if err != nil {
				os.Exit(2)
			}
			l, err := net.Listen("tcp", u.Host)
			if err != nil {
				os.Exit(2)
			}
			_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"health":"true"}`)) }))
		}
	}
	os.Exit(2)
}

// Options.APIServerArgs reach kube-apiserver after the flags Start always passes. The test
// binary stands in for etcd; the fake kube-apiserver writes its arguments down and exits.
func TestStartPassesAPIServerArgs(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, argsFile := t.TempDir(), filepath.Join(t.TempDir(), "args")
	for name, script := range map[string]string{
		"etcd":           "exec env " + fakeEtcdEnv + "=1 '" + self + "' \"$@\"\n",
		"kube-apiserver": "for a in \"$@\"; do echo \"$a\"; done > '" + argsFile + "'; exit 1\n",
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	extra := []string{"--runtime-config=resource.k8s.io/v1=false", "--feature-gates=DRADeviceTaints=true"}
	_, err = Start(context.Background(), Options{BinDir: bin, Dir: t.TempDir(), StartTimeout: 10 * time.Second, APIServerArgs: extra})
	if err == nil || !strings.Contains(err.Error(), "kube-apiserver exited before it was ready") {
		t.Fatalf("Start error = %v; want the fake kube-apiserver's exit", err)
	}
	data, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatalf("kube-apiserver was not started: %v", err)
	}
	args := strings.Fields(string(data))
	if len(args) < len(extra)+1 || !strings.HasPrefix(args[0], "--etcd-servers=") {
		t.Fatalf("kube-apiserver arguments %q; want Start's own flags first", args)
	}
	if got := args[len(args)-len(extra):]; strings.Join(got, " ") != strings.Join(extra, " ") {
		t.Errorf("kube-apiserver's last arguments = %q, want %q", got, extra)
	}
}

// A component that fails to start is reported with the end of its log, and nothing is left
// running. Fake binaries stand in for etcd and kube-apiserver.
func TestStartFailureReportsTheLogTail(t *testing.T) {
	bin := t.TempDir()
	write := func(name, script string) {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("etcd", "echo 'starting etcd'; echo 'etcd: cannot listen: address already in use' >&2; exit 1\n")
	write("kube-apiserver", "exit 1\n")

	dir := t.TempDir()
	_, err := Start(context.Background(), Options{BinDir: bin, Dir: dir, StartTimeout: 10 * time.Second})
	if err == nil {
		t.Fatal("Start succeeded with an etcd that exits at once")
	}
	for _, want := range []string{"etcd exited before it was ready", "address already in use", "etcd.log"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestStartWithoutBinariesSaysHowToGetThem(t *testing.T) {
	t.Setenv(BinDirEnv, "")
	_, err := Start(context.Background(), Options{})
	if err == nil || !strings.Contains(err.Error(), "make testbin") {
		t.Errorf("error = %v, want one pointing at `make testbin`", err)
	}
	_, err = Start(context.Background(), Options{BinDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "etcd not found") {
		t.Errorf("error = %v, want one naming the missing etcd", err)
	}
}

// A component that cannot bind its port (freePort's port taken before the component bound
// it) is started again on new ports, up to startAttempts times; any other failure is
// reported at once.
func TestStartRetriesOnlyAPortTakenMeanwhile(t *testing.T) {
	for _, tc := range []struct {
		failure  string
		attempts string
	}{
		{"listen tcp 127.0.0.1:2379: bind: address already in use", "3"},
		{"cannot access data directory: permission denied", "1"},
	} {
		bin, counter := t.TempDir(), filepath.Join(t.TempDir(), "attempts")
		script := "n=$(cat " + counter + " 2>/dev/null || echo 0); echo $((n+1)) > " + counter + "\necho '" + tc.failure + "' >&2; exit 1\n"
		for name, body := range map[string]string{"etcd": script, "kube-apiserver": "exit 1\n"} {
			if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		_, err := Start(context.Background(), Options{BinDir: bin, Dir: t.TempDir(), StartTimeout: 10 * time.Second})
		if err == nil || !strings.Contains(err.Error(), tc.failure) {
			t.Errorf("%s: Start error = %v; want one that says so", tc.failure, err)
		}
		if got, _ := os.ReadFile(counter); strings.TrimSpace(string(got)) != tc.attempts {
			t.Errorf("%s: etcd started %s times; want %s", tc.failure, strings.TrimSpace(string(got)), tc.attempts)
		}
	}
}

// Only a Ready kwok node loses the not-ready taint that admission put on it.
func TestNotReadyTaintToLift(t *testing.T) {
	notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
	other := corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}
	node := func(kwok bool, ready corev1.ConditionStatus, taints ...corev1.Taint) *corev1.Node {
		n := &corev1.Node{Spec: corev1.NodeSpec{Taints: taints},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
		if kwok {
			n.Annotations = map[string]string{KwokAnnotation: "fake"}
		}
		return n
	}
	for _, tc := range []struct {
		name string
		node *corev1.Node
		want int
	}{
		{"Ready kwok node", node(true, corev1.ConditionTrue, other, notReady), 1},
		{"NotReady kwok node", node(true, corev1.ConditionFalse, notReady), -1},
		{"kwok node of unknown readiness", node(true, corev1.ConditionUnknown, notReady), -1},
		{"Ready node without kwok", node(false, corev1.ConditionTrue, notReady), -1},
		{"Ready kwok node without the taint", node(true, corev1.ConditionTrue, other), -1},
	} {
		if got := notReadyTaintToLift(tc.node); got != tc.want {
			t.Errorf("%s: notReadyTaintToLift = %d, want %d", tc.name, got, tc.want)
		}
	}
}
