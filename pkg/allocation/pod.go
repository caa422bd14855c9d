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
	"math"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

// PodRequests is the pod's effective request as the scheduler computes it
// (k8s.io/component-helpers/resource PodRequests): app containers and sidecars add up; each
// init container needs its own request plus the sidecars started before it; the pod needs the
// larger of the two per resource, plus the overhead. Sorted by name, zeros dropped, sums
// clamped to the int64 range.
func PodRequests(app, init []Container, overhead []ResourceCount) []ResourceCount {
	sum := map[string]int64{}
	for _, c := range app {
		addTo(sum, c.Requests)
	}
	sidecars := map[string]int64{}
	initMax := map[string]int64{}
	for _, c := range init {
		if c.Restartable {
			addTo(sum, c.Requests)
			addTo(sidecars, c.Requests)
			maxInto(initMax, sidecars)
			continue
		}
		need := map[string]int64{}
		addTo(need, c.Requests)
		for name, v := range sidecars {
			need[name] = saturating.Add(need[name], v)
		}
		maxInto(initMax, need)
	}
	maxInto(sum, initMax)
	addTo(sum, overhead)
	return sortedCounts(sum)
}

func addTo(m map[string]int64, rs []ResourceCount) {
	for _, r := range rs {
		m[r.Name] = saturating.Add(m[r.Name], max(r.Count, 0))
	}
}

func maxInto(dst, src map[string]int64) {
	for name, v := range src {
		if v > dst[name] {
			dst[name] = v
		}
	}
}

// sortedCounts lists the non-zero entries of m, sorted by name.
func sortedCounts(m map[string]int64) []ResourceCount {
	var out []ResourceCount
	for name, v := range m {
		if v > 0 {
			out = append(out, ResourceCount{Name: name, Count: v})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// quantityCount is a quantity as a whole number of units (rounded up, as Value does),
// clamped to [0, MaxInt64].
func quantityCount(q resource.Quantity) int64 {
	if v, ok := q.AsInt64(); ok { // the common case, exact and fast
		return max(v, 0)
	}
	if q.Sign() <= 0 {
		return 0
	}
	// Compared as a float first: CmpInt64 takes time that grows with a huge exponent.
	if q.AsApproximateFloat64() >= 0x1p63 || q.CmpInt64(math.MaxInt64) >= 0 {
		return math.MaxInt64
	}
	return max(q.Value(), 0)
}

// gpuRequests is what one container asks of GPU resources: its request, or its limit where
// it has no request.
func gpuRequests(r *corev1.ResourceRequirements) []ResourceCount {
	var out []ResourceCount
	for name, q := range r.Requests {
		if IsGPUResource(string(name)) {
			out = append(out, ResourceCount{Name: string(name), Count: quantityCount(q)})
		}
	}
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; !ok && IsGPUResource(string(name)) {
			out = append(out, ResourceCount{Name: string(name), Count: quantityCount(q)})
		}
	}
	return out
}

// FromPod is what allocation keeps of a pod that requests GPU resources through the device
// plugin (in a container, an init container or the overhead); nil for any other pod.
//
// It reads only these fields, so a decoder may fill just them:
//   - metadata: name, namespace, uid, creationTimestamp, deletionTimestamp (whether it is set);
//   - spec: containers[].resources.{requests,limits}, initContainers[].resources.{requests,limits}
//     and initContainers[].restartPolicy, overhead, nodeName, nodeSelector,
//     affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution, schedulingGates
//     (whether there are any);
//   - status: phase, extendedResourceClaimStatus.requestMappings[].resourceName.
func FromPod(pod *corev1.Pod) *Pod {
	if pod == nil {
		return nil
	}
	app := make([]Container, 0, len(pod.Spec.Containers))
	for i := range pod.Spec.Containers {
		if rs := gpuRequests(&pod.Spec.Containers[i].Resources); len(rs) > 0 {
			app = append(app, Container{Requests: rs})
		}
	}
	var init []Container
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		if rs := gpuRequests(&c.Resources); len(rs) > 0 {
			init = append(init, Container{Requests: rs, Restartable: sidecar})
		}
	}
	var overhead []ResourceCount
	for name, q := range pod.Spec.Overhead {
		if IsGPUResource(string(name)) {
			overhead = append(overhead, ResourceCount{Name: string(name), Count: quantityCount(q)})
		}
	}
	if len(app) == 0 && len(init) == 0 && len(overhead) == 0 {
		return nil
	}
	requests := withoutMapped(PodRequests(app, init, overhead), pod.Status.ExtendedResourceClaimStatus)
	if len(requests) == 0 {
		return nil
	}
	return &Pod{
		Namespace: pod.Namespace,
		Name:      pod.Name,
		UID:       UIDOf(string(pod.UID)),
		Node:      pod.Spec.NodeName,
		Model:     pinnedModel(&pod.Spec),
		Requests:  requests,
		Created:   pod.CreationTimestamp.Unix(),
		Finished:  pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed,
		Deleting:  pod.DeletionTimestamp != nil,
		Gated:     len(pod.Spec.SchedulingGates) > 0,
	}
}

// withoutMapped drops the resources the scheduler serves with the pod's extended-resource
// claim (KEP-5004): the claim's devices count for them. It maps each resource as a whole,
// per node, so the pod's other resources stay device-plugin requests.
func withoutMapped(requests []ResourceCount, st *corev1.PodExtendedResourceClaimStatus) []ResourceCount {
	if st == nil || len(st.RequestMappings) == 0 {
		return requests
	}
	mapped := func(r ResourceCount) bool {
		for _, m := range st.RequestMappings {
			if m.ResourceName == r.Name {
				return true
			}
		}
		return false
	}
	if !slices.ContainsFunc(requests, mapped) {
		return requests
	}
	return slices.DeleteFunc(slices.Clone(requests), mapped)
}

// pinnedModel is the ProductLabel value the pod's node selector requires, else the one every
// required node-affinity term requires (the terms are ORed, so all must agree); "" when the
// pod pins no single model.
func pinnedModel(spec *corev1.PodSpec) string {
	if v := spec.NodeSelector[ProductLabel]; v != "" {
		return v
	}
	if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil {
		return ""
	}
	required := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if required == nil || len(required.NodeSelectorTerms) == 0 {
		return ""
	}
	model := ""
	for i := range required.NodeSelectorTerms {
		v := termModel(&required.NodeSelectorTerms[i])
		if v == "" || model != "" && v != model {
			return ""
		}
		model = v
	}
	return model
}

// termModel is the single ProductLabel value a node selector term requires (its expressions
// are ANDed); "" when it requires none or contradictory ones.
func termModel(term *corev1.NodeSelectorTerm) string {
	model := ""
	for _, e := range term.MatchExpressions {
		if e.Key != ProductLabel || e.Operator != corev1.NodeSelectorOpIn || len(e.Values) != 1 {
			continue
		}
		if model != "" && e.Values[0] != model {
			return ""
		}
		model = e.Values[0]
	}
	return model
}
