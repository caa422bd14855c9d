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
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/status"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// watching runs the plugin with args in the background, its output in out and errOut; the
// returned channel gives its exit code.
func watching(ctx context.Context, c *factory.Factory, terminal bool, args ...string) (out, errOut *testenv.Buffer, done chan int) {
	out, errOut, done = &testenv.Buffer{}, &testenv.Buffer{}, make(chan int, 1)
	go func() {
		done <- run(ctx, args, factory.Environment{Out: out, ErrOut: errOut, Terminal: terminal,
			Getenv: func(string) string { return "" }, Now: func() time.Time { return now }}, c)
	}()
	return out, errOut, done
}

// exitCode waits for the plugin's exit after cancel.
func exitCode(t *testing.T, done chan int) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin did not return within 10s of cancellation")
	}
	return 0
}

// quickRetries makes the fleet watch retry a cluster at once, for the test's duration.
func quickRetries(t *testing.T) {
	first, most := status.RetryFirst, status.RetryMost
	status.RetryFirst, status.RetryMost = 10*time.Millisecond, 10*time.Millisecond
	t.Cleanup(func() { status.RetryFirst, status.RetryMost = first, most })
}

// Without a terminal, --watch over several contexts prints a line per change: a new state of
// an inventory, a deletion, a cluster lost and one back.
func TestFleetWatchLines(t *testing.T) {
	c := fleetClients(t, nil)
	prod := c.Contexts["prod"].FakeGPU.(fakeGPU).Clientset
	lab := c.Contexts["lab"].FakeGPU.(fakeGPU).Clientset
	// prod's first watch is the test's to end; the next finds nothing listening (one failure:
	// client-go's retries back off from 0.8 s, with jitter).
	first := watch.NewFake()
	var mu sync.Mutex
	watches := 0
	prodWatching := make(chan struct{}, 10)
	prod.PrependWatchReactor("gpuinventories", func(clienttesting.Action) (bool, watch.Interface, error) {
		mu.Lock()
		defer mu.Unlock()
		watches++
		switch {
		case watches == 1:
			prodWatching <- struct{}{}
			return true, first, nil
		case watches == 2:
			return true, nil, refused("https://prod.example:6443")
		}
		return false, nil, nil
	})
	labWatching := make(chan struct{}, 10)
	lab.PrependWatchReactor("gpuinventories", func(clienttesting.Action) (bool, watch.Interface, error) {
		labWatching <- struct{}{}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errOut, done := watching(ctx, c, false, "--context", "prod,lab", "--watch")
	for _, ch := range []chan struct{}{prodWatching, labWatching} {
		select {
		case <-ch:
		case code := <-done:
			t.Fatalf("exited with %d before watching: %s", code, errOut.String())
		case <-time.After(10 * time.Second):
			t.Fatal("no watch within 10s")
		}
	}

	home := fixtures.HomeLab()
	nuc1ComesBack(t, lab, home)
	waitForOutput(t, out, "[lab] cluster: 4 GPU nodes, 1 ready")
	first.Stop() // prod's connection drops
	waitForOutput(t, out, "[prod] reconnected")
	if err := lab.Tracker().Delete(homelabv1.SchemeGroupVersion.WithResource("gpuinventories"), "", "cluster", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForOutput(t, out, "- [lab] cluster: deleted")
	back := inventoryObject("cluster", home, nil, nil)
	back.ResourceVersion = "9"
	back.Status.ObservedAt = &metav1.Time{Time: statusTime.Add(2 * time.Hour)}
	if err := lab.Tracker().Create(homelabv1.SchemeGroupVersion.WithResource("gpuinventories"), back, ""); err != nil {
		t.Fatal(err)
	}
	waitForOutput(t, out, statusTime.Add(2*time.Hour).Format(time.RFC3339)+" [lab]")
	cancel()
	if code := exitCode(t, done); code != factory.ExitOK {
		t.Errorf("exit %d after cancel with every cluster read, stderr %q", code, errOut.String())
	}
	if errOut.String() != "" {
		t.Errorf("stderr %q, want nothing: the changes are the output", errOut.String())
	}
	golden(t, "fleet-watch-lines.golden", out.String())
}

// On a terminal the fleet is redrawn: a cluster not reachable at the start is shown as such,
// retried, and drawn once it answers.
func TestFleetWatchTerminalRetriesAClusterDownAtTheStart(t *testing.T) {
	quickRetries(t)
	_, _, edge := fleetFixtures(t)
	late := cluster("https://late.example:6443", true, edge)
	var mu sync.Mutex
	lists := 0
	late.FakeGPU.(fakeGPU).Clientset.PrependReactor("*", "gpuinventories", func(action clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case action.GetVerb() == "get": // the first read
			return true, nil, refused("https://late.example:6443")
		case action.GetVerb() == "list" && lists < 3: // the follower's first tries
			lists++
			return true, nil, refused("https://late.example:6443")
		}
		return false, nil, nil
	})
	c := fleetClients(t, map[string]*factory.Factory{"late": late})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errOut, done := watching(ctx, c, true, "--context", "prod,lab,late", "--watch")
	waitForOutput(t, out, "Clusters:        3 read")
	cancel()
	if code := exitCode(t, done); code != factory.ExitOK {
		t.Errorf("exit %d, stderr %q", code, errOut.String())
	}
	screens := strings.Split(out.String(), printer.ClearScreen)
	for i := range screens {
		screens[i] = ansi.ReplaceAllString(screens[i], "")
	}
	if len(screens) != 3 || !strings.Contains(screens[1], "Not read:\n  late:  cannot reach the API server at https://late.example:6443") {
		t.Errorf("want two screens, the first showing late as not read; got %d:\n%s", len(screens)-1, ansi.ReplaceAllString(out.String(), ""))
	}
	golden(t, "fleet-watch-terminal.golden", strings.Join(screens[1:], "--- redrawn ---\n"))
}

// The exit status of a fleet watch is that of the last states seen: 5 while a cluster cannot
// be read (before 3, with --fail-on-degraded), 1 when none could be read at the start.
func TestFleetWatchExitCodes(t *testing.T) {
	quickRetries(t)
	down := func() *factory.Factory {
		return failing(cluster("https://10.0.0.9:6443", true), "*", refused("https://10.0.0.9:6443"))
	}
	for _, tc := range []struct {
		args []string
		want int
		wait string // printed before the watch is stopped
	}{
		{[]string{"--context", "prod,down", "--watch", "--fail-on-degraded"}, factory.ExitPartial, "[down] cannot reach"},
		{[]string{"--context", "prod,lab", "--watch", "--fail-on-degraded"}, factory.ExitDegraded, "[lab] cluster"},
		{[]string{"--context", "edge,lab", "--watch"}, factory.ExitOK, "[lab] cluster"},
	} {
		c := fleetClients(t, map[string]*factory.Factory{"down": down()})
		ctx, cancel := context.WithCancel(context.Background())
		out, errOut, done := watching(ctx, c, false, tc.args...)
		waitForOutput(t, out, tc.wait)
		cancel()
		if code := exitCode(t, done); code != tc.want {
			t.Errorf("kubectl gpuinv %s: exit %d, want %d (stderr %q)", strings.Join(tc.args, " "), code, tc.want, errOut.String())
		}
	}
	c := fleetClients(t, map[string]*factory.Factory{"down": down(), "down2": down()})
	r := runPlugin(context.Background(), c, false, nil, "--context", "down,down2", "--watch")
	if r.code != factory.ExitError || strings.Count(r.err, "cannot reach the API server") != 2 || r.out != "" {
		t.Errorf("watch with no cluster read: exit %d, stdout %q, stderr %q; want exit 1 and a line per cluster on stderr", r.code, r.out, r.err)
	}
}

// With -o json, --watch prints each state as the object annotated with its context.
func TestFleetWatchJSON(t *testing.T) {
	c := fleetClients(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errOut, done := watching(ctx, c, false, "--context", "lab,edge", "--watch", "-o", "json")
	waitForOutput(t, out, `"gpuinv.homelab.youngju.dev/context": "edge"`)
	cancel()
	if code := exitCode(t, done); code != factory.ExitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	dec := json.NewDecoder(strings.NewReader(out.String()))
	var contexts []string
	for dec.More() {
		var gi homelabv1.GpuInventory
		if err := dec.Decode(&gi); err != nil {
			t.Fatalf("%v in:\n%s", err, out.String())
		}
		if gi.Kind != "GpuInventory" {
			t.Errorf("object of kind %q, want GpuInventory", gi.Kind)
		}
		contexts = append(contexts, gi.Annotations[ContextAnnotation])
	}
	if strings.Join(contexts, ",") != "lab,edge" {
		t.Errorf("objects of contexts %v, want lab then edge", contexts)
	}
}
