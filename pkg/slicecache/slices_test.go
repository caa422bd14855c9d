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

package slicecache

import (
	"context"
	"fmt"
	"reflect"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
)

func TestServed(t *testing.T) {
	slices := metav1.APIResource{Name: "resourceslices", Kind: "ResourceSlice"}
	claims := metav1.APIResource{Name: "resourceclaims", Kind: "ResourceClaim"}
	for _, tc := range []struct {
		name      string
		resources []*metav1.APIResourceList
		want      bool
	}{
		{"served", []*metav1.APIResourceList{{GroupVersion: "resource.k8s.io/v1", APIResources: []metav1.APIResource{claims, slices}}}, true},
		{"no resource.k8s.io", []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "nodes"}}}}, false},
		{"only v1beta1", []*metav1.APIResourceList{{GroupVersion: "resource.k8s.io/v1beta1", APIResources: []metav1.APIResource{slices}}}, false},
		{"v1 without resourceslices", []*metav1.APIResourceList{{GroupVersion: "resource.k8s.io/v1", APIResources: []metav1.APIResource{claims}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Served(context.Background(), prototest.DiscoveryClient(t, false, tc.resources...))
			if err != nil || got != tc.want {
				t.Errorf("Served = %v, %v; want %v, nil", got, err, tc.want)
			}
		})
	}
	t.Run("discovery fails", func(t *testing.T) {
		if got, err := Served(context.Background(), prototest.DiscoveryClient(t, true)); err == nil || got {
			t.Errorf("Served = %v, %v; want false and the error", got, err)
		}
	})
}

// slice is a gpu.nvidia.com slice of node in the driver's shape, with what the cache drops
// besides (managed fields, labels, annotations, brand, other capacities, counter values).
func slice(name, node string, generation, count int64, driverVersion string, devices ...string) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{"app": "nvidia-dra-driver-gpu"},
			Annotations: map[string]string{"note": "dropped"},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "gpu-kubelet-plugin", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "resource.k8s.io/v1",
			}},
		},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   inventory.DRADriver,
			NodeName: &node,
			Pool:     resourcev1.ResourcePool{Name: node, Generation: generation, ResourceSliceCount: count},
		},
	}
	for i, d := range devices {
		uuid := "GPU-" + node + "-" + d
		bus := "0000:1b:00." + d[len(d)-1:] // gpu-<n>
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
			Name: d,
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type":                            {StringValue: ptr("gpu")},
				"uuid":                            {StringValue: &uuid},
				"productName":                     {StringValue: ptr("NVIDIA B200")},
				"brand":                           {StringValue: ptr("Nvidia")},
				"architecture":                    {StringValue: ptr("Blackwell")},
				"cudaComputeCapability":           {VersionValue: ptr("10.0.0")},
				"driverVersion":                   {VersionValue: ptr(driverVersion)},
				"cudaDriverVersion":               {VersionValue: ptr("13.0.0")},
				"resource.kubernetes.io/pciBusID": {StringValue: &bus},
				"index":                           {IntValue: ptr(int64(i))},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
				"memory":       {Value: resource.MustParse("183359Mi")},
				"multiprocess": {Value: resource.MustParse("1")},
			},
		})
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// fixture is a started cache, with every OnChange call on changes; write makes a change
// through the cache's source.
type fixture struct {
	client  *fake.Clientset   // of newFixture
	server  *prototest.Server // of newServerFixture
	cache   *Cache
	changes chan string
	write   func(t *testing.T, typ watch.EventType, s *resourcev1.ResourceSlice)
}

// newFixture starts a cache (New) on a fake clientset holding objs.
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	slices := client.ResourceV1().ResourceSlices()
	f := &fixture{client: client, write: func(t *testing.T, typ watch.EventType, s *resourcev1.ResourceSlice) {
		t.Helper()
		var err error
		switch typ {
		case watch.Added:
			_, err = slices.Create(context.Background(), s, metav1.CreateOptions{})
		case watch.Modified:
			_, err = slices.Update(context.Background(), s, metav1.UpdateOptions{})
		default:
			err = slices.Delete(context.Background(), s.Name, metav1.DeleteOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}}
	f.start(t, newOnFake(client))
	return f
}

// newServerFixture starts a cache as the operator runs it (NewForConfig: protobuf decoded
// straight into compact slices) on a fake API server holding objs.
func newServerFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	server := prototest.NewServer(t, prototest.Options{}, prototest.ResourceSlices)
	server.Set(objs...)
	c, err := NewForConfig(server.Config())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{server: server, write: func(t *testing.T, typ watch.EventType, s *resourcev1.ResourceSlice) { server.Apply(typ, s) }}
	f.start(t, c)
	return f
}

