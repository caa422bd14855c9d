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
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The keep-rules: what Fit reads of the objects of a Cluster, for callers that list only
// what a question needs and trim each object as it arrives. A trimmed object gives every
// answer the whole one gives (the tests of pkg/plugin compare the two).

// Of a node, Fit reads its name, labels (node affinity, slices' and allocations' node
// selectors), unschedulable, taints and allocatable resources; where NodeOnlyReason rejects
// every pod, only its name, unschedulable, the taints that keep pods off and the labels the
// pods' selectors name (SelectorKeys). The callers keep those through the node cache's
// decoder (nodecache.Rules).

// NodeOnlyReason is what the filters that read the node alone (NodeName, NodeUnschedulable,
// TaintToleration, NodeAffinity) say of the pod there, "" when they pass. A node they reject
// is rejected whatever runs on it: Fit's answer there needs no pod, slice or claim.
func NodeOnlyReason(pod *corev1.Pod, node *corev1.Node) string { return nodeFilters(pod, node) }

// SelectorKeys are the label keys of the pod's node selector and required node affinity: the
// labels the node-only filters read for it.
func SelectorKeys(p *corev1.Pod) []string {
	var keys []string
	for k := range p.Spec.NodeSelector {
		keys = append(keys, k)
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, r := range term.MatchExpressions {
				keys = append(keys, r.Key)
			}
		}
	}
	return keys
}

// KeepPod is what Fit and Preempt read of a bound pod, and what names it among a node's
// holders: its name, namespace, UID and deletion; its node, priority, phase and start; its
// claims and their statuses; the first DisruptionTarget condition (preempted or not); and its
// effective request (PodRequests: containers, init containers, overhead, pod-level
// resources, the resources in its status and a pending resize) as the requests of one
// container, whose effective request is the same.
func KeepPod(p *corev1.Pod) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, DeletionTimestamp: p.DeletionTimestamp},
		Spec: corev1.PodSpec{NodeName: p.Spec.NodeName, Priority: p.Spec.Priority, ResourceClaims: p.Spec.ResourceClaims,
			Containers: []corev1.Container{{Name: "requests", Resources: corev1.ResourceRequirements{Requests: podRequests(p)}}}},
		Status: corev1.PodStatus{Phase: p.Status.Phase, StartTime: p.Status.StartTime, Conditions: disruptionTarget(p),
			ResourceClaimStatuses: p.Status.ResourceClaimStatuses, ExtendedResourceClaimStatus: p.Status.ExtendedResourceClaimStatus},
	}
}

// disruptionTarget is the pod's first DisruptionTarget condition, the one the scheduler reads.
func disruptionTarget(p *corev1.Pod) []corev1.PodCondition {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			return []corev1.PodCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason}}
		}
	}
	return nil
}

// StubSlice is what the questions read of a slice on a node where no pod is placed: its
// driver, pool and node, by which the pool's newest generation is known (FreeDevices); no
// device. The allocator never reads it for a node it is not on.
func StubSlice(s *resourcev1.ResourceSlice) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: s.Name},
		Spec: resourcev1.ResourceSliceSpec{Driver: s.Spec.Driver, Pool: s.Spec.Pool, NodeName: s.Spec.NodeName}}
}
