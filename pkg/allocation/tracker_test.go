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

package allocation

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recorder collects the nodes a Tracker reports as changed.
type recorder struct {
	mu    sync.Mutex
	nodes map[string]int
}

func record(t *Tracker) *recorder {
	r := &recorder{nodes: map[string]int{}}
	t.OnChange(func(node string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.nodes[node]++
	})
	return r
}

// take returns the nodes reported since the last take, sorted.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for n := range r.nodes {
		out = append(out, n)
	}
	sort.Strings(out)
	clear(r.nodes)
	return out
}

func boundPod(ns, name, node string, requests ...ResourceCount) *Pod {
	return &Pod{Namespace: ns, Name: name, UID: UIDOf(ns + "-" + name), Node: node, Created: 100, Requests: requests}
}

func allocatedClaim(ns, name string, holders []string, devices ...Device) *Claim {
	c := &Claim{Namespace: ns, Name: name, UID: "claim-" + name, Created: 50, Devices: devices}
	for _, h := range holders {
		c.Holders = append(c.Holders, Holder{Name: h, UID: UIDOf(ns + "-" + h)})
	}
	return c
}

func TestTrackerClaimSharedByPodsCountsOnce(t *testing.T) {
	tr := NewTracker()
	rec := record(tr)
	tr.SetPod(boundPod("ml", "a", "n1", rc(ResourceGPU, 1)))
	// Pod a also holds the shared claim: it counts once.
	tr.SetClaim(allocatedClaim("ml", "shared", []string{"a", "b", "c"}, Device{"n1", "gpu-1"}, Device{"n1", "gpu-2"}))
	want := &Held{Pods: 3, Namespaces: []NamespaceHeld{{Namespace: "ml", Pods: 3, Resources: gpus(1), Devices: []string{"gpu-1", "gpu-2"}}}}
	if diff := cmp.Diff(want, tr.Held("n1")); diff != "" {
		t.Errorf("Held(n1) (-want +got):\n%s", diff)
	}
	if g, m := tr.Held("n1").GPUs(Shape{GPUs: 8}); g != 3 || m != 3000 {
		t.Errorf("GPUs = %d, %d milli; want 3 GPUs, 3000", g, m)
	}
	if got := rec.take(); !slices.Equal(got, []string{"n1"}) {
		t.Errorf("changed nodes = %v, want [n1]", got)
	}
	// The same claim again changes nothing: no notice, same pointer.
	before := tr.Held("n1")
	tr.SetClaim(allocatedClaim("ml", "shared", []string{"c", "b", "a"}, Device{"n1", "gpu-1"}, Device{"n1", "gpu-2"}))
	if tr.Held("n1") != before {
		t.Error("an event that changes nothing replaced the node's Held")
	}
	if got := rec.take(); len(got) != 0 {
		t.Errorf("changed nodes = %v after an event that changes nothing", got)
	}
}

func TestTrackerFinishedPodReleases(t *testing.T) {
	tr := NewTracker()
	rec := record(tr)
	p := boundPod("ml", "a", "n1", rc(ResourceGPU, 2))
	tr.SetPod(p)
	if tr.Held("n1") == nil {
		t.Fatal("the bound pod holds nothing")
	}
	rec.take()
	done := *p
	done.Finished = true
	tr.SetPod(&done)
	if h := tr.Held("n1"); h != nil {
		t.Errorf("a finished pod still holds %+v", h)
	}
	if got := rec.take(); !slices.Equal(got, []string{"n1"}) {
		t.Errorf("changed nodes = %v, want [n1]", got)
	}
}

func TestTrackerPodBoundThenDeleted(t *testing.T) {
	tr := NewTracker()
	rec := record(tr)
	waiting := &Pod{Namespace: "ml", Name: "a", UID: UIDOf("u"), Created: 10, Model: "NVIDIA-H100-80GB-HBM3",
		Requests: []ResourceCount{rc(ResourceGPU, 2), rc(ResourceMIGPrefix+"3g.40gb", 1)}}
	tr.SetPod(waiting)
	want := []Demand{{Model: "NVIDIA-H100-80GB-HBM3", Pods: 1, Milli: 2428, Since: 10}}
	if diff := cmp.Diff(want, tr.Pending()); diff != "" {
		t.Errorf("Pending (-want +got):\n%s", diff)
	}
	if got := rec.take(); !slices.Equal(got, []string{""}) {
		t.Errorf("changed = %v, want the pending notice only", got)
	}
	bound := *waiting
	bound.Node = "n1"
	tr.SetPod(&bound)
	if len(tr.Pending()) != 0 {
		t.Errorf("a bound pod is still pending: %+v", tr.Pending())
	}
	if got := rec.take(); !slices.Equal(got, []string{"", "n1"}) {
		t.Errorf("changed = %v, want pending and n1", got)
	}
	tr.DeletePod(bound.Namespace, bound.Name)
	if h := tr.Held("n1"); h != nil {
		t.Errorf("a deleted pod still holds %+v", h)
	}
	if got := rec.take(); !slices.Equal(got, []string{"n1"}) {
		t.Errorf("changed = %v, want n1", got)
	}
	tr.DeletePod(bound.Namespace, bound.Name)
	if got := rec.take(); len(got) != 0 {
		t.Errorf("deleting an unknown pod reported %v", got)
	}
}

