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
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

// reader reads the input, turning bad values into warnings and safe values.
type reader struct {
	isGPU    func(name string) bool
	flavors  map[string]bool // the ResourceFlavors that exist
	warnings []string
}

func (r *reader) warn(format string, args ...any) {
	r.warnings = append(r.warnings, fmt.Sprintf(format, args...))
}

// count is a quota or usage figure as counted: negative is 0 (Kueue's validation rejects it,
// but a figure read from a broken object must not subtract hardware).
// what names the object and entry a warning is about; it is only called for one.
func (r *reader) count(what func() string, field string, v int64) int64 {
	switch {
	case v < 0:
		r.warn("%s: %s is negative (%d); counted as 0", what(), field, v)
		return 0
	case v == math.MaxInt64:
		r.warn("%s: %s is too large to count; counted as %d", what(), field, v)
	}
	return v
}

func (r *reader) optional(what func() string, field string, v *int64) *int64 {
	if v == nil {
		return nil
	}
	c := r.count(what, field, *v)
	return &c
}

// limits reads a ClusterQueue's or Cohort's GPU quota entries; other resources are ignored.
func (r *reader) limits(kind, name string, in []Limit) ([]flavorResource, map[flavorResource]limit) {
	quotas := map[flavorResource]limit{}
	var entries []flavorResource
	warned := map[string]bool{}
	for _, l := range in {
		if !r.isGPU(string(l.Resource)) {
			continue
		}
		fr := flavorResource{l.Flavor, l.Resource}
		if _, dup := quotas[fr]; dup {
			r.warn("%s %s gives quota of %s in ResourceFlavor %q twice: the first counts", kind, name, l.Resource, l.Flavor)
			continue
		}
		if !r.flavors[l.Flavor] && !warned[l.Flavor] {
			warned[l.Flavor] = true
			r.warn("%s %s names ResourceFlavor %q, which does not exist: its quota reaches no node", kind, name, l.Flavor)
		}
		what := func() string { return fmt.Sprintf("%s %s, %s in ResourceFlavor %q", kind, name, l.Resource, l.Flavor) }
		quotas[fr] = limit{
			nominal:   r.count(what, "nominalQuota", l.Nominal),
			borrowing: r.optional(what, "borrowingLimit", l.BorrowingLimit),
			lending:   r.optional(what, "lendingLimit", l.LendingLimit),
		}
		entries = append(entries, fr)
	}
	return entries, quotas
}

// usage reads a ClusterQueue's status.flavorsReservation or status.flavorsUsage.
func (r *reader) usage(queue, field string, in []Usage) map[flavorResource]int64 {
	out := map[flavorResource]int64{}
	for _, u := range in {
		if !r.isGPU(string(u.Resource)) {
			continue
		}
		fr := flavorResource{u.Flavor, u.Resource}
		what := func() string {
			return fmt.Sprintf("ClusterQueue %s, %s in ResourceFlavor %q", queue, u.Resource, u.Flavor)
		}
		out[fr] = saturating.Add(out[fr], r.count(what, field, u.Total))
	}
	return out
}

// sortedUnique sorts items by name and drops a nameless item or a second of one name, with a
// warning: the API server allows neither, so only a broken reader gives them.
func sortedUnique[T any](r *reader, kind string, items []T, name func(*T) string) []*T {
	out := make([]*T, 0, len(items))
	for i := range items {
		out = append(out, &items[i])
	}
	slices.SortStableFunc(out, func(a, b *T) int { return cmp.Compare(name(a), name(b)) })
	kept := out[:0]
	for _, t := range out {
		switch {
		case name(t) == "":
			r.warn("a %s without a name is ignored", kind)
		case len(kept) > 0 && name(kept[len(kept)-1]) == name(t):
			r.warn("%s %s is given twice: the first counts", kind, name(t))
		default:
			kept = append(kept, t)
		}
	}
	return kept
}

// forestOf builds Kueue's cohort trees: Cohort objects with their parents, implicit cohorts
// for names no object has, ClusterQueues as leaves, cycles broken; then the subtree quotas.
func (r *reader) forestOf(k *Kueue) *forest {
	f := &forest{byName: map[string]*member{}, memo: map[potentialKey]int64{}}
	cohorts := sortedUnique(r, "Cohort", k.Cohorts, func(c *Cohort) string { return c.Name })
	for _, c := range cohorts {
		m := f.cohort(c.Name)
		m.entries, m.quotas = r.limits("Cohort", c.Name, c.Quotas)
	}
	for _, c := range cohorts {
		if c.Parent != "" {
			f.byName[c.Name].parent = f.cohort(c.Parent)
		}
	}
	for _, q := range sortedUnique(r, "ClusterQueue", k.ClusterQueues, func(q *ClusterQueue) string { return q.Name }) {
		m := &member{name: q.Name, queue: q}
		m.entries, m.quotas = r.limits("ClusterQueue", q.Name, q.Quotas)
		if q.Cohort != "" {
			m.parent = f.cohort(q.Cohort)
		}
		f.queues = append(f.queues, m)
	}
	slices.SortFunc(f.cohorts, func(a, b *member) int { return cmp.Compare(a.name, b.name) })
	r.warnings = append(r.warnings, f.breakCycles()...)
	f.accumulate()
	return f
}
