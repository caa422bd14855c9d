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
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

func h100Node(name string, ready corev1.ConditionStatus) *corev1.Node {
	n := node(name, ready, map[string]string{LabelProduct: "NVIDIA-H100-80GB-HBM3", LabelCount: "8", LabelMemory: "81559"})
	n.ResourceVersion = "1"
	allocates(n, allocation.ResourceGPU, 8)
	return n
}

// allocates gives the node capacity and allocatable of resource, as its device plugin would.
func allocates(n *corev1.Node, res string, count int64) *corev1.Node {
	if n.Status.Capacity == nil {
		n.Status.Capacity, n.Status.Allocatable = corev1.ResourceList{}, corev1.ResourceList{}
	}
	q := *resource.NewQuantity(count, resource.DecimalSI)
	n.Status.Capacity[corev1.ResourceName(res)], n.Status.Allocatable[corev1.ResourceName(res)] = q, q
	return n
}

func held(ns string, pods int32, gpus int64, devices ...string) *allocation.Held {
	h := &allocation.Held{Pods: pods, Namespaces: []allocation.NamespaceHeld{{Namespace: ns, Pods: pods, Devices: devices}}}
	if gpus > 0 {
		h.Namespaces[0].Resources = []allocation.ResourceCount{{Name: allocation.ResourceGPU, Count: gpus}}
	}
	return h
}

