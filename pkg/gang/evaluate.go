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
	"fmt"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
)

// outcome is what became of one pod in one placement.
type outcome struct {
	pod      string
	template int
	node     string // "" when no node of the placement takes it
	fit      capacity.Result
	message  string // the FailedScheduling text when no node takes it
}

// evaluation is one placement's run of the default pod group algorithm.
type evaluation struct {
	placement placement
	// outcomes are every pod's, each pod tried: the scheduler tries the first cut of
	// them, and decides those exactly as here, since a pod's node depends only on the
	// pods before it.
	outcomes []outcome
	placed   int // pods placed of all outcomes
	cut      int
	success  bool
	status   string // the placement's status when it fails
	held     string // the FailedScheduling text of the first pod that did not fit
}

// evaluate places the gang's pods one after the other on the placement's nodes,
// assuming each as the scheduler's snapshot does, then forgets them all, as
// podGroupSchedulingDefaultAlgorithm and the revert of each placement do.
func (sim *simulation) evaluate(st *state, pl placement) (evaluation, error) {
	ev := evaluation{placement: pl, outcomes: make([]outcome, len(sim.members))}
	// failed remembers, per template, the pod that found no node and how many pods were
	// placed then: a pod of the same template finds none either while nothing changes.
	type failure struct{ pod, placed int }
	failed := map[int]failure{}
	for j, m := range sim.members {
		ev.outcomes[j] = outcome{pod: m.pod.Name, template: m.template}
		if f, ok := failed[m.template]; ok && f.placed == ev.placed {
			ev.outcomes[j].message = ev.outcomes[f.pod].message
			continue
		}
		node, fit, msg, err := st.schedulePod(m, pl.nodes)
		if err != nil {
			sim.revert(st, ev.outcomes[:j])
			return ev, err
		}
		if node == "" {
			ev.outcomes[j].message = msg
			failed[m.template] = failure{pod: j, placed: ev.placed}
			if ev.held == "" {
				ev.held = msg
			}
			continue
		}
		st.assume(node, m, fit, 1)
		ev.outcomes[j].node, ev.outcomes[j].fit = node, fit
		ev.placed++
	}
	sim.revert(st, ev.outcomes)
	ev.judge(sim.minCount)
	return ev, nil
}

// revert forgets the placed pods of outcomes, the last first.
func (sim *simulation) revert(st *state, outcomes []outcome) {
	for j := len(outcomes) - 1; j >= 0; j-- {
		if o := outcomes[j]; o.node != "" {
			st.assume(o.node, sim.members[j], o.fit, -1)
		}
	}
}

// state is the scratch snapshot and what is kept beside it of the gang's assumed pods.
type state struct {
	s  *capacity.Snapshot
	sc *scorer
	pf *prefilter
}

func newState(s *capacity.Snapshot) *state {
	return &state{s: s, sc: newScorer(s), pf: newPrefilter(s)}
}

// assume assumes (sign 1) or forgets (-1) a gang pod on its node.
func (st *state) assume(node string, m member, fit capacity.Result, sign int64) {
	if sign > 0 {
		st.s.Assume(m.pod, fit)
	} else {
		st.s.Forget(m.pod, fit)
	}
	st.sc.assume(node, m, sign)
	st.pf.assume(node, m, sign)
}

// judge runs GangScheduling's PlacementFeasible after each pod, as the default algorithm
// does: the placement fails as soon as the pods left cannot bring the gang to minCount.
func (ev *evaluation) judge(minCount int) {
	remaining, scheduled := len(ev.outcomes), 0
	for j, o := range ev.outcomes {
		remaining--
		if o.node != "" {
			scheduled++
		}
		if remaining+scheduled < minCount {
			ev.cut = j + 1
			ev.status = fmt.Sprintf(msgMinCount, minCount, scheduled, remaining)
			return
		}
	}
	ev.cut, ev.success = len(ev.outcomes), true
}

// domain is what the evaluation says of its domain.
func (ev *evaluation) domain() Domain {
	return Domain{Value: ev.placement.value, Nodes: len(ev.placement.nodes), Pods: ev.placed, Held: ev.held, Status: ev.status}
}

// schedulePod is the scheduler's schedulingAlgorithm for one pod on the placement's
// nodes: every node through the filters, the feasible ones scored, the best chosen. A
// pod no node takes gets the FitError's text, without a preemption part (the pod group
// cycle runs no PostFilter per pod). Nodes the prefilter rejects skip the filters unless
// no node takes the pod, when every node's reasons make the text.
func (st *state) schedulePod(m member, nodes []string) (string, capacity.Result, string, error) {
	var feasible []capacity.Result
	for _, n := range nodes {
		if !st.pf.mayFit(n, m) {
			continue
		}
		r, err := st.fit(m, n)
		if err != nil {
			return "", capacity.Result{}, "", err
		}
		if r.Fits() {
			feasible = append(feasible, r)
		}
	}
	if len(feasible) > 0 {
		best := feasible[st.sc.pick(m, feasible)]
		return best.Node, best, "", nil
	}
	results := make([]capacity.Result, 0, len(nodes))
	for _, n := range nodes {
		r, err := st.fit(m, n)
		if err != nil {
			return "", capacity.Result{}, "", err
		}
		results = append(results, r)
	}
	return "", capacity.Result{}, capacity.Message(results), nil
}

func (st *state) fit(m member, node string) (capacity.Result, error) {
	r, err := st.s.Fit(m.pod, m.claims, node)
	if err != nil {
		return r, fmt.Errorf("%w: pod %s: %w", ErrInput, m.pod.Name, err)
	}
	return r, nil
}
