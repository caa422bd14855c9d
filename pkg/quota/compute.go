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
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// MaxRows is the most rows status.quota's bounded lists may hold (the CRD's maxItems).
const MaxRows = 32

// MaxModels is the most rows status.quota.models may hold (the CRD's maxItems).
const MaxModels = 64

// Result is quota against hardware, and what is wrong with it.
type Result struct {
	// Status is status.quota; nil when no quota names a GPU resource and Kueue is not served.
	Status *homelabv1.GpuQuota
	// Overcommitted has one line per cohort (or per resource of the ResourceQuotas) whose
	// quota for a model is larger than the Ready GPUs it reaches, naming its queues.
	Overcommitted []string
	// Stranded has one line for the Ready GPU nodes no flavor selects and one per quota no
	// node can serve.
	Stranded []string
	// Warnings has one line per piece of bad input (a negative quota, an unknown flavor, a
	// cohort cycle, ...); what it affects is counted as the line says.
	Warnings []string
}

// Compute puts the cluster's GPU quota beside the hardware it reaches. The lists of
// cohorts, queues and namespaces hold at most bound rows each (at most MaxRows), the
// largest quota first; every total is exact. The same input gives the same result.
func Compute(c Cluster, bound int) Result {
	bound = max(0, min(bound, MaxRows))
	dra := map[string]bool{}
	for _, name := range c.DRAResources {
		dra[string(name)] = true
	}
	r := &reader{isGPU: func(name string) bool { return allocation.IsGPUResource(name) || dra[name] }}
	h := newHardware(c.Nodes, func(name corev1.ResourceName) bool {
		return r.isGPU(string(name)) || len(name) > len(draQuotaSuffix) && strings.HasSuffix(string(name), draQuotaSuffix)
	})
	ns := r.namespaceModel(c.ResourceQuotas, h)
	var res Result
	if c.Kueue == nil && len(ns.rows) == 0 {
		res.Warnings = r.warnings
		return res
	}
	status := &homelabv1.GpuQuota{Namespaces: int32(ns.namespaces)}
	var models []*row
	if c.Kueue != nil {
		k := r.kueue(c.Kueue, c.Nodes, h)
		status.Kueue = c.Kueue.Version
		status.ClusterQueues, status.Cohorts, status.StrandedNodes = int32(k.clusterQueues), int32(k.roots), int32(k.strandedNodes)
		for _, rw := range first(k.cohorts.list, bound) {
			status.CohortModels = append(status.CohortModels, homelabv1.QuotaCohort{
				Cohort: rw.owner.name, Model: rw.model, Queues: first(rw.queues, 8), QuotaFigures: rw.figures()})
		}
		for _, rw := range first(k.queues.list, bound) {
			q := homelabv1.QuotaQueue{Name: rw.owner.name, Model: rw.model, Flavors: first(rw.flavors, 8), QuotaFigures: rw.figures()}
			if rw.owner.parent != nil {
				q.Cohort = rw.owner.root().name
			}
			status.Queues = append(status.Queues, q)
		}
		models = k.models.list
		res.Overcommitted, res.Stranded = k.overcommitted, k.stranded
	}
	status.Models = modelRows(models, ns.models)
	if n := len(models) + len(ns.models); n > MaxModels {
		r.warn("%d model rows of quota; status.quota.models lists the first %d", n, MaxModels)
	}
	status.NamespaceQuotas = first(ns.rows, bound)
	res.Status = status
	res.Overcommitted = append(res.Overcommitted, ns.overcommitted...)
	res.Stranded = append(res.Stranded, ns.stranded...)
	res.Warnings = r.warnings
	return res
}

// kueue reads Kueue's objects: the flavors against the nodes, the cohort trees, the rows.
func (r *reader) kueue(k *Kueue, nodes []Node, h *hardware) *kueueModel {
	flavors := sortedUnique(r, "ResourceFlavor", k.Flavors, func(f *Flavor) string { return f.Name })
	r.flavors = make(map[string]bool, len(flavors))
	kept := make([]Flavor, len(flavors))
	for i, f := range flavors {
		r.flavors[f.Name] = true
		kept[i] = *f
	}
	h.selectFlavors(nodes, kept)
	return r.kueueModel(r.forestOf(k), h)
}

// modelRows is Kueue's rows then the ResourceQuotas', at most MaxModels.
func modelRows(kueue, namespaces []*row) []homelabv1.QuotaModel {
	var out []homelabv1.QuotaModel
	for _, rw := range kueue {
		out = append(out, homelabv1.QuotaModel{Model: rw.model, Source: homelabv1.QuotaSourceKueue,
			QuotaFigures: rw.figures(), StrandedReady: rw.strandedReady})
	}
	for _, rw := range namespaces {
		out = append(out, homelabv1.QuotaModel{Model: rw.model, Source: homelabv1.QuotaSourceResourceQuota, QuotaFigures: rw.figures()})
	}
	return slices.Clip(first(out, MaxModels))
}