// starter starts a fixture holding objs.
type starter func(t *testing.T, objs ...runtime.Object) *fixture

// onEachBackend runs test on a fake clientset (New) and on a fake API server
// (NewForConfig), each a subtest of its own.
func onEachBackend(t *testing.T, test func(t *testing.T, start starter)) {
	t.Run("fake clientset", func(t *testing.T) { test(t, newFixture) })
	t.Run("API server", func(t *testing.T) { test(t, newServerFixture) })
}

// start runs c until the test ends and waits for its first sync.
func (f *fixture) start(t *testing.T, c *Cache) {
	t.Helper()
	f.cache, f.changes = c, make(chan string, 100)
	f.cache.OnChange(func(node string) { f.changes <- node })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() { f.cache.Informer().RunWithContext(ctx); close(done) }()
	if !cache.WaitForCacheSync(ctx.Done(), f.cache.HasSynced) {
		t.Fatal("slice cache never synced")
	}
	// The initial list's nodes were announced before the sync: start with a clean slate.
	for len(f.changes) > 0 {
		<-f.changes
	}
}

// next returns the node of the next OnChange call.
func (f *fixture) next(t *testing.T) string {
	t.Helper()
	select {
	case node := <-f.changes:
		return node
	case <-time.After(10 * time.Second):
		t.Fatal("no OnChange call")
		return ""
	}
}

// noChangeUntil fails if OnChange is called before the call for sentinel: events are
// handled in order, so a call the previous writes caused would come first.
func (f *fixture) noChangeUntil(t *testing.T, sentinel string) {
	t.Helper()
	if node := f.next(t); node != sentinel {
		t.Errorf("OnChange(%q) before the sentinel %q", node, sentinel)
	}
}

func (f *fixture) create(t *testing.T, s *resourcev1.ResourceSlice) {
	t.Helper()
	f.write(t, watch.Added, s)
}

func (f *fixture) update(t *testing.T, s *resourcev1.ResourceSlice) {
	t.Helper()
	f.write(t, watch.Modified, s)
}