// Per node: what pods hold is allocated, the rest of a Ready, uncordoned node's allocatable
// GPUs is free; what a NotReady or cordoned node has free is counted apart. Per model and per inventory the
// figures add up, and the fit summary names the nodes with most free GPUs.
func TestAllocationPerNodeModelAndInventory(t *testing.T) {
	cordoned := h100Node("gpu-c", corev1.ConditionTrue)
	cordoned.Spec.Unschedulable = true
	nodes := []*corev1.Node{h100Node("gpu-a", corev1.ConditionTrue), h100Node("gpu-b", corev1.ConditionTrue),
		h100Node("gpu-d", corev1.ConditionFalse), cordoned}
	byNode := map[string]*allocation.Held{"gpu-a": held("team-a", 2, 6), "gpu-b": held("team-b", 1, 1), "gpu-d": held("team-a", 1, 8)}
	cache := NewEntryCache().WithAllocation(func(n string) *allocation.Held { return byNode[n] })
	inv, _ := cache.Compute(nodes, nil, time.Now())

	got := map[string][3]int32{}
	for _, e := range inv.Nodes {
		got[e.Name] = [3]int32{e.AllocatedGpus, e.FreeGpus, e.GpuPods}
	}
	want := map[string][3]int32{"gpu-a": {6, 2, 2}, "gpu-b": {1, 7, 1}, "gpu-c": {0, 0, 0}, "gpu-d": {8, 0, 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("per node [allocated free pods] (-want +got):\n%s", diff)
	}
	m := inv.Models[0]
	if m.AllocatedGpus != 15 || m.FreeGpus != 9 || m.UnschedulableFreeGpus != 8 {
		t.Errorf("model: allocated %d free %d on unschedulable nodes %d, want 15, 9 and 8 (the cordoned node's)",
			m.AllocatedGpus, m.FreeGpus, m.UnschedulableFreeGpus)
	}
	wantFit := &homelabv1.GpuFit{NodesWith1Free: 2, NodesWith2Free: 2, NodesWith4Free: 1,
		Most: []homelabv1.NodeFree{{Name: "gpu-b", FreeGpus: 7}, {Name: "gpu-a", FreeGpus: 2}}}
	if diff := cmp.Diff(wantFit, m.Fit); diff != "" {
		t.Errorf("fit (-want +got):\n%s", diff)
	}
	a := inv.Allocation
	if a == nil || a.AllocatedGpus != 15 || a.FreeGpus != 9 || a.GpuPods != 4 || a.AllocatedMilliGpus != 15000 {
		t.Fatalf("allocation summary: %+v", a)
	}
	wantNS := []homelabv1.NamespaceUsage{{Namespace: "team-a", Pods: 3, Gpus: 14, MilliGpus: 14000}, {Namespace: "team-b", Pods: 1, Gpus: 1, MilliGpus: 1000}}
	if diff := cmp.Diff(wantNS, a.Namespaces); diff != "" {
		t.Errorf("namespaces (-want +got):\n%s", diff)
	}
}

// Without an allocation source nothing about allocation is reported: no summary, no figures.
func TestNoAllocationWithoutSource(t *testing.T) {
	inv, _ := NewEntryCache().Compute([]*corev1.Node{h100Node("gpu-a", corev1.ConditionTrue)}, nil, time.Now())
	if inv.Allocation != nil || inv.Nodes[0].FreeGpus != 0 || inv.Models[0].Fit != nil {
		t.Errorf("allocation reported without a source: %+v %+v", inv.Allocation, inv.Nodes[0])
	}
}

// A new holder on a node changes the entry (the cache re-reads it) and the hash; a pod moving
// from one namespace to another with the same GPUs changes only the namespaces, and the hash.
func TestAllocationChangesTheHash(t *testing.T) {
	nodes := []*corev1.Node{h100Node("gpu-a", corev1.ConditionTrue)}
	current := held("team-a", 1, 2)
	cache := NewEntryCache().WithAllocation(func(string) *allocation.Held { return current })
	first, _ := cache.Compute(nodes, nil, time.Now())
	current = held("team-a", 2, 4)
	second, _ := cache.Compute(nodes, nil, time.Now())
	if second.Nodes[0].AllocatedGpus != 4 || second.Hash == first.Hash {
		t.Errorf("a new holder: allocated %d, hash changed %t", second.Nodes[0].AllocatedGpus, second.Hash != first.Hash)
	}
	current = held("team-b", 2, 4)
	third, _ := cache.Compute(nodes, nil, time.Now())
	if third.Hash == second.Hash || third.Allocation.Namespaces[0].Namespace != "team-b" {
		t.Errorf("the namespace changed but the hash did not: %+v", third.Allocation.Namespaces)
	}
	again, _ := cache.Compute(nodes, nil, time.Now())
	if again.Hash != third.Hash {
		t.Error("equal content gave another hash")
	}
}

// MIG devices and shared replicas count as parts: a GPU partly held is allocated, and the
// exact share is in thousandths.
func TestAllocationCountsPartsOfGPUs(t *testing.T) {
	shared := node("shared", corev1.ConditionTrue, map[string]string{LabelProduct: "NVIDIA-A100-SXM4-40GB-SHARED", LabelCount: "4",
		"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"})
	shared.ResourceVersion = "1"
	allocates(shared, allocation.ResourceGPUShared, 16)
	// Mixed strategy: one GPU whole, one partitioned into 4 1g.5gb and a 3g.20gb.
	mig := node("mig", corev1.ConditionTrue, map[string]string{LabelProduct: "NVIDIA-A100-SXM4-40GB", LabelCount: "2",
		"nvidia.com/mig.strategy": "mixed", "nvidia.com/mig.capable": "true"})
	mig.ResourceVersion = "1"
	allocates(allocates(allocates(mig, allocation.ResourceGPU, 1), "nvidia.com/mig-1g.5gb", 4), "nvidia.com/mig-3g.20gb", 1)
	byNode := map[string]*allocation.Held{
		"shared": {Pods: 5, Namespaces: []allocation.NamespaceHeld{{Namespace: "ns", Pods: 5,
			Resources: []allocation.ResourceCount{{Name: allocation.ResourceGPUShared, Count: 5}}}}},
		"mig": {Pods: 2, Namespaces: []allocation.NamespaceHeld{{Namespace: "ns", Pods: 2,
			Resources: []allocation.ResourceCount{{Name: "nvidia.com/mig-1g.5gb", Count: 1}, {Name: "nvidia.com/mig-3g.20gb", Count: 1}}}}},
	}
	inv, _ := NewEntryCache().WithAllocation(func(n string) *allocation.Held { return byNode[n] }).
		Compute([]*corev1.Node{shared, mig}, nil, time.Now())
	for _, e := range inv.Nodes {
		switch e.Name {
		case "shared": // 5 replicas of 4 per GPU: 1.25 GPUs, 2 GPUs touched; replicas are no whole GPUs
			wantFree := []homelabv1.ResourceFree{{Resource: allocation.ResourceGPUShared, Free: 11}}
			if e.AllocatedGpus != 2 || e.FreeGpus != 0 || !cmp.Equal(e.Free, wantFree) {
				t.Errorf("shared: allocated %d free %d %v, want 2, 0 and %v", e.AllocatedGpus, e.FreeGpus, e.Free, wantFree)
			}
		case "mig": // 1 + 3 slices of 7: one GPU touched; the whole GPU is free
			wantFree := []homelabv1.ResourceFree{{Resource: allocation.ResourceGPU, Free: 1},
				{Resource: "nvidia.com/mig-1g.5gb", Free: 3}, {Resource: "nvidia.com/mig-3g.20gb", Free: 0}}
			if e.AllocatedGpus != 1 || e.FreeGpus != 1 || !cmp.Equal(e.Free, wantFree) {
				t.Errorf("mig: allocated %d free %d %v, want 1, 1 and %v", e.AllocatedGpus, e.FreeGpus, e.Free, wantFree)
			}
		}
	}
	if got := inv.Allocation.AllocatedMilliGpus; got != 1250+142+428 {
		t.Errorf("allocatedMilliGpus %d, want %d", got, 1250+142+428)
	}
}

// Demand: an inventory of the whole cluster shows every requested model, one with a selector
// only any-model demand and its own models; DRA and GFD forms of a product are one model.
func TestAddDemand(t *testing.T) {
	nodes := []*corev1.Node{h100Node("gpu-a", corev1.ConditionTrue)}
	cache := NewEntryCache().WithAllocation(func(string) *allocation.Held { return nil })
	demand := []allocation.Demand{
		{Model: "NVIDIA-H100-80GB-HBM3", Pods: 2, Milli: 3000, Since: 100},
		{Model: "NVIDIA H100 80GB HBM3", DRA: true, Pods: 1, Milli: 1000, Since: 50},
		{Model: "", Pods: 1, Milli: 143, Since: 200},
		{Model: "NVIDIA-B200", Pods: 4, Milli: 32000, Since: 300},
	}
	all, _ := cache.Compute(nodes, nil, time.Now())
	before := all.Hash
	all.AddDemand(demand, true)
	want := []homelabv1.GpuDemand{
		{Model: "", Pods: 1, Gpus: 1, Since: ptrTime(200)},
		{Model: "NVIDIA-B200", Pods: 4, Gpus: 32, Since: ptrTime(300)},
		{Model: "NVIDIA-H100-80GB-HBM3", Pods: 3, Gpus: 4, Since: ptrTime(50)},
	}
	if diff := cmp.Diff(want, all.Allocation.Pending); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
	if all.Allocation.PendingPods != 8 || all.Allocation.PendingGpus != 37 || all.Models[0].PendingGpus != 4 || all.Hash == before {
		t.Errorf("pending totals %d pods %d GPUs, model %d, hash changed %t", all.Allocation.PendingPods,
			all.Allocation.PendingGpus, all.Models[0].PendingGpus, all.Hash != before)
	}
	pool, _ := cache.Compute(nodes, nil, time.Now())
	pool.AddDemand(demand, false)
	if len(pool.Allocation.Pending) != 2 || pool.Allocation.PendingGpus != 5 {
		t.Errorf("an inventory with a selector shows %+v, want any-model and H100 demand only", pool.Allocation.Pending)
	}
}

func ptrTime(unix int64) *metav1.Time {
	t := metav1.NewTime(time.Unix(unix, 0).UTC())
	return &t
}

// Thousands of requested models and namespaces are folded: the summary stays bounded and
// its totals exact.
func TestDemandAndNamespacesAreBounded(t *testing.T) {
	var demand []allocation.Demand
	for i := range 1000 {
		demand = append(demand, allocation.Demand{Model: fmt.Sprintf("VENDOR-%04d", i), Pods: 1, Milli: 1000, Since: int64(i)})
	}
	byNamespace := map[string]*homelabv1.NamespaceUsage{}
	for i := range 500 {
		byNamespace[fmt.Sprint("ns-", i)] = &homelabv1.NamespaceUsage{Namespace: fmt.Sprint("ns-", i), Pods: 1, Gpus: 1, MilliGpus: int64(1000 + i)}
	}
	inv := Inventory{Allocation: &homelabv1.GpuAllocation{}}
	inv.AddDemand(demand, true)
	if len(inv.Allocation.Pending) != MaxDemands || inv.Allocation.PendingPods != 1000 {
		t.Errorf("%d demands listed, %d pods; want %d and 1000", len(inv.Allocation.Pending), inv.Allocation.PendingPods, MaxDemands)
	}
	top := topNamespaces(byNamespace)
	if len(top) != MaxNamespaces+1 || top[0].Namespace != "ns-499" || top[MaxNamespaces].Namespace != OtherNamespaces || top[MaxNamespaces].Pods != 490 {
		t.Errorf("namespaces: %d listed, first %s, last %+v", len(top), top[0].Namespace, top[MaxNamespaces])
	}
}

// At 65,000 nodes of 5,000 products with 100,000 GPU pods in 2,000 namespaces and waiting
// pods pinning 1,000 models, the whole status stays under 256 KiB.
func TestStatusSizeBoundWithAllocation(t *testing.T) {
	const n = 65000
	entries := fleet(n)
	refs := make([]entryRef, n)
	for i := range entries {
		e := &entries[i]
		e.Product = fmt.Sprintf("VENDOR-ACCELERATOR-WITH-A-LONG-NAME-%05d", i%5000)
		h := &allocation.Held{Pods: 2}
		for j := range 2 {
			h.Namespaces = append(h.Namespaces, allocation.NamespaceHeld{Namespace: fmt.Sprintf("namespace-with-a-long-name-%04d", (i+j)%2000), Pods: 1,
				Resources: []allocation.ResourceCount{{Name: allocation.ResourceGPU, Count: 1}}})
		}
		refs[i] = entryRef{entry: e, cached: &cachedEntry{held: h}}
		n := &corev1.Node{Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			allocation.ResourceGPU: *resource.NewQuantity(int64(e.GpuCount), resource.DecimalSI)}}}
		refs[i].milli = applyHeld(e, h, n, nil)
		d := digest(e)
		refs[i].digest = &d
	}
	inv := fromRefs(refs, true)
	var demand []allocation.Demand
	for i := range 1000 {
		demand = append(demand, allocation.Demand{Model: fmt.Sprintf("VENDOR-ACCELERATOR-WITH-A-LONG-NAME-%05d", i*7), Pods: 5, Milli: 8000, Since: int64(i)})
	}
	inv.AddDemand(demand, true)
	if inv.Allocation.GpuPods != 2*n || inv.Allocation.AllocatedGpus != 2*n || inv.Allocation.FreeGpus != 6*n-n/200*6 {
		t.Errorf("totals not exact: %+v", inv.Allocation)
	}
	listed, omitted := inv.Listed(DefaultMaxStatusNodes, MaxNodeListBytes)
	gi := homelabv1.GpuInventory{Status: inv.Status(listed, Conditions(inv, omitted, 1), 1, metav1.Now())}
	data, err := json.Marshal(gi)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 256<<10 {
		t.Errorf("the status is %d bytes; want at most 256 KiB", len(data))
	}
}

