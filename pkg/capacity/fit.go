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
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// The scheduler's reasons, word for word (its filter plugins' status messages).
const (
	ReasonNodeName       = "node(s) didn't match the requested node name"
	ReasonUnschedulable  = "node(s) were unschedulable"
	ReasonTaint          = "node(s) had untolerated taint(s)"
	ReasonAffinity       = "node(s) didn't match Pod's node affinity/selector"
	ReasonTooManyPods    = "Too many pods"
	ReasonClaimsNotFit   = "cannot allocate all claims"
	ReasonClaimNotOnNode = "resourceclaim not available on the node"
)

// Result is the scheduler's verdict on one pod and one node.
type Result struct {
	Node string
	// Reasons is empty when the pod fits; else what the scheduler's first failing filter
	// says (NodeResourcesFit may say several, one per resource).
	Reasons []string
	// Allocations are what the pod's unallocated claims would get on the node.
	Allocations []resourcev1.AllocationResult
	// Claims are the claims the allocations are for, in the same order.
	Claims []*resourcev1.ResourceClaim
}

// Fits reports whether the pod fits on the node.
func (r Result) Fits() bool { return len(r.Reasons) == 0 }

// Fit runs the scheduler's filters for the pod on the named node. claims are the pod's
// resource claims (see PodClaims). The error reports invalid input the scheduler would also
// refuse for every node (a class that does not exist, a CEL selector that does not compile).
func (s *Snapshot) Fit(pod *corev1.Pod, claims []*resourcev1.ResourceClaim, node string) (Result, error) {
	r := Result{Node: node}
	n := s.nodes[node]
	if n == nil {
		return r, fmt.Errorf("node %s does not exist", node)
	}
	if reason := nodeFilters(pod, n.node); reason != "" {
		r.Reasons = []string{reason}
		return r, nil
	}
	delegated := s.delegated(pod, n)
	if r.Reasons = s.resourcesFit(pod, n, delegated); len(r.Reasons) > 0 {
		return r, nil
	}
	return s.claimsFit(r, pod, claims, n, delegated)
}

// nodeFilters runs NodeName, NodeUnschedulable, TaintToleration and NodeAffinity.
func nodeFilters(pod *corev1.Pod, node *corev1.Node) string {
	logger := klog.Background()
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		return ReasonNodeName
	}
	if node.Spec.Unschedulable && !v1helper.TolerationsTolerateTaint(logger, pod.Spec.Tolerations,
		&corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}, false) {
		return ReasonUnschedulable
	}
	if _, untolerated := v1helper.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, pod.Spec.Tolerations,
		doNotSchedule, false); untolerated {
		return ReasonTaint
	}
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok {
		return ReasonAffinity
	}
	return ""
}

func doNotSchedule(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// delegated returns the pod's extended resources that the node provides through DRA: a
// DeviceClass maps them and the node's allocatable has none (the scheduler's
// shouldDelegateResourceToDRA), with the quantity requested.
func (s *Snapshot) delegated(pod *corev1.Pod, n *nodeInfo) map[corev1.ResourceName]int64 {
	var out map[corev1.ResourceName]int64
	for name, q := range s.requestsOf(pod) {
		if !isExtended(name) || q.IsZero() || s.resolver.GetDeviceClass(name) == nil {
			continue
		}
		if a, _ := n.allocatable(name); a > 0 {
			continue
		}
		if out == nil {
			out = map[corev1.ResourceName]int64{}
		}
		out[name] = q.Value()
	}
	return out
}

// resourcesFit is NodeResourcesFit's Filter.
func (s *Snapshot) resourcesFit(pod *corev1.Pod, n *nodeInfo, delegated map[corev1.ResourceName]int64) []string {
	var reasons []string
	if max, _ := n.allocatable(corev1.ResourcePods); n.count+1 > max {
		reasons = append(reasons, ReasonTooManyPods)
	}
	reqs := s.requestsOf(pod)
	names := make([]corev1.ResourceName, 0, len(reqs))
	for name := range reqs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		q := reqs[name]
		want := q.Value()
		if name == corev1.ResourceCPU {
			want = q.MilliValue()
		}
		if want <= 0 || name == corev1.ResourcePods {
			continue
		}
		if _, ok := delegated[name]; ok {
			continue
		}
		if !isScheduledResource(name) {
			continue
		}
		have, _ := n.allocatable(name)
		if want > have-n.requested[name] {
			reasons = append(reasons, "Insufficient "+string(name))
		}
	}
	return reasons
}

