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

package dispatch

import (
	"fmt"
	"slices"
)

// placed is the outcome of placing one pod set on one model.
type placed struct {
	ok     bool
	reason string
	left   int64
	// uncertain says why a fit is uncertain; unlisted, why a failure in the listed domains
	// is (the level has domains the status does not list).
	uncertain, unlisted string
}

// placeOnModel places the pod set on the model's nodes, wherever they are.
func (s *state) placeOnModel(m string, ask Ask) placed {
	h := s.models[m].free
	before := h.String()
	n, left, _ := h.place(int64(ask.Pods), int(ask.Gpus))
	if n < int64(ask.Pods) {
		return placed{reason: fmt.Sprintf("%s: %d of %d pods of %d GPUs fit (%s)", m, n, ask.Pods, ask.Gpus, before)}
	}
	return placed{ok: true, left: left}
}

// placeInDomains places the pod set inside one domain of level (when set), its slices
// each inside one domain of the slice level (when set), and takes the GPUs from those
// domains, their ancestors and the model. s changes only when it fits.
func (s *state) placeInDomains(m string, ask Ask, level string) placed {
	outer, inner, reason := s.levels(level, ask.SliceLevel)
	if reason != "" {
		return placed{reason: reason}
	}
	var best *domainFit
	mostPods, mostIn := int64(-1), ""
	for _, d := range outerDomains(outer, level) {
		fit := s.fitIn(d, inner, m, ask)
		if fit.pods > mostPods && d != nil {
			mostPods, mostIn = fit.pods, d.name
		}
		if fit.ok && (best == nil || fit.left < best.left) {
			best = &fit
		}
	}
	if best != nil {
		s.commit(m, best)
		return placed{ok: true, left: best.left}
	}
	res := placed{reason: s.noDomain(m, ask, level, mostIn, mostPods)}
	if t, li := s.levelOf(cmpOr(ask.SliceLevel, level)); t != nil && t.listed[li] < t.counts[li] {
		res.unlisted = fmt.Sprintf("%s: %d of the %d domains of %s are listed and none takes pod set %s",
			m, t.listed[li], t.counts[li], t.levels[li], ask.Name)
	}
	return res
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (s *state) noDomain(m string, ask Ask, level, mostIn string, mostPods int64) string {
	if ask.SliceLevel != "" {
		return fmt.Sprintf("%s: no domain of %s takes %d slices of %d pods of %d GPUs", m,
			cmpOr(level, "the topology"), ask.Pods/ask.SliceSize, ask.SliceSize, ask.Gpus)
	}
	most := ""
	if mostIn != "" {
		most = fmt.Sprintf(" (the most: %s, %d)", mostIn, mostPods)
	}
	return fmt.Sprintf("%s: no %s takes %d pods of %d GPUs%s", m, level, ask.Pods, ask.Gpus, most)
}

// levels finds the levels of a request in the worker's topology: the one the pod set must
// fit in (-1: none) and the one its slices must (-1: none), in one tree.
func (s *state) levels(level, slice string) (outer, inner levelRef, reason string) {
	outer, inner = levelRef{index: -1}, levelRef{index: -1}
	for _, l := range []struct {
		key string
		ref *levelRef
	}{{level, &outer}, {slice, &inner}} {
		if l.key == "" {
			continue
		}
		t, i := s.levelOf(l.key)
		if t == nil {
			return outer, inner, fmt.Sprintf("no topology of the worker has level %s", l.key)
		}
		*l.ref = levelRef{tree: t, index: i}
	}
	if outer.tree != nil && inner.tree != nil && outer.tree != inner.tree {
		return outer, inner, fmt.Sprintf("levels %s and %s are not in one topology of the worker", level, slice)
	}
	return outer, inner, ""
}

type levelRef struct {
	tree  *tree
	index int
}

// outerDomains are the domains the whole pod set may go into: those of the level, or one
// nil standing for the whole topology.
func outerDomains(outer levelRef, level string) []*domain {
	if outer.tree == nil {
		return []*domain{nil}
	}
	var out []*domain
	for _, d := range outer.tree.domains {
		if d.level == outer.index && level != "" {
			out = append(out, d)
		}
	}
	return out
}

// domainFit is a pod set placed inside a domain: the moves per domain the pods went to.
type domainFit struct {
	ok    bool
	pods  int64
	left  int64
	moves map[*domain][]move
}

// fitIn places the pod set inside d (nil: anywhere in the topology), in slices inside
// domains of the inner level when it has one; on copies of the domains' counts.
func (s *state) fitIn(d *domain, inner levelRef, m string, ask Ask) domainFit {
	fit := domainFit{moves: map[*domain][]move{}}
	if inner.tree == nil {
		h := d.models[m].clone()
		n, left, moves := h.place(int64(ask.Pods), int(ask.Gpus))
		fit.pods, fit.left, fit.ok = n, left, n == int64(ask.Pods)
		fit.moves[d] = moves
		return fit
	}
	work := map[*domain]hist{}
	var slicesIn []*domain
	for _, c := range inner.tree.domains {
		if c.level == inner.index && (d == nil || c.under(d)) && c.models[m] != nil {
			slicesIn = append(slicesIn, c)
			work[c] = c.models[m].clone()
		}
	}
	for range ask.Pods / ask.SliceSize {
		var bestIn *domain
		var bestLeft int64
		for _, c := range slicesIn {
			h := work[c].clone()
			if n, left, _ := h.place(int64(ask.SliceSize), int(ask.Gpus)); n == int64(ask.SliceSize) && (bestIn == nil || left < bestLeft) {
				bestIn, bestLeft = c, left
			}
		}
		if bestIn == nil {
			return fit
		}
		_, left, moves := work[bestIn].place(int64(ask.SliceSize), int(ask.Gpus))
		fit.pods += int64(ask.SliceSize)
		fit.left += left
		fit.moves[bestIn] = append(fit.moves[bestIn], moves...)
	}
	fit.ok = true
	return fit
}

// commit takes a domain placement's GPUs from the domains the pods went to, their
// ancestors, and the model.
func (s *state) commit(m string, fit *domainFit) {
	for d, moves := range fit.moves {
		if d == nil {
			continue
		}
		for x := d; x != nil; x = x.parent {
			if h := x.models[m]; h != nil {
				h.apply(moves)
			}
		}
		s.models[m].free.apply(moves)
	}
}

// take takes n GPUs of model m from ClusterQueue queue's quota: why it has too little, or
// why that is unknown. A nil quota (the status has none) is unknown.
func (q *quotaState) take(queue, m string, n int64) (reason, uncertain string) {
	if q == nil {
		return "", "quota: the worker's inventory shows none"
	}
	if queue == "" {
		return "", "quota: the Workload has no ClusterQueue yet"
	}
	rows := q.queues[queue]
	i := slices.IndexFunc(rows, func(r *queueQuota) bool { return slices.Contains(r.models, m) })
	if i < 0 {
		if len(rows) > 0 {
			return fmt.Sprintf("quota: ClusterQueue %s has no nvidia.com/gpu quota for %s", queue, m), ""
		}
		return "", fmt.Sprintf("quota: the worker's inventory does not list ClusterQueue %s", queue)
	}
	row := rows[i]
	if n <= row.left {
		row.left -= n
		return "", ""
	}
	need := n - max(row.left, 0)
	cohort := q.cohorts[row.cohort+"\x00"+m]
	if row.borrowable > 0 && row.cohort != "" && cohort == nil {
		row.left -= n
		return "", fmt.Sprintf("quota: ClusterQueue %s would borrow %d from cohort %s, which the inventory does not list", queue, need, row.cohort)
	}
	canBorrow := int64(0)
	if cohort != nil {
		canBorrow = min(row.borrowable, max(cohort.unused, 0))
	}
	if need > canBorrow {
		return fmt.Sprintf("quota: ClusterQueue %s has %d nvidia.com/gpu of %s left, %d asked", queue, max(row.left, 0)+canBorrow, m, n), ""
	}
	row.left -= n
	cohort.unused -= need
	return "", ""
}
