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

//lint:file-ignore SA1019 Grafana's sidecar provisions the classic dashboard JSON (package dashboard); dashboardv2 is the new app platform's resource, which it does not load.

package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// Panel titles the tests look for.
const (
	titleModels         = "GPUs per model"
	titleFragmentation  = "Largest job that fits on one node, per model"
	titleQuotaHardware  = "Nominal quota against Ready and free GPUs, per model"
	titleCohortFindings = "Quota findings"
	titleIdleHours      = "Idle GPU-hours per namespace"
	titleProblemNodes   = "GPU nodes by condition"
)

// The fragmentation threshold, the same for every model of an inventory.
var threshold = "max(" + sel("gpu_inventory_fragmentation_threshold_gpus") + ")"

func overview(b *dashboard.DashboardBuilder) {
	b.WithRow(dashboard.NewRowBuilder("Overview")).
		WithPanel(single("GPUs", "GPUs on the inventory's nodes, Ready or not.", unitGPUs,
			"sum(max by (ready) ("+sel("gpu_inventory_gpus")+"))", nil)).
		WithPanel(single("Ready GPUs", "GPUs on Ready nodes.", unitGPUs,
			"max("+sel("gpu_inventory_gpus", `ready="true"`)+")", nil)).
		WithPanel(single("Allocated GPUs", "GPUs of which pods hold any part (device plugin or DRA).", unitGPUs,
			"sum(max by (product) ("+sel("gpu_inventory_allocated_gpus")+"))", nil)).
		WithPanel(single("Free GPUs", "GPUs a pod could get whole now: healthy, not held, on a Ready node not cordoned.", unitGPUs,
			"sum(max by (product) ("+sel("gpu_inventory_free_gpus")+"))", nil)).
		WithPanel(single("Pending GPUs", "GPUs asked for by pods and DRA claims waiting to be scheduled.", unitGPUs,
			"sum(max by (product) ("+sel("gpu_inventory_pending_gpus")+"))", thresholds(step(1, "orange")))).
		WithPanel(single("Oldest GPU pod waiting", "How long the oldest waiting pod that asks for GPUs has waited (GpuFreeWhilePodsWait looks at 15 minutes).", unitSeconds,
			"time() - min("+sel("gpu_inventory_pending_oldest_timestamp_seconds")+")", thresholds(step(900, "orange"), step(3600, "red"))))
}

func models(b *dashboard.DashboardBuilder) {
	perModel := func(metric string, matchers ...string) string {
		return "max by (product) (" + sel(metric, matchers...) + ")"
	}
	b.WithRow(dashboard.NewRowBuilder("GPUs per model")).
		WithPanel(grid(titleModels, "Each model's GPUs now: on the inventory's nodes, on Ready nodes, held by pods, free for a whole-GPU pod, and asked for by waiting pods.",
			[]string{"product"},
			column{"Total", "sum by (product) (max by (product, ready) (" + sel("gpu_inventory_model_gpus") + "))"},
			column{"Ready", perModel("gpu_inventory_model_gpus", `ready="true"`)},
			column{"Allocated", perModel("gpu_inventory_allocated_gpus")},
			column{"Free", perModel("gpu_inventory_free_gpus")},
			column{"Pending", perModel("gpu_inventory_pending_gpus", `product!=""`)},
		).Span(24)).
		WithPanel(dashed(graph("Ready and total GPUs per model", "GPUs on Ready nodes (solid) against all the model's GPUs (dashed).", unitGPUs,
			query(perModel("gpu_inventory_model_gpus", `ready="true"`), "{{product}} ready"),
			query("sum by (product) (max by (product, ready) ("+sel("gpu_inventory_model_gpus")+"))", "{{product}} total"),
		), ".* total$")).
		WithPanel(graph("Allocated GPUs per model", "GPUs of which pods hold any part.", unitGPUs,
			query(perModel("gpu_inventory_allocated_gpus"), "{{product}}"))).
		WithPanel(graph("Free GPUs per model", "GPUs a pod could get whole now.", unitGPUs,
			query(perModel("gpu_inventory_free_gpus"), "{{product}}"))).
		WithPanel(graph("Pending GPUs per requested model", "GPUs asked for by waiting pods and claims, by the model they ask for (any model: no model asked for).", unitGPUs,
			query(`label_replace(`+perModel("gpu_inventory_pending_gpus")+`, "product", "any model", "product", "")`, "{{product}}")))
}