func (f *fixture) delete(t *testing.T, name string) {
	t.Helper()
	f.write(t, watch.Deleted, &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// wantFacts checks a node's cached facts and devices against DeviceFactsOf of its full
// (untrimmed) slices: the trim keeps all that is read.
func (f *fixture) wantFacts(t *testing.T, node string, full ...*resourcev1.ResourceSlice) *inventory.DeviceFacts {
	t.Helper()
	got := f.cache.Facts(node)
	var want *inventory.DeviceFacts
	var devices []homelabv1.GpuDevice
	if len(full) > 0 {
		want = factsOf(full)
		devices, want.Devices = want.Devices, nil // listed by Devices, not kept with the facts
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Facts(%s) = %+v\nwant %+v", node, got, want)
	}
	if got := f.cache.Devices(node); !reflect.DeepEqual(got, devices) {
		t.Errorf("Devices(%s) = %+v\nwant %+v", node, got, devices)
	}
	return got
}

func TestListWatchSelectsTheDriver(t *testing.T) {
	t.Run("fake clientset", func(t *testing.T) {
		f := newFixture(t)
		for _, a := range f.client.Actions() {
			var restrictions string
			switch a := a.(type) {
			case clienttesting.ListActionImpl:
				restrictions = a.GetListRestrictions().Fields.String()
			case clienttesting.WatchActionImpl:
				restrictions = a.GetWatchRestrictions().Fields.String()
			default:
				continue
			}
			if restrictions != "spec.driver=gpu.nvidia.com" {
				t.Errorf("%s %s with field selector %q, want spec.driver=gpu.nvidia.com", a.GetVerb(), a.GetResource().Resource, restrictions)
			}
		}
		if n := len(f.client.Actions()); n == 0 {
			t.Error("no list or watch of resourceslices")
		}
	})
	t.Run("API server", func(t *testing.T) {
		f := newServerFixture(t)
		requests := f.server.Requests()
		for _, r := range requests {
			if got := r.Query().Get("fieldSelector"); got != "spec.driver=gpu.nvidia.com" {
				t.Errorf("%s with field selector %q, want spec.driver=gpu.nvidia.com", r, got)
			}
		}
		if len(requests) == 0 {
			t.Error("no list or watch of resourceslices")
		}
	})
}

// Each step starts a cache of its own on the slices it begins with (the state the step
// before it left), so that any one runs alone; each runs on both backends.
func TestFactsFollowSlices(t *testing.T) {
	gen1 := func() *resourcev1.ResourceSlice {
		return slice("dra-1-gpu", "dra-1", 1, 1, "580.126.9", "gpu-0", "gpu-1")
	}
	gen2 := func() *resourcev1.ResourceSlice {
		return slice("dra-1-gpu", "dra-1", 2, 1, "590.48.1", "gpu-0", "gpu-1")
	}
	dra2 := func() *resourcev1.ResourceSlice { return slice("dra-2-gpu", "dra-2", 1, 1, "580.126.9", "gpu-0") }
	step := func(name string, run func(t *testing.T, start starter)) {
		t.Run(name, func(t *testing.T) { onEachBackend(t, run) })
	}

	step("initial list", func(t *testing.T, start starter) {
		initial := gen1()
		f := start(t, initial)
		if got := f.wantFacts(t, "dra-1", initial); got == nil || got.GpuCount != 2 {
			t.Fatalf("facts from the initial list: %+v, want 2 GPUs", got)
		}
		if f.cache.Facts("dra-2") != nil {
			t.Error("a node without slices has facts")
		}
	})

	step("added", func(t *testing.T, start starter) {
		f := start(t, gen1())
		s := dra2()
		f.create(t, s)
		if node := f.next(t); node != "dra-2" {
			t.Fatalf("OnChange(%q), want dra-2", node)
		}
		f.wantFacts(t, "dra-2", s)
	})

	step("new generation", func(t *testing.T, start starter) {
		f := start(t, gen1())
		before := f.cache.Facts("dra-1")
		s := gen2()
		f.update(t, s)
		if node := f.next(t); node != "dra-1" {
			t.Fatalf("OnChange(%q), want dra-1", node)
		}
		got := f.wantFacts(t, "dra-1", s)
		if got == before || got.DriverVersion != "590.48.1" {
			t.Errorf("facts after the new generation: %+v (same pointer: %v)", got, got == before)
		}
		if before.DriverVersion != "580.126.9" {
			t.Errorf("the facts returned before were modified: %+v", before)
		}
	})

	step("republished with equal content", func(t *testing.T, start starter) {
		f := start(t, gen2())
		before := f.cache.Facts("dra-1")
		s := gen2()
		s.Labels["republished"] = "true" // a new resourceVersion, nothing read changed
		f.update(t, s)
		f.create(t, slice("sentinel-gpu", "sentinel", 1, 1, "580.126.9", "gpu-0"))
		f.noChangeUntil(t, "sentinel")
		if got := f.cache.Facts("dra-1"); got != before {
			t.Errorf("equal facts got a new pointer: %p, was %p", got, before)
		}
	})

	step("a GPU swapped for another of the same kind", func(t *testing.T, start starter) {
		f := start(t, gen2())
		s := slice("dra-1-gpu", "dra-1", 3, 1, "590.48.1", "gpu-0", "gpu-1")
		for i := range s.Spec.Devices {
			if s.Spec.Devices[i].Name == "gpu-1" {
				s.Spec.Devices[i].Attributes["uuid"] = resourcev1.DeviceAttribute{StringValue: ptr("GPU-replacement")}
			}
		}
		f.update(t, s)
		if node := f.next(t); node != "dra-1" {
			t.Fatalf("OnChange(%q), want dra-1: the devices changed, nothing else", node)
		}
		f.wantFacts(t, "dra-1", s)
	})

	step("deleted", func(t *testing.T, start starter) {
		f := start(t, gen2(), dra2())
		if f.cache.Facts("dra-2") == nil {
			t.Fatal("no facts of dra-2 from the initial list")
		}
		f.delete(t, "dra-2-gpu")
		if node := f.next(t); node != "dra-2" {
			t.Fatalf("OnChange(%q), want dra-2", node)
		}
		if got := f.cache.Facts("dra-2"); got != nil {
			t.Errorf("facts of a node without slices: %+v", got)
		}
	})

	step("moved to another node", func(t *testing.T, start starter) {
		f := start(t, gen2())
		s := slice("dra-1-gpu", "dra-3", 2, 1, "590.48.1", "gpu-0", "gpu-1")
		s.Spec.Pool.Name = "dra-1" // the pool's name is not the node's: the node is
		f.update(t, s)
		got := map[string]bool{f.next(t): true, f.next(t): true}
		if !got["dra-1"] || !got["dra-3"] {
			t.Errorf("OnChange for %v, want dra-1 and dra-3", got)
		}
		f.wantFacts(t, "dra-1")
		f.wantFacts(t, "dra-3", s)
	})
}

// A node's facts come from all its slices: a pool of two slices counts once both of its
// newest generation are there.
func TestFactsOfAPoolOfSeveralSlices(t *testing.T) { onEachBackend(t, testFactsOfAPoolOfSeveralSlices) }

func testFactsOfAPoolOfSeveralSlices(t *testing.T, start starter) {
	f := start(t)
	a := slice("dra-1-a", "dra-1", 1, 2, "580.126.9", "gpu-0")
	b := slice("dra-1-b", "dra-1", 1, 2, "580.126.9", "gpu-1")
	f.create(t, a)
	if node := f.next(t); node != "dra-1" {
		t.Fatalf("OnChange(%q), want dra-1", node)
	}
	if got := f.wantFacts(t, "dra-1", a); got == nil || !got.Pending {
		t.Errorf("one slice of two: %+v, want pending", got)
	}
	f.create(t, b)
	if node := f.next(t); node != "dra-1" {
		t.Fatalf("OnChange(%q), want dra-1", node)
	}
	if got := f.wantFacts(t, "dra-1", a, b); got == nil || got.Pending || got.GpuCount != 2 {
		t.Errorf("both slices: %+v, want 2 GPUs", got)
	}
	// One slice republished, same devices, next generation: the pool waits for the other.
	a2 := slice("dra-1-a", "dra-1", 2, 2, "580.126.9", "gpu-0")
	f.update(t, a2)
	if node := f.next(t); node != "dra-1" {
		t.Fatalf("OnChange(%q), want dra-1", node)
	}
	if got := f.wantFacts(t, "dra-1", a2, b); got == nil || !got.Pending {
		t.Errorf("one slice of two at the next generation: %+v, want pending", got)
	}
}

// Slices that are not node-local (a network-attached pool) or of another driver (the fake
// clientset ignores the field selector) are cached as a stub and give no node facts.
func TestSlicesNotReadAreStubs(t *testing.T) { onEachBackend(t, testSlicesNotReadAreStubs) }

func testSlicesNotReadAreStubs(t *testing.T, start starter) {
	f := start(t)
	network := slice("fabric", "x", 1, 1, "580.126.9", "gpu-0")
	network.Spec.NodeName = nil
	network.Spec.AllNodes = ptr(true)
	other := slice("other-driver", "dra-1", 1, 1, "580.126.9", "gpu-0")
	other.Spec.Driver = "gpu.example.com"
	f.create(t, network)
	f.create(t, other)
	f.create(t, slice("sentinel-gpu", "sentinel", 1, 1, "580.126.9", "gpu-0"))
	f.noChangeUntil(t, "sentinel")
	for _, s := range []*resourcev1.ResourceSlice{network, other} {
		obj, ok, err := f.cache.Informer().GetIndexer().GetByKey(s.Name)
		if err != nil || !ok {
			t.Fatalf("%s not cached: %v", s.Name, err)
		}
		cached := obj.(*compactSlice)
		want := &compactSlice{Compact: kubeproto.Compact{Name: s.Name, ResourceVersion: cached.ResourceVersion}, driver: s.Spec.Driver}
		if !reflect.DeepEqual(cached, want) {
			t.Errorf("%s cached as %+v, want only its name, resourceVersion and driver", s.Name, cached)
		}
	}
	if f.cache.Facts("dra-1") != nil || f.cache.Facts("x") != nil {
		t.Error("facts from slices that are not read")
	}
	f.delete(t, "fabric")
	f.delete(t, "sentinel-gpu")
	f.noChangeUntil(t, "sentinel")
}

func TestTrimKeepsOnlyWhatIsRead(t *testing.T) {
	s := slice("dra-1-gpu", "dra-1", 3, 2, "580.126.9", "gpu-0")
	s.Spec.Devices[0].Taints = []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/xid", Value: "79", Effect: resourcev1.DeviceTaintEffectNoSchedule, TimeAdded: &metav1.Time{}}}
	s.Spec.Devices[0].ConsumesCounters = []resourcev1.DeviceCounterConsumption{{CounterSet: "gpu-0-counters", Counters: map[string]resourcev1.Counter{"memory": {Value: resource.MustParse("10Gi")}}}}
	counters := slice("dra-1-counters", "dra-1", 3, 2, "580.126.9")
	counters.Spec.SharedCounters = []resourcev1.CounterSet{{Name: "gpu-0-counters", Counters: map[string]resourcev1.Counter{"memory": {Value: resource.MustParse("80Gi")}}}}
	f := newFixture(t, s, counters)

	obj, ok, err := f.cache.Informer().GetIndexer().GetByKey("dra-1-gpu")
	if err != nil || !ok {
		t.Fatalf("not cached: %v", err)
	}
	h100 := &model{
		kind: "gpu", productName: "NVIDIA B200", architecture: "Blackwell", computeCapability: "10.0.0",
		driverVersion: "580.126.9", cudaDriverVersion: "13.0.0",
		consumes: &[]consumption{{set: "gpu-0-counters", counters: []counter{{name: "memory", milli: 10 << 30 * 1000}}}},
		memory:   183359 << 20, hasMemory: true,
	}
	want := &compactSlice{
		Compact: kubeproto.Compact{Name: "dra-1-gpu", ResourceVersion: obj.(*compactSlice).ResourceVersion}, driver: inventory.DRADriver,
		node: "dra-1", pool: pool{name: "dra-1", generation: 3, resourceSliceCount: 2},
		devices: []device{{
			name: "gpu-0", uuid: packedUUID{spelling: idElsewhere}, pciBusID: packedPCI{spelling: 1, digits: [5]byte{0x00, 0x00, 0x1b, 0x00, 0x00}},
			model: h100, more: &deviceMore{uuid: "GPU-dra-1-gpu-0", taints: []taint{{key: "gpu.nvidia.com/xid", effect: resourcev1.DeviceTaintEffectNoSchedule}}},
		}},
	}
	if !reflect.DeepEqual(obj, want) {
		t.Errorf("cached slice:\n%+v\nwant:\n%+v", obj, want)
	}
	obj, _, _ = f.cache.Informer().GetIndexer().GetByKey("dra-1-counters")
	sets := &[]counterSet{{name: "gpu-0-counters", counters: []counter{{name: "memory", milli: 80 << 30 * 1000}}}}
	if got := obj.(*compactSlice); got.devices != nil || got.pool != (pool{name: "dra-1", generation: 3, resourceSliceCount: 2}) ||
		!reflect.DeepEqual(got.counterSets, sets) {
		t.Errorf("cached counters slice: %+v, want its pool, its counter set and no devices", got)
	}
	f.wantFacts(t, "dra-1", s, counters)

	// The trim may run twice (client-go applies it again to objects it re-queues).
	tr := &trimmer{}
	once, _ := tr.Trim(s)
	twice, _ := tr.Trim(once)
	if !reflect.DeepEqual(once, twice) {
		t.Errorf("a trimmed slice trims to\n%+v\nnot itself\n%+v", twice, once)
	}
}

// A deletion the informer learnt of only from a tombstone (it missed the watch event)
// still removes the node's facts: the cache remembers each slice's node.
func TestTombstoneDeletion(t *testing.T) {
	c := newOnFake(fake.NewClientset())
	var changed []string
	c.OnChange(func(node string) { changed = append(changed, node) })
	indexer := c.Informer().GetIndexer()
	trimmed, _ := (&trimmer{}).Trim(slice("dra-1-gpu", "dra-1", 1, 1, "580.126.9", "gpu-0"))
	if err := indexer.Add(trimmed); err != nil {
		t.Fatal(err)
	}
	c.sliceSeen(trimmed)
	if c.Facts("dra-1") == nil {
		t.Fatal("no facts from the slice")
	}
	if err := indexer.Delete(trimmed); err != nil {
		t.Fatal(err)
	}
	c.sliceDeleted(cache.DeletedFinalStateUnknown{Key: "dra-1-gpu"})
	if c.Facts("dra-1") != nil || !reflect.DeepEqual(changed, []string{"dra-1", "dra-1"}) {
		t.Errorf("after the tombstone: facts %+v, OnChange calls %v", c.Facts("dra-1"), changed)
	}
}

// The store may be ahead of the event handler: a slice the store has moved to another node
// is no longer listed on its old one, and the move's event then gives each node its facts.
func TestStoreAheadOfHandler(t *testing.T) {
	c := newOnFake(fake.NewClientset())
	indexer := c.Informer().GetIndexer()
	tr := &trimmer{}
	first, _ := tr.Trim(slice("dra-gpu", "dra-1", 1, 1, "580.126.9", "gpu-0"))
	if err := indexer.Add(first); err != nil {
		t.Fatal(err)
	}
	c.sliceSeen(first)
	moved, _ := tr.Trim(slice("dra-gpu", "dra-2", 2, 1, "580.126.9", "gpu-0"))
	if err := indexer.Update(moved); err != nil {
		t.Fatal(err)
	}
	if got := c.Devices("dra-1"); got != nil {
		t.Errorf("dra-1 still lists the moved slice's devices: %+v", got)
	}
	c.sliceSeen(moved)
	if c.Facts("dra-1") != nil || c.Facts("dra-2") == nil || len(c.Devices("dra-2")) != 1 {
		t.Errorf("after the move: dra-1 facts %+v, dra-2 facts %+v and devices %+v", c.Facts("dra-1"), c.Facts("dra-2"), c.Devices("dra-2"))
	}
}

// The facts of trimmed slices are those of the full slices, for each shape the driver
// publishes.
func TestTrimmedSlicesGiveTheSameFacts(t *testing.T) {
	str := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }
	ver := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{VersionValue: &s} }
	gib := func(n string) map[resourcev1.QualifiedName]resourcev1.DeviceCapacity {
		return map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse(n)}, "multiprocessors": {Value: resource.MustParse("14")}}
	}
	staticMIG := slice("mig", "n", 1, 1, "580.126.9")
	staticMIG.Spec.Devices = []resourcev1.Device{{
		Name: "gpu-0-mig-1g10gb-0",
		Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"type": str("mig"), "uuid": str("MIG-1"), "parentUUID": str("GPU-1"), "profile": str("1g.10gb"),
			"productName": str("NVIDIA H100 80GB HBM3"), "architecture": str("Hopper"), "driverVersion": ver("580.126.9"),
			"resource.kubernetes.io/pciBusID": str("0000:1b:00.0"), "brand": str("Nvidia"),
		},
		Capacity: gib("10Gi"),
		Taints:   []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/xid", Value: "48", Effect: resourcev1.DeviceTaintEffectNoExecute}},
	}}
	dynamicMIG := slice("dyn", "n", 1, 1, "580.126.9")
	dynamicMIG.Spec.Devices = []resourcev1.Device{
		{Name: "gpu-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"type": str("gpu"), "uuid": str("GPU-1"), "productName": str("NVIDIA H100 80GB HBM3"), "pciBusID": str("0000:1b:00.0"),
		}, Capacity: gib("80Gi"), ConsumesCounters: []resourcev1.DeviceCounterConsumption{{CounterSet: "gpu-0", Counters: map[string]resourcev1.Counter{"memory": {Value: resource.MustParse("80Gi")}}}}},
		{Name: "gpu-0-mig-1g10gb-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"type": str("mig"), "parentUUID": str("GPU-1"), "profile": str("1g.10gb"),
		}, Capacity: gib("10Gi"), ConsumesCounters: []resourcev1.DeviceCounterConsumption{{CounterSet: "gpu-0", Counters: map[string]resourcev1.Counter{"memory": {Value: resource.MustParse("10Gi")}}}}},
	}
	qualified := slice("q", "n", 1, 1, "580.126.9")
	qualified.Spec.Devices = []resourcev1.Device{
		{Name: "gpu-vfio-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"gpu.nvidia.com/type": str("vfio"), "gpu.nvidia.com/uuid": str("vfio-0000:1b:00.0"), "gpu.nvidia.com/productName": str("GH100 [H100 SXM5 80GB]"),
			"resource.kubernetes.io/pciBusID": str("0000:1b:00.0"),
		}},
		{Name: "gpu-1", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"gpu.nvidia.com/type": str("gpu"), "gpu.nvidia.com/uuid": str("GPU-2"), "gpu.nvidia.com/cudaDriverVersion": ver("13.0.0"),
		}, Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"gpu.nvidia.com/memory": {Value: resource.MustParse("80Gi")}}},
	}
	// An attribute under the name DeviceFactsOf reads first hides one under the other
	// spelling, even when it is of a kind it does not read.
	shadowed := slice("shadowed", "n", 1, 1, "580.126.9")
	shadowed.Spec.Devices = []resourcev1.Device{
		{Name: "gpu-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"type": {IntValue: ptr(int64(1))}, "gpu.nvidia.com/type": str("gpu"),
			"uuid": str("GPU-1"), "gpu.nvidia.com/uuid": str("GPU-other"),
			"productName": {BoolValue: ptr(true)}, "gpu.nvidia.com/productName": str("NVIDIA H100"),
			"pciBusID": str("0000:1b:00.0"), "gpu.nvidia.com/pciBusID": str("0000:2b:00.0"),
		}, Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi")}, "gpu.nvidia.com/memory": {Value: resource.MustParse("40Gi")}}},
		{Name: "gpu-1", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"type": str("gpu"), "uuid": str("GPU-2"), "gpu.nvidia.com/pciBusID": str("0000:2b:00.0"),
			"cudaComputeCapability": str("nine"), "cudaDriverVersion": ver("13.0.0"), "gpu.nvidia.com/driverVersion": ver("580.1.2"),
		}},
	}
	// Memory capacities at and beyond the bounds DeviceFactsOf accepts.
	memory := slice("memory", "n", 1, 1, "580.126.9")
	for i, q := range []string{"-1", "-0.5", "0", "0.5", "1.5Mi", "1Pi", "1025Ti", "1e400", "9223372036854775807", "9223372036854775808"} {
		memory.Spec.Devices = append(memory.Spec.Devices, resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type": str("gpu"), "uuid": str(fmt.Sprintf("GPU-%d", i)), "productName": str("NVIDIA H100"),
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse(q)}},
		})
	}
	// Taints of every effect, more than a device lists, and strings longer than are shared.
	long := strings.Repeat("x", 300)
	taints := slice("taints", "n", 1, 1, "580.126.9")
	taints.Spec.Devices = []resourcev1.Device{{
		Name: "gpu-0-" + long,
		Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"type": str("gpu"), "uuid": str("GPU-" + long), "productName": str("NVIDIA " + long), "architecture": str(long),
			"resource.kubernetes.io/pciBusID": str(long),
		},
	}}
	for i, effect := range []resourcev1.DeviceTaintEffect{"None", "NoSchedule", "NoExecute", "None", "None", "None", "None", "None", "None", "NoExecute"} {
		taints.Spec.Devices[0].Taints = append(taints.Spec.Devices[0].Taints, resourcev1.DeviceTaint{Key: fmt.Sprintf("gpu.nvidia.com/t%d", i), Value: "v", Effect: effect})
	}
	for _, s := range []*resourcev1.ResourceSlice{staticMIG, dynamicMIG, qualified, shadowed, memory, taints} {
		t.Run(s.Name, func(t *testing.T) {
			wantSameFacts(t, s)
		})
	}
}