// isScheduledResource reports whether NodeResourcesFit checks the resource: CPU, memory,
// ephemeral storage, hugepages, attachable volumes and extended resources.
func isScheduledResource(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return true
	}
	return isExtended(name) || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// claimsFit is DynamicResources' Filter: allocated claims must be available on the node; the
// unallocated ones, and a claim for the delegated extended resources, must all be allocatable
// there at once.
func (s *Snapshot) claimsFit(r Result, pod *corev1.Pod, claims []*resourcev1.ResourceClaim, n *nodeInfo, delegated map[corev1.ResourceName]int64) (Result, error) {
	var toAllocate []*resourcev1.ResourceClaim
	for _, c := range claims {
		if c.Status.Allocation == nil {
			toAllocate = append(toAllocate, c)
			continue
		}
		if sel := c.Status.Allocation.NodeSelector; sel != nil {
			if ok, _ := nodeaffinity.NewLazyErrorNodeSelector(sel).Match(n.node); !ok {
				r.Reasons = []string{ReasonClaimNotOnNode}
				return r, nil
			}
		}
	}
	if len(delegated) > 0 {
		toAllocate = append(toAllocate, s.extendedClaim(pod, delegated))
	}
	results, err := s.allocate(n.node, toAllocate)
	if err != nil {
		return r, err
	}
	if results == nil {
		r.Reasons = []string{ReasonClaimsNotFit}
		return r, nil
	}
	r.Allocations, r.Claims = results, toAllocate
	return r, nil
}

// extendedClaim is the claim the scheduler makes for extended resources served by DRA: one
// request of each mapped resource's class for the quantity the pod requests.
func (s *Snapshot) extendedClaim(pod *corev1.Pod, delegated map[corev1.ResourceName]int64) *resourcev1.ResourceClaim {
	names := make([]corev1.ResourceName, 0, len(delegated))
	for name := range delegated {
		names = append(names, name)
	}
	slices.Sort(names)
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: pod.Namespace, Name: pod.Name + "-extended-resources", UID: types.UID(string(pod.UID) + "-extended"),
	}}
	for i, name := range names {
		c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourcev1.DeviceRequest{
			Name: fmt.Sprintf("container-%d-request-%d", 0, i),
			Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: s.resolver.GetDeviceClass(name).Name,
				AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
				Count:           delegated[name],
			},
		})
	}
	return c
}

// PodClaims returns the claims the pod references: by name, or made from a template (the
// generated claim named in the pod's status when there is one, else a new claim from
// templates, keyed by name, as the resourceclaim controller would make it). It fails when a
// claim or template cannot be found.
func (s *Snapshot) PodClaims(pod *corev1.Pod, templates map[string]*resourcev1.ResourceClaimTemplate) ([]*resourcev1.ResourceClaim, error) {
	var out []*resourcev1.ResourceClaim
	for _, pc := range pod.Spec.ResourceClaims {
		name := ""
		switch {
		case pc.ResourceClaimName != nil:
			name = *pc.ResourceClaimName
		case pc.ResourceClaimTemplateName != nil:
			name = generatedName(pod, pc.Name)
		}
		if name != "" {
			c := s.claims[types.NamespacedName{Namespace: pod.Namespace, Name: name}]
			if c == nil {
				return nil, fmt.Errorf("pod %s/%s: resource claim %s/%s does not exist", pod.Namespace, pod.Name, pod.Namespace, name)
			}
			out = append(out, c)
			continue
		}
		if pc.ResourceClaimTemplateName == nil {
			continue
		}
		t := templates[*pc.ResourceClaimTemplateName]
		if t == nil {
			return nil, fmt.Errorf("pod %s/%s: resource claim template %s/%s does not exist", pod.Namespace, pod.Name, pod.Namespace, *pc.ResourceClaimTemplateName)
		}
		out = append(out, &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name + "-" + pc.Name, UID: types.UID(string(pod.UID) + "-" + pc.Name)},
			Spec:       *t.Spec.Spec.DeepCopy(),
		})
	}
	return out, nil
}

// generatedName is the name of the claim made from a template for the pod's claim, from the
// pod's status; "" while none has been made.
func generatedName(pod *corev1.Pod, claim string) string {
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.Name == claim && st.ResourceClaimName != nil {
			return *st.ResourceClaimName
		}
	}
	return ""
}

// isExtended is the API's IsExtendedResourceName: a qualified name outside kubernetes.io
// that is not a quota "requests." name.
func isExtended(name corev1.ResourceName) bool {
	n := string(name)
	return strings.Contains(n, "/") && !strings.Contains(n, corev1.ResourceDefaultNamespacePrefix) &&
		!strings.HasPrefix(n, corev1.DefaultResourceRequestsPrefix)
}
