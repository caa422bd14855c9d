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

package gpuinventory

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

func h100(name, pool string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1", Labels: map[string]string{"pool": pool,
			inventory.LabelProduct: "NVIDIA-H100-80GB-HBM3", inventory.LabelCount: "8"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Allocatable: corev1.ResourceList{allocation.ResourceGPU: resource.MustParse("8")}},
	}
}

func drain(c *Controller) map[string]bool {
	got := map[string]bool{}
	for c.queue.Len() > 0 {
		key, _ := c.queue.Get()
		got[key.Name] = true
		c.queue.Done(key)
	}
	return got
}

// A pod bound to a node enqueues the inventories that select the node, and the status they
// write says what it holds; a waiting pod enqueues every inventory and shows as demand in
// the inventory of the whole cluster; the metrics follow.
func TestAllocationReachesTheStatusAndMetrics(t *testing.T) {
	tracker := allocation.NewTracker()
	all := gpuInventory("all", 1, homelabv1.GpuInventoryStatus{})
	pool := gpuInventory("pool-b", 1, homelabv1.GpuInventoryStatus{})
	pool.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "b"}}
	f := newFixtureWith(t, withHoldings(tracker), []*corev1.Node{h100("gpu-a", "a"), h100("gpu-b", "b")}, all, pool)
	drain(f.controller)

	tracker.SetPod(&allocation.Pod{Namespace: "ml", Name: "train", UID: allocation.UIDOf("u1"), Node: "gpu-a",
		Requests: []allocation.ResourceCount{{Name: allocation.ResourceGPU, Count: 4}}})
	if got := drain(f.controller); !got["all"] || got["pool-b"] {
		t.Errorf("a pod on gpu-a enqueued %v, want all only", got)
	}
	status := f.appliedStatus(f.sync("all"), "all")
	a := status.Allocation
	if a == nil || a.AllocatedGpus != 4 || a.FreeGpus != 12 || a.GpuPods != 1 || len(a.Namespaces) != 1 || a.Namespaces[0].Namespace != "ml" {
		t.Fatalf("status.allocation = %+v", a)
	}
	if status.Models[0].AllocatedGpus != 4 || status.Models[0].FreeGpus != 12 || status.Models[0].Fit.NodesWith8Free != 1 {
		t.Errorf("model = %+v", status.Models[0])
	}

	tracker.SetPod(&allocation.Pod{Namespace: "ml", Name: "wait", UID: allocation.UIDOf("u2"), Created: 1000, Model: "NVIDIA-B200",
		Requests: []allocation.ResourceCount{{Name: allocation.ResourceGPU, Count: 8}}})
	if got := drain(f.controller); !got["all"] || !got["pool-b"] {
		t.Errorf("a waiting pod enqueued %v, want every inventory", got)
	}
	status = f.appliedStatus(f.sync("all"), "all")
	if p := status.Allocation.Pending; len(p) != 1 || p[0].Model != "NVIDIA-B200" || p[0].Gpus != 8 {
		t.Errorf("pending = %+v, want 8 GPUs of NVIDIA-B200", p)
	}
	if got, _ := f.gauge("gpu_inventory_pending_gpus", "all", "NVIDIA-B200"); got != 8 {
		t.Errorf("gpu_inventory_pending_gpus = %v, want 8", got)
	}
	if got, _ := f.gauge("gpu_inventory_pending_oldest_timestamp_seconds", "all", "NVIDIA-B200"); got != 1000 {
		t.Errorf("gpu_inventory_pending_oldest_timestamp_seconds = %v, want 1000", got)
	}
	if got, _ := f.gauge("gpu_inventory_free_gpus", "all", "NVIDIA-H100-80GB-HBM3"); got != 12 {
		t.Errorf("gpu_inventory_free_gpus = %v, want 12", got)
	}
	poolStatus := f.appliedStatus(f.sync("pool-b"), "pool-b")
	if poolStatus.Allocation == nil || len(poolStatus.Allocation.Pending) != 0 || poolStatus.Allocation.FreeGpus != 8 {
		t.Errorf("pool-b: %+v; want 8 free and no demand for a model it does not have", poolStatus.Allocation)
	}

	tracker.DeletePod("ml", "train")
	tracker.DeletePod("ml", "wait")
	status = f.appliedStatus(f.sync("all"), "all")
	if status.Allocation.AllocatedGpus != 0 || status.Allocation.PendingPods != 0 || status.Allocation.FreeGpus != 16 {
		t.Errorf("after the pods left: %+v", status.Allocation)
	}
	if _, ok := f.gauge("gpu_inventory_pending_gpus", "all", "NVIDIA-B200"); ok {
		t.Error("pending series stay after the demand went")
	}
}

