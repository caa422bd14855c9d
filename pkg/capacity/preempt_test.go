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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// prioritized gives a pod a priority and, when started is not zero, a start time.
func prioritized(p *corev1.Pod, priority int32, started time.Time) *corev1.Pod {
	p.Spec.Priority = ptr.To(priority)
	if !started.IsZero() {
		p.Status.StartTime = &metav1.Time{Time: started}
	}
	return p
}

func preempt(t *testing.T, s *Snapshot, pod *corev1.Pod) Preemption {
	t.Helper()
	results, err := s.FitAll(pod, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Preempt(pod, nil, results)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func victimNames(c Candidate) []string {
	var out []string
	for _, v := range c.Victims {
		out = append(out, v.Name)
	}
	return out
}

// The pending pod of the scheduler's default priority, on GPUs held by pods of the same
// priority: the scheduler's FailedScheduling event says no victims where room is short, and
// not helpful elsewhere.
func TestPreemptionInTheSchedulersWords(t *testing.T) {
	cordoned := node("cordoned", map[corev1.ResourceName]string{gpuResource: "8"})
	cordoned.Spec.Unschedulable = true
	nodes := []*corev1.Node{cordoned, node("a", map[corev1.ResourceName]string{gpuResource: "4"}),
		node("b", map[corev1.ResourceName]string{gpuResource: "8"}), node("small", map[corev1.ResourceName]string{gpuResource: "2"})}
	held := []*corev1.Pod{gpuPod("a-0", "a", gpuResource, 4, true), gpuPod("b-0", "b", gpuResource, 6, true)}
	s := NewSnapshot(Cluster{Nodes: nodes, Pods: held})
	pod := gpuPod("job", "", gpuResource, 4, false)
	pod.Spec.NodeSelector = nil

	got := preempt(t, s, pod)
	// small has 2 GPUs: asking 4 is more than it has, which no eviction cures.
	want := "preemption: 0/4 nodes are available: 2 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
	if got.Message != want || len(got.Candidates) != 0 {
		t.Errorf("Preempt = %q, %d candidates; want %q, none", got.Message, len(got.Candidates), want)
	}

	pod.Spec.PreemptionPolicy = ptr.To(corev1.PreemptNever)
	if got := preempt(t, s, pod); got.Message != "preemption: not eligible due to preemptionPolicy=Never." {
		t.Errorf("a pod that never preempts: %q", got.Message)
	}
}

// A pod of higher priority: the scheduler picks the node whose victims matter least and
// evicts no more of them than it must, the least important first.
func TestPreemptionPicksVictimsAsTheSchedulerDoes(t *testing.T) {
	now := time.Now()
	nodes := []*corev1.Node{node("a", map[corev1.ResourceName]string{gpuResource: "8"}), node("b", map[corev1.ResourceName]string{gpuResource: "8"})}
	pods := []*corev1.Pod{
		// a: 8 GPUs held by two pods of priority 100 and one of 1000.
		prioritized(gpuPod("a-low-old", "a", gpuResource, 2, true), 100, now.Add(-2*time.Hour)),
		prioritized(gpuPod("a-low-new", "a", gpuResource, 2, true), 100, now.Add(-time.Hour)),
		prioritized(gpuPod("a-high", "a", gpuResource, 4, true), 1000, now.Add(-time.Hour)),
		// b: 8 GPUs held by priority 500 pods: a higher highest victim than a's.
		prioritized(gpuPod("b-mid-0", "b", gpuResource, 4, true), 500, now.Add(-time.Hour)),
		prioritized(gpuPod("b-mid-1", "b", gpuResource, 4, true), 500, now.Add(-time.Hour)),
	}
	s := NewSnapshot(Cluster{Nodes: nodes, Pods: pods})
	pod := prioritized(gpuPod("urgent", "", gpuResource, 2, false), 2000, time.Time{})
	pod.Spec.NodeSelector = nil

	got := preempt(t, s, pod)
	if len(got.Candidates) != 2 {
		t.Fatalf("candidates %+v, want a and b", got.Candidates)
	}
	best := got.Candidates[0]
	// On a, 2 GPUs come from one priority-100 pod; the scheduler reprieves the older one.
	if best.Node != "a" || len(best.Victims) != 1 || best.Victims[0].Name != "a-low-new" {
		t.Errorf("best candidate %s evicting %v, want a evicting [a-low-new]", best.Node, victimNames(best))
	}
	if want := "preemption: found a potential placement for pod on node a, preempting 1 victims"; got.Message != want {
		t.Errorf("message %q, want %q", got.Message, want)
	}

	// Asking 8: every pod of a or of b must go; a's most important victim (1000) outranks
	// b's (500), so b is picked.
	pod8 := prioritized(gpuPod("urgent8", "", gpuResource, 8, false), 2000, time.Time{})
	pod8.Spec.NodeSelector = nil
	got = preempt(t, s, pod8)
	if len(got.Candidates) == 0 || got.Candidates[0].Node != "b" || len(got.Candidates[0].Victims) != 2 {
		t.Errorf("asking 8: %+v, want b first, evicting both its pods", got.Candidates)
	}

	// A pod of priority 600 may evict only a's priority-100 pods (4 GPUs) and b's (8).
	pod6 := prioritized(gpuPod("mid6", "", gpuResource, 6, false), 600, time.Time{})
	pod6.Spec.NodeSelector = nil
	got = preempt(t, s, pod6)
	if len(got.Candidates) != 1 || got.Candidates[0].Node != "b" {
		t.Errorf("asking 6 at priority 600: %+v, want b alone", got.Candidates)
	}
}

// Victims already terminating on the pod's nominated node: the scheduler waits for them.
func TestPreemptionWaitsForTerminatingVictims(t *testing.T) {
	victim := prioritized(gpuPod("victim", "a", gpuResource, 8, true), 0, time.Now())
	victim.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	victim.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonPreemptionByScheduler}}
	s := NewSnapshot(Cluster{Nodes: []*corev1.Node{node("a", map[corev1.ResourceName]string{gpuResource: "8"})}, Pods: []*corev1.Pod{victim}})
	pod := prioritized(gpuPod("urgent", "a", gpuResource, 8, false), 1000, time.Time{})
	pod.Status.NominatedNodeName = "a"
	if got := preempt(t, s, pod); got.Message != "preemption: not eligible due to a terminating pod on the nominated node." {
		t.Errorf("nominated, victim terminating: %q", got.Message)
	}
	// Terminating for another reason (a user's delete): the scheduler may preempt again.
	victim.Status.Conditions = nil
	if got := preempt(t, s, pod); len(got.Candidates) != 1 {
		t.Errorf("victim deleted by a user: %+v, want a candidate", got)
	}
}

// Room that evicting lower-priority pods does not make: the dry run says what still lacks.
func TestPreemptionThatDoesNotMakeRoom(t *testing.T) {
	pods := []*corev1.Pod{
		prioritized(gpuPod("low", "a", gpuResource, 2, true), 0, time.Now()),
		prioritized(gpuPod("high", "a", gpuResource, 6, true), 5000, time.Now()),
	}
	s := NewSnapshot(Cluster{Nodes: []*corev1.Node{node("a", map[corev1.ResourceName]string{gpuResource: "8"})}, Pods: pods})
	pod := prioritized(gpuPod("job", "a", gpuResource, 4, false), 1000, time.Time{})
	want := "preemption: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
	if got := preempt(t, s, pod); got.Message != want || len(got.Candidates) != 0 {
		t.Errorf("Preempt = %q %+v, want %q", got.Message, got.Candidates, want)
	}
}
