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

package podcache

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2/ktesting"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
)

// newServer is a fake API server of pods and namespaces holding pods.
func newServer(t *testing.T, opts prototest.Options, pods ...*corev1.Pod) *prototest.Server {
	t.Helper()
	server := prototest.NewServer(t, opts, prototest.Pods, prototest.Namespaces)
	for _, p := range pods {
		server.Set(p)
	}
	return server
}

// podLists are the server's pod list requests, in order.
func podLists(server *prototest.Server) []prototest.Request {
	var lists []prototest.Request
	for _, r := range server.Requests() {
		if !r.IsWatch() && strings.HasSuffix(r.Path, "/pods") {
			lists = append(lists, r)
		}
	}
	return lists
}

// fakeTracker records what the cache tells it.
type fakeTracker struct {
	mu      sync.Mutex
	pods    map[string]*allocation.Pod
	calls   []string
	changed chan struct{}
}

func newFakeTracker() *fakeTracker {
	return &fakeTracker{pods: map[string]*allocation.Pod{}, changed: make(chan struct{}, 1)}
}

func (f *fakeTracker) record(call string) {
	f.calls = append(f.calls, call)
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *fakeTracker) SetPod(p *allocation.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods[p.Key()] = p
	f.record("set " + p.Key())
}

func (f *fakeTracker) DeletePod(namespace, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := namespace + "/" + name
	delete(f.pods, key)
	f.record("delete " + key)
}

func (f *fakeTracker) Pod(namespace, name string) *allocation.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pods[namespace+"/"+name]
}

func (f *fakeTracker) Pods() []*allocation.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Collect(maps.Values(f.pods))
}

func (f *fakeTracker) ReplacePods(pods []*allocation.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods = map[string]*allocation.Pod{}
	for _, p := range pods {
		f.pods[p.Key()] = p
	}
	f.record(fmt.Sprintf("replace %d", len(pods)))
}

// waitFor waits until cond holds of the tracker's pods and returns the calls so far.
func (f *fakeTracker) waitFor(t *testing.T, what string, cond func(pods map[string]*allocation.Pod) bool) []string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		f.mu.Lock()
		ok, calls, pods := cond(f.pods), slices.Clone(f.calls), slices.Sorted(maps.Keys(f.pods))
		f.mu.Unlock()
		if ok {
			return calls
		}
		select {
		case <-f.changed:
		case <-timeout:
			t.Fatalf("the tracker never had %s; it has %v after %v", what, pods, calls)
		}
	}
}

// has is a condition: the tracker holds exactly these pods, with these nodes.
func has(want map[string]string) func(map[string]*allocation.Pod) bool {
	return func(pods map[string]*allocation.Pod) bool {
		if len(pods) != len(want) {
			return false
		}
		for key, node := range want {
			if p, ok := pods[key]; !ok || p.Node != node {
				return false
			}
		}
		return true
	}
}

// start runs a cache of server's pods feeding tracker until the test ends.
func start(ctx context.Context, t *testing.T, server *prototest.Server, tracker Tracker) *Cache {
	t.Helper()
	return startWith(ctx, t, server, tracker, Options{})
}

func startWith(ctx context.Context, t *testing.T, server *prototest.Server, tracker Tracker, opts Options) *Cache {
	t.Helper()
	c, err := New(server.Config(), tracker, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-stopped
	})
	return c
}

func pending(namespace, name string, n string) *corev1.Pod {
	p := gpuPod(namespace, name, gpus(n))
	p.Spec.NodeName, p.Status = "", corev1.PodStatus{Phase: corev1.PodPending}
	return p
}

