//go:build integration

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

package integration

import (
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// exitWithin is how soon the operator exits after SIGTERM.
const exitWithin = time.Second

// After SIGTERM the operator process exits with status 0 within a second, every time: with
// and without leader election, reading usage from a Prometheus that never answers, on a
// cluster it has synced and while it still lists.
func TestOperatorExitsWithinASecondOfSIGTERM(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	silent := silentServer(t)
	cases := []struct {
		args  []string
		after time.Duration // 0: once ready
	}{
		{nil, 0}, {nil, 0}, {[]string{"--leader-elect"}, 0}, {[]string{"--leader-elect"}, 0},
		{[]string{"--prometheus-url=http://" + silent}, 0}, {[]string{"--prometheus-url=http://" + silent}, 0},
		{nil, 50 * time.Millisecond}, {nil, 300 * time.Millisecond}, {[]string{"--leader-elect"}, 300 * time.Millisecond},
		{[]string{"--prometheus-url=http://" + silent}, 700 * time.Millisecond},
		{[]string{"--leader-elect"}, 50 * time.Millisecond}, {[]string{"--leader-elect"}, 100 * time.Millisecond},
		{[]string{"--leader-elect"}, 150 * time.Millisecond}, {[]string{"--leader-elect"}, 200 * time.Millisecond},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprintf("run %d %v after %s", i, tc.args, tc.after), func(t *testing.T) {
			took, out, err := stopAfter(t, c, tc.args, tc.after)
			if err != nil {
				t.Fatalf("exited with %v after SIGTERM, want status 0\n%s", err, out.String())
			}
			t.Logf("exited %s after SIGTERM", took.Round(time.Millisecond))
			if took > exitWithin {
				t.Errorf("exited %s after SIGTERM, want within %s\n%s", took.Round(time.Millisecond), exitWithin, out.String())
			}
		})
	}
}

// stopAfter runs the operator binary until it is ready (after 0) or for after, sends it
// SIGTERM, and returns how long it took to exit and how it exited.
func stopAfter(t *testing.T, c *cluster, extraArgs []string, after time.Duration) (time.Duration, *testenv.Buffer, error) {
	t.Helper()
	return stopProcessAfter(t, operatorBinary, append([]string{"--kubeconfig=" + c.env.KubeconfigPath(), "--namespace=" + operatorNamespace,
		"--metrics-bind-address=0"}, extraArgs...), after)
}

// stopProcessAfter runs binary with args and a health address until it is ready (after 0)
// or for after, sends it SIGTERM, and returns how long it took to exit and how it exited.
func stopProcessAfter(t *testing.T, binary string, args []string, after time.Duration) (time.Duration, *testenv.Buffer, error) {
	t.Helper()
	health := freeAddress(t)
	out := &testenv.Buffer{}
	cmd := exec.Command(binary, append(args, "--health-probe-bind-address="+health)...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	ready := func() error {
		resp, err := http.Get("http://" + health + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
		return nil
	}
	if after > 0 {
		time.Sleep(after) // the signal comes at a moment of the start, on purpose
	} else {
		eventually(t, 60*time.Second, filepath.Base(binary)+" ready", ready)
	}
	signalled := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		return time.Since(signalled), out, err
	case <-time.After(30 * time.Second):
		return time.Since(signalled), out, fmt.Errorf("still running 30s after SIGTERM")
	}
}

// silentServer is the address of a server that accepts connections and never answers.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, conn) // held open, never read
		}
	}()
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

// freeAddress is a loopback address with a port nothing listens on now.
func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
