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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
)

// spread is an inventory of H100 nodes on which pods hold 8 minus free[i] GPUs.
func spread(free ...int64) Inventory {
	var nodes []*corev1.Node
	byNode := map[string]*allocation.Held{}
	for i, f := range free {
		name := fmt.Sprintf("gpu-%d", i)
		nodes = append(nodes, h100Node(name, corev1.ConditionTrue))
		byNode[name] = held("ml", 1, 8-f)
	}
	inv, _ := NewEntryCache().WithAllocation(func(n string) *allocation.Held { return byNode[n] }).Compute(nodes, nil, t0)
	return inv
}

func fragmented(inv Inventory, spec homelabv1.GpuInventorySpec) metav1.Condition {
	return *meta.FindStatusCondition(ConditionsFor(inv, &spec, 0, 1), homelabv1.ConditionFragmented)
}

// Ten free GPUs, two on each of five nodes: a job of 8 fits nowhere (Fragmented, the
// default size), a job of 2 fits; the model's largest fit is 2.
func TestFragmentedWhenFreeGPUsAreSpread(t *testing.T) {
	inv := spread(2, 2, 2, 2, 2)
	if m := inv.Models[0]; m.FreeGpus != 10 || m.LargestFit != 2 {
		t.Fatalf("model: %d free, largest fit %d; want 10 and 2", m.FreeGpus, m.LargestFit)
	}
	got := fragmented(inv, homelabv1.GpuInventorySpec{})
	want := metav1.Condition{Type: homelabv1.ConditionFragmented, Status: metav1.ConditionTrue, ObservedGeneration: 1,
		Reason:  homelabv1.ReasonFreeGPUsFragmented,
		Message: "no node can take a job of 8 GPUs although the GPUs are free: NVIDIA-H100-80GB-HBM3 has 10 free, at most 2 on one node"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spec.fragmentationGpus unset (8) (-want +got):\n%s", diff)
	}
	got = fragmented(inv, homelabv1.GpuInventorySpec{FragmentationGpus: 2})
	want = metav1.Condition{Type: homelabv1.ConditionFragmented, Status: metav1.ConditionFalse, ObservedGeneration: 1,
		Reason: homelabv1.ReasonNotFragmented, Message: "every model with 2 or more free GPUs has a node with 2 free"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spec.fragmentationGpus 2 (-want +got):\n%s", diff)
	}
	if got := fragmented(inv, homelabv1.GpuInventorySpec{FragmentationGpus: 11}); got.Status != metav1.ConditionFalse {
		t.Errorf("a job larger than all free GPUs waits for GPUs, not for a node: Fragmented %s", got.Status)
	}
}

// A node with 8 free takes the job, however many other nodes have a few free.
func TestNotFragmentedWhenANodeTakesTheJob(t *testing.T) {
	inv := spread(8, 2, 2, 1)
	if got := fragmented(inv, homelabv1.GpuInventorySpec{}); got.Status != metav1.ConditionFalse || inv.Models[0].LargestFit != 8 {
		t.Errorf("Fragmented %s/%s, largest fit %d; want False and 8", got.Status, got.Reason, inv.Models[0].LargestFit)
	}
}

func TestFragmentationThresholdDefaultsToEight(t *testing.T) {
	for _, tc := range []struct {
		spec homelabv1.GpuInventorySpec
		want int32
	}{{homelabv1.GpuInventorySpec{}, 8}, {homelabv1.GpuInventorySpec{FragmentationGpus: 4}, 4}} {
		if got := tc.spec.FragmentationThreshold(); got != tc.want {
			t.Errorf("spec %+v: threshold %d, want %d", tc.spec, got, tc.want)
		}
	}
	// Conditions, for tools without a spec, judge for the default.
	if got := *meta.FindStatusCondition(Conditions(spread(4, 4), 0, 1), homelabv1.ConditionFragmented); got.Status != metav1.ConditionTrue {
		t.Errorf("8 free, 4 per node: Fragmented %s, want True", got.Status)
	}
}

