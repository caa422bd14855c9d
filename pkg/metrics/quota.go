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

package metrics

import "github.com/prometheus/client_golang/prometheus"

// QuotaContent is an inventory's quota against hardware (status.quota).
type QuotaContent struct {
	// Models are per model and resource, over the cluster; Cohorts per cohort, model and
	// resource (the largest, as status.quota lists them).
	Models, Cohorts []QuotaRow
	StrandedNodes   int32
	// Unknown: the operator could not read all of the quota.
	Unknown bool
}

// QuotaRow is one row of quota against hardware, in the unit of Resource.
type QuotaRow struct {
	Cohort, Model, Resource, Finding               string
	Capacity, Ready, Free, Nominal, Reserved, Used int64
	Pending                                        int32
}

// quotaDescs are the gauges of quota against hardware.
type quotaDescs struct {
	nominal, hardware, reserved, used, pending, cohortNominal, cohortReady, finding, stranded, unknown *prometheus.Desc
}

func newQuotaDescs(desc func(name, help string, labels ...string) *prometheus.Desc) quotaDescs {
	return quotaDescs{
		nominal:       desc("quota_nominal", "Nominal quota of Kueue's ClusterQueues (and Cohorts) per model and GPU resource, in the resource's unit.", "model", "resource"),
		hardware:      desc("quota_hardware", "Units of the GPU resource on the nodes the quota's flavors select, by state (capacity, ready: on nodes that can take pods, free: the scheduler could grant now).", "model", "resource", "state"),
		reserved:      desc("quota_reserved", "Quota reserved by admitted workloads, as Kueue reports it (status.flavorsReservation).", "model", "resource"),
		used:          desc("quota_used", "Quota used by admitted workloads, as Kueue reports it (status.flavorsUsage).", "model", "resource"),
		pending:       desc("quota_pending_workloads", "Workloads Kueue holds pending in ClusterQueues with quota of the model and resource.", "model", "resource"),
		cohortNominal: desc("quota_cohort_nominal", "Nominal quota of a cohort (its ClusterQueues and Cohorts) per model and GPU resource, for the cohorts status.quota lists.", "cohort", "model", "resource"),
		cohortReady:   desc("quota_cohort_ready", "Ready units of the GPU resource on the nodes a cohort's flavors select.", "cohort", "model", "resource"),
		finding:       desc("quota_finding", "1 for each quota finding: Overcommitted (quota larger than the Ready hardware it reaches) or Stranded (quota no node can serve); cohort=\"\" for the cluster's rows.", "cohort", "model", "resource", "finding"),
		stranded:      desc("quota_stranded_nodes", "Ready GPU nodes that no ResourceFlavor of any ClusterQueue selects."),
		unknown:       desc("quota_unknown", "1 when the operator could not read Kueue's objects or the ResourceQuotas (RBAC or errors): the quota figures are incomplete."),
	}
}

func (d quotaDescs) all() []*prometheus.Desc {
	return []*prometheus.Desc{d.nominal, d.hardware, d.reserved, d.used, d.pending, d.cohortNominal, d.cohortReady, d.finding, d.stranded, d.unknown}
}

func (d quotaDescs) collect(gauge func(*prometheus.Desc, float64, ...string), q *QuotaContent) {
	if q == nil {
		return
	}
	for _, r := range q.Models {
		gauge(d.nominal, float64(r.Nominal), r.Model, r.Resource)
		gauge(d.hardware, float64(r.Capacity), r.Model, r.Resource, "capacity")
		gauge(d.hardware, float64(r.Ready), r.Model, r.Resource, "ready")
		gauge(d.hardware, float64(r.Free), r.Model, r.Resource, "free")
		gauge(d.reserved, float64(r.Reserved), r.Model, r.Resource)
		gauge(d.used, float64(r.Used), r.Model, r.Resource)
		gauge(d.pending, float64(r.Pending), r.Model, r.Resource)
		if r.Finding != "" {
			gauge(d.finding, 1, "", r.Model, r.Resource, r.Finding)
		}
	}
	for _, r := range q.Cohorts {
		gauge(d.cohortNominal, float64(r.Nominal), r.Cohort, r.Model, r.Resource)
		gauge(d.cohortReady, float64(r.Ready), r.Cohort, r.Model, r.Resource)
		if r.Finding != "" {
			gauge(d.finding, 1, r.Cohort, r.Model, r.Resource, r.Finding)
		}
	}
	gauge(d.stranded, float64(q.StrandedNodes))
	unknown := 0.0
	if q.Unknown {
		unknown = 1
	}
	gauge(d.unknown, unknown)
}
