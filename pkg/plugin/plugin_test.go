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

package plugin

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	gpufake "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned/fake"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/live"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/plugintest"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// statusTime is when the fixtures' inventories last changed; now is when the tests look.
var (
	statusTime = time.Date(2026, 11, 29, 21, 45, 38, 0, time.UTC)
	now        = statusTime.Add(3*time.Hour + 5*time.Minute)
)

// mixedFleetPrevious is what the operator knew of dgx-09 before its labels vanished 2 hours
// before statusTime.
var mixedFleetPrevious = []homelabv1.GpuNodeEntry{{
	Name: "dgx-09", Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8, GpuMemoryMiB: 81559, Family: "hopper", ComputeCapability: "9.0",
	LabelsMissing: true, LabelsMissingSince: &metav1.Time{Time: statusTime.Add(-2 * time.Hour)},
}}

// inventoryObject is a GpuInventory as the operator stores it for nodes.
func inventoryObject(name string, nodes []*corev1.Node, previous []homelabv1.GpuNodeEntry, selector *metav1.LabelSelector) *homelabv1.GpuInventory {
	return &homelabv1.GpuInventory{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1, ResourceVersion: "1",
			CreationTimestamp: metav1.NewTime(statusTime.Add(-24 * time.Hour))},
		Spec:   homelabv1.GpuInventorySpec{NodeSelector: selector},
		Status: live.InventoryStatus(nodes, nil, previous, 500, 1, statusTime),
	}
}

// fakeClients serves nodes (from a test server, as the API server does) and inventories;
// the GpuInventory CRD is installed when crdInstalled is true.
func fakeClients(t *testing.T, nodes []*corev1.Node, crdInstalled bool, inventories ...*homelabv1.GpuInventory) *factory.Factory {
	t.Helper()
	return fakeClientsServing(t, &plugintest.NodeServer{Nodes: nodes}, crdInstalled, inventories...)
}

// fakeClientsServing is fakeClients with the nodes served by nodes.
func fakeClientsServing(t *testing.T, nodes *plugintest.NodeServer, crdInstalled bool, inventories ...*homelabv1.GpuInventory) *factory.Factory {
	t.Helper()
	var invObjs []runtime.Object
	for _, gi := range inventories {
		invObjs = append(invObjs, gi.DeepCopy())
	}
	// Without field management: the apply configurations carry no schema, and the tests write
	// through the tracker.
	gpu := gpufake.NewClientset(invObjs...)
	disc := gpu.Discovery().(*fakediscovery.FakeDiscovery)
	if crdInstalled {
		disc.Resources = []*metav1.APIResourceList{{GroupVersion: homelabv1.SchemeGroupVersion.String(),
			APIResources: []metav1.APIResource{{Name: "gpuinventories", Kind: "GpuInventory"}}}}
	} else {
		// What the API server answers for a resource it does not serve.
		gpu.PrependReactor("*", "gpuinventories", func(action clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewGenericServerResponse(http.StatusNotFound, action.GetVerb(),
				homelabv1.Resource("gpuinventories"), "", "", 0, false)
		})
	}
	return &factory.Factory{Base: nodes.Start(t), Warnings: io.Discard, FakeGPU: fakeGPU{gpu}, FakeDiscovery: disc}
}

type result struct {
	out, err string
	code     int
}

