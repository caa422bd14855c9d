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

// Package gang answers "would this gang fit now, all or nothing, and where": a job of pods
// that must start together, inside one topology domain or not. It answers in two ways,
// as the two components that place gangs do: PlaceAsScheduler as kube-scheduler v1.37.2
// places a PodGroup (workload-aware scheduling: placements per topology domain, each pod
// through the scheduler's filters, in this project by pkg/capacity), and PlaceAsKueue as
// Kueue v0.17.0's Topology Aware Scheduling assigns a PodSet to domains (its own count of
// node capacity). Both work on a scratch copy: the caller's Snapshot is untouched. How
// each component decides, and where this package differs, is docs/design/gangs.md.
package gang

import (
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
)

// MaxPods is the most pods a gang may have here: the simulation runs the scheduler's
// filters for every pod on every node of a domain.
const MaxPods = 2048

// MaxFilterRuns bounds PlaceAsScheduler's work: pods times nodes.
const MaxFilterRuns = 20_000_000

// Template is one kind of the gang's pods.
type Template struct {
	// Pod is what every replica copies; replica i is named "<name>-<i>" (the template's
	// index is added when several templates share a name).
	Pod *corev1.Pod
	// ClaimTemplates are the ResourceClaimTemplates the pod's claims name, by name; each
	// replica gets its own claims from them, as the resourceclaim controller makes them.
	ClaimTemplates map[string]*resourcev1.ResourceClaimTemplate
	Count          int
}

// Topology is where the gang's pods must or should stay.
type Topology struct {
	// Key is a level's node label: the PodGroup's schedulingConstraints.topology[0].key,
	// or Kueue's podset-required-topology (or podset-preferred-topology with Preferred).
	// "" places the gang anywhere.
	Key string
	// Preferred is Kueue's podset-preferred-topology: one domain of Key if one can take
	// the gang, else one of a level above, else several at the top.
	Preferred bool
	// Unconstrained is Kueue's podset-unconstrained-topology.
	Unconstrained bool
	// SliceKey and SliceSize are Kueue's podset-slice-required-topology and
	// podset-slice-size: every SliceSize pods in one domain of SliceKey.
	SliceKey  string
	SliceSize int
}

// Gang is a job whose pods start together.
type Gang struct {
	// Name names the gang in messages (the PodGroup or the Workload).
	Name      string
	Templates []Template
	// MinCount is the PodGroup's gang minCount: the scheduler places the gang when at
	// least this many of its pods fit. 0 means every pod. Kueue has no minCount: it
	// admits a PodSet's whole count.
	MinCount int
	Topology Topology
}

// Result is the answer for one gang.
type Result struct {
	// Fits reports whether the gang would be placed now without preempting anyone.
	Fits bool
	// Domain is the chosen domain: the value of Topology.Key (the scheduler's placement,
	// Kueue's domain of the level it fit at; Kueue's domains joined by "," when it spread
	// the gang). "" without a topology or when nothing fits.
	Domain string
	// Choices are, for the scheduler, the domains as good as Domain (the same placement
	// score), Domain first: the scheduler picks one of them at random. One when the choice
	// is certain; none when nothing fits.
	Choices []string
	// Pods are the gang's pods in the order they are placed, with their nodes.
	Pods []Pod
	// Domains are, per domain of Topology.Key (or all nodes as one domain without a key),
	// how many of the gang's pods it takes now and what holds the rest.
	Domains []Domain
	// Message is the component's own words when the gang is not placed: the PodGroup's
	// PodGroupInitiallyScheduled=False condition message, or the text of Kueue's
	// QuotaReserved=False condition.
	Message string
	// Messages are, for the scheduler, every text the condition may carry: it reports the
	// status of one placement chosen at random ("first placement status"); Message is the
	// one when it reports the first domain by name.
	Messages []string
	// Preemption is the scheduler's gang preemption, when the gang does not fit.
	Preemption *Preemption
	// Kueue is what Kueue decided, in Kueue's mode only.
	Kueue *KueueResult
}

// Pod is one of the gang's pods.
type Pod struct {
	Name     string
	Template int
	// Node is where the pod goes; "" when it does not (or, for Kueue, when its lowest
	// level is not the hostname: the scheduler then picks a node of Domain).
	Node string
	// Domain is where the pod goes: for the scheduler, its placement's value; for Kueue,
	// the lowest-level domain it is assigned to (its values joined by ",").
	Domain string
	// Message is, for the scheduler, the FailedScheduling event text of a pod that stays
	// pending.
	Message string
	// Messages are every text that event may carry, as for Result.Messages.
	Messages []string
	// Nominated is the node the scheduler's gang preemption nominates for the pod.
	Nominated string
}

