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

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Content is what the gauges of one inventory report: its latest computed content. The
// gauges are made from it when /metrics is scraped, so that an inventory costs one small
// value between scrapes rather than a few dozen stored series (which a thousand inventories
// would feel), and a sync replaces its content without deleting and recreating them.
type Content struct {
	GPUNodes, ReadyGPUNodes     int32
	GPUs, ReadyGPUs             int32
	UnhealthyGPUs               int32
	LabelsMissingNodes          int32
	Models                      []ModelContent
	SourceNodes, ConditionNodes []Count
	// Allocation is set when pods are read: the models' allocated and free GPUs, the
	// pending demand and the namespaces are reported only then.
	Allocation bool
	Pending    []Pending
	Namespaces []Count
	// NotReadyNodes names the GPU nodes that are not Ready (with --metrics-per-node only).
	NotReadyNodes []string
	// FragmentationGPUs is the job size the Fragmented condition is judged for.
	FragmentationGPUs int32
	// Quota is the quota against hardware; nil: the inventory has none.
	Quota *QuotaContent
	// Usage is what the pods holding GPUs use of them; nil: not read (no --prometheus-url).
	Usage *UsageContent
	// Topology is how the GPU nodes group into topology domains; nil: none.
	Topology *TopologyContent
}

// ModelContent is one model's figures in an inventory; LargestFit is the most free GPUs on
// one node.
type ModelContent struct {
	Product                                      string
	GPUs, ReadyGPUs, Allocated, Free, LargestFit int32
}

// Count is a number of GPU nodes or GPUs under a name (a source, a condition, a namespace).
type Count struct {
	Name  string
	Value int32
}

// Pending is the demand of waiting pods for a model ("": any); Since is the oldest one's
// creation in Unix seconds, 0 when unknown.
type Pending struct {
	Product string
	GPUs    int32
	Since   int64
}

// contents is the collector of every inventory's gauges.
type contents struct {
	mu     sync.Mutex
	byName map[string]*Content

	gpuNodes, gpus, modelGPUs, unhealthy, labelsMissing, notReady *prometheus.Desc
	sources, conditions                                           *prometheus.Desc
	allocated, free, pending, pendingSince, namespaces            *prometheus.Desc
	largestFit, fragmentation                                     *prometheus.Desc
	quota                                                         quotaDescs
	usage                                                         usageDescs
	topology                                                      topologyDescs
}

func newContents() *contents {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, append([]string{"inventory"}, labels...), nil)
	}
	return &contents{
		quota:         newQuotaDescs(desc),
		usage:         newUsageDescs(desc),
		topology:      newTopologyDescs(desc),
		byName:        map[string]*Content{},
		gpuNodes:      desc("gpu_nodes", "GPU nodes covered by an inventory, by readiness.", "ready"),
		gpus:          desc("gpus", "GPUs covered by an inventory, by readiness of their node.", "ready"),
		modelGPUs:     desc("model_gpus", "GPUs per model (product without MIG/-SHARED suffix), by readiness of their node.", "product", "ready"),
		unhealthy:     desc("unhealthy_gpus", "Unusable GPUs: capacity minus allocatable, DRA devices tainted NoSchedule/NoExecute, at least one per node whose health monitor reports a GPU fault."),
		labelsMissing: desc("labels_missing_nodes", "GPU nodes reported from last-known labels because GPU Feature Discovery's labels vanished."),
		notReady:      desc("node_not_ready", "1 for each GPU node that is not Ready (only with --metrics-per-node).", "node"),
		sources:       desc("source_nodes", "GPU nodes by the source of their GPU facts (gpu-feature-discovery, dra, gke, accelerator-label, device-plugin; comma-joined when several).", "source"),
		conditions:    desc("condition_nodes", "GPU nodes with a condition in status.nodes[].conditions (NotReady, UnhealthyGPUs, XIDError, DriverUpgradeFailed, ...).", "condition"),
		allocated:     desc("allocated_gpus", "GPUs of which pods hold any part (device plugin or DRA), per model.", "product"),
		free:          desc("free_gpus", "GPUs a pod could get whole now (healthy, not held, on a Ready node not cordoned), per model.", "product"),
		largestFit:    desc("largest_fit_gpus", "The most GPUs free on one Ready, uncordoned node of the model: the largest job that fits on one node now, per model.", "product"),
		fragmentation: desc("fragmentation_threshold_gpus", "The job size the inventory's Fragmented condition is judged for (spec.fragmentationGpus, 8 when unset)."),
		pending:       desc("pending_gpus", "GPUs asked for by pods (and DRA claims) waiting to be scheduled, per requested model (product=\"\": any model).", "product"),
		pendingSince:  desc("pending_oldest_timestamp_seconds", "Creation time of the oldest waiting pod that asks for GPUs, per requested model (product=\"\": any model).", "product"),
		namespaces:    desc("namespace_gpus", "GPUs held per namespace, for the 10 namespaces holding most (the rest as \"<other namespaces>\").", "namespace"),
	}
}