// runPlugin runs the plugin in-process with fake clients.
func runPlugin(ctx context.Context, c *factory.Factory, terminal bool, env map[string]string, args ...string) result {
	var out, errOut bytes.Buffer
	code := run(ctx, args, factory.Environment{Out: &out, ErrOut: &errOut, Terminal: terminal,
		Getenv: func(k string) string { return env[k] }, Now: func() time.Time { return now }}, c)
	return result{out.String(), errOut.String(), code}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `go test ./pkg/plugin -update` to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (rerun with -update if the change is intended):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

func TestGoldenOutputs(t *testing.T) {
	fleets := map[string]func() *factory.Factory{
		"homelab": func() *factory.Factory {
			nodes := fixtures.HomeLab()
			return fakeClients(t, nodes, true, inventoryObject("cluster", nodes, nil, nil))
		},
		"mixed": func() *factory.Factory {
			nodes := fixtures.MixedFleet()
			return fakeClients(t, nodes, true, inventoryObject("cluster", nodes, mixedFleetPrevious, nil))
		},
	}
	cases := []struct {
		name     string
		args     []string
		terminal bool
	}{
		{"table", nil, false},
		{"table-terminal", nil, true},
		{"wide", []string{"-o", "wide"}, false},
		{"wide-terminal", []string{"-o", "wide"}, true},
		{"problems", []string{"--problems"}, false},
		{"json", []string{"-o", "json"}, false},
		{"yaml", []string{"-o", "yaml"}, false},
		{"scan", []string{"scan"}, false},
		{"scan-terminal", []string{"scan"}, true},
		{"scan-json", []string{"scan", "-o", "json"}, false},
		{"scan-selector", []string{"scan", "-l", "nvidia.com/gpu.family in (ampere,hopper)"}, false},
	}
	for fleet, clientsFor := range fleets {
		for _, tc := range cases {
			t.Run(fleet+"/"+tc.name, func(t *testing.T) {
				r := runPlugin(context.Background(), clientsFor(), tc.terminal, nil, tc.args...)
				if r.code != factory.ExitOK || r.err != "" {
					t.Fatalf("exit %d, stderr %q", r.code, r.err)
				}
				golden(t, fleet+"-"+tc.name+".golden", r.out)
				if tc.terminal {
					if !strings.Contains(r.out, "\x1b[") {
						t.Errorf("terminal output has no colour")
					}
					plain := runPlugin(context.Background(), clientsFor(), false, nil, tc.args...)
					if got := ansi.ReplaceAllString(r.out, ""); got != plain.out {
						t.Errorf("terminal output without its colour codes differs from the plain output:\n--- terminal\n%s--- plain\n%s", got, plain.out)
					}
				} else if strings.Contains(r.out, "\x1b") {
					t.Errorf("output to a non-terminal contains escape codes")
				}
			})
		}
	}
}

func TestNoColorTurnsColourOff(t *testing.T) {
	nodes := fixtures.HomeLab()
	c := fakeClients(t, nodes, true, inventoryObject("cluster", nodes, nil, nil))
	coloured := runPlugin(context.Background(), c, true, nil)
	noColor := runPlugin(context.Background(), c, true, map[string]string{"NO_COLOR": "1"})
	plain := runPlugin(context.Background(), c, false, nil)
	if !strings.Contains(coloured.out, "\x1b[31m") {
		t.Errorf("on a terminal without NO_COLOR, not-ready nodes are not red:\n%s", coloured.out)
	}
	if noColor.out != plain.out {
		t.Errorf("with NO_COLOR=1 on a terminal the output differs from the plain output:\n--- NO_COLOR\n%q\n--- plain\n%q", noColor.out, plain.out)
	}
}

func TestListGolden(t *testing.T) {
	mixed := fixtures.MixedFleet()
	home := fixtures.HomeLab()
	c := func() *factory.Factory {
		return fakeClients(t, append(mixed, home...), true,
			inventoryObject("cluster", mixed, mixedFleetPrevious, nil),
			inventoryObject("home-lab", home, nil, &metav1.LabelSelector{MatchLabels: map[string]string{"site": "home"}}),
			&homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: "new", ResourceVersion: "1"}})
	}
	for _, tc := range []struct {
		name     string
		args     []string
		terminal bool
	}{
		{"list", []string{"list"}, false},
		{"list-terminal", []string{"list"}, true},
		{"list-yaml", []string{"list", "-o", "yaml"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPlugin(context.Background(), c(), tc.terminal, nil, tc.args...)
			if r.code != factory.ExitOK || r.err != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.err)
			}
			golden(t, tc.name+".golden", r.out)
		})
	}
	// An inventory the operator has not reported yet says so.
	r := runPlugin(context.Background(), c(), false, nil, "new")
	if r.code != factory.ExitOK || !strings.Contains(r.out, "not reported yet") {
		t.Errorf("exit %d, output:\n%s", r.code, r.out)
	}
}

