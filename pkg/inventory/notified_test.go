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

package inventory

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
)

// sources are devices and holdings that change, with a count of the lookups.
type sources struct {
	mu      sync.Mutex
	facts   map[string]*DeviceFacts
	held    map[string]*allocation.Held
	lookups atomic.Int64
}

func (s *sources) devices(node string) *DeviceFacts {
	s.lookups.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.facts[node]
}

func (s *sources) holdings(node string) *allocation.Held {
	s.lookups.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[node]
}

// A notified cache asks about a node's devices and holdings only when the node is new or
// changed, or Changed named it; what it computes is what an unnotified cache computes.
func TestNotifiedCacheAsksOnlyAboutChangedNodes(t *testing.T) {
	h100, tainted := DeviceFactsOf(draSlices(t, dra.H100)), DeviceFactsOf(draSlices(t, dra.H100Tainted))
	src := &sources{facts: map[string]*DeviceFacts{"dra-1": h100}, held: map[string]*allocation.Held{"gpu-a": held("ml", 1, 2)}}
	dra1 := draNode("dra-1")
	dra1.ResourceVersion = "1"
	nodes := []*corev1.Node{h100Node("gpu-a", corev1.ConditionTrue), dra1, node("cpu-1", corev1.ConditionTrue, nil)}
	nodes[2].ResourceVersion = "1"
	cache := NewEntryCacheWithDevices(src.devices).WithAllocation(src.holdings).Notified()
	compute := func(nodes []*corev1.Node) Inventory {
		t.Helper()
		inv, _ := cache.Compute(nodes, nil, t0)
		plain, _ := NewEntryCacheWithDevices(src.devices).WithAllocation(src.holdings).Compute(nodes, nil, t0)
		if inv.Hash != plain.Hash {
			t.Fatalf("the notified cache computed %+v; a fresh cache %+v", inv.Nodes, plain.Nodes)
		}
		return inv
	}
	lookups := func() int64 { return src.lookups.Swap(0) }

	compute(nodes)
	if n := lookups(); n != 2*2+2*2 { // the notified and the fresh cache: two GPU nodes, two sources
		t.Errorf("first compute: %d lookups; want 8 (none for the node without GPUs)", n)
	}
	compute(nodes)
	if n := lookups(); n != 4 {
		t.Errorf("nothing changed: %d lookups; want only the fresh cache's 4", n)
	}

	// dra-1's slice gains a taint; a compute of another inventory (gpu-a only) drains the
	// notice, and the next compute of all nodes still sees the taint.
	src.mu.Lock()
	src.facts["dra-1"] = tainted
	src.mu.Unlock()
	cache.Changed("dra-1")
	compute(nodes[:1])
	inv := compute(nodes)
	if e := inv.Nodes[slicesIndex(inv, "dra-1")]; e.UnhealthyGpus == 0 {
		t.Errorf("dra-1 after its taint: %+v; want unhealthy GPUs", e)
	}
	lookups()

	// What pods hold on gpu-a changes.
	src.mu.Lock()
	src.held["gpu-a"] = held("ml", 2, 8)
	src.mu.Unlock()
	cache.Changed("gpu-a")
	cache.Changed("") // the tracker's notice of pending demand
	if inv := compute(nodes); inv.Nodes[slicesIndex(inv, "gpu-a")].AllocatedGpus != 8 {
		t.Errorf("gpu-a after more pods: %+v; want 8 allocated", inv.Nodes[slicesIndex(inv, "gpu-a")])
	}
	if n := lookups(); n != 2+4 {
		t.Errorf("after one notice: %d lookups; want 2 for gpu-a and the fresh cache's 4", n)
	}
}

func slicesIndex(inv Inventory, name string) int {
	for i, e := range inv.Nodes {
		if e.Name == name {
			return i
		}
	}
	panic("no entry of " + name)
}