// Domain is what one topology domain can do for the gang now.
type Domain struct {
	Value string
	Nodes int
	// Pods is how many of the gang's pods the domain takes now, placed one after the
	// other as the component places them.
	Pods int
	// Held says what holds the rest: the scheduler's FailedScheduling text for the first
	// pod that did not fit, or Kueue's count of excluded nodes.
	Held string
	// Status is, for the scheduler, the placement's status: what "first placement
	// status" says when this placement is the one the scheduler reports.
	Status string
}

// member is one pod of the gang, made from its template.
type member struct {
	pod      *corev1.Pod
	claims   []*resourcev1.ResourceClaim
	template int
}

// ErrInput marks errors in the gang itself, not in the cluster.
var ErrInput = errors.New("invalid gang")

func inputErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInput, fmt.Sprintf(format, args...))
}

// count checks the gang's sizes and returns its number of pods.
func (g *Gang) count() (int, error) {
	if len(g.Templates) == 0 {
		return 0, inputErr("the gang has no pod templates")
	}
	total := 0
	for i, t := range g.Templates {
		if t.Pod == nil {
			return 0, inputErr("template %d has no pod", i)
		}
		if t.Count < 0 {
			return 0, inputErr("template %d asks for %d pods", i, t.Count)
		}
		total += t.Count
		if total > MaxPods {
			return 0, inputErr("the gang asks for more than %d pods; this simulation places at most %d", MaxPods, MaxPods)
		}
	}
	if total == 0 {
		return 0, inputErr("the gang has no pods")
	}
	if g.MinCount < 0 {
		return 0, inputErr("minCount %d is negative", g.MinCount)
	}
	if g.MinCount > total {
		return 0, inputErr("minCount %d is more than the gang's %d pods: kube-scheduler keeps them out of its queue (%q)",
			g.MinCount, total, "waiting for minCount pods from a gang to appear in scheduling queue")
	}
	return total, nil
}

// minCount is the gang's effective minCount.
func (g *Gang) minCount(total int) int {
	if g.MinCount == 0 {
		return total
	}
	return g.MinCount
}

// prefixes are the templates' pod name prefixes: the pod's name, with the template's index
// when templates share a name.
func (g *Gang) prefixes() []string {
	names := map[string]int{}
	for _, t := range g.Templates {
		names[t.Pod.Name]++
	}
	out := make([]string, len(g.Templates))
	for ti, t := range g.Templates {
		out[ti] = t.Pod.Name
		if names[t.Pod.Name] > 1 {
			out[ti] += "-" + strconv.Itoa(ti)
		}
	}
	return out
}

// members makes the gang's pods and their claims, in the order they are placed.
func (g *Gang) members(s *capacity.Snapshot) ([]member, error) {
	var out []member
	prefixes := g.prefixes()
	for ti, t := range g.Templates {
		for i := range t.Count {
			p := t.Pod.DeepCopy()
			p.Name = fmt.Sprintf("%s-%d", prefixes[ti], i)
			p.UID = types.UID(p.Namespace + "/" + p.Name)
			p.Spec.NodeName = ""
			claims, err := s.PodClaims(p, t.ClaimTemplates)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInput, err)
			}
			out = append(out, member{pod: p, claims: claims, template: ti})
		}
	}
	return out, nil
}

// checkPods is the scheduler's validatePodGroup: one scheduler name, one priority and one
// preemption policy for every pod of the group.
func checkPods(ms []member) error {
	first := ms[0].pod
	for _, m := range ms[1:] {
		p := m.pod
		if p.Spec.SchedulerName != first.Spec.SchedulerName {
			return inputErr("all pods in a single pod group should have the same .spec.schedulerName set, got: %q and %q", p.Spec.SchedulerName, first.Spec.SchedulerName)
		}
		if a, b := corev1helpers.PodPriority(p), corev1helpers.PodPriority(first); a != b {
			return inputErr("all pods in a single pod group should have the same priority as the pod group's priority, got %d and %d", a, b)
		}
		if a, b := preemptionPolicy(p), preemptionPolicy(first); a != b {
			return inputErr("all pods in a single pod group should have the same preemption policy, got %v and %v", a, b)
		}
	}
	return nil
}

func preemptionPolicy(p *corev1.Pod) corev1.PreemptionPolicy {
	if p.Spec.PreemptionPolicy != nil {
		return *p.Spec.PreemptionPolicy
	}
	return corev1.PreemptLowerPriority
}