func TestTrackerClaimServedPodCountsTheClaimAndItsOtherResources(t *testing.T) {
	tr := NewTracker()
	// Its nvidia.com/gpu is served by the extended-resource claim (FromPod drops it), its
	// MIG device by the device plugin.
	mig := rc(ResourceMIGPrefix+"1g.10gb", 1)
	tr.SetPod(boundPod("ml", "a", "n1", mig))
	tr.SetClaim(allocatedClaim("ml", "a-gpu", []string{"a"}, Device{"n1", "gpu-0"}))
	want := &Held{Pods: 1, Namespaces: []NamespaceHeld{{Namespace: "ml", Pods: 1, Resources: []ResourceCount{mig}, Devices: []string{"gpu-0"}}}}
	if diff := cmp.Diff(want, tr.Held("n1")); diff != "" {
		t.Errorf("Held(n1) (-want +got):\n%s", diff)
	}
}

func TestTrackerClaimDemand(t *testing.T) {
	tr := NewTracker()
	c := &Claim{Namespace: "ml", Name: "c", Created: 30, Requests: []DeviceRequest{
		{Class: "gpu.nvidia.com", Count: 2, Product: h100Product},
		{Class: "mig.nvidia.com", Count: 7, Product: h100Product},
		{Class: "gpu.nvidia.com", Count: 1},
	}}
	tr.SetClaim(c)
	tr.SetPod(&Pod{Namespace: "ml", Name: "p", Created: 20, Requests: []ResourceCount{rc(ResourceGPUShared, 1)}})
	want := []Demand{
		{Model: "", DRA: false, Pods: 1, Milli: 1000, Since: 20},
		{Model: "", DRA: true, Pods: 0, Milli: 1000, Since: 30},
		{Model: h100Product, DRA: true, Pods: 1, Milli: 3000, Since: 30},
	}
	if diff := cmp.Diff(want, tr.Pending()); diff != "" {
		t.Errorf("Pending (-want +got):\n%s", diff)
	}
	// Allocated: the claim holds on its node and asks for nothing more.
	allocated := allocatedClaim("ml", "c", nil, Device{"n2", "gpu-0"}, Device{"n3", "gpu-0-mig-1g5gb-19-0"})
	tr.SetClaim(allocated)
	if diff := cmp.Diff(want[:1], tr.Pending()); diff != "" {
		t.Errorf("Pending after allocation (-want +got):\n%s", diff)
	}
	// A claim reserved for no pod still holds its devices.
	for node, dev := range map[string]string{"n2": "gpu-0", "n3": "gpu-0-mig-1g5gb-19-0"} {
		want := &Held{Namespaces: []NamespaceHeld{{Namespace: "ml", Devices: []string{dev}}}}
		if diff := cmp.Diff(want, tr.Held(node)); diff != "" {
			t.Errorf("Held(%s) (-want +got):\n%s", node, diff)
		}
	}
}

func TestTrackerPendingSinceFollowsTheOldest(t *testing.T) {
	tr := NewTracker()
	for i, created := range []int64{300, 100, 200, 100} {
		tr.SetPod(&Pod{Namespace: "ml", Name: fmt.Sprint("p", i), Created: created, Requests: gpus(1)})
	}
	since := func() int64 { return tr.Pending()[0].Since }
	if since() != 100 {
		t.Fatalf("Since = %d, want 100", since())
	}
	tr.DeletePod("ml", "p1")
	if since() != 100 {
		t.Errorf("Since = %d after one of two oldest left, want 100", since())
	}
	tr.DeletePod("ml", "p3")
	if since() != 200 {
		t.Errorf("Since = %d after both oldest left, want 200", since())
	}
}