// The driver's fixtures, cached, give each node the facts of its full slices.
func TestFixturesCached(t *testing.T) {
	for _, name := range []string{dra.H100, dra.H100Tainted, dra.A100StaticMIG, dra.H100DynMIG, dra.H100VFIO, dra.PoolMidUpdate} {
		t.Run(name, func(t *testing.T) {
			full, err := dra.Slices(name)
			if err != nil {
				t.Fatal(err)
			}
			byNode := map[string][]*resourcev1.ResourceSlice{}
			var objs []runtime.Object
			for _, s := range full {
				byNode[*s.Spec.NodeName] = append(byNode[*s.Spec.NodeName], s)
				objs = append(objs, s.DeepCopy())
			}
			onEachBackend(t, func(t *testing.T, start starter) {
				f := start(t, objs...)
				for node, slices := range byNode {
					if got := f.wantFacts(t, node, slices...); got == nil {
						t.Errorf("no facts for %s", node)
					}
				}
			})
		})
	}
}

// wantSameFacts checks that slices of one node, cached, give the facts of the full slices.
func wantSameFacts(t *testing.T, full ...*resourcev1.ResourceSlice) {
	t.Helper()
	tr := &trimmer{}
	expanded := make([]*resourcev1.ResourceSlice, len(full))
	for i, s := range full {
		cached, err := tr.Trim(s.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		expanded[i] = cached.(*compactSlice).expand()
	}
	got, want := factsOf(expanded), factsOf(full)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("facts of the cached slices:\n%+v\nof the full slices:\n%+v", got, want)
	}
}

