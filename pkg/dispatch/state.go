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
	"maps"
	"strings"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// maxModelTaints is how many taints a model's status lists (the most common first).
const maxModelTaints = 8

// state is what a worker's GpuInventory status says is free, as the placements of a
// question and of earlier nominations use it up.
type state struct {
	models map[string]*modelState
	order  []string // models in the status's order
	trees  []*tree
	quota  *quotaState // nil: the status says nothing of quota
}

type modelState struct {
	free    hist
	taints  []homelabv1.TaintCount
	ready   int32 // Ready nodes: a taint on as many is on every node a pod can land on
	pending int32
}

type tree struct {
	name    string
	levels  []string
	counts  []int32 // domains per level, exact
	listed  []int32 // domains per level the status lists
	domains []*domain
}

type domain struct {
	level  int
	name   string
	parent *domain
	models map[string]hist
}

// quotaState is the worker's ClusterQueues' nvidia.com/gpu quota per model.
type quotaState struct {
	queues  map[string][]*queueQuota // by ClusterQueue
	cohorts map[string]*cohortQuota  // by cohort and model: cohort + "\x00" + model
}

type queueQuota struct {
	models     []string
	cohort     string
	left       int64 // nominal - reserved
	borrowable int64
}

type cohortQuota struct{ unused int64 }

// newState reads a status.
func newState(st *homelabv1.GpuInventoryStatus) *state {
	s := &state{models: map[string]*modelState{}}
	for i := range st.Models {
		m := &st.Models[i]
		if m.Product == "" {
			continue
		}
		s.models[m.Product] = &modelState{free: histOf(m.FreeNodes), taints: m.Taints, ready: m.ReadyNodes, pending: m.PendingGpus}
		s.order = append(s.order, m.Product)
	}
	if st.Topology != nil {
		for i := range st.Topology.Topologies {
			s.trees = append(s.trees, treeOf(&st.Topology.Topologies[i]))
		}
	}
	if st.Quota != nil {
		s.quota = quotaOf(st.Quota)
	}
	return s
}

func treeOf(t *homelabv1.TopologyTree) *tree {
	tr := &tree{name: t.Name}
	index := map[string]int{}
	for i, l := range t.Levels {
		tr.levels = append(tr.levels, l.Key)
		tr.counts = append(tr.counts, l.Domains)
		index[l.Key] = i
	}
	tr.listed = make([]int32, len(tr.levels))
	byLevel := map[int]map[string]*domain{}
	for i := range t.Domains {
		d := &t.Domains[i]
		level, ok := index[d.Level]
		if !ok {
			continue
		}
		dom := &domain{level: level, name: d.Name, models: map[string]hist{}}
		for j := range d.Models {
			dom.models[d.Models[j].Model] = histOf(d.Models[j].FreeNodes)
		}
		tr.domains = append(tr.domains, dom)
		tr.listed[level]++
		if byLevel[level] == nil {
			byLevel[level] = map[string]*domain{}
		}
		byLevel[level][d.Name] = dom
	}
	for i, dom := range tr.domains {
		if dom.level > 0 && t.Domains[i].Parent != "" {
			dom.parent = byLevel[dom.level-1][t.Domains[i].Parent]
		}
	}
	return tr
}

func quotaOf(q *homelabv1.GpuQuota) *quotaState {
	qs := &quotaState{queues: map[string][]*queueQuota{}, cohorts: map[string]*cohortQuota{}}
	for _, row := range q.Queues {
		if row.Resource != allocation.ResourceGPU {
			continue
		}
		qs.queues[row.Name] = append(qs.queues[row.Name], &queueQuota{models: strings.Split(row.Model, "+"),
			cohort: row.Cohort, left: row.Nominal - row.Reserved, borrowable: row.Borrowable})
	}
	for _, row := range q.CohortModels {
		if row.Resource != allocation.ResourceGPU {
			continue
		}
		for _, m := range strings.Split(row.Model, "+") {
			qs.cohorts[row.Cohort+"\x00"+m] = &cohortQuota{unused: row.Nominal - row.Reserved}
		}
	}
	return qs
}

// clone copies what placements change: the histograms and the quota left.
func (s *state) clone() *state {
	c := &state{models: make(map[string]*modelState, len(s.models)), order: s.order}
	for name, m := range s.models {
		mc := *m
		mc.free = m.free.clone()
		c.models[name] = &mc
	}
	for _, t := range s.trees {
		c.trees = append(c.trees, t.clone())
	}
	if s.quota != nil {
		c.quota = s.quota.clone()
	}
	return c
}

func (t *tree) clone() *tree {
	c := *t
	c.domains = make([]*domain, len(t.domains))
	copies := make(map[*domain]*domain, len(t.domains))
	for i, d := range t.domains {
		dc := &domain{level: d.level, name: d.name, models: make(map[string]hist, len(d.models))}
		for m, h := range d.models {
			dc.models[m] = h.clone()
		}
		c.domains[i], copies[d] = dc, dc
	}
	for i, d := range t.domains {
		if d.parent != nil {
			c.domains[i].parent = copies[d.parent]
		}
	}
	return &c
}

func (q *quotaState) clone() *quotaState {
	c := &quotaState{queues: make(map[string][]*queueQuota, len(q.queues)), cohorts: make(map[string]*cohortQuota, len(q.cohorts))}
	for name, rows := range q.queues {
		for _, r := range rows {
			rc := *r
			c.queues[name] = append(c.queues[name], &rc)
		}
	}
	for k, v := range maps.All(q.cohorts) {
		vc := *v
		c.cohorts[k] = &vc
	}
	return c
}

// levelOf is the first tree that has level key, and the level's index.
func (s *state) levelOf(key string) (*tree, int) {
	for _, t := range s.trees {
		for i, l := range t.levels {
			if l == key {
				return t, i
			}
		}
	}
	return nil, -1
}

// under reports whether d is anc or lies below it.
func (d *domain) under(anc *domain) bool {
	for x := d; x != nil; x = x.parent {
		if x == anc {
			return true
		}
	}
	return false
}
