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

// Package dispatch answers the fleet hub's dispatch question (docs/design/hub.md, "The
// question, precisely"): would all of a Kueue Workload's pods start on a worker cluster now,
// counting whole GPUs, from nothing but the worker's GpuInventory status; and which workers
// are best. Pure: no API calls, no clock.
package dispatch

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Verdict is a worker's answer to a Workload.
type Verdict int

// Verdicts, worst first.
const (
	DoesNotFit Verdict = iota
	// FitsUncertain: it fits on what the status shows, but the status does not show
	// everything the answer needs (a taint on part of the nodes, quota not listed, topology
	// domains not listed).
	FitsUncertain
	Fits
)

func (v Verdict) String() string {
	switch v {
	case Fits:
		return "fits"
	case FitsUncertain:
		return "fits, uncertain"
	}
	return "does not fit"
}

// Worker is what the hub knows of one worker cluster.
type Worker struct {
	// Name is the worker's MultiKueueCluster name.
	Name string
	// Unavailable says why nothing may be sent there now (unreachable, stale, not a member,
	// not Active); "" when something may.
	Unavailable string
	// Status is the worker's GpuInventory status as last read; nil when never read.
	Status *homelabv1.GpuInventoryStatus
}

// Answer is one worker's answer to one Workload.
type Answer struct {
	Worker  string
	Verdict Verdict
	// Reason says why it does not fit, or why the fit is uncertain; "" for a certain fit.
	Reason string
	// PreferredMet counts the pod sets whose preferred topology one domain takes.
	PreferredMet int
	// LeftFree is the free GPUs the placement leaves on the nodes it takes.
	LeftFree int64
	// PendingGpus is what waiting pods on the worker already ask of the models used.
	PendingGpus int64
}

// Judge answers whether all of req fits on w now, after the assumed placements of earlier
// nominations to w (in order; one that no longer fits is left out).
func Judge(req Request, w Worker, assumed []Request) Answer {
	a := Answer{Worker: w.Name}
	if w.Unavailable != "" {
		a.Reason = w.Unavailable
		return a
	}
	if w.Status == nil {
		a.Reason = "its GpuInventory has not been read"
		return a
	}
	s := newState(w.Status)
	for _, r := range assumed {
		if p := s.judge(r); p.ok {
			s = p.state
		}
	}
	p := s.judge(req)
	if !p.ok {
		a.Reason = p.reason
		return a
	}
	a.Verdict, a.PreferredMet, a.LeftFree, a.PendingGpus = Fits, p.preferred, p.left, p.pending
	if len(p.uncertain) > 0 {
		a.Verdict, a.Reason = FitsUncertain, strings.Join(p.uncertain, "; ")
	}
	return a
}

// placement is the outcome of placing a request or a pod set on a state.
type placement struct {
	state     *state
	ok        bool
	reason    string
	uncertain []string
	preferred int
	left      int64
	pending   int64
}

// better orders placements: certain first, preferred topology met, the least left free.
func better(a, b *placement) bool {
	if (len(a.uncertain) == 0) != (len(b.uncertain) == 0) {
		return len(a.uncertain) == 0
	}
	if a.preferred != b.preferred {
		return a.preferred > b.preferred
	}
	return a.left < b.left
}

// judge places every pod set of req, each on the model that suits it best, on a copy of s.
func (s *state) judge(req Request) placement {
	cur := placement{state: s, ok: true}
	for _, ask := range req.Sets {
		best, reason := cur.state.bestModel(ask, req.ClusterQueue)
		if best == nil {
			return placement{reason: reason}
		}
		cur.state = best.state
		cur.uncertain = append(cur.uncertain, best.uncertain...)
		cur.preferred += best.preferred
		cur.left += best.left
		cur.pending += best.pending
	}
	if cur.state == s {
		cur.state = s.clone()
	}
	slices.Sort(cur.uncertain)
	cur.uncertain = slices.Compact(cur.uncertain)
	return cur
}

// bestModel places one pod set on each model it may use and keeps the best placement; nil
// and the reasons when no model takes it.
func (s *state) bestModel(ask Ask, queue string) (*placement, string) {
	models, reason := s.candidates(ask, queue)
	if len(models) == 0 {
		return nil, reason
	}
	var best *placement
	var reasons []string
	for _, m := range models {
		p := s.clone().placeOn(m, ask, queue)
		if !p.ok {
			reasons = append(reasons, p.reason)
			continue
		}
		if best == nil || better(&p, best) {
			best = &p
		}
	}
	if best == nil {
		if len(reasons) > 3 {
			reasons = append(reasons[:3], fmt.Sprintf("%d more models", len(reasons)-3))
		}
		return nil, strings.Join(reasons, "; ")
	}
	return best, ""
}