// Free GPUs spread two per node: the status says Fragmented, the metrics the largest fit and
// the job size; the next sync of the same content writes nothing, and a new
// spec.fragmentationGpus is judged at once (one write, the condition flipped).
func TestFragmentedInventoryWritesOnceAndFollowsItsSpec(t *testing.T) {
	tracker := allocation.NewTracker()
	var nodes []*corev1.Node
	for i := range 5 {
		name := fmt.Sprintf("gpu-%d", i)
		nodes = append(nodes, h100(name, "a"))
		tracker.SetPod(&allocation.Pod{Namespace: "ml", Name: "train-" + name, UID: allocation.UIDOf(name), Node: name,
			Requests: []allocation.ResourceCount{{Name: allocation.ResourceGPU, Count: 6}}})
	}
	configure := withHoldings(tracker)
	f := newFixtureWith(t, configure, nodes, gpuInventory("all", 1, homelabv1.GpuInventoryStatus{}))
	status := f.appliedStatus(f.sync("all"), "all")
	cond := meta.FindStatusCondition(status.Conditions, homelabv1.ConditionFragmented)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Message !=
		"no node can take a job of 8 GPUs although the GPUs are free: NVIDIA-H100-80GB-HBM3 has 10 free, at most 2 on one node" {
		t.Fatalf("Fragmented = %+v", cond)
	}
	if m := status.Models[0]; m.LargestFit != 2 || m.Pool == nil || m.Pool.AvailableDevices != 10 || m.Pool.AllocatedDevices != 30 {
		t.Errorf("model: largest fit %d, pool %+v; want 2 and 30 allocated, 10 available", m.LargestFit, m.Pool)
	}
	if got, _ := f.gauge("gpu_inventory_largest_fit_gpus", "all", "NVIDIA-H100-80GB-HBM3"); got != 2 {
		t.Errorf("gpu_inventory_largest_fit_gpus = %v, want 2", got)
	}
	if got, _ := f.gauge("gpu_inventory_fragmentation_threshold_gpus", "all"); got != 8 {
		t.Errorf("gpu_inventory_fragmentation_threshold_gpus = %v, want 8", got)
	}

	// The stored status is current: no write.
	stored := gpuInventory("all", 1, status)
	f = newFixtureWith(t, configure, nodes, stored)
	if actions := f.sync("all"); len(actions) != 0 || len(f.writer.written) != 0 {
		t.Fatalf("unchanged content: %d writes, calls %v; want none", len(f.writer.written), actions)
	}

	// Jobs of 2 fit: one write, Fragmented False since now, the others unmoved.
	for i := range status.Conditions {
		status.Conditions[i].LastTransitionTime = metav1.NewTime(t0)
	}
	changed := gpuInventory("all", 2, status)
	changed.Spec.FragmentationGpus = 2
	f = newFixtureWith(t, configure, nodes, changed)
	status = f.appliedStatus(f.sync("all"), "all")
	cond = meta.FindStatusCondition(status.Conditions, homelabv1.ConditionFragmented)
	if cond.Status != metav1.ConditionFalse || cond.Reason != homelabv1.ReasonNotFragmented || !cond.LastTransitionTime.Time.Equal(t1) {
		t.Errorf("after spec.fragmentationGpus=2: %s/%s at %s, want False/%s at %s", cond.Status, cond.Reason, cond.LastTransitionTime, homelabv1.ReasonNotFragmented, t1)
	}
	if degraded := meta.FindStatusCondition(status.Conditions, homelabv1.ConditionDegraded); !degraded.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("Degraded moved to %s without flipping", degraded.LastTransitionTime)
	}
	if got, _ := f.gauge("gpu_inventory_fragmentation_threshold_gpus", "all"); got != 2 {
		t.Errorf("gpu_inventory_fragmentation_threshold_gpus = %v, want 2", got)
	}
}