// The message names at most five models, in product order, and says how many more; the
// folded <other models> is not judged (its GPUs are of several models). Without pods,
// nothing is known to be free.
func TestFragmentedMessageIsBounded(t *testing.T) {
	inv := Inventory{Allocation: &homelabv1.GpuAllocation{}}
	for i := range 7 {
		inv.Models = append(inv.Models, homelabv1.GpuModel{Product: fmt.Sprintf("model-%d", i), FreeGpus: 9, LargestFit: 1})
	}
	inv.Models = append(inv.Models, homelabv1.GpuModel{Product: OtherModels, FreeGpus: 100, LargestFit: 1})
	got := FragmentedCondition(inv, 8, 1)
	if !strings.HasPrefix(got.Message, "no node can take a job of 8 GPUs although the GPUs are free: model-0 has 9 free, at most 1 on one node; model-1") ||
		!strings.HasSuffix(got.Message, "model-4 has 9 free, at most 1 on one node; and 2 more models") || strings.Contains(got.Message, OtherModels) {
		t.Errorf("message %q", got.Message)
	}
	inv.Allocation = nil
	if got := FragmentedCondition(inv, 8, 1); got.Status != metav1.ConditionFalse || got.Reason != homelabv1.ReasonAllocationUnknown {
		t.Errorf("without pods: %s/%s, want False/%s", got.Status, got.Reason, homelabv1.ReasonAllocationUnknown)
	}
}

// The pool counts every GPU once: held ones as allocated (a tainted, held DRA GPU too), the
// unhealthy ones not held and everything not held on a NotReady node as unavailable, the
// rest as available.
func TestPoolCountsHealthyTaintedAndAllocated(t *testing.T) {
	withdrawn := h100Node("dp-a", corev1.ConditionTrue) // the device plugin withdrew 2 GPUs
	withdrawn.Status.Allocatable[allocation.ResourceGPU] = *resource.NewQuantity(6, resource.DecimalSI)
	down := h100Node("dp-b", corev1.ConditionFalse)
	tainted := DeviceFactsOf(draSlices(t, dra.H100Tainted)) // gpu-3 tainted NoSchedule
	byNode := map[string]*allocation.Held{"dp-a": held("ml", 1, 3), "dp-b": held("ml", 1, 2),
		"dra-t": held("ml", 1, 0, "gpu-0", "gpu-3")}
	inv, _ := NewEntryCacheWithDevices(devicesOf(map[string]*DeviceFacts{"dra-t": tainted})).
		WithAllocation(func(n string) *allocation.Held { return byNode[n] }).
		Compute([]*corev1.Node{withdrawn, down, draNode("dra-t")}, nil, t0)
	if len(inv.Models) != 1 {
		t.Fatalf("models %+v, want one", inv.Models)
	}
	m := inv.Models[0]
	want := &homelabv1.GpuPool{TotalDevices: 24, AllocatedDevices: 7, AvailableDevices: 9, UnavailableDevices: 8}
	if diff := cmp.Diff(want, m.Pool); diff != "" {
		t.Errorf("pool (-want +got):\n%s", diff)
	}
	if m.FreeGpus != 9 || m.LargestFit != 6 {
		t.Errorf("free %d, largest fit %d; want 9 (3 + 6) and 6 (dra-t)", m.FreeGpus, m.LargestFit)
	}
	plain, _ := NewEntryCache().Compute([]*corev1.Node{withdrawn}, nil, t0)
	if plain.Models[0].Pool != nil || plain.Models[0].LargestFit != 0 {
		t.Errorf("without pods: pool %+v, largest fit %d; want none", plain.Models[0].Pool, plain.Models[0].LargestFit)
	}
}