func TestTrackerRelist(t *testing.T) {
	tr := NewTracker()
	rec := record(tr)
	tr.ReplacePods([]*Pod{
		boundPod("ml", "a", "n1", gpus(1)...),
		boundPod("ml", "b", "n2", gpus(1)...),
		{Namespace: "ml", Name: "w", Requests: gpus(1)},
	})
	tr.ReplaceClaims([]*Claim{allocatedClaim("ml", "c", []string{"x"}, Device{"n3", "gpu-0"})})
	rec.take()
	n1 := tr.Held("n1")
	// After the relist b and the claim are gone, a is unchanged, d is new.
	tr.ReplacePods([]*Pod{boundPod("ml", "a", "n1", gpus(1)...), boundPod("ml", "d", "n4", gpus(2)...), {Namespace: "ml", Name: "w", Requests: gpus(1)}})
	tr.ReplaceClaims(nil)
	if tr.Held("n1") != n1 {
		t.Error("the relist replaced an unchanged node's Held")
	}
	if tr.Held("n2") != nil || tr.Held("n3") != nil || tr.Held("n4") == nil {
		t.Errorf("after the relist: n2 %+v, n3 %+v, n4 %+v", tr.Held("n2"), tr.Held("n3"), tr.Held("n4"))
	}
	if got := rec.take(); !slices.Equal(got, []string{"n2", "n3", "n4"}) {
		t.Errorf("changed = %v, want [n2 n3 n4]", got)
	}
}

func TestHoldings(t *testing.T) {
	a := boundPod("ml", "a", "n1", gpus(1)...)
	a.Created = 500
	viaClaim := boundPod("ml", "b", "n1") // its request is served by the claim "shared"
	viaClaim.Created = 600
	finished := boundPod("ml", "old", "n1", gpus(4)...)
	finished.Finished = true
	pods := []*Pod{a, viaClaim, finished, boundPod("dev", "z", "n2", rc(ResourceGPUShared, 1))}
	claims := []*Claim{
		allocatedClaim("ml", "shared", []string{"a", "b"}, Device{"n1", "gpu-1"}, Device{"n2", "gpu-0"}),
		allocatedClaim("ml", "orphan", nil, Device{"n1", "gpu-7"}),
		{Namespace: "ml", Name: "waiting", Requests: []DeviceRequest{{Class: "gpu.nvidia.com", Count: 1}}},
	}
	want := []Holding{
		{Namespace: "dev", Pod: "z", Node: "n2", Resources: []ResourceCount{rc(ResourceGPUShared, 1)}, Since: 100},
		{Namespace: "ml", Pod: "", Node: "n1", Devices: []string{"gpu-7"}, Claims: []string{"orphan"}, Since: 50},
		{Namespace: "ml", Pod: "a", Node: "n1", Resources: gpus(1), Devices: []string{"gpu-1"}, Claims: []string{"shared"}, Shared: true, Since: 500},
		{Namespace: "ml", Pod: "a", Node: "n2", Devices: []string{"gpu-0"}, Claims: []string{"shared"}, Shared: true, Since: 500},
		{Namespace: "ml", Pod: "b", Node: "n1", Devices: []string{"gpu-1"}, Claims: []string{"shared"}, Shared: true, Since: 600},
		{Namespace: "ml", Pod: "b", Node: "n2", Devices: []string{"gpu-0"}, Claims: []string{"shared"}, Shared: true, Since: 600},
	}
	if diff := cmp.Diff(want, Holdings(pods, claims)); diff != "" {
		t.Errorf("Holdings (-want +got):\n%s", diff)
	}
}

// The tracker, fed random events, always equals a full recompute of the state the events
// leave, and names every node whose Held changed.
func TestTrackerEqualsCompute(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 0x5eed))
			w := newWorld(r)
			tr := NewTracker()
			rec := record(tr)
			before := map[string]*Held{}
			for step := range 600 {
				event := w.step(tr)
				wantHeld, wantPending := Compute(w.podList(), w.claimList())
				changed := rec.take()
				for _, node := range w.nodes {
					got := tr.Held(node)
					if !heldEqual(got, wantHeld[node]) {
						t.Fatalf("step %d (%s): Held(%s) = %+v, recompute %+v", step, event, node, got, wantHeld[node])
					}
					if got != before[node] && !slices.Contains(changed, node) {
						t.Fatalf("step %d (%s): Held(%s) changed without a notice", step, event, node)
					}
					if got == before[node] && slices.Contains(changed, node) {
						t.Fatalf("step %d (%s): notice for %s whose Held did not change", step, event, node)
					}
					before[node] = got
				}
				if diff := cmp.Diff(wantPending, tr.Pending()); diff != "" {
					t.Fatalf("step %d (%s): Pending (-recompute +tracker):\n%s", step, event, diff)
				}
				for node := range wantHeld {
					if !slices.Contains(w.nodes, node) {
						t.Fatalf("recompute holds on unknown node %q", node)
					}
				}
			}
		})
	}
}

