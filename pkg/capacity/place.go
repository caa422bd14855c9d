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
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
)

// FitAll runs Fit on every node, in name order.
func (s *Snapshot) FitAll(pod *corev1.Pod, claims []*resourcev1.ResourceClaim) ([]Result, error) {
	out := make([]Result, 0, len(s.names))
	for _, n := range s.names {
		r, err := s.Fit(pod, claims, n)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Message is what the scheduler's FailedScheduling event says of results where no node
// fits: "0/N nodes are available: " and each reason with the number of nodes that gave it,
// sorted as the scheduler sorts them (as strings). It leaves out the scheduler's preemption
// part. It is "" when some node fits.
func Message(results []Result) string {
	counts := map[string]int{}
	for _, r := range results {
		if r.Fits() {
			return ""
		}
		for _, reason := range r.Reasons {
			counts[reason]++
		}
	}
	parts := make([]string, 0, len(counts))
	for reason, n := range counts {
		parts = append(parts, fmt.Sprintf("%v %v", n, reason))
	}
	sort.Strings(parts)
	msg := fmt.Sprintf("0/%v nodes are available:", len(results))
	if len(parts) > 0 {
		msg += " " + strings.Join(parts, ", ") + "."
	}
	return msg
}

// Assume counts the pod as bound to r's node, with r's claim allocations, as the scheduler's
// cache does once it picked the node: later questions see it there.
func (s *Snapshot) Assume(pod *corev1.Pod, r Result) {
	n := s.nodes[r.Node]
	if n == nil || !r.Fits() {
		return
	}
	requests := s.requestsOf(pod)
	bound := pod.DeepCopy()
	bound.Spec.NodeName = r.Node
	s.remember(bound, requests)
	n.pods = append(n.pods, bound)
	n.AddRequests(requests)
	s.commit(r.Allocations)
}

// PodsOn returns the pods bound to the node that have not finished, sorted by namespace and
// name: the pods that hold its resources.
func (s *Snapshot) PodsOn(node string) []*corev1.Pod { return s.podsOn(node) }

// Requests is the pod's effective request, as the scheduler computes it.
func Requests(pod *corev1.Pod) corev1.ResourceList { return podRequests(pod) }
