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
	"sort"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
)

// Probe makes the pod (and its claims) that asks for n units of something.
type Probe func(n int64) (*corev1.Pod, []*resourcev1.ResourceClaim)

// MaxFit is the largest n up to limit for which the probe's pod fits on the node now, by the
// scheduler's filters; 0 when not even one fits. A pod asking for n units fits whenever one
// asking for more does, so the answer is found by bisection.
func (s *Snapshot) MaxFit(node string, limit int64, probe Probe) (int64, error) {
	var firstErr error
	n := sort.Search(int(limit), func(i int) bool {
		pod, claims := probe(int64(i) + 1)
		r, err := s.Fit(pod, claims, node)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return err != nil || !r.Fits()
	})
	return int64(n), firstErr
}

// DevicePluginFree is what a pod could still get of a device-plugin resource on the node: its
// allocatable minus what the node's bound pods request, in the resource's own unit (a
// time-sliced replica, a MIG device). It says nothing of the node's taints or conditions.
func (s *Snapshot) DevicePluginFree(node string, resource corev1.ResourceName) int64 {
	n := s.nodes[node]
	if n == nil {
		return 0
	}
	have, _ := n.allocatable(resource)
	return max(0, have-n.requested[resource])
}
