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
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
)

// The scheduler's words (schedule_one_podgroup.go, the GangScheduling and
// TopologyPlacementGenerator plugins, DefaultPreemption's PodGroupPostFilter).
const (
	msgUnschedulable  = "pod group is unschedulable"
	msgNoPlacements   = "no feasible placements found"
	msgMinCount       = "minCount (%d) cannot be satisfied: %d scheduled, %d remaining"
	msgPlacements     = "0/%d placements are available, first placement status: %s"
	msgPreemption     = "pod group preemption: "
	msgNoVictims      = "No preemption victims found for incoming preemptor"
	msgNotEligible    = "not eligible due to preemptionPolicy=Never."
	msgVictimsChosen  = "found a placement for podgroup, preempting %d victims"
	reasonTooManyRuns = "the simulation would run the scheduler's filters %d times (pods x nodes), over its bound of %d"
)

// ErrNoDomain reports a topology key that makes no domain: no node carries it, or it is
// not a level of Kueue's topology.
var ErrNoDomain = errors.New("no topology domain")

// PlaceAsScheduler answers as kube-scheduler v1.37.2 with the GenericWorkload and
// TopologyAwareWorkloadScheduling gates places a PodGroup of the gang's pods: a placement
// per value of Topology.Key (all nodes without one), in each the pods one after the other
// through the scheduler's filters and scores, the gang's minCount checked after each pod,
// the fitting placement that holds the most pods and packs CPU and memory tightest
// chosen, and when none fits the scheduler's gang preemption. The scheduler breaks ties
// at random; here the first domain and node in name order win.
func PlaceAsScheduler(s *capacity.Snapshot, g Gang) (Result, error) {
	total, err := g.count()
	if err != nil {
		return Result{}, err
	}
	if g.Topology.Preferred || g.Topology.Unconstrained || g.Topology.SliceKey != "" || g.Topology.SliceSize != 0 {
		return Result{}, inputErr("kube-scheduler's PodGroup has only a required topology key: preferred, unconstrained and slices are Kueue's")
	}
	members, err := g.members(s)
	if err != nil {
		return Result{}, err
	}
	if err := checkPods(members); err != nil {
		return Result{}, err
	}
	pls := placements(s, g.Topology.Key)
	if len(pls) == 0 {
		return Result{}, fmt.Errorf("%w: no node carries the label %q (kube-scheduler: %q)", ErrNoDomain, g.Topology.Key, msgNoPlacements)
	}
	if runs := total * len(s.Nodes()); runs > MaxFilterRuns {
		return Result{}, inputErr(reasonTooManyRuns, runs, MaxFilterRuns)
	}
	sim := &simulation{members: members, minCount: g.minCount(total)}
	cycle, err := sim.run(s.Clone(), pls)
	if err != nil {
		return Result{}, err
	}
	res := cycle.result()
	if !res.Fits {
		if res.Preemption, err = sim.preempt(s, pls); err != nil {
			return Result{}, err
		}
		cycle.explain(&res)
	}
	return res, nil
}

// placement is the nodes of one domain, sorted by name.
type placement struct {
	value string
	nodes []string
}

// placements groups the snapshot's nodes by their value of key, as TopologyPlacement's
// GeneratePlacements does (nodes without the label are in none); without a key, all
// nodes are one placement.
func placements(s *capacity.Snapshot, key string) []placement {
	if key == "" {
		return []placement{{nodes: s.Nodes()}}
	}
	index := map[string]int{}
	var out []placement
	for _, name := range s.Nodes() {
		v, ok := s.Node(name).Labels[key]
		if !ok {
			continue
		}
		i, seen := index[v]
		if !seen {
			i = len(out)
			index[v] = i
			out = append(out, placement{value: v})
		}
		out[i].nodes = append(out[i].nodes, name)
	}
	slices.SortFunc(out, func(a, b placement) int { return strings.Compare(a.value, b.value) })
	return out
}

// simulation is the gang and how to place it.
type simulation struct {
	members  []member
	minCount int
}

// cycle is one pod group scheduling cycle: every placement evaluated, the best chosen.
type cycle struct {
	evals []evaluation
	best  int   // index into evals; -1 when no placement fits
	tied  []int // the placements as good as best, best first
}