// With MIG's single strategy the node's GPUs are MIG devices (GFD's count): allocated is
// counted in them, the exact share as slices, and what is free is MIG devices, no whole GPU.
func TestSingleStrategyMIGCountsDevices(t *testing.T) {
	n := node("a100-mig", corev1.ConditionTrue, map[string]string{LabelProduct: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", LabelCount: "14",
		"nvidia.com/mig.strategy": "single"})
	n.ResourceVersion = "1"
	allocates(n, allocation.ResourceGPU, 14)
	h := held("ns", 3, 3)
	inv, _ := NewEntryCache().WithAllocation(func(string) *allocation.Held { return h }).Compute([]*corev1.Node{n}, nil, time.Now())
	e := inv.Nodes[0]
	wantFree := []homelabv1.ResourceFree{{Resource: allocation.ResourceGPU, Free: 11}}
	if e.AllocatedGpus != 3 || e.FreeGpus != 0 || !cmp.Equal(e.Free, wantFree) || inv.Allocation.AllocatedMilliGpus != 3000/7 || inv.Allocation.Namespaces[0].Gpus != 3 {
		t.Errorf("allocated %d free %d %v milli %d namespace %d; want 3, 0, %v, 428, 3", e.AllocatedGpus, e.FreeGpus, e.Free,
			inv.Allocation.AllocatedMilliGpus, inv.Allocation.Namespaces[0].Gpus, wantFree)
	}
}