// The cache against an API server, with and without streaming lists: a pod without GPUs is
// kept nowhere and reaches the tracker never; a pending GPU pod is waiting demand; binding
// moves it to its node; an update that changes nothing allocation reads reaches no tracker;
// finishing or deleting a pod drops it; a relist after the watch expired replaces the pods,
// including changes the watch missed.
func TestCacheFollowsGPUPods(t *testing.T) {
	for _, mode := range []struct {
		name        string
		noWatchList bool
	}{{"server with streaming lists", false}, {"server without streaming lists", true}} {
		t.Run(mode.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			web := realisticPod("web", "frontend")
			trainer := pending("ml", "trainer", "2")
			bound := gpuPod("ml", "bound", gpus("1"))
			done := gpuPod("ml", "done", gpus("4"))
			done.Status.Phase = corev1.PodSucceeded
			server := newServer(t, prototest.Options{NoWatchList: mode.noWatchList}, web, trainer, bound, done)
			tracker := newFakeTracker()
			c := start(ctx, t, server, tracker)

			calls := tracker.waitFor(t, "the pending and the bound pod", has(map[string]string{"ml/trainer": "", "ml/bound": "worker-17"}))
			if !slices.Equal(calls, []string{"replace 2"}) {
				t.Errorf("the first sync told the tracker %v; want one replace of 2 pods", calls)
			}
			if !c.HasSynced() {
				t.Error("HasSynced is false after the tracker had the list")
			}
			if keys := c.store.ListKeys(); len(keys) != 2 {
				t.Errorf("the store keeps %v; want the two unfinished GPU pods only", keys)
			}
			if got := tracker.pods["ml/trainer"]; got.Node != "" || got.Requests[0] != (allocation.ResourceCount{Name: allocation.ResourceGPU, Count: 2}) {
				t.Errorf("the pending pod reached the tracker as %+v", got)
			}

			// The web pod changes and goes; then the trainer is bound: the tracker hears only of
			// the trainer (one watch delivers in order).
			web.Status.Message = "restarted"
			server.Apply(watch.Modified, web)
			server.Apply(watch.Deleted, web)
			trainer.Spec.NodeName, trainer.Status.Phase = "worker-3", corev1.PodRunning
			server.Apply(watch.Modified, trainer)
			calls = tracker.waitFor(t, "the trainer on worker-3", has(map[string]string{"ml/trainer": "worker-3", "ml/bound": "worker-17"}))
			if want := []string{"replace 2", "set ml/trainer"}; !slices.Equal(calls, want) {
				t.Errorf("calls %v; want %v", calls, want)
			}

			// A status update of the trainer that allocation does not read, then the bound pod
			// finishes and the trainer is deleted.
			trainer.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			server.Apply(watch.Modified, trainer)
			bound.Status.Phase = corev1.PodFailed
			server.Apply(watch.Modified, bound)
			server.Apply(watch.Modified, bound) // a finished pod's later updates change nothing
			server.Apply(watch.Deleted, trainer)
			calls = tracker.waitFor(t, "no pod", has(map[string]string{}))
			if want := []string{"replace 2", "set ml/trainer", "delete ml/bound", "delete ml/trainer"}; !slices.Equal(calls, want) {
				t.Errorf("calls %v; want %v", calls, want)
			}
			server.Apply(watch.Deleted, bound) // deleting a finished pod: nothing to tell

			// A new pod arrives by the watch; two more are created and one deleted while no
			// watch sees it; the watch expires and the relist replaces everything.
			server.Apply(watch.Added, pending("ml", "next", "1"))
			tracker.waitFor(t, "the next pod", has(map[string]string{"ml/next": ""}))
			server.ApplySilently(watch.Deleted, pending("ml", "next", "1"))
			for _, p := range []*corev1.Pod{gpuPod("ml", "missed", gpus("8")), pending("ml", "missed-pending", "1"), realisticPod("web", "missed-web")} {
				server.ApplySilently(watch.Added, p)
			}
			server.Expire()
			calls = tracker.waitFor(t, "the pods after the relist", has(map[string]string{"ml/missed": "worker-17", "ml/missed-pending": ""}))
			if last := calls[len(calls)-1]; last != "replace 2" {
				t.Errorf("the relist ended with %q; want a replace of 2 pods", last)
			}
			if diff := cmp.Diff([]string{"ml/missed", "ml/missed-pending"}, slices.Sorted(slices.Values(c.store.ListKeys()))); diff != "" {
				t.Errorf("store keys after the relist (-want +got):\n%s", diff)
			}
			// Lists, never streaming lists: the first from the watch cache, in pages of PageSize.
			lists := podLists(server)
			if want := "/api/v1/pods?limit=5000&resourceVersion=0"; len(lists) != 2 || lists[0].String() != want {
				t.Errorf("list requests %v; want two, the first %v", lists, want)
			}
		})
	}
}