// SamePod compares every field of Pod: one the API gains must be added to it.
func TestSamePodComparesEveryField(t *testing.T) {
	base := Pod{Namespace: "ml", Name: "p", UID: UIDOf("u"), Node: "n", Model: "m", Requests: gpus(1), Created: 1}
	v := reflect.ValueOf(&base).Elem()
	for i := range v.NumField() {
		other := base
		f := reflect.ValueOf(&other).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Int64:
			f.SetInt(f.Int() + 1)
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Slice:
			f.Set(reflect.ValueOf(gpus(2)))
		case reflect.Array:
			f.Index(0).SetUint(f.Index(0).Uint() + 1)
		default:
			t.Fatalf("field %s of kind %s: teach this test to change it", v.Type().Field(i).Name, f.Kind())
		}
		if SamePod(&base, &other) {
			t.Errorf("SamePod ignores a change of %s", v.Type().Field(i).Name)
		}
	}
	same := base
	same.Requests = gpus(1)
	if !SamePod(&base, &same) {
		t.Error("SamePod tells apart two pods that differ only in the Requests slice's identity")
	}
}

// world is the current set of pods and claims a random event sequence produces.
type world struct {
	r      *rand.Rand
	nodes  []string
	pods   map[string]*Pod
	claims map[string]*Claim
}

func newWorld(r *rand.Rand) *world {
	return &world{r: r, nodes: []string{"n0", "n1", "n2", "n3"}, pods: map[string]*Pod{}, claims: map[string]*Claim{}}
}

func (w *world) podList() []*Pod {
	var out []*Pod
	for _, p := range w.pods {
		out = append(out, p)
	}
	return out
}