// Changes racing with computes are never lost: once the last change was named, the next
// compute shows it.
func TestNotifiedCacheLosesNoRacingChange(t *testing.T) {
	const nodeCount = 20
	src := &sources{facts: map[string]*DeviceFacts{}, held: map[string]*allocation.Held{}}
	var nodes []*corev1.Node
	for i := range nodeCount {
		n := h100Node(fmt.Sprintf("gpu-%02d", i), corev1.ConditionTrue)
		nodes = append(nodes, n)
	}
	cache := NewEntryCache().WithAllocation(src.holdings).Notified()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			cache.Compute(nodes, nil, time.Now())
			cache.Compute(nodes[:nodeCount/2], nil, time.Now())
		}
	})
	for round := range 2000 {
		name := nodes[round%nodeCount].Name
		src.mu.Lock()
		src.held[name] = held("ml", 1, int64(1+round%8))
		src.mu.Unlock()
		cache.Changed(name)
	}
	close(stop)
	wg.Wait()
	inv, _ := cache.Compute(nodes, nil, time.Now())
	for _, e := range inv.Nodes {
		want := src.holdings(e.Name).Namespaces[0].Resources[0].Count
		if int64(e.AllocatedGpus) != want {
			t.Errorf("%s shows %d allocated; the last change made it %d", e.Name, e.AllocatedGpus, want)
		}
	}
}

// Property: a notified cache, which finds an unchanged node by its object, computes what a
// fresh cache computes as nodes change (a new object and version), are listed again (a new
// object, the same version), lose their GPUs, leave and come back, and as what pods hold
// changes; it keeps no node object it no longer needs.
func TestNotifiedCacheFollowsNodeObjects(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	src := &sources{facts: map[string]*DeviceFacts{}, held: map[string]*allocation.Held{}}
	cache := NewEntryCache().WithAllocation(src.holdings).Notified()
	nodes := make([]*corev1.Node, 30)
	version := 1
	fresh := func(i int) *corev1.Node {
		version++
		labels := map[string]string{LabelProduct: "NVIDIA-H100-80GB-HBM3", LabelCount: fmt.Sprint(1 + rng.IntN(8))}
		if rng.IntN(5) == 0 {
			labels = nil // no GPU (any more)
		}
		n := node(fmt.Sprintf("gpu-%02d", i), corev1.ConditionTrue, labels)
		n.ResourceVersion = fmt.Sprint(version)
		return n
	}
	for i := range nodes {
		nodes[i] = fresh(i)
	}
	for trial := range 500 {
		i := rng.IntN(len(nodes))
		switch rng.IntN(5) {
		case 0: // the node changes
			nodes[i] = fresh(i)
		case 1: // listed again: another object of the same version
			nodes[i] = nodes[i].DeepCopy()
		case 2: // the node leaves and a node of that name joins
			cache.Forget(nodes[i].Name)
			nodes[i] = fresh(i)
		case 3: // what pods hold on it changes
			src.mu.Lock()
			src.held[nodes[i].Name] = held("ml", 1, int64(1+rng.IntN(8)))
			src.mu.Unlock()
			cache.Changed(nodes[i].Name)
		}
		listed := nodes
		if trial%3 == 2 { // another inventory's selector
			listed = nodes[:len(nodes)/2]
		}
		got, _ := cache.Compute(listed, nil, t0)
		want, _ := NewEntryCache().WithAllocation(src.holdings).Compute(listed, nil, t0)
		if got.Hash != want.Hash {
			t.Fatalf("trial %d: the notified cache computed %+v; a fresh cache %+v", trial, got.Nodes, want.Nodes)
		}
		cache.mu.Lock()
		for obj, e := range cache.byObject {
			if e.node != obj || cache.entries[obj.Name] != e {
				t.Fatalf("trial %d: the cache keeps node object %s (version %s) that its entry no longer uses", trial, obj.Name, obj.ResourceVersion)
			}
		}
		cache.mu.Unlock()
	}
}
