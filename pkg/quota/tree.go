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

package quota

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

// flavorResource is one (flavor, resource) pair, the unit Kueue keeps quota in.
type flavorResource struct {
	flavor   string
	resource corev1.ResourceName
}

// limit is one GPU quota entry, read: negative values are 0.
type limit struct {
	nominal            int64
	borrowing, lending *int64
}

// member is a ClusterQueue or a Cohort (an object, or a name only: Kueue's implicit cohort)
// in a cohort tree.
type member struct {
	name   string
	queue  *ClusterQueue // nil for a cohort
	parent *member
	// entries are the GPU quota entries in the order given; quotas the same by key.
	entries []flavorResource
	quotas  map[flavorResource]limit
	// subtree is a Cohort's SubtreeQuota in Kueue: own nominal plus what children lend (a
	// ClusterQueue's is its nominal quota: see sub).
	subtree map[flavorResource]int64
	depth   int
}

func (m *member) root() *member {
	for m.parent != nil {
		m = m.parent
	}
	return m
}

// sub is the member's SubtreeQuota of fr.
func (m *member) sub(fr flavorResource) int64 {
	if m.queue != nil {
		return m.quotas[fr].nominal
	}
	return m.subtree[fr]
}

// local is Kueue's localQuota: what lendingLimit keeps inside this member's subtree.
func (m *member) local(fr flavorResource) int64 {
	if l := m.quotas[fr].lending; l != nil {
		return max(0, m.sub(fr)-*l)
	}
	return 0
}

// forest is Kueue's ClusterQueues and Cohorts as trees.
type forest struct {
	queues  []*member // sorted by name
	cohorts []*member // sorted by name, implicit ones included
	byName  map[string]*member
	memo    map[potentialKey]int64
}

type potentialKey struct {
	m  *member
	fr flavorResource
}

// cohort is the member of that name, made an implicit cohort when no object has it.
func (f *forest) cohort(name string) *member {
	if m, ok := f.byName[name]; ok {
		return m
	}
	m := &member{name: name, quotas: map[flavorResource]limit{}}
	f.byName[name] = m
	f.cohorts = append(f.cohorts, m)
	return m
}

// breakCycles makes every member of a parent cycle a root, as its own cohort: Kueue stops
// admitting to a cycle, so no member borrows from another.
func (f *forest) breakCycles() []string {
	var warnings []string
	state := map[*member]int{} // 1: on the current path, 2: done
	for _, c := range slices.Clone(f.cohorts) {
		var path []*member
		cur := c
		for cur != nil && state[cur] == 0 {
			state[cur] = 1
			path = append(path, cur)
			cur = cur.parent
		}
		if cur != nil && state[cur] == 1 {
			cycle := path[slices.Index(path, cur):]
			names := make([]string, len(cycle))
			for i, m := range cycle {
				names[i] = m.name
				m.parent = nil
			}
			slices.Sort(names)
			warnings = append(warnings, fmt.Sprintf("Cohorts %s form a parent cycle (Kueue admits nothing to them): each is counted as its own cohort", strings.Join(names, ", ")))
		}
		for _, m := range path {
			state[m] = 2
		}
	}
	return warnings
}

// accumulate computes every Cohort's subtree quota bottom-up, as Kueue does: a child gives
// its parent all of its subtree quota but what its lendingLimit keeps local. Queues are
// leaves, so they give first; then Cohorts, deepest first.
func (f *forest) accumulate() {
	for _, c := range f.cohorts {
		c.subtree = make(map[flavorResource]int64, len(c.quotas))
		for fr, l := range c.quotas {
			c.subtree[fr] = l.nominal
		}
		c.depth = 0
		for p := c.parent; p != nil; p = p.parent {
			c.depth++
		}
	}
	for _, q := range f.queues {
		if q.parent != nil {
			for _, fr := range q.entries {
				q.parent.subtree[fr] = saturating.Add(q.parent.subtree[fr], q.sub(fr)-q.local(fr))
			}
		}
	}
	cohorts := slices.Clone(f.cohorts)
	slices.SortStableFunc(cohorts, func(a, b *member) int { return b.depth - a.depth })
	for _, c := range cohorts {
		if c.parent != nil {
			for fr, v := range c.subtree {
				c.parent.subtree[fr] = saturating.Add(c.parent.subtree[fr], v-c.local(fr))
			}
		}
	}
}

// potential is Kueue's potentialAvailable: the most this member could use of fr with
// nothing else in use, through its ancestors and within every borrowingLimit on the way.
// Cohorts' answers are kept: their queues ask for the same.
func (f *forest) potential(m *member, fr flavorResource) int64 {
	if m.parent == nil {
		return m.sub(fr)
	}
	key := potentialKey{m, fr}
	if m.queue == nil {
		if v, ok := f.memo[key]; ok {
			return v
		}
	}
	v := saturating.Add(m.local(fr), f.potential(m.parent, fr))
	if b := m.quotas[fr].borrowing; b != nil {
		v = min(v, saturating.Add(m.sub(fr), *b))
	}
	if m.queue == nil {
		f.memo[key] = v
	}
	return v
}

// borrowable is what a ClusterQueue can borrow of fr on top of its nominal quota.
func (f *forest) borrowable(q *member, fr flavorResource) int64 {
	return max(0, f.potential(q, fr)-q.quotas[fr].nominal)
}