func (c *contents) set(name string, content *Content) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if content == nil {
		delete(c.byName, name)
		return
	}
	c.byName[name] = content
}

func (c *contents) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.gpuNodes, c.gpus, c.modelGPUs, c.unhealthy, c.labelsMissing, c.notReady,
		c.sources, c.conditions, c.allocated, c.free, c.largestFit, c.fragmentation, c.pending, c.pendingSince, c.namespaces} {
		ch <- d
	}
	for _, d := range append(append(c.quota.all(), c.usage.all()...), c.topology.all()...) {
		ch <- d
	}
}

func (c *contents) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, content := range c.byName {
		c.collect(ch, name, content)
	}
}

func (c *contents) collect(ch chan<- prometheus.Metric, name string, in *Content) {
	seen := map[string]bool{} // a series twice would fail the whole scrape: the first wins
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		key := d.String() + "\x00" + strings.Join(labels, "\x00")
		if seen[key] {
			return
		}
		seen[key] = true
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{name}, labels...)...)
	}
	byReadiness := func(d *prometheus.Desc, all, ready int32, labels ...string) {
		gauge(d, float64(ready), append(labels, "true")...)
		gauge(d, float64(all-ready), append(labels, "false")...)
	}
	byReadiness(c.gpuNodes, in.GPUNodes, in.ReadyGPUNodes)
	byReadiness(c.gpus, in.GPUs, in.ReadyGPUs)
	gauge(c.unhealthy, float64(in.UnhealthyGPUs))
	gauge(c.labelsMissing, float64(in.LabelsMissingNodes))
	if in.FragmentationGPUs > 0 {
		gauge(c.fragmentation, float64(in.FragmentationGPUs))
	}
	for _, m := range in.Models {
		byReadiness(c.modelGPUs, m.GPUs, m.ReadyGPUs, m.Product)
		if in.Allocation {
			gauge(c.allocated, float64(m.Allocated), m.Product)
			gauge(c.free, float64(m.Free), m.Product)
			gauge(c.largestFit, float64(m.LargestFit), m.Product)
		}
	}
	for _, s := range in.SourceNodes {
		gauge(c.sources, float64(s.Value), s.Name)
	}
	for _, s := range in.ConditionNodes {
		gauge(c.conditions, float64(s.Value), s.Name)
	}
	for _, p := range in.Pending {
		gauge(c.pending, float64(p.GPUs), p.Product)
		if p.Since != 0 {
			gauge(c.pendingSince, float64(p.Since), p.Product)
		}
	}
	for _, ns := range in.Namespaces {
		gauge(c.namespaces, float64(ns.Value), ns.Name)
	}
	for _, node := range in.NotReadyNodes {
		gauge(c.notReady, 1, node)
	}
	c.quota.collect(gauge, in.Quota)
	c.usage.collect(gauge, in.Usage)
	c.topology.collect(gauge, in.Topology)
}

// SetContent replaces what the gauges report of an inventory.
func (m *Metrics) SetContent(inventory string, content Content) {
	m.contents.set(inventory, &content)
}
