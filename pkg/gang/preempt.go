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

package gang

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
)

// Preemption is what the scheduler's gang preemption (DefaultPreemption's
// PodGroupPostFilter) makes of a gang that fits no placement.
type Preemption struct {
	// Message is the preemption part of the PodGroup's condition, "pod group preemption: ...".
	Message string
	// Messages are every text Message may be: when the gang does not fit even with every
	// victim gone, it reports one placement chosen at random, as the cycle does.
	Messages []string
	// Victims are the pods the scheduler evicts so that the gang fits, most important
	// first; none when preemption does not help.
	Victims []*corev1.Pod
	// Domain is where the gang goes once the victims are gone, and Choices the domains as
	// good as it (Domain first): the scheduler picks one at random, and the victims here
	// are those of Domain.
	Domain    string
	Choices   []string
	nominated map[string]string // pod name -> the node nominated for it
}

// victim is a pod of lower priority than the gang, and its node.
type victim struct {
	pod  *corev1.Pod
	node string
}

// preempt is PodGroupEvaluator.Preempt with the whole cluster as its domain: every pod of
// lower priority than the gang is removed, the pod group cycle runs again, and if the gang
// then fits, victims are given back, the most important first, while the gang's pods still
// pass the filters on their nodes. Each pod is a victim of its own (PodGroups with
// disruptionMode All, which make a group one victim, are not read), and
// PodDisruptionBudgets are not read.
func (sim *simulation) preempt(base *capacity.Snapshot, pls []placement) (*Preemption, error) {
	first := sim.members[0].pod
	if preemptionPolicy(first) == corev1.PreemptNever {
		return preemptionSaying(msgPreemption + msgNotEligible), nil
	}
	prio := corev1helpers.PodPriority(first)
	var victims []victim
	for _, n := range base.Nodes() {
		for _, p := range base.PodsOn(n) {
			if corev1helpers.PodPriority(p) < prio {
				victims = append(victims, victim{pod: p, node: n})
			}
		}
	}
	if len(victims) == 0 {
		return preemptionSaying(msgPreemption + msgNoVictims), nil
	}
	scratch := base.Clone()
	for _, v := range victims {
		scratch.Evict(v.node, []*corev1.Pod{v.pod})
	}
	c, err := sim.run(scratch, pls)
	if err != nil {
		return nil, err
	}
	if c.best < 0 {
		out := &Preemption{}
		for k := range c.evals {
			out.Messages = addMessage(out.Messages, msgPreemption+c.groupStatus(k))
		}
		out.Message = out.Messages[0]
		return out, nil
	}
	ev := c.evals[c.best]
	now := time.Now()
	slices.SortStableFunc(victims, func(a, b victim) int { return moreImportant(a.pod, b.pod, now) })
	out := &Preemption{Domain: ev.placement.value, Choices: c.choices(), nominated: map[string]string{}}
	for _, v := range victims {
		scratch.Restore(v.node, []*corev1.Pod{v.pod})
		ok, err := sim.fitsWith(scratch, ev, v.node)
		if err != nil {
			return nil, err
		}
		if !ok {
			scratch.Evict(v.node, []*corev1.Pod{v.pod})
			out.Victims = append(out.Victims, v.pod)
		}
	}
	for _, o := range ev.outcomes {
		if o.node != "" {
			out.nominated[o.pod] = o.node
		}
	}
	out.Message = msgPreemption + fmt.Sprintf(msgVictimsChosen, len(out.Victims))
	out.Messages = []string{out.Message}
	return out, nil
}

// preemptionSaying is a preemption that finds nothing to do, and says so.
func preemptionSaying(message string) *Preemption {
	return &Preemption{Message: message, Messages: []string{message}}
}

// fitsWith reports whether the gang's pods that the evaluation put on node still pass the
// filters there, one after the other. Pods on other nodes are not affected by a pod given
// back to this one.
func (sim *simulation) fitsWith(s *capacity.Snapshot, ev evaluation, node string) (bool, error) {
	var placed []int
	var fits []capacity.Result
	defer func() {
		for i := len(placed) - 1; i >= 0; i-- {
			s.Forget(sim.members[placed[i]].pod, fits[i])
		}
	}()
	for j, o := range ev.outcomes {
		if o.node != node {
			continue
		}
		m := sim.members[j]
		r, err := s.Fit(m.pod, m.claims, node)
		if err != nil {
			return false, err
		}
		if !r.Fits() {
			return false, nil
		}
		s.Assume(m.pod, r)
		placed, fits = append(placed, j), append(fits, r)
	}
	return true, nil
}

// moreImportant orders victims as the scheduler's MoreImportantVictim does for single
// pods: higher priority first, then the one that started earlier (a pod not started yet
// counts as started now).
func moreImportant(a, b *corev1.Pod, now time.Time) int {
	start := func(p *corev1.Pod) time.Time {
		if p.Status.StartTime != nil {
			return p.Status.StartTime.Time
		}
		return now
	}
	return cmp.Or(cmp.Compare(corev1helpers.PodPriority(b), corev1helpers.PodPriority(a)), start(a).Compare(start(b)))
}
