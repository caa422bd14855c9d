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

import corev1 "k8s.io/api/core/v1"

// memoSize bounds the requests memo; past it the memo starts anew.
const memoSize = 4096

// requestsMemo keeps the effective requests of the pods asked about: Fit is asked about one
// pod on node after node (a gang's pods on every node of every domain, assumed and forgotten
// in each), and computing a pod's request is most of a filter's work. The memo holds the
// pods, so no other pod can take a pod's address while it is kept; pods are not changed
// once asked about. A Clone starts its own.
type requestsMemo map[*corev1.Pod]corev1.ResourceList

// requestsOf is podRequests(pod), from the memo when known. The list is shared: callers
// only read it.
func (s *Snapshot) requestsOf(pod *corev1.Pod) corev1.ResourceList {
	if r, ok := s.memo[pod]; ok {
		return r
	}
	r := podRequests(pod)
	s.remember(pod, r)
	return r
}

func (s *Snapshot) remember(pod *corev1.Pod, r corev1.ResourceList) {
	if s.memo == nil || len(s.memo) >= memoSize {
		s.memo = requestsMemo{}
	}
	s.memo[pod] = r
}

// removeRequests uncounts a bound pod whose effective request is requests.
func (u *Usage) removeRequests(requests corev1.ResourceList) {
	u.count--
	for name, q := range requests {
		if name == corev1.ResourceCPU {
			u.requested[name] -= q.MilliValue()
			continue
		}
		u.requested[name] -= q.Value()
	}
}