func fragmentation(b *dashboard.DashboardBuilder) {
	largest := "max by (product) (" + sel("gpu_inventory_largest_fit_gpus") + ")"
	free := "max by (product) (" + sel("gpu_inventory_free_gpus", `product!="<other models>"`) + ")"
	b.WithRow(dashboard.NewRowBuilder("Fragmentation")).
		WithPanel(dashed(graph(titleFragmentation, "The most GPUs free on one Ready, uncordoned node of each model, against spec.fragmentationGpus (dashed): a model whose line stays under it while it has that many GPUs free is Fragmented.", unitGPUs,
			query(largest, "{{product}}"),
			query(threshold, "spec.fragmentationGpus"),
		), "^spec.fragmentationGpus$")).
		WithPanel(grid("Fragmented models", "Per model: free GPUs, the largest job that fits on one node, and the free GPUs of a model that is Fragmented (at least spec.fragmentationGpus free, but no node has that many; the GpuInventoryFragmented alert).",
			[]string{"product"},
			column{"Free", free},
			column{"Largest fit", largest},
			column{"Free, fragmented", "(" + free + " >= on () group_left () " + threshold + ") and on (product) (" + largest + " < on () group_left () " + threshold + ")"},
		))
}

func quota(b *dashboard.DashboardBuilder) {
	byModel := func(metric string, matchers ...string) string {
		return "max by (model, resource) (" + sel(metric, matchers...) + ")"
	}
	byCohort := func(metric string, matchers ...string) string {
		return "max by (cohort, model, resource) (" + sel(metric, matchers...) + ")"
	}
	b.WithRow(dashboard.NewRowBuilder("Quota against hardware")).
		WithPanel(dashed(graph(titleQuotaHardware, "Kueue's nominal quota and the cluster's ResourceQuotas (dashed) against the GPUs on the nodes the quota's flavors select: on Ready nodes, and free now.", unitGPUs,
			query(byModel("gpu_inventory_quota_nominal"), "{{model}} nominal ({{resource}})"),
			query(byModel("gpu_inventory_quota_hardware", `state="ready"`), "{{model}} ready ({{resource}})"),
			query(byModel("gpu_inventory_quota_hardware", `state="free"`), "{{model}} free ({{resource}})"),
		), ".* nominal .*")).
		WithPanel(grid("Quota per model", "Nominal quota, reserved and used by admitted workloads (Kueue's status), pending workloads, and the hardware the flavors select.",
			[]string{"model", "resource"},
			column{"Nominal", byModel("gpu_inventory_quota_nominal")},
			column{"Reserved", byModel("gpu_inventory_quota_reserved")},
			column{"Used", byModel("gpu_inventory_quota_used")},
			column{"Pending workloads", byModel("gpu_inventory_quota_pending_workloads")},
			column{"Hardware", byModel("gpu_inventory_quota_hardware", `state="capacity"`)},
			column{"Ready", byModel("gpu_inventory_quota_hardware", `state="ready"`)},
			column{"Free", byModel("gpu_inventory_quota_hardware", `state="free"`)},
		)).
		WithPanel(grid("Cohorts", "Each cohort's nominal quota against the Ready GPUs its flavors reach.",
			[]string{"cohort", "model", "resource"},
			column{"Nominal", byCohort("gpu_inventory_quota_cohort_nominal")},
			column{"Ready", byCohort("gpu_inventory_quota_cohort_ready")},
		)).
		WithPanel(grid(titleCohortFindings, "Overcommitted: quota larger than the Ready GPUs it reaches (GpuInventoryQuotaOvercommitted). Stranded: quota no node can serve. An empty cohort is the cluster's ResourceQuotas.",
			[]string{"cohort", "model", "resource", "finding"},
			column{"Findings", "max by (cohort, model, resource, finding) (" + sel("gpu_inventory_quota_finding") + ") > 0"},
		).Span(6)).
		WithPanel(single("Stranded GPU nodes", "Ready GPU nodes that no ResourceFlavor of any ClusterQueue selects.", unitGPUs,
			"max("+sel("gpu_inventory_quota_stranded_nodes")+")", thresholds(step(1, "orange"))).Height(8).Span(3)).
		WithPanel(single("Quota unknown", "1: Kueue's objects or the ResourceQuotas could not be read (RBAC, errors): the quota figures are incomplete (the inventory's QuotaUnknown condition says why).", unitGPUs,
			"max("+sel("gpu_inventory_quota_unknown")+")", thresholds(step(1, "red"))).Height(8).Span(3))
}

