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
	"fmt"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
)

// preemptionAnswer is what the scheduler's preemption makes of a pending pod.
type preemptionAnswer struct {
	// Message is the preemption part of the FailedScheduling event, "preemption: ...".
	Message string `json:"message"`
	// Nominated is the node the scheduler already preempted pods on for this pod.
	Nominated string `json:"nominated,omitempty"`
	// Candidates are nodes where evicting pods of lower priority makes room, the one the
	// scheduler would pick first (at most nearestShown).
	Candidates []preemptionCandidate `json:"candidates,omitempty"`
	// CandidateNodes counts them, shown or not.
	CandidateNodes int `json:"candidateNodes,omitempty"`
}

type preemptionCandidate struct {
	Node    string   `json:"node"`
	Victims []victim `json:"victims"`
}

type victim struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Priority  int32  `json:"priority"`
	// Holds is what it holds there of GPUs, as the holders list says it.
	Holds string `json:"holds,omitempty"`
}

// preemption runs the scheduler's preemption for a pod no node takes (results).
func (v *view) preemption(pod *corev1.Pod, claims []*resourcev1.ResourceClaim, results []capacity.Result) (*preemptionAnswer, error) {
	p, err := v.snap.Preempt(pod, claims, results)
	if err != nil {
		return nil, err
	}
	return v.answerOf(pod, p), nil
}

// answerOf is what why and fit say of p, the preemption of pod.
func (v *view) answerOf(pod *corev1.Pod, p capacity.Preemption) *preemptionAnswer {
	a := &preemptionAnswer{Message: p.Message, Nominated: pod.Status.NominatedNodeName, CandidateNodes: len(p.Candidates)}
	for _, c := range p.Candidates[:min(len(p.Candidates), nearestShown)] {
		holders := map[string]string{}
		for _, h := range v.holders(c.Node) {
			holders[h.Namespace+"/"+h.Pod] = h.holds()
		}
		pc := preemptionCandidate{Node: c.Node}
		for _, vp := range c.Victims {
			pc.Victims = append(pc.Victims, victim{Namespace: vp.Namespace, Pod: vp.Name,
				Priority: corev1helpers.PodPriority(vp), Holds: holders[vp.Namespace+"/"+vp.Name]})
		}
		a.Candidates = append(a.Candidates, pc)
	}
	return a
}

// write prints what preemption would do, when it would do anything.
func (a *preemptionAnswer) write(b *strings.Builder) error {
	if a.Nominated != "" {
		fmt.Fprintf(b, "Nominated:  node %s: the scheduler preempted pods there for this pod and places it there once they are gone\n", a.Nominated)
	}
	if len(a.Candidates) == 0 {
		return nil
	}
	best := a.Candidates[0]
	fmt.Fprintf(b, "\nPreemption: evicting pods of lower priority makes room on %s; the scheduler picks %s, evicting %s:\n",
		countOf(int64(a.CandidateNodes), "node", "nodes"), best.Node, countOf(int64(len(best.Victims)), "pod", "pods"))
	tw := tabwriter.NewWriter(b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tVICTIM\tPRIORITY\tHOLDS")
	for _, c := range a.Candidates {
		for _, vp := range c.Victims {
			holds := vp.Holds
			if holds == "" {
				holds = "-"
			}
			fmt.Fprintf(tw, "%s\t%s/%s\t%d\t%s\n", c.Node, vp.Namespace, vp.Pod, vp.Priority, holds)
		}
	}
	return tw.Flush()
}