// Namespaces sharing a time-sliced GPU: each namespace's thousandths are apportioned from the
// node's, so the per-namespace usage adds up to allocatedMilliGpus.
func TestNamespaceUsageAddsUpToTheAllocation(t *testing.T) {
	shared := node("shared", corev1.ConditionTrue, map[string]string{LabelProduct: "Tesla-T4-SHARED", LabelCount: "1",
		"nvidia.com/gpu.replicas": "3", "nvidia.com/gpu.sharing-strategy": "time-slicing"})
	shared.ResourceVersion = "1"
	one := []allocation.ResourceCount{{Name: allocation.ResourceGPU, Count: 1}}
	h := &allocation.Held{Pods: 3, Namespaces: []allocation.NamespaceHeld{
		{Namespace: "a", Pods: 1, Resources: one}, {Namespace: "b", Pods: 1, Resources: one}, {Namespace: "c", Pods: 1, Resources: one}}}
	inv, _ := NewEntryCache().WithAllocation(func(string) *allocation.Held { return h }).
		Compute([]*corev1.Node{shared}, nil, time.Now())
	a := inv.Allocation
	if a.AllocatedMilliGpus != 1000 {
		t.Fatalf("allocatedMilliGpus %d, want 1000 (three replicas of three)", a.AllocatedMilliGpus)
	}
	var sum int64
	for _, u := range a.Namespaces {
		sum += u.MilliGpus
	}
	if sum != a.AllocatedMilliGpus {
		t.Errorf("namespaces add up to %d thousandths, allocatedMilliGpus is %d: %+v", sum, a.AllocatedMilliGpus, a.Namespaces)
	}
}