// A pod whose GPU request cannot be read is counted and not kept; if it was kept before, the
// tracker forgets it. The cache goes on with the other pods.
func TestCacheSkipsPodsItCannotRead(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	trainer := pending("ml", "trainer", "1")
	server := newServer(t, prototest.Options{}, trainer, pending("ml", "other", "1"))
	tracker := newFakeTracker()
	c := start(ctx, t, server, tracker)
	tracker.waitFor(t, "two pods", has(map[string]string{"ml/trainer": "", "ml/other": ""}))

	// 65 digits: beyond the length DecodePod parses, though ParseQuantity would take it.
	trainer.Spec.Containers[0].Resources.Limits[allocation.ResourceGPU] = resource.MustParse(strings.Repeat("9", 65))
	server.Apply(watch.Modified, trainer)
	server.Apply(watch.Added, pending("ml", "after", "1"))
	tracker.waitFor(t, "the other pod and the one after", has(map[string]string{"ml/other": "", "ml/after": ""}))
	if n := c.Skipped(); n != 1 {
		t.Errorf("Skipped = %d; want 1", n)
	}
}

// What the cache and the tracker keep of a GPU pod is small, and nothing of its bytes: no kept
// string may hold on to the message it was decoded from. Pods without GPUs leave nothing.
func TestKeptPodsAreSmall(t *testing.T) {
	const n = 5000
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	s := newStore(allocation.NewTracker())
	before := heap()
	func() {
		for i := range 2 * n {
			var p *corev1.Pod
			if i%2 == 0 {
				p = gpuPod(fmt.Sprintf("team-%d", i%50), fmt.Sprintf("trainer-%05d-7d9f8c6b5-x7k2p", i), gpus("1"))
				p.Spec.NodeName = fmt.Sprintf("gpu-node-%04d", i%500)
			} else {
				p = realisticPod("web", fmt.Sprintf("frontend-%05d", i))
			}
			p.UID = types.UID(fmt.Sprintf("0f7d3c52-5b1e-4a55-9b7e-%012d", i))
			data := prototest.Encode(t, p)
			obj, err := k8sruntime.Decode(podCodec.Serializer(scheme.Codecs.WithoutConversion()).DecoderToVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), corev1.SchemeGroupVersion), data)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Add(obj); err != nil {
				t.Fatal(err)
			}
		}
	}()
	perPod := float64(heap()-before) / n
	if kept := len(s.List()); kept != n {
		t.Fatalf("the tracker keeps %d pods; want the %d GPU pods", kept, n)
	}
	if perPod > 320 {
		t.Errorf("the cache and the tracker hold %.0f bytes per GPU pod; want at most 320", perPod)
	}
	runtime.KeepAlive(s)
}

// Through the allocation Tracker, as the operator runs it: a pending GPU pod is demand for
// its model; bound, it is held on its node and no longer demand; finished, it holds nothing.
func TestCacheFeedsTheTracker(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	trainer := pending("ml", "trainer", "2")
	trainer.Spec.NodeSelector = map[string]string{allocation.ProductLabel: "NVIDIA-H100-80GB-HBM3"}
	server := newServer(t, prototest.Options{}, realisticPod("web", "frontend"), trainer)
	tracker := allocation.NewTracker()
	changed := make(chan struct{}, 1)
	tracker.OnChange(func(string) {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	c := start(ctx, t, server, tracker)
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for !cond() {
			select {
			case <-changed:
			case <-timeout:
				t.Fatalf("never %s: pending %+v, held on worker-3 %+v", what, tracker.Pending(), tracker.Held("worker-3"))
			}
		}
	}
	waitUntil("the trainer pending", func() bool {
		p := tracker.Pending()
		return len(p) == 1 && p[0].Model == "NVIDIA-H100-80GB-HBM3" && p[0].Pods == 1 && p[0].Milli == 2000
	})
	if !c.HasSynced() || tracker.Held("worker-17") != nil {
		t.Errorf("synced %v; held on the web pod's node %+v", c.HasSynced(), tracker.Held("worker-17"))
	}

	trainer.Spec.NodeName, trainer.Status.Phase = "worker-3", corev1.PodRunning
	server.Apply(watch.Modified, trainer)
	waitUntil("the trainer held on worker-3", func() bool {
		h := tracker.Held("worker-3")
		return h != nil && h.Pods == 1 && len(tracker.Pending()) == 0
	})
	if h := tracker.Held("worker-3"); len(h.Namespaces) != 1 || h.Namespaces[0].Namespace != "ml" ||
		!slices.Equal(h.Namespaces[0].Resources, []allocation.ResourceCount{{Name: allocation.ResourceGPU, Count: 2}}) {
		t.Errorf("held on worker-3: %+v", h.Namespaces)
	}

	trainer.Status.Phase = corev1.PodSucceeded
	server.Apply(watch.Modified, trainer)
	waitUntil("worker-3 released", func() bool { return tracker.Held("worker-3") == nil })
}
