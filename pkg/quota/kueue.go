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

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

// kueueModel is Kueue's GPU quota as rows per queue, per cohort tree and per model, judged.
type kueueModel struct {
	queues, cohorts, models *rowSet
	own                     *rowSet // Cohort objects' own quota, for stranded quota
	clusterQueues, roots    int
	strandedNodes           int
	overcommitted, stranded []string
}

func (r *reader) kueueModel(f *forest, h *hardware) *kueueModel {
	m := &kueueModel{queues: newRowSet(), cohorts: newRowSet(), models: newRowSet(), own: newRowSet()}
	roots := map[*member]bool{}
	for _, q := range f.queues {
		if len(q.entries) > 0 {
			m.clusterQueues++
			roots[q.root()] = true
			m.addQueue(r, f, h, q)
		}
	}
	for _, c := range f.cohorts {
		if len(c.entries) > 0 {
			roots[c.root()] = true
		}
		for _, fr := range c.entries {
			model := h.ofFlavor(fr).model
			for _, rw := range []*row{m.cohorts.get(c.root(), model, fr.resource), m.models.get(nil, model, fr.resource), m.own.get(c, model, fr.resource)} {
				rw.addFlavor(fr.flavor)
				rw.nominal = saturating.Add(rw.nominal, c.quotas[fr].nominal)
			}
		}
	}
	m.roots = len(roots)
	for _, set := range []*rowSet{m.queues, m.cohorts, m.models, m.own} {
		for _, rw := range set.list {
			rw.hw = h.figuresOf(rw.flavors, rw.resource)
			rw.reached = rw.hw
		}
	}
	if m.clusterQueues > 0 {
		m.strandedHardware(f, h)
	}
	m.judge()
	return m
}

// addQueue adds one ClusterQueue's quota, borrowing and usage to its rows.
func (m *kueueModel) addQueue(r *reader, f *forest, h *hardware, q *member) {
	reserved := r.usage(q.name, "flavorsReservation", q.queue.Reserved)
	used := r.usage(q.name, "flavorsUsage", q.queue.Used)
	root := q.root()
	for _, fr := range q.entries {
		model := h.ofFlavor(fr).model
		own := m.queues.get(q, model, fr.resource)
		own.borrowable = saturating.Add(own.borrowable, f.borrowable(q, fr))
		for _, rw := range []*row{own, m.cohorts.get(root, model, fr.resource), m.models.get(nil, model, fr.resource)} {
			rw.addFlavor(fr.flavor)
			rw.addQueue(q)
			rw.nominal = saturating.Add(rw.nominal, q.quotas[fr].nominal)
			rw.reserved = saturating.Add(rw.reserved, reserved[fr])
			rw.used = saturating.Add(rw.used, used[fr])
		}
	}
}

// strandedNamed is how many stranded nodes a finding names.
const strandedNamed = 5

// strandedHardware finds the GPU nodes no flavor of a ClusterQueue with GPU quota selects,
// adds them to their model's rows and says which of them are Ready.
func (m *kueueModel) strandedHardware(f *forest, h *hardware) {
	covered := newNodeSet(h.n)
	for _, q := range f.queues {
		for _, fr := range q.entries {
			if s, ok := h.flavors[fr.flavor]; ok {
				covered.or(s)
			}
		}
	}
	uncovered := slices.Clone(h.gpu)
	for i := range uncovered {
		uncovered[i] &^= covered[i]
	}
	stranded := slices.Clone(uncovered)
	stranded.and(h.ready)
	m.strandedNodes = stranded.count()
	resources := sortedResources(h)
	var parts []string
	for _, p := range h.products {
		sel := slices.Clone(uncovered)
		sel.and(h.byProduct[p])
		units := m.addUncovered(h, p, sel, resources)
		sel.and(h.ready)
		if n := sel.count(); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s (%s)", n, p, strings.Join(units, ", ")))
		}
	}
	if m.strandedNodes > 0 {
		subject := fmt.Sprintf("%d Ready GPU nodes are", m.strandedNodes)
		if m.strandedNodes == 1 {
			subject = "1 Ready GPU node is"
		}
		var named []string
		for _, i := range stranded.first(strandedNamed) {
			named = append(named, h.names[i])
		}
		if m.strandedNodes > len(named) {
			named = append(named, "...")
		}
		m.stranded = append(m.stranded, fmt.Sprintf("%s selected by no ResourceFlavor of a ClusterQueue with GPU quota: %s (%s)",
			subject, strings.Join(parts, ", "), strings.Join(named, ", ")))
	}
}