// A node's taints that keep pods off are shown beside its free GPUs, not subtracted from
// them: a GPU pool's taint is one its pods tolerate.
func TestTaintsShownBesideFreeGPUs(t *testing.T) {
	n := h100Node("gpu-a", corev1.ConditionTrue)
	n.Spec.Taints = []corev1.Taint{
		{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule},
		{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule},
		{Key: "node.kubernetes.io/disk-pressure", Effect: corev1.TaintEffectNoSchedule},
		{Key: "maintenance", Effect: corev1.TaintEffectNoExecute},
	}
	inv, _ := NewEntryCache().WithAllocation(func(string) *allocation.Held { return held("ml", 1, 2) }).
		Compute([]*corev1.Node{n}, nil, time.Now())
	e := inv.Nodes[0]
	want := []string{"nvidia.com/gpu=present:NoSchedule", "maintenance:NoExecute"}
	if !cmp.Equal(e.Taints, want) || e.FreeGpus != 6 {
		t.Errorf("taints %q free %d; want %q and 6", e.Taints, e.FreeGpus, want)
	}
}

// Gated pods are queued, not pending: the scheduler does not try them yet.
func TestQueuedDemandIsApart(t *testing.T) {
	cache := NewEntryCache().WithAllocation(func(string) *allocation.Held { return nil })
	inv, _ := cache.Compute([]*corev1.Node{h100Node("gpu-a", corev1.ConditionTrue)}, nil, time.Now())
	inv.AddDemand([]allocation.Demand{
		{Model: "NVIDIA-H100-80GB-HBM3", Pods: 1, Milli: 2000, Since: 10},
		{Model: "NVIDIA-H100-80GB-HBM3", Pods: 3, Milli: 24000, Since: 5, Queued: true},
	}, true)
	a := inv.Allocation
	if a.PendingPods != 1 || a.PendingGpus != 2 || a.QueuedPods != 3 || a.QueuedGpus != 24 || inv.Models[0].PendingGpus != 2 {
		t.Errorf("pending %d pods %d GPUs (model %d), queued %d pods %d GPUs; want 1, 2 (2), 3, 24",
			a.PendingPods, a.PendingGpus, inv.Models[0].PendingGpus, a.QueuedPods, a.QueuedGpus)
	}
}