func TestExitCodes(t *testing.T) {
	home := fixtures.HomeLab() // every GPU node NotReady: Degraded
	healthy := fixtures.MixedFleet()[:1]
	c := fakeClients(t, append(home, healthy...), true,
		inventoryObject("cluster", home, nil, nil), inventoryObject("healthy", healthy, nil, nil))
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, factory.ExitOK},
		{[]string{"--fail-on-degraded"}, factory.ExitDegraded},
		{[]string{"--fail-on-degraded", "-o", "json"}, factory.ExitDegraded},
		{[]string{"healthy", "--fail-on-degraded"}, factory.ExitOK},
		{[]string{"list", "--fail-on-degraded"}, factory.ExitDegraded},
		{[]string{"scan", "--fail-on-degraded"}, factory.ExitDegraded},
		{[]string{"scan", "--fail-on-degraded", "-l", "nvidia.com/gpu.family=hopper"}, factory.ExitOK},
		{[]string{"-o", "table"}, factory.ExitError},
		{[]string{"--problems", "-o", "json"}, factory.ExitError},
		{[]string{"scan", "-l", "a b c"}, factory.ExitError},
		{[]string{"--no-such-flag"}, factory.ExitError},
		{[]string{"a", "b"}, factory.ExitError},
	} {
		r := runPlugin(context.Background(), c, false, nil, tc.args...)
		if r.code != tc.want {
			t.Errorf("kubectl gpuinv %s: exit %d, want %d (stderr %q)", strings.Join(tc.args, " "), r.code, tc.want, r.err)
		}
		if tc.want == factory.ExitDegraded && r.out == "" {
			t.Errorf("kubectl gpuinv %s: exit 3 without printing the inventory", strings.Join(tc.args, " "))
		}
		if (tc.want == factory.ExitError) != (r.err != "") {
			t.Errorf("kubectl gpuinv %s: exit %d with stderr %q", strings.Join(tc.args, " "), r.code, r.err)
		}
	}
}

func TestErrorMessagesSayWhatToDo(t *testing.T) {
	forbidden := func(c *factory.Factory, resource string) *factory.Factory {
		gr := schema.GroupResource{Group: homelabv1.GroupName, Resource: resource}
		c.FakeGPU.(fakeGPU).Clientset.PrependReactor("*", resource, func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(gr, "cluster", nil)
		})
		return c
	}
	forbiddenNodes := &plugintest.NodeServer{Fail: apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", nil)}
	home := fixtures.HomeLab()
	for _, tc := range []struct {
		name    string
		clients *factory.Factory
		args    []string
		want    string
	}{
		{"no CRD", fakeClients(t, home, false), nil, "error: " + factory.CRDNotInstalled + "\n"},
		{"no CRD, list", fakeClients(t, home, false), []string{"list"}, "error: " + factory.CRDNotInstalled + "\n"},
		{"no such inventory", fakeClients(t, home, true), []string{"nope"}, "error: GpuInventory \"nope\" not found; `kubectl gpuinv list` shows the inventories that exist\n"},
		{"forbidden get", forbidden(fakeClients(t, home, true), "gpuinventories"), nil,
			`error: permission denied: kubectl gpuinv needs "get" on gpuinventories in API group "homelab.youngju.dev" (cluster-scoped); ask a cluster admin for a ClusterRole that grants it (` + "`kubectl auth can-i get gpuinventories.homelab.youngju.dev`" + ` checks).`},
		{"forbidden list nodes", fakeClientsServing(t, forbiddenNodes, false), []string{"scan"},
			`error: permission denied: kubectl gpuinv needs "list" on nodes in the core API group ("") (cluster-scoped)`},
		{"unknown output", fakeClients(t, home, true), []string{"-o", "table"}, "error: unknown output format \"table\": use wide, json or yaml\nSee 'kubectl gpuinv --help' for usage.\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPlugin(context.Background(), tc.clients, false, nil, tc.args...)
			if r.code != factory.ExitError {
				t.Errorf("exit %d, want %d", r.code, factory.ExitError)
			}
			if !strings.HasPrefix(r.err, tc.want) {
				t.Errorf("stderr:\n%s\nwant it to start with:\n%s", r.err, tc.want)
			}
			if r.out != "" {
				t.Errorf("stdout %q, want nothing", r.out)
			}
		})
	}
	// Without the CRD, scan still works: it needs only the Nodes.
	r := runPlugin(context.Background(), fakeClients(t, home, false), false, nil, "scan")
	if r.code != factory.ExitOK || !strings.Contains(r.out, "GPU nodes:       0/4 ready") {
		t.Errorf("scan without the CRD: exit %d, stderr %q, output:\n%s", r.code, r.err, r.out)
	}
}