// addUncovered adds the unselected nodes of one product to its model rows and returns their
// Ready units per resource, as a finding tells them.
func (m *kueueModel) addUncovered(h *hardware, product string, sel nodeSet, resources []corev1.ResourceName) []string {
	var units []string
	for _, res := range resources {
		f := h.sum(sel, res)
		if f.capacity == 0 {
			continue
		}
		rw := m.models.get(nil, product, res)
		all := h.union(rw.flavors)
		all.or(sel)
		rw.hw = h.sum(all, res)
		rw.strandedReady = f.ready
		if f.ready > 0 {
			units = append(units, fmt.Sprintf("%d %s", f.ready, res))
		}
	}
	return units
}

func sortedResources(h *hardware) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(h.resources))
	for r := range h.resources {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// judge sets every row's finding and writes the findings' lines.
func (m *kueueModel) judge() {
	sortRows(m.cohorts.list)
	over := map[rowKey][]string{} // per (model, resource): the overcommitted cohorts
	for _, rw := range m.cohorts.list {
		switch {
		case rw.model == "" && rw.nominal > 0:
			rw.finding = homelabv1.QuotaFindingStranded
		case rw.model != "" && rw.nominal > rw.hw.ready:
			rw.finding = homelabv1.QuotaFindingOvercommitted
			k := rowKey{nil, rw.model, rw.resource}
			over[k] = append(over[k], rw.owner.name)
			m.overcommitted = append(m.overcommitted, fmt.Sprintf("%s: quota %d %s of %s, more than the %d Ready its flavors reach",
				rw.label(), rw.nominal, rw.resource, rw.model, rw.hw.ready))
		}
	}
	sortRows(m.queues.list)
	for _, rw := range m.queues.list {
		switch {
		case rw.model == "" && rw.nominal > 0:
			rw.finding = homelabv1.QuotaFindingStranded
			m.stranded = append(m.stranded, fmt.Sprintf("ClusterQueue %s: quota %d %s in ResourceFlavors %s reaches no node with %s",
				rw.owner.name, rw.nominal, rw.resource, strings.Join(rw.flavors, ", "), rw.resource))
		case m.cohorts.byKey[rowKey{rw.owner.root(), rw.model, rw.resource}].finding == homelabv1.QuotaFindingOvercommitted:
			rw.finding = homelabv1.QuotaFindingOvercommitted
		}
	}
	sortRows(m.own.list)
	for _, rw := range m.own.list {
		if rw.model == "" && rw.nominal > 0 {
			m.stranded = append(m.stranded, fmt.Sprintf("Cohort %s: its own quota %d %s in ResourceFlavors %s reaches no node with %s",
				rw.owner.name, rw.nominal, rw.resource, strings.Join(rw.flavors, ", "), rw.resource))
		}
	}
	m.judgeModels(over)
}

// judgeModels marks a model overcommitted when one of its cohorts is, or when its cohorts
// together promise more than the Ready hardware their flavors reach.
func (m *kueueModel) judgeModels(over map[rowKey][]string) {
	sortRows(m.models.list)
	for _, rw := range m.models.list {
		switch {
		case rw.model == "":
			if rw.nominal > 0 {
				rw.finding = homelabv1.QuotaFindingStranded
			}
		case len(over[rowKey{nil, rw.model, rw.resource}]) > 0:
			rw.finding = homelabv1.QuotaFindingOvercommitted
		case rw.nominal > rw.reached.ready:
			rw.finding = homelabv1.QuotaFindingOvercommitted
			m.overcommitted = append(m.overcommitted, fmt.Sprintf("%s, %s: cohorts %s together hold quota %d, more than the %d Ready their flavors reach",
				rw.model, rw.resource, listNames(m.cohortsOf(rw), 8), rw.nominal, rw.reached.ready))
		case rw.strandedReady > 0:
			rw.finding = homelabv1.QuotaFindingStranded
		}
	}
}

// cohortsOf names the cohorts with quota in a model row.
func (m *kueueModel) cohortsOf(model *row) []string {
	var names []string
	for _, rw := range m.cohorts.list {
		if rw.model == model.model && rw.resource == model.resource {
			names = append(names, rw.owner.name)
		}
	}
	slices.Sort(names)
	return names
}
