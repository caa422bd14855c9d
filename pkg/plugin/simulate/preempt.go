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

package simulate

import (
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// Preemption runs the scheduler's preemption for a pod no node takes (results).
func (v *View) Preemption(pod *corev1.Pod, claims []*resourcev1.ResourceClaim, results []capacity.Result) (*printer.Preemption, error) {
	p, err := v.snap.Preempt(pod, claims, results)
	if err != nil {
		return nil, err
	}
	return v.answerOf(pod, p), nil
}

// answerOf is what why and fit say of p, the preemption of pod.
func (v *View) answerOf(pod *corev1.Pod, p capacity.Preemption) *printer.Preemption {
	a := &printer.Preemption{Message: p.Message, Nominated: pod.Status.NominatedNodeName, CandidateNodes: len(p.Candidates)}
	for _, c := range p.Candidates[:min(len(p.Candidates), printer.NearestShown)] {
		holders := map[string]string{}
		for _, h := range v.holders(c.Node) {
			holders[h.Namespace+"/"+h.Pod] = h.Holds()
		}
		pc := printer.PreemptionCandidate{Node: c.Node}
		for _, vp := range c.Victims {
			pc.Victims = append(pc.Victims, printer.Victim{Namespace: vp.Namespace, Pod: vp.Name,
				Priority: corev1helpers.PodPriority(vp), Holds: holders[vp.Namespace+"/"+vp.Name]})
		}
		a.Candidates = append(a.Candidates, pc)
	}
	return a
}