func TestCompletion(t *testing.T) {
	home := fixtures.HomeLab()
	c := fakeClients(t, home, true, inventoryObject("cluster", home, nil, nil), inventoryObject("home-lab", home, nil, nil))
	r := runPlugin(context.Background(), c, false, nil, "__complete", "")
	want := "cluster\t4 GPU nodes, 0 ready; 1 GPU, 0 ready\nhome-lab\t4 GPU nodes, 0 ready; 1 GPU, 0 ready\n:4\n"
	if r.code != factory.ExitOK || !strings.Contains(r.out, "\nscan\t") || !strings.HasSuffix(strings.SplitN(r.out, "Completion ended", 2)[0], want) {
		t.Errorf("completion of NAME: exit %d, output %q, want the subcommands, then %q", r.code, r.out, want)
	}
	r = runPlugin(context.Background(), c, false, nil, "completion", "bash")
	if r.code != factory.ExitOK || !strings.Contains(r.out, "__start_kubectl-gpuinv") {
		t.Errorf("completion bash: exit %d, output starts %.200q", r.code, r.out)
	}
}

// waitForOutput waits until the watching plugin has printed text (at most 10s).
func waitForOutput(t *testing.T, out *testenv.Buffer, text string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output within 10s:\n%s", text, out.String())
		}
		time.Sleep(10 * time.Millisecond) // polls the output under test
	}
}