func heldIdle(b *dashboard.DashboardBuilder) {
	byNamespace := func(metric string) string {
		return "sum by (namespace) (max by (namespace, model) (" + sel(metric) + "))"
	}
	byNamespaceModel := func(metric string) string {
		return "max by (namespace, model) (" + sel(metric) + ")"
	}
	b.WithRow(dashboard.NewRowBuilder("Held but idle (DCGM exporter)")).
		WithPanel(graph(titleIdleHours, "GPU-hours held by pods whose GPUs DCGM exporter reported idle, over the operator's --idle-window (24 h unless set), per namespace.", unitGPUHours,
			query(byNamespace("gpu_inventory_idle_gpu_hours"), "{{namespace}}"))).
		WithPanel(grid("Held and idle per namespace and model", "GPUs held now and those idle longer than --idle-after, and the GPU-hours held and idle over --idle-window.",
			[]string{"namespace", "model"},
			column{"Held GPUs", byNamespaceModel("gpu_inventory_held_gpus")},
			column{"Idle GPUs", byNamespaceModel("gpu_inventory_idle_gpus")},
			column{"Held GPU-h", byNamespaceModel("gpu_inventory_held_gpu_hours")},
			column{"Idle GPU-h", byNamespaceModel("gpu_inventory_idle_gpu_hours")},
		)).
		WithPanel(graph("GPUs held idle per namespace", "GPUs held by pods idle for longer than --idle-after (the GpuHeldIdle alert); kubectl gpuinv idle lists the pods.", unitGPUs,
			query(byNamespace("gpu_inventory_idle_gpus"), "{{namespace}}"))).
		WithPanel(graph("GPU utilisation per model (DCGM exporter)", "DCGM exporter's average utilisation of each model's GPUs, over all of Prometheus' DCGM series (not only this inventory's nodes).", unitPercent,
			query("avg by (modelName) (DCGM_FI_DEV_GPU_UTIL)", "{{modelName}}")).Max(100).Span(8)).
		WithPanel(single("Usage unknown", "1: Prometheus was unreachable, slow or wrong, or had no DCGM series, at the operator's last look (the inventory's UsageUnknown condition says which).", unitGPUs,
			"max("+sel("gpu_inventory_usage_unknown")+")", thresholds(step(1, "orange"))).Height(8))
}

func problemNodes(b *dashboard.DashboardBuilder) {
	b.WithRow(dashboard.NewRowBuilder("Problem nodes")).
		WithPanel(single("GPU nodes not Ready", "GPU nodes that are not Ready (GpuNodeNotReady).", unitGPUs,
			"max("+sel("gpu_inventory_gpu_nodes", `ready="false"`)+")", thresholds(step(1, "red")))).
		WithPanel(single("Unhealthy GPUs", "Capacity above allocatable, DRA devices tainted NoSchedule/NoExecute, or a health monitor's GPU fault (GpuUnhealthy).", unitGPUs,
			"max("+sel("gpu_inventory_unhealthy_gpus")+")", thresholds(step(1, "red")))).
		WithPanel(single("GPU labels missing", "GPU nodes reported from last-known labels because GPU Feature Discovery's labels vanished (GpuLabelsMissing).", unitGPUs,
			"max("+sel("gpu_inventory_labels_missing_nodes")+")", thresholds(step(1, "orange")))).
		WithPanel(single("Since the last successful sync", "Time since the inventory was last synced; it is re-examined every 30 s (GpuInventoryNotSynced fires past 10 minutes).", unitSeconds,
			"time() - max("+sel("gpu_inventory_last_successful_sync_timestamp_seconds")+")", thresholds(step(300, "orange"), step(600, "red"))).Span(8)).
		WithPanel(single("Leader", "Replicas that lead (1 expected; 0: none writes the inventories, GpuInventoryNoLeader).", unitGPUs,
			"sum(gpu_inventory_leader)", colours("red", step(1, "green"), step(2, "red")))).
		WithPanel(graph(titleProblemNodes, "GPU nodes with each condition of status.nodes[].conditions (NotReady, UnhealthyGPUs, XIDError, DriverUpgradeFailed, ...).", unitGPUs,
			query("max by (condition) ("+sel("gpu_inventory_condition_nodes")+") > 0", "{{condition}}")).
			DrawStyle(common.GraphDrawStyleBars).FillOpacity(60).
			Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal))).
		WithPanel(grid("Not Ready GPU nodes, by name", "Each GPU node that is not Ready (needs the operator's --metrics-per-node).",
			[]string{"node"},
			column{"Not Ready", "max by (node) (" + sel("gpu_inventory_node_not_ready") + ") > 0"},
		))
}