// run evaluates every placement on the scratch snapshot and chooses one, as
// podGroupSchedulingPlacementAlgorithm does.
func (sim *simulation) run(scratch *capacity.Snapshot, pls []placement) (*cycle, error) {
	st := newState(scratch)
	c := &cycle{best: -1}
	bestScore := int64(-1)
	var fits []int
	for _, pl := range pls {
		ev, err := sim.evaluate(st, pl)
		if err != nil {
			return nil, err
		}
		if ev.success {
			fits = append(fits, len(c.evals))
		}
		c.evals = append(c.evals, ev)
	}
	maxPods := 0
	for _, i := range fits {
		maxPods = max(maxPods, c.evals[i].placed)
	}
	for _, i := range fits {
		score := int64(c.evals[i].placed*maxScore/maxPods) + st.sc.placementScore(sim.members, c.evals[i])
		switch {
		case score > bestScore:
			c.best, bestScore, c.tied = i, score, []int{i}
		case score == bestScore:
			c.tied = append(c.tied, i)
		}
	}
	return c, nil
}

// choices are the values of the placements tied for best.
func (c *cycle) choices() []string {
	var out []string
	for _, i := range c.tied {
		out = append(out, c.evals[i].placement.value)
	}
	return out
}

// result is the cycle's answer before preemption.
func (c *cycle) result() Result {
	var res Result
	for _, ev := range c.evals {
		res.Domains = append(res.Domains, ev.domain())
	}
	if c.best < 0 {
		return res
	}
	ev := c.evals[c.best]
	res.Fits, res.Domain, res.Choices = true, ev.placement.value, c.choices()
	for _, o := range ev.outcomes {
		p := Pod{Name: o.pod, Template: o.template, Node: o.node, Message: o.message}
		if o.node != "" {
			p.Domain = ev.placement.value
		}
		res.Pods = append(res.Pods, p)
	}
	return res
}

// groupStatus is the status the cycle ends with when no placement fits and the scheduler
// reports placement k: the message of the PodGroup's condition before the preemption part.
func (c *cycle) groupStatus(k int) string {
	return msgUnschedulable + ", " + fmt.Sprintf(msgPlacements, len(c.evals), c.evals[k].status)
}

// explain writes what the scheduler says of a gang that does not fit: the condition and
// each pod's FailedScheduling text. The scheduler reports the placement it evaluated first,
// the first of a map's iteration: Message and each pod's Message are those of the first
// placement by name, Messages every text the condition and each event may carry.
func (c *cycle) explain(res *Result) {
	pre := res.Preemption
	res.Pods = make([]Pod, len(c.evals[0].outcomes))
	for j, o := range c.evals[0].outcomes {
		res.Pods[j] = Pod{Name: o.pod, Template: o.template, Nominated: pre.nominated[o.pod]}
	}
	for k := range c.evals {
		group := c.groupStatus(k)
		for _, preMessage := range pre.Messages {
			r := report{group: group, message: group + ", " + preMessage, waiting: len(pre.Victims) > 0}
			r.wrapped = msgUnschedulable + ", " + r.message
			res.Messages = addMessage(res.Messages, r.message)
			for j := range res.Pods {
				res.Pods[j].Messages = addMessage(res.Pods[j].Messages, r.pod(c.evals[k], j))
			}
		}
	}
	res.Message = res.Messages[0]
	for j := range res.Pods {
		res.Pods[j].Message = res.Pods[j].Messages[0]
	}
}

// report is what the scheduler says when it reports one placement: the group's status
// before preemption, the condition's message, and that message as a placed pod's event
// wraps it.
type report struct {
	group, message, wrapped string
	waiting                 bool // preemption found victims
}

// pod is the FailedScheduling text of the placement's pod j.
func (r report) pod(ev evaluation, j int) string {
	o := ev.outcomes[j]
	switch {
	case j >= ev.cut:
		// Never tried: the group's status as it was before preemption.
		return r.group
	case o.node == "":
		return o.message
	case r.waiting:
		return r.message
	default:
		// Placed, then the group failed: the scheduler wraps the group's message in its
		// own status, whose error repeats the first words.
		return r.wrapped
	}
}

// addMessage appends m to ms unless it is there already.
func addMessage(ms []string, m string) []string {
	if slices.Contains(ms, m) {
		return ms
	}
	return append(ms, m)
}