// nuc1ComesBack makes the home lab's nuc1 Ready and stores the inventory that says so
// (resourceVersion 2, observed an hour after statusTime) in gpu's tracker.
func nuc1ComesBack(t *testing.T, gpu *gpufake.Clientset, home []*corev1.Node) *homelabv1.GpuInventory {
	t.Helper()
	home[0].Status.Conditions[0].Status = corev1.ConditionTrue
	changed := inventoryObject("cluster", home, nil, nil)
	changed.ResourceVersion = "2"
	changed.Status.ObservedAt = &metav1.Time{Time: statusTime.Add(time.Hour)}
	if err := gpu.Tracker().Update(homelabv1.SchemeGroupVersion.WithResource("gpuinventories"), changed, "", metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return changed
}

// A watch whose resourceVersion expired (HTTP 410) is resumed from a fresh list: what changed
// meanwhile is printed, and so is a deletion.
func TestWatchResumesAfterExpiry(t *testing.T) {
	for _, tc := range []struct {
		name string
		// meanwhile changes the inventory while the watch is down and returns the text that
		// must then appear.
		meanwhile func(t *testing.T, gpu *gpufake.Clientset, home []*corev1.Node) string
	}{
		{"changed meanwhile", func(t *testing.T, gpu *gpufake.Clientset, home []*corev1.Node) string {
			nuc1ComesBack(t, gpu, home)
			return statusTime.Add(time.Hour).Format(time.RFC3339)
		}},
		{"deleted meanwhile", func(t *testing.T, gpu *gpufake.Clientset, _ []*corev1.Node) string {
			if err := gpu.Tracker().Delete(homelabv1.SchemeGroupVersion.WithResource("gpuinventories"), "", "cluster", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			return "deleted"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := fixtures.HomeLab()
			c := fakeClients(t, home, true, inventoryObject("cluster", home, nil, nil))
			gpu := c.FakeGPU.(fakeGPU).Clientset
			expiring := watch.NewFake()
			watches := make(chan int, 10)
			var count int
			gpu.PrependWatchReactor("gpuinventories", func(clienttesting.Action) (bool, watch.Interface, error) {
				count++
				watches <- count
				if count == 1 {
					return true, expiring, nil
				}
				return false, nil, nil // the tracker serves the watches after the first
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out, errOut := &testenv.Buffer{}, &testenv.Buffer{}
			done := make(chan int, 1)
			go func() {
				done <- run(ctx, []string{"--watch"}, factory.Environment{Out: out, ErrOut: errOut,
					Getenv: func(string) string { return "" }, Now: func() time.Time { return now }}, c)
			}()
			waitWatch := func(n int) {
				t.Helper()
				select {
				case got := <-watches:
					if got != n {
						t.Fatalf("watch %d started, want %d", got, n)
					}
				case code := <-done:
					t.Fatalf("exited with %d before watch %d: %s", code, n, errOut.String())
				case <-time.After(10 * time.Second):
					t.Fatalf("no watch %d within 10s", n)
				}
			}
			waitWatch(1)
			want := tc.meanwhile(t, gpu, home)
			if strings.Contains(out.String(), want) {
				t.Fatalf("%q printed before the watch expired:\n%s", want, out.String())
			}
			expiring.Error(&metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired,
				Message: "too old resource version: 1 (5)"})
			waitWatch(2) // resumed after the list
			waitForOutput(t, out, want)
			cancel()
			if code := <-done; code != factory.ExitOK {
				t.Errorf("exit %d after cancel, stderr %q", code, errOut.String())
			}
		})
	}
}

func TestWatchPrintsEachChange(t *testing.T) {
	for _, terminal := range []bool{false, true} {
		name := "watch-lines.golden"
		if terminal {
			name = "watch-terminal.golden"
		}
		t.Run(name, func(t *testing.T) {
			home := fixtures.HomeLab()
			gi := inventoryObject("cluster", home, nil, nil)
			c := fakeClients(t, home, true, gi)
			gpu := c.FakeGPU.(fakeGPU).Clientset
			watching := make(chan struct{}, 10)
			gpu.PrependWatchReactor("gpuinventories", func(clienttesting.Action) (bool, watch.Interface, error) {
				watching <- struct{}{}
				return false, nil, nil // the tracker serves the watch
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out, errOut := &testenv.Buffer{}, &testenv.Buffer{}
			done := make(chan int, 1)
			go func() {
				done <- run(ctx, []string{"--watch"}, factory.Environment{Out: out, ErrOut: errOut, Terminal: terminal,
					Getenv: func(string) string { return "" }, Now: func() time.Time { return now }}, c)
			}()
			select {
			case <-watching:
			case code := <-done:
				t.Fatalf("exited with %d before watching: %s", code, errOut.String())
			case <-time.After(10 * time.Second):
				t.Fatal("no watch within 10s")
			}

			// nuc1 comes back; then a write that changes nothing visible (same status).
			changed := nuc1ComesBack(t, gpu, home)
			same := changed.DeepCopy()
			same.ResourceVersion = "3"
			same.Annotations = map[string]string{"touched": "yes"}
			if err := gpu.Tracker().Update(homelabv1.SchemeGroupVersion.WithResource("gpuinventories"), same, "", metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := gpu.Tracker().Delete(homelabv1.SchemeGroupVersion.WithResource("gpuinventories"), "", "cluster", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			waitForOutput(t, out, "deleted")
			// It comes back, and is followed again.
			back := inventoryObject("cluster", home, nil, nil)
			back.ResourceVersion = "4"
			back.Status.ObservedAt = &metav1.Time{Time: statusTime.Add(2 * time.Hour)}
			if err := gpu.Tracker().Create(homelabv1.SchemeGroupVersion.WithResource("gpuinventories"), back, "", metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitForOutput(t, out, statusTime.Add(2*time.Hour).Format(time.RFC3339))
			cancel()
			if code := <-done; code != factory.ExitOK {
				t.Errorf("exit %d after cancel, stderr %q", code, errOut.String())
			}
			golden(t, name, out.String())
		})
	}
}