// candidates are the models a pod set may land on: those it pins, else those its
// ClusterQueue has quota in, else every model of the worker.
func (s *state) candidates(ask Ask, queue string) ([]string, string) {
	if ask.Models != nil {
		var in []string
		for _, m := range ask.Models {
			if s.models[m] != nil {
				in = append(in, m)
			}
		}
		if len(in) == 0 {
			return nil, fmt.Sprintf("pod set %s asks for %s; the worker has %s", ask.Name, orList(ask.Models), andList(s.order))
		}
		return in, ""
	}
	if s.quota != nil {
		var quoted []string
		for _, row := range s.quota.queues[queue] {
			for _, m := range row.models {
				if s.models[m] != nil && !slices.Contains(quoted, m) {
					quoted = append(quoted, m)
				}
			}
		}
		if len(quoted) > 0 {
			return quoted, ""
		}
	}
	if len(s.order) == 0 {
		return nil, "the worker has no GPU node"
	}
	return s.order, ""
}

// placeOn places one pod set on model m of s (s is the placement's own copy).
func (s *state) placeOn(m string, ask Ask, queue string) placement {
	p := placement{state: s, ok: true, pending: int64(s.models[m].pending)}
	if reason, uncertain := s.models[m].tainted(m, ask.Tolerations); reason != "" {
		return placement{reason: reason}
	} else if uncertain != "" {
		p.uncertain = append(p.uncertain, uncertain)
	}
	var res placed
	switch {
	case ask.Required != "" || ask.SliceLevel != "":
		if res = s.placeInDomains(m, ask, ask.Required); !res.ok && res.unlisted != "" {
			unlisted := res.unlisted
			if res = s.placeOnModel(m, ask); res.ok {
				res.uncertain = unlisted
			}
		}
	case ask.Preferred != "":
		if res = s.placeInDomains(m, ask, ask.Preferred); res.ok {
			p.preferred = 1
		} else {
			res = s.placeOnModel(m, ask)
		}
	default:
		res = s.placeOnModel(m, ask)
	}
	if !res.ok {
		return placement{reason: res.reason}
	}
	p.left = res.left
	if res.uncertain != "" {
		p.uncertain = append(p.uncertain, res.uncertain)
	}
	reason, uncertain := s.quota.take(queue, m, int64(ask.Pods)*int64(ask.Gpus))
	if reason != "" {
		return placement{reason: reason}
	}
	if uncertain != "" {
		p.uncertain = append(p.uncertain, uncertain)
	}
	return p
}

// tainted is why no pod of the set lands on the model's nodes (a taint not tolerated on
// every node a pod can land on), or why that is uncertain (on some of them).
func (m *modelState) tainted(model string, tolerations []corev1.Toleration) (reason, uncertain string) {
	var partial []string
	for _, t := range m.taints {
		if tolerates(tolerations, t.Taint) {
			continue
		}
		if m.ready > 0 && t.Nodes >= m.ready {
			return fmt.Sprintf("%s: every node is tainted %s, which the pods do not tolerate", model, t.Taint), ""
		}
		partial = append(partial, fmt.Sprintf("%s on %d of %d nodes", t.Taint, t.Nodes, m.ready))
	}
	if len(m.taints) >= maxModelTaints {
		partial = append(partial, "more taints than the status lists")
	}
	if len(partial) > 0 {
		return "", fmt.Sprintf("%s: taints not tolerated: %s", model, strings.Join(partial, ", "))
	}
	return "", ""
}

func orList(s []string) string  { return joinList(s, "or") }
func andList(s []string) string { return joinList(s, "and") }

func joinList(s []string, word string) string {
	switch len(s) {
	case 0:
		return "no GPU model"
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " " + word + " " + s[len(s)-1]
}

// Rank orders answers best first (docs/design/hub.md, "Ranking"): certain fits, then
// uncertain ones, then those that do not fit; among fits, the most preferred topologies
// met, the least free left on the nodes taken, the least pending GPUs; then by name.
func Rank(answers []Answer) {
	slices.SortStableFunc(answers, func(a, b Answer) int {
		return cmp.Or(
			cmp.Compare(b.Verdict, a.Verdict),
			cmp.Compare(b.PreferredMet, a.PreferredMet),
			cmp.Compare(a.LeftFree, b.LeftFree),
			cmp.Compare(a.PendingGpus, b.PendingGpus),
			strings.Compare(a.Worker, b.Worker))
	})
}

// Choose is the workers to nominate from ranked answers: the best n that fit for certain,
// else the best n that fit at all.
func Choose(ranked []Answer, n int) []string {
	var out []string
	for _, want := range []Verdict{Fits, FitsUncertain} {
		for _, a := range ranked {
			if a.Verdict == want && len(out) < n {
				out = append(out, a.Worker)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}
