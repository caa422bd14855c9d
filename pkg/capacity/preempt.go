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
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// The words of the scheduler's DefaultPreemption.
const (
	ReasonPreemptionNotHelpful = "Preemption is not helpful for scheduling"
	ReasonNoVictims            = "No preemption victims found for incoming pod"
	notEligibleNever           = "not eligible due to preemptionPolicy=Never."
	notEligibleTerminating     = "not eligible due to a terminating pod on the nominated node."
)

// Preemption is what the scheduler's DefaultPreemption makes of a pod that fits on no node.
type Preemption struct {
	// Message is the preemption part of the FailedScheduling event, "preemption: ...".
	Message string
	// Candidates are the nodes where evicting pods of lower priority makes room, the one the
	// scheduler prefers first.
	Candidates []Candidate
}

// Candidate is a node where the pod fits once Victims are gone.
type Candidate struct {
	Node string
	// Victims are the fewest pods of lower priority whose eviction makes room, most important
	// first, as the scheduler chooses them.
	Victims []*corev1.Pod
}

// Preempt runs DefaultPreemption's dry run for a pod whose Fit on every node gave results
// (nodes outside the snapshot count as rejected by the node-only filters). It reads the pods
// of lower priority on the nodes that lacked only room, so those must be in the snapshot as
// pods, not counted in Usage. PodDisruptionBudgets are not read: the scheduler prefers
// victims whose eviction violates none, which can change which node it picks, not whether
// preemption helps.
func (s *Snapshot) Preempt(pod *corev1.Pod, claims []*resourcev1.ResourceClaim, results []Result) (Preemption, error) {
	if msg, ok := s.eligible(pod, results); !ok {
		return Preemption{Message: "preemption: " + msg}, nil
	}
	var out Preemption
	now := time.Now()
	statuses := make([]Result, 0, len(results))
	for _, r := range results {
		if !s.resolvable(pod, r) {
			statuses = append(statuses, Result{Node: r.Node, Reasons: []string{ReasonPreemptionNotHelpful}})
			continue
		}
		c, reasons, err := s.dryRun(pod, claims, r.Node, now)
		if err != nil {
			return Preemption{}, err
		}
		if c != nil {
			out.Candidates = append(out.Candidates, *c)
			continue
		}
		statuses = append(statuses, Result{Node: r.Node, Reasons: reasons})
	}
	if len(out.Candidates) == 0 {
		out.Message = "preemption: " + Message(statuses)
		return out, nil
	}
	slices.SortStableFunc(out.Candidates, func(a, b Candidate) int { return betterCandidate(a, b, now) })
	best := out.Candidates[0]
	out.Message = fmt.Sprintf("preemption: found a potential placement for pod on node %v, preempting %d victims", best.Node, len(best.Victims))
	return out, nil
}

// eligible is DefaultPreemption's PodEligibleToPreemptOthers.
func (s *Snapshot) eligible(pod *corev1.Pod, results []Result) (string, bool) {
	if p := pod.Spec.PreemptionPolicy; p != nil && *p == corev1.PreemptNever {
		return notEligibleNever, false
	}
	nominated := pod.Status.NominatedNodeName
	if nominated == "" || s.nodes[nominated] == nil {
		return "", true
	}
	i := slices.IndexFunc(results, func(r Result) bool { return r.Node == nominated })
	if i >= 0 && !s.resolvable(pod, results[i]) {
		return "", true
	}
	prio := corev1helpers.PodPriority(pod)
	for _, p := range s.nodes[nominated].pods {
		if corev1helpers.PodPriority(p) < prio && terminatingByPreemption(p) {
			return notEligibleTerminating, false
		}
	}
	return "", true
}

// terminatingByPreemption is the scheduler's PodTerminatingByPreemption.
func terminatingByPreemption(p *corev1.Pod) bool {
	if p.DeletionTimestamp == nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			return c.Status == corev1.ConditionTrue && c.Reason == corev1.PodReasonPreemptionByScheduler
		}
	}
	return false
}

// resolvable reports a result the scheduler's filters mark Unschedulable rather than
// UnschedulableAndUnresolvable: only NodeResourcesFit failed, and for no resource does the
// pod ask more than the node's allocatable.
func (s *Snapshot) resolvable(pod *corev1.Pod, r Result) bool {
	n := s.nodes[r.Node]
	if n == nil || r.Fits() {
		return false
	}
	requests := podRequests(pod)
	for _, reason := range r.Reasons {
		if reason == ReasonTooManyPods {
			continue
		}
		name, ok := strings.CutPrefix(reason, "Insufficient ")
		if !ok {
			return false
		}
		q := requests[corev1.ResourceName(name)]
		want := q.Value()
		if name == string(corev1.ResourceCPU) {
			want = q.MilliValue()
		}
		if have, _ := n.allocatable(corev1.ResourceName(name)); want > have {
			return false
		}
	}
	return true
}