// The driver's fixtures give each node the same facts cached as in full.
func TestFixturesGiveTheSameFacts(t *testing.T) {
	for _, name := range []string{dra.H100, dra.H100Tainted, dra.A100StaticMIG, dra.H100DynMIG, dra.H100VFIO, dra.PoolMidUpdate} {
		t.Run(name, func(t *testing.T) {
			full, err := dra.Slices(name)
			if err != nil {
				t.Fatal(err)
			}
			byNode := map[string][]*resourcev1.ResourceSlice{}
			for _, s := range full {
				byNode[*s.Spec.NodeName] = append(byNode[*s.Spec.NodeName], s)
			}
			for _, slices := range byNode {
				wantSameFacts(t, slices...)
			}
		})
	}
}

// The informer's store reads a cached slice's name and resourceVersion through
// meta.Accessor, and may copy it.
func TestCachedSliceIsAnObject(t *testing.T) {
	full, err := dra.Slices(dra.H100Tainted)
	if err != nil {
		t.Fatal(err)
	}
	full[0].ResourceVersion = "42"
	obj, _ := (&trimmer{}).Trim(full[0])
	cached := obj.(*compactSlice)
	m, err := meta.Accessor(obj)
	if err != nil || m.GetName() != full[0].Name || m.GetResourceVersion() != "42" {
		t.Fatalf("meta.Accessor: %v, %v", m, err)
	}
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err != nil || key != full[0].Name {
		t.Errorf("key %q, %v; want %q", key, err, full[0].Name)
	}
	cp := cached.DeepCopyObject().(*compactSlice)
	if !reflect.DeepEqual(cp, cached) {
		t.Fatalf("copy:\n%+v\nwant:\n%+v", cp, cached)
	}
	tainted := slices.IndexFunc(cached.devices, func(d device) bool { return len(d.taints()) > 0 })
	if tainted < 0 {
		t.Fatalf("%s cached without taints", dra.H100Tainted)
	}
	cp.devices[tainted].name = "changed" // taints, like models, are shared and read-only
	if d := cached.devices[tainted]; d.name == "changed" {
		t.Error("the copy shares its devices with the original")
	}
}

