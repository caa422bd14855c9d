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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// gpuPod is a pod created at created, bound to node ("" while it waits), whose one container
// requests GPU resources (name, count pairs).
func gpuPod(namespace, name, node string, created time.Time, resources ...any) *corev1.Pod {
	requests := corev1.ResourceList{}
	for i := 0; i+1 < len(resources); i += 2 {
		requests[corev1.ResourceName(resources[i].(string))] = *resource.NewQuantity(int64(resources[i+1].(int)), resource.DecimalSI)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(namespace + "-" + name), ResourceVersion: "7",
			CreationTimestamp: metav1.NewTime(created)},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "cuda:12",
			Resources: corev1.ResourceRequirements{Requests: requests, Limits: requests}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// gpuClaim is a ResourceClaim allocated devices (node, device pairs) of the NVIDIA driver,
// reserved for pods.
func gpuClaim(namespace, name string, created time.Time, devices [][2]string, pods ...string) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("claim-" + name),
		ResourceVersion: "8", CreationTimestamp: metav1.NewTime(created)}}
	c.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: "gpu.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: int64(max(len(devices), 1))}}}
	if len(devices) > 0 {
		c.Status.Allocation = &resourcev1.AllocationResult{}
		for _, d := range devices {
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
				resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: allocation.DRADriver, Pool: d[0], Device: d[1]})
		}
	}
	for _, p := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: p, UID: types.UID(namespace + "-" + p)})
	}
	return c
}

// allocatedFleet is the mixed fleet with pods and claims holding GPUs, pods and a claim
// waiting, and pods that hold nothing:
//   - ml/train-0 holds 4 GPUs of dgx-01, ml/train-1 2 of dgx-07;
//   - research/notebook-a a 1g.5gb MIG device of a100-mixed, notebook-b 2 of a100-mig-7's
//     single-strategy 1g.5gb devices;
//   - serving/infer-0 and infer-1 1 and 3 of t4-shared-1's 4 time-slicing replicas;
//   - team-dra/dra-a and dra-b share the claim shared-gpu (dgx-07's gpu-5), dra-c has the
//     claim solo (gpu-6, gpu-7), and the claim orphan holds dgx-01's gpu-7 for no pod;
//   - edge/cam-0 holds 1 GPU of jetson-1, a node outside the inventory with no record;
//   - ml/wait-h100 waits for 8 H100 GPUs, batch/wait-any for 1 of any model, the claim
//     team-dra/wait-b200 for a B200;
//   - ml/old-job finished on dgx-01; default/web holds no GPU.
func allocatedFleet() ([]*corev1.Node, []*corev1.Pod, []*resourcev1.ResourceClaim) {
	nodes := fixtures.MixedFleet()
	at := func(d time.Duration) time.Time { return statusTime.Add(d) }
	waitH100 := gpuPod("ml", "wait-h100", "", at(-30*time.Minute), "nvidia.com/gpu", 8)
	waitH100.Spec.NodeSelector = map[string]string{allocation.ProductLabel: "NVIDIA-H100-80GB-HBM3"}
	oldJob := gpuPod("ml", "old-job", "dgx-01", at(-48*time.Hour), "nvidia.com/gpu", 8)
	oldJob.Status.Phase = corev1.PodSucceeded
	draPod := func(name string) *corev1.Pod {
		p := gpuPod("team-dra", name, "dgx-07", at(-90*time.Minute))
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu"}}
		return p
	}
	pods := []*corev1.Pod{
		gpuPod("ml", "train-0", "dgx-01", at(-2*time.Hour), "nvidia.com/gpu", 4),
		gpuPod("ml", "train-1", "dgx-07", at(-24*time.Hour), "nvidia.com/gpu", 2),
		gpuPod("research", "notebook-a", "a100-mixed", at(0), "nvidia.com/mig-1g.5gb", 1),
		gpuPod("research", "notebook-b", "a100-mig-7", at(3*time.Hour), "nvidia.com/gpu", 2),
		gpuPod("serving", "infer-0", "t4-shared-1", at(-5*time.Hour), "nvidia.com/gpu.shared", 1),
		gpuPod("serving", "infer-1", "t4-shared-1", at(-4*time.Hour), "nvidia.com/gpu.shared", 3),
		draPod("dra-a"), draPod("dra-b"), draPod("dra-c"),
		gpuPod("edge", "cam-0", "jetson-1", at(-72*time.Hour), "nvidia.com/gpu", 1),
		waitH100,
		gpuPod("batch", "wait-any", "", at(-10*time.Minute), "nvidia.com/gpu", 1),
		oldJob,
		gpuPod("default", "web", "dgx-01", at(-time.Hour)),
	}
	waitB200 := gpuClaim("team-dra", "wait-b200", at(-20*time.Minute), nil)
	waitB200.Spec.Devices.Requests[0].Exactly.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
		Expression: `device.attributes["gpu.nvidia.com"].productName == "NVIDIA B200"`}}}
	claims := []*resourcev1.ResourceClaim{
		gpuClaim("team-dra", "shared-gpu", at(-2*time.Hour), [][2]string{{"dgx-07", "gpu-5"}}, "dra-a", "dra-b"),
		gpuClaim("team-dra", "solo", at(-2*time.Hour), [][2]string{{"dgx-07", "gpu-6"}, {"dgx-07", "gpu-7"}}, "dra-c"),
		gpuClaim("team-dra", "orphan", at(-6*time.Hour), [][2]string{{"dgx-01", "gpu-7"}}),
		waitB200,
	}
	return nodes, pods, claims
}

// allocatedInventory is the GpuInventory the operator writes for nodes when it reads pods and
// claims: entries with what pods hold, models with their fit, the allocation summary with
// all demand (an inventory of the whole cluster). maxNodes bounds the node list (0: 500).
func allocatedInventory(t *testing.T, name string, nodes []*corev1.Node, previous []homelabv1.GpuNodeEntry,
	pods []*corev1.Pod, claims []*resourcev1.ResourceClaim, maxNodes int) *homelabv1.GpuInventory {
	t.Helper()
	var ap []*allocation.Pod
	for _, p := range pods {
		if a := allocation.FromPod(p); a != nil {
			ap = append(ap, a)
		}
	}
	var ac []*allocation.Claim
	for _, c := range claims {
		if a := allocation.FromClaim(c); a != nil {
			ac = append(ac, a)
		}
	}
	held, demand := allocation.Compute(ap, ac)
	content, _ := inventory.NewEntryCache().WithAllocation(func(node string) *allocation.Held { return held[node] }).
		Compute(nodes, previous, statusTime)
	if content.Allocation == nil {
		t.Fatal("the inventory has no allocation summary")
	}
	content.AddDemand(demand, true)
	if maxNodes == 0 {
		maxNodes = inventory.DefaultMaxStatusNodes
	}
	listed, omitted := content.Listed(maxNodes, inventory.MaxNodeListBytes)
	conditions := inventory.Conditions(content, omitted, 1)
	at := metav1.NewTime(statusTime)
	for i := range conditions {
		conditions[i].LastTransitionTime = at
	}
	return &homelabv1.GpuInventory{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1, ResourceVersion: "1",
			CreationTimestamp: metav1.NewTime(statusTime.Add(-24 * time.Hour))},
		Status: content.Status(listed, conditions, 1, at),
	}
}