func (w *world) claimList() []*Claim {
	var out []*Claim
	for _, c := range w.claims {
		out = append(out, c)
	}
	return out
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

func (w *world) randomPod() *Pod {
	r := w.r
	name := fmt.Sprint("p", r.IntN(12))
	ns := pick(r, "a", "b")
	p := &Pod{Namespace: ns, Name: name, UID: UIDOf(ns + name + pick(r, "", "-v2")), Created: r.Int64N(50)}
	for range 1 + r.IntN(2) {
		p.Requests = append(p.Requests, rc(pick(r, ResourceGPU, ResourceGPUShared, ResourceMIGPrefix+"1g.5gb", ResourceMIGPrefix+"3g.20gb"), 1+r.Int64N(3)))
	}
	p.Requests = PodRequests([]Container{{Requests: p.Requests}}, nil, nil)
	if r.IntN(3) > 0 {
		p.Node = pick(r, w.nodes...)
	}
	p.Finished = r.IntN(6) == 0
	p.Model = pick(r, "", "", "H100", "A100")
	return p
}

func (w *world) randomClaim() *Claim {
	r := w.r
	ns := pick(r, "a", "b")
	c := &Claim{Namespace: ns, Name: fmt.Sprint("c", r.IntN(8)), Created: r.Int64N(50)}
	if r.IntN(3) > 0 {
		for range 1 + r.IntN(3) {
			dev := pick(r, "gpu-0", "gpu-1", "gpu-0-mig-1g5gb-19-0", "gpu-0-mig-3g20gb-9-4", "gpu-1-mig-1g5gb-19-1")
			c.Devices = append(c.Devices, Device{Pool: pick(r, w.nodes...), Device: dev})
		}
		c.Devices = compactDevices(sortDevices(c.Devices))
		for range r.IntN(3) {
			// Holders named like the pods, so pods and claim holders overlap.
			h := fmt.Sprint("p", r.IntN(12))
			c.Holders = append(c.Holders, Holder{Name: h, UID: UIDOf(ns + h + pick(r, "", "-v2"))})
		}
		return c
	}
	for range r.IntN(3) {
		c.Requests = append(c.Requests, DeviceRequest{Class: pick(r, "gpu.nvidia.com", "mig.nvidia.com"), Count: 1 + r.Int64N(4), Product: pick(r, "", "NVIDIA H100 80GB HBM3")})
	}
	return c
}

func sortDevices(ds []Device) []Device {
	sort.Slice(ds, func(i, j int) bool {
		return ds[i].Pool < ds[j].Pool || ds[i].Pool == ds[j].Pool && ds[i].Device < ds[j].Device
	})
	return ds
}

// step applies one random event to the world and the tracker and names it.
func (w *world) step(tr *Tracker) string {
	r := w.r
	switch n := r.IntN(20); {
	case n < 8:
		p := w.randomPod()
		if len(w.pods) > 0 && r.IntN(4) == 0 {
			// An update that changes nothing allocation reads: a copy of a pod it has.
			keys := slices.Sorted(maps.Keys(w.pods))
			same := *w.pods[keys[r.IntN(len(keys))]]
			p = &same
		}
		w.pods[p.Key()] = p
		tr.SetPod(p)
		if !p.holds() && !p.waits() {
			delete(w.pods, p.Key())
		}
		return "SetPod " + p.Key()
	case n < 10:
		namespace, name := pick(r, "a", "b"), fmt.Sprint("p", r.IntN(12))
		key := namespace + "/" + name
		delete(w.pods, key)
		tr.DeletePod(namespace, name)
		return "DeletePod " + key
	case n < 15:
		c := w.randomClaim()
		w.claims[c.Key()] = c
		tr.SetClaim(c)
		return "SetClaim " + c.Key()
	case n < 17:
		key := pick(r, "a", "b") + "/" + fmt.Sprint("c", r.IntN(8))
		delete(w.claims, key)
		tr.DeleteClaim(key)
		return "DeleteClaim " + key
	case n < 19:
		var list []*Pod
		clear(w.pods)
		for range r.IntN(10) {
			p := w.randomPod()
			list = append(list, p)
			w.pods[p.Key()] = p
		}
		tr.ReplacePods(list)
		return fmt.Sprint("ReplacePods ", len(list))
	default:
		var list []*Claim
		clear(w.claims)
		for range r.IntN(6) {
			c := w.randomClaim()
			list = append(list, c)
			w.claims[c.Key()] = c
		}
		tr.ReplaceClaims(list)
		return fmt.Sprint("ReplaceClaims ", len(list))
	}
}

// Pod events and claim events arrive from two goroutines; the race detector checks the
// Tracker's locking, and the end state equals a recompute.
func TestTrackerConcurrentWriters(t *testing.T) {
	tr := NewTracker()
	tr.OnChange(func(node string) { _ = tr.Held(node); _ = tr.Pending() })
	var pods []*Pod
	var claims []*Claim
	for i := range 200 {
		pods = append(pods, boundPod("ml", fmt.Sprint("p", i), fmt.Sprint("n", i%10), gpus(1)...))
		claims = append(claims, allocatedClaim("ml", fmt.Sprint("c", i), []string{fmt.Sprint("q", i)}, Device{fmt.Sprint("n", i%10), "gpu-7"}))
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, p := range pods {
			tr.SetPod(p)
		}
	})
	wg.Go(func() {
		for _, c := range claims {
			tr.SetClaim(c)
		}
	})
	wg.Go(func() {
		for i := range 1000 {
			_ = tr.Held(fmt.Sprint("n", i%10))
		}
	})
	wg.Wait()
	want, _ := Compute(pods, claims)
	for node, h := range want {
		if !heldEqual(tr.Held(node), h) {
			t.Errorf("Held(%s) = %+v, recompute %+v", node, tr.Held(node), h)
		}
	}
}

// Demand is what the scheduler will try to place: a waiting pod being deleted is none, and a
// gated pod's is queued, apart from the pending demand; a bound pod being deleted still holds.
func TestTrackerGatedAndDeletingPods(t *testing.T) {
	tr := NewTracker()
	gated := &Pod{Namespace: "ml", Name: "gated", Created: 10, Gated: true, Requests: gpus(4)}
	leaving := &Pod{Namespace: "ml", Name: "leaving", Created: 5, Deleting: true, Requests: gpus(2)}
	waiting := &Pod{Namespace: "ml", Name: "waiting", Created: 20, Requests: gpus(1)}
	terminating := boundPod("ml", "terminating", "n1", gpus(3)...)
	terminating.Deleting = true
	for _, p := range []*Pod{gated, leaving, waiting, terminating} {
		tr.SetPod(p)
	}
	want := []Demand{{Pods: 1, Milli: 1000, Since: 20}, {Pods: 1, Milli: 4000, Since: 10, Queued: true}}
	if diff := cmp.Diff(want, tr.Pending()); diff != "" {
		t.Errorf("Pending (-want +got):\n%s", diff)
	}
	if h := tr.Held("n1"); h == nil || h.Pods != 1 {
		t.Errorf("the terminating pod holds %+v, want its 3 GPUs", h)
	}
	ungated := *gated
	ungated.Gated = false
	tr.SetPod(&ungated)
	want = []Demand{{Pods: 2, Milli: 5000, Since: 10}}
	if diff := cmp.Diff(want, tr.Pending()); diff != "" {
		t.Errorf("after the gates are lifted, Pending (-want +got):\n%s", diff)
	}
}
