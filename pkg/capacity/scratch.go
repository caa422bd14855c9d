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

package capacity

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// Clone returns a scratch copy of the snapshot: Assume, Forget, Evict and Restore on it
// leave s as it was. The objects themselves (nodes, pods, slices, claims, classes) are
// shared; nothing here changes them.
func (s *Snapshot) Clone() *Snapshot {
	c := *s
	c.memo = nil
	c.nodes = make(map[string]*nodeInfo, len(s.nodes))
	for name, n := range s.nodes {
		c.nodes[name] = &nodeInfo{node: n.node, pods: slices.Clone(n.pods),
			Usage: Usage{count: n.count, requested: maps.Clone(n.requested)}}
	}
	c.state = structured.AllocatedState{
		AllocatedDevices:         s.state.AllocatedDevices.Clone(),
		AllocatedSharedDeviceIDs: s.state.AllocatedSharedDeviceIDs.Clone(),
		AggregatedCapacity:       s.state.AggregatedCapacity.Clone(),
	}
	return &c
}

// Forget undoes Assume(pod, r): the pod no longer counts on r's node, nor its allocations.
func (s *Snapshot) Forget(pod *corev1.Pod, r Result) {
	n := s.nodes[r.Node]
	if n == nil || !r.Fits() {
		return
	}
	i := slices.IndexFunc(n.pods, func(p *corev1.Pod) bool {
		return p.UID == pod.UID && p.Namespace == pod.Namespace && p.Name == pod.Name
	})
	if i < 0 {
		return
	}
	gone := n.pods[i]
	n.pods = slices.Delete(slices.Clone(n.pods), i, i+1)
	n.removeRequests(s.requestsOf(gone))
	for j := range r.Allocations {
		removeAllocation(&s.state, &r.Allocations[j])
	}
}

// removeAllocation uncounts what addAllocation counted.
func removeAllocation(st *structured.AllocatedState, a *resourcev1.AllocationResult) {
	for _, r := range a.Devices.Results {
		if ptr.Deref(r.AdminAccess, false) {
			continue
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if Features.ConsumableCapacity && r.ShareID != nil {
			st.AllocatedSharedDeviceIDs.Delete(structured.MakeSharedDeviceID(id, r.ShareID))
			if r.ConsumedCapacity != nil {
				st.AggregatedCapacity.Remove(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			}
			continue
		}
		st.AllocatedDevices.Delete(id)
	}
}

// Restore binds pods that Evict took off the node back to it.
func (s *Snapshot) Restore(node string, pods []*corev1.Pod) {
	n := s.nodes[node]
	if n == nil {
		return
	}
	for _, p := range pods {
		n.add(p)
	}
}

// Requested returns how many pods are bound to the node and the sum of their requests
// (CPU in millicores, the rest in their unit), as NodeResourcesFit counts them. The map is
// the caller's, never nil.
func (s *Snapshot) Requested(node string) (int64, map[corev1.ResourceName]int64) {
	out := map[corev1.ResourceName]int64{}
	n := s.nodes[node]
	if n == nil {
		return 0, out
	}
	maps.Copy(out, n.requested)
	return n.count, out
}

// ScheduledResource reports whether NodeResourcesFit checks the resource: CPU, memory,
// ephemeral storage, hugepages and extended resources.
func ScheduledResource(name corev1.ResourceName) bool { return isScheduledResource(name) }

// The scheduler's requests for a container that asks for no CPU or memory, as its resource
// scoring counts them (schedutil.DefaultMilliCPURequest, DefaultMemoryRequest).
const (
	DefaultMilliCPURequest int64 = 100
	DefaultMemoryRequest   int64 = 200 * 1024 * 1024
)

// NonZeroRequests is the pod's CPU (millicores) and memory request as the scheduler's
// resource scoring counts them: a container that requests neither counts the defaults.
func NonZeroRequests(p *corev1.Pod) (cpu, memory int64) {
	r := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{
		UseStatusResources: true,
		NonMissingContainerRequests: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(DefaultMilliCPURequest, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(DefaultMemoryRequest, resource.DecimalSI),
		},
	})
	return r.Cpu().MilliValue(), r.Memory().Value()
}

// NonZeroRequested is the CPU (millicores) and memory the node's bound pods hold as the
// scheduler's resource scoring counts them (NodeInfo.NonZeroRequested). Pods the snapshot
// only counts (Cluster.Usage) add their requests as they are.
func (s *Snapshot) NonZeroRequested(node string) (cpu, memory int64) {
	n := s.nodes[node]
	if n == nil {
		return 0, 0
	}
	cpu, memory = n.requested[corev1.ResourceCPU], n.requested[corev1.ResourceMemory]
	for _, p := range n.pods {
		c, m := NonZeroRequests(p)
		r := podRequests(p)
		cpu += c - r.Cpu().MilliValue()
		memory += m - r.Memory().Value()
	}
	return cpu, memory
}