// dryRun is SelectVictimsOnNode: with every pod of lower priority gone, does the pod fit;
// then which of them it can leave, the most important first. A nil candidate comes with the
// reasons the node still gives.
func (s *Snapshot) dryRun(pod *corev1.Pod, claims []*resourcev1.ResourceClaim, node string, now time.Time) (*Candidate, []string, error) {
	n := s.nodes[node]
	prio := corev1helpers.PodPriority(pod)
	var victims []*corev1.Pod
	for _, p := range n.pods {
		if corev1helpers.PodPriority(p) < prio {
			victims = append(victims, p)
		}
	}
	if len(victims) == 0 {
		return nil, []string{ReasonNoVictims}, nil
	}
	without := n.without(victims)
	// DynamicResources has no PreFilter extensions: a victim's claims stay allocated in the
	// dry run, so only NodeResourcesFit sees the room made.
	r, err := s.fitOn(pod, claims, without)
	if err != nil || !r.Fits() {
		return nil, r.Reasons, err
	}
	slices.SortStableFunc(victims, func(a, b *corev1.Pod) int { return moreImportantFirst(a, b, now) })
	var chosen []*corev1.Pod
	for _, v := range victims {
		without.Add(v)
		if len(s.resourcesFit(pod, without, s.delegated(pod, without))) == 0 {
			without.pods = append(without.pods, v)
			continue
		}
		without.remove(v)
		chosen = append(chosen, v)
	}
	return &Candidate{Node: node, Victims: chosen}, nil, nil
}

// Evict takes the pods off the node, as the scheduler's preemption deletes its victims: their
// requests no longer count there. Their claims stay allocated until the ResourceClaim
// controller frees them, which the scheduler does not count on either.
func (s *Snapshot) Evict(node string, pods []*corev1.Pod) {
	n := s.nodes[node]
	if n == nil {
		return
	}
	left := n.without(pods)
	n.pods, n.Usage = left.pods, left.Usage
}

// fitOn is Fit past the node-only filters, which the dry run leaves as they were.
func (s *Snapshot) fitOn(pod *corev1.Pod, claims []*resourcev1.ResourceClaim, n *nodeInfo) (Result, error) {
	r := Result{Node: n.node.Name}
	delegated := s.delegated(pod, n)
	if r.Reasons = s.resourcesFit(pod, n, delegated); len(r.Reasons) > 0 {
		return r, nil
	}
	return s.claimsFit(r, pod, claims, n, delegated)
}

// without is a copy of the node's usage without the pods gone.
func (n *nodeInfo) without(gone []*corev1.Pod) *nodeInfo {
	out := &nodeInfo{node: n.node, Usage: Usage{count: n.count, requested: make(map[corev1.ResourceName]int64, len(n.requested))}}
	for k, v := range n.requested {
		out.requested[k] = v
	}
	for _, p := range n.pods {
		if !slices.Contains(gone, p) {
			out.pods = append(out.pods, p)
		}
	}
	for _, p := range gone {
		out.remove(p)
	}
	return out
}

// remove uncounts a pod's requests (Add counts them).
func (u *Usage) remove(p *corev1.Pod) { u.removeRequests(podRequests(p)) }

// moreImportantFirst orders pods as the scheduler's MoreImportantPod: higher priority, then
// the one started earlier. Pods that started in the same second keep their order (the
// scheduler's is its cache's, which no API shows).
func moreImportantFirst(a, b *corev1.Pod, now time.Time) int {
	return cmp.Or(cmp.Compare(corev1helpers.PodPriority(b), corev1helpers.PodPriority(a)), startTime(a, now).Compare(startTime(b, now)))
}

// startTime is the scheduler's GetPodStartTime: a pod not started yet counts as started now.
func startTime(p *corev1.Pod, now time.Time) time.Time {
	if p.Status.StartTime != nil {
		return p.Status.StartTime.Time
	}
	return now
}

// betterCandidate orders candidates as pickOneNodeForPreemption picks them (no budgets
// read): the lowest highest victim priority, the lowest sum of priorities, the fewest
// victims, the latest start among the highest-priority victims, then by name.
func betterCandidate(a, b Candidate, now time.Time) int {
	return cmp.Or(
		cmp.Compare(corev1helpers.PodPriority(a.Victims[0]), corev1helpers.PodPriority(b.Victims[0])),
		cmp.Compare(prioritySum(a.Victims), prioritySum(b.Victims)),
		cmp.Compare(len(a.Victims), len(b.Victims)),
		earliestOfHighest(b.Victims, now).Compare(earliestOfHighest(a.Victims, now)),
		cmp.Compare(a.Node, b.Node),
	)
}

func prioritySum(pods []*corev1.Pod) int64 {
	var sum int64
	for _, p := range pods {
		sum += int64(corev1helpers.PodPriority(p)) + math.MaxInt32 + 1
	}
	return sum
}

// earliestOfHighest is the scheduler's GetEarliestPodStartTime: the earliest start among
// the victims of the highest priority.
func earliestOfHighest(pods []*corev1.Pod, now time.Time) time.Time {
	top := corev1helpers.PodPriority(pods[0])
	earliest := startTime(pods[0], now)
	for _, p := range pods[1:] {
		switch prio := corev1helpers.PodPriority(p); {
		case prio > top:
			top, earliest = prio, startTime(p, now)
		case prio == top && startTime(p, now).Before(earliest):
			earliest = startTime(p, now)
		}
	}
	return earliest
}