// fleetSlice is the i-th node's 8-GPU slice, with the strings of its own (name, node,
// resourceVersion, UUIDs) freshly allocated as a decoder would.
func fleetSlice(template *resourcev1.ResourceSlice, i int) *resourcev1.ResourceSlice {
	s := template.DeepCopy()
	node := fmt.Sprintf("dra-h100-%d", i)
	s.Name = node + "-gpu.nvidia.com-8fq2x"
	s.ResourceVersion = strconv.Itoa(100000 + i)
	s.Spec.NodeName = &node
	s.Spec.Pool.Name = strings.Clone(node)
	for j := range s.Spec.Devices {
		uuid := fmt.Sprintf("GPU-%08x-6b80-5491-8500-21f3285de%03d", i, j)
		s.Spec.Devices[j].Attributes["uuid"] = resourcev1.DeviceAttribute{StringValue: &uuid}
	}
	return s
}

// What the cache retains of an 8-GPU slice: the heap a thousand of them hold once the full
// slices are gone, beyond what the first one put in the tables the slices share.
func TestRetainedBytesPerSlice(t *testing.T) {
	const n, limit = 1000, 1024
	full, err := dra.Slices(dra.H100)
	if err != nil {
		t.Fatal(err)
	}
	template := full[0]
	if len(template.Spec.Devices) != 8 {
		t.Fatalf("%s has %d devices, want 8", dra.H100, len(template.Spec.Devices))
	}
	tr := &trimmer{}
	_, _ = tr.Trim(fleetSlice(template, n))
	held := make([]any, n)
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	for i := range held {
		held[i], _ = tr.Trim(fleetSlice(template, i))
	}
	goruntime.GC()
	goruntime.ReadMemStats(&after)
	perSlice := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("%d bytes retained per 8-GPU slice", perSlice)
	if perSlice > limit {
		t.Errorf("%d bytes retained per 8-GPU slice, want at most %d", perSlice, limit)
	}
	goruntime.KeepAlive(held)
}

func BenchmarkTransform(b *testing.B) {
	full, err := dra.Slices(dra.H100)
	if err != nil {
		b.Fatal(err)
	}
	slices := make([]*resourcev1.ResourceSlice, 64)
	for i := range slices {
		slices[i] = fleetSlice(full[0], i)
	}
	tr := &trimmer{}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := tr.Trim(slices[i%len(slices)]); err != nil {
			b.Fatal(err)
		}
	}
}

// newOnFake builds the cache on a fake clientset: a list and watch of the ResourceSlices with
// spec.driver=gpu.nvidia.com, trimmed by the informer's transform.
func newOnFake(client *fake.Clientset) *Cache {
	slices := client.ResourceV1().ResourceSlices()
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = driverSelector
			return slices.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = driverSelector
			return slices.Watch(ctx, opts)
		},
	}, client)
	return newCache(lw, &resourcev1.ResourceSlice{}, &trimmer{})
}