// Partitions are the free MIG devices per profile on Ready, uncordoned nodes: the mixed
// strategy's nvidia.com/mig-<profile> and the single strategy's nvidia.com/gpu.
func TestPoolPartitions(t *testing.T) {
	mixed := node("mixed", corev1.ConditionTrue, map[string]string{LabelProduct: "NVIDIA-A100-SXM4-80GB", LabelCount: "2",
		"nvidia.com/mig.strategy": "mixed"})
	allocates(mixed, "nvidia.com/mig-1g.10gb", 7)
	allocates(mixed, "nvidia.com/mig-3g.40gb", 2)
	single := node("single", corev1.ConditionTrue, map[string]string{LabelProduct: "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", LabelCount: "7",
		"nvidia.com/mig.strategy": "single"})
	allocates(single, allocation.ResourceGPU, 7)
	down := node("down", corev1.ConditionFalse, map[string]string{LabelProduct: "NVIDIA-A100-SXM4-80GB", LabelCount: "1"})
	allocates(down, "nvidia.com/mig-1g.10gb", 7)
	byNode := map[string]*allocation.Held{
		"mixed":  {Pods: 1, Namespaces: []allocation.NamespaceHeld{{Namespace: "ml", Pods: 1, Resources: []allocation.ResourceCount{{Name: "nvidia.com/mig-1g.10gb", Count: 3}}}}},
		"single": held("ml", 1, 2),
	}
	inv, _ := NewEntryCache().WithAllocation(func(n string) *allocation.Held { return byNode[n] }).
		Compute([]*corev1.Node{mixed, single, down}, nil, t0)
	want := []homelabv1.GpuPartition{{Profile: "1g.10gb", Free: 4 + 5}, {Profile: "3g.40gb", Free: 2}}
	if diff := cmp.Diff(want, inv.Models[0].Pool.Partitions); diff != "" {
		t.Errorf("partitions (-want +got):\n%s", diff)
	}

	var p pooler
	for i := range 2 * MaxPartitions {
		p.add(&homelabv1.GpuNodeEntry{Ready: true, Free: []homelabv1.ResourceFree{{Resource: fmt.Sprintf("nvidia.com/mig-%02dg.1gb", i), Free: 1}}})
	}
	if got := p.result().Partitions; len(got) != MaxPartitions || got[0].Profile != "00g.1gb" {
		t.Errorf("%d partitions from %s, want the first %d by profile", len(got), got[0].Profile, MaxPartitions)
	}
}

// Every model with 16 MIG profiles of the longest names, on 65,000 nodes of 5,000 products: the
// status stays under 256 KiB.
func TestStatusSizeBoundWithPartitions(t *testing.T) {
	const n = 65000
	entries := fleet(n)
	refs := make([]entryRef, n)
	for i := range entries {
		e := &entries[i]
		e.Product = fmt.Sprintf("VENDOR-ACCELERATOR-WITH-A-LONG-NAME-%05d", i%5000)
		e.Ready, e.Conditions = true, nil
		alloc := corev1.ResourceList{}
		for j := range maxFreeResources {
			name := fmt.Sprintf("%s%02dg.%s", allocation.ResourceMIGPrefix, j, strings.Repeat("x", maxMIGProfileLength-4))
			alloc[corev1.ResourceName(name)] = *resource.NewQuantity(7, resource.DecimalSI)
		}
		h := held("ml", 1, 0)
		refs[i] = entryRef{entry: e, cached: &cachedEntry{held: h}}
		refs[i].milli = applyHeld(e, h, &corev1.Node{Status: corev1.NodeStatus{Allocatable: alloc}}, nil)
		d := digest(e)
		refs[i].digest = &d
	}
	inv := fromRefs(refs, true)
	for _, m := range inv.Models {
		if m.Pool == nil || len(m.Pool.Partitions) != MaxPartitions {
			t.Fatalf("model %s: pool %+v, want %d partitions", m.Product, m.Pool, MaxPartitions)
		}
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
	t.Logf("%d bytes", len(data))
}
