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

// Package metrics holds the operator's Prometheus metrics: its own (syncs, status writes,
// inventory gauges, leadership), the workqueue metrics of every named queue, and client-go's
// request latency and results. A Metrics is built once per operator and passed to the
// controllers; nothing is registered at import time.
package metrics

import (
	"context"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"
)

const namespace = "gpu_inventory"

// Metrics is every metric the operator serves on /metrics, with the registry that serves them.
type Metrics struct {
	Registry *prometheus.Registry

	// Loops are the worker loops' and their queues' metrics.
	Loops
	// StatusWrites counts status writes by inventory and outcome: written, or skipped
	// because the inventory hash was unchanged.
	StatusWrites *prometheus.CounterVec
	// StatusReads counts the GETs of a whole inventory that the cache (without node lists)
	// made necessary.
	StatusReads *prometheus.CounterVec
	// ConfigMapWrites counts writes of the gpu-node-status ConfigMap.
	ConfigMapWrites prometheus.Counter
	// GpuNodeWrites counts what the records controller did with a node's GpuNode record, by
	// outcome (see GpuNodeOutcomes).
	GpuNodeWrites *prometheus.CounterVec
	// LastSuccessfulSync is the time of each inventory's last successful sync.
	LastSuccessfulSync *prometheus.GaugeVec
	// Leader is 1 while this instance leads (or runs without leader election).
	Leader prometheus.Gauge
	// UsageReadings observes how long each reading of GPU usage from Prometheus took, by
	// result (ok, or the UsageUnknown reason).
	UsageReadings *prometheus.HistogramVec

	// contents are the gauges of each inventory's content (SetContent).
	contents *contents

	client clientMetrics
}

// New builds the metrics on a registry of their own, with the Go and process collectors.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Loops:    newLoops(namespace),
		StatusWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "status_writes_total",
			Help: "GpuInventory status writes, by outcome: written, or skipped because the inventory hash was unchanged."}, []string{"inventory", "outcome"}),
		StatusReads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "status_reads_total",
			Help: "GETs of a whole GpuInventory because the cached copy (without node list) held a version this instance did not write."}, []string{"inventory"}),
		ConfigMapWrites: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "configmap_writes_total",
			Help: "Writes of the gpu-node-status ConfigMap."}),
		GpuNodeWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "gpunode_writes_total",
			Help: "GpuNode record writes by outcome: created, updated, missing (facts vanished), seeded (from an older version's memory), deleted (node gone), or skipped because the record was current."}, []string{"outcome"}),
		LastSuccessfulSync: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "last_successful_sync_timestamp_seconds",
			Help: "Unix time of the last successful sync of each inventory (alert on time() minus this)."}, []string{"inventory"}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "leader",
			Help: "1 while this instance is the leader (or runs without leader election), else 0."}),
		UsageReadings: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "usage_reading_duration_seconds",
			Help:    "Duration of each reading of GPU usage from Prometheus (--prometheus-url), by result: ok, or why it failed.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 10)}, []string{"result"}),
		contents: newContents(),
		client:   newClientMetrics(namespace),
	}
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.StatusWrites, m.StatusReads, m.ConfigMapWrites, m.GpuNodeWrites, m.LastSuccessfulSync, m.Leader,
		m.UsageReadings, m.contents)
	m.Loops.register(m.Registry)
	m.client.register(m.Registry)
	for _, outcome := range GpuNodeOutcomes {
		m.GpuNodeWrites.WithLabelValues(outcome) // every series from the start, for rate()
	}
	return m
}

// Outcomes of GpuNodeWrites.
const (
	GpuNodeCreated = "created"
	GpuNodeUpdated = "updated"
	GpuNodeMissing = "missing"
	GpuNodeSeeded  = "seeded"
	GpuNodeDeleted = "deleted"
	GpuNodeSkipped = "skipped"
)

// GpuNodeOutcomes lists the outcomes of GpuNodeWrites.
var GpuNodeOutcomes = []string{GpuNodeCreated, GpuNodeUpdated, GpuNodeMissing, GpuNodeSeeded, GpuNodeDeleted, GpuNodeSkipped}

// ForgetInventory drops a deleted inventory's series.
func (m *Metrics) ForgetInventory(name string) {
	labels := prometheus.Labels{"inventory": name}
	m.contents.set(name, nil)
	m.LastSuccessfulSync.DeletePartialMatch(labels)
	m.StatusWrites.DeletePartialMatch(labels)
	m.StatusReads.DeletePartialMatch(labels)
}

// client-go's request metrics are process-wide, registered once and before any request (a
// later registration races with the requests in flight): the adapters are registered at
// init and forward to the metrics that called ServeClientMetrics last.
var clientMetricsTo atomic.Pointer[clientMetrics]

func init() {
	clientmetrics.Register(clientmetrics.RegisterOpts{RequestLatency: latencyAdapter{}, RequestResult: resultAdapter{}})
}

// ServeClientMetrics makes m receive client-go's request latency and results.
func (m *Metrics) ServeClientMetrics() {
	clientMetricsTo.Store(&m.client)
}

// clientMetrics are client-go's request latency and results, under a binary's namespace.
type clientMetrics struct {
	latency *prometheus.HistogramVec
	result  *prometheus.CounterVec
}

func newClientMetrics(namespace string) clientMetrics {
	return clientMetrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "rest_client", Name: "request_duration_seconds",
			Help: "API request latency by verb and host.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}, []string{"verb", "host"}),
		result: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "rest_client", Name: "requests_total",
			Help: "API requests by status code, method and host."}, []string{"code", "method", "host"}),
	}
}

func (c clientMetrics) register(r *prometheus.Registry) { r.MustRegister(c.latency, c.result) }

type latencyAdapter struct{}

func (latencyAdapter) Observe(_ context.Context, verb string, u url.URL, latency time.Duration) {
	if m := clientMetricsTo.Load(); m != nil {
		m.latency.WithLabelValues(verb, u.Host).Observe(latency.Seconds())
	}
}

type resultAdapter struct{}

func (resultAdapter) Increment(_ context.Context, code, method, host string) {
	if m := clientMetricsTo.Load(); m != nil {
		m.result.WithLabelValues(code, method, host).Inc()
	}
}

// Loops are what every worker loop counts (pkg/controller's Loop): syncs by controller and
// result, their duration and panics, and its queue's workqueue metrics.
type Loops struct {
	// Syncs counts syncs by controller and result (success, error).
	Syncs *prometheus.CounterVec
	// SyncDuration observes how long syncs take, by controller.
	SyncDuration *prometheus.HistogramVec
	// SyncPanics counts syncs that panicked (and were retried), by controller.
	SyncPanics *prometheus.CounterVec

	queues queueMetrics
}

func newLoops(namespace string) Loops {
	return Loops{
		Syncs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "syncs_total",
			Help: "Syncs by controller and result."}, []string{"controller", "result"}),
		SyncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "sync_duration_seconds",
			Help: "Duration of syncs by controller.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}, []string{"controller"}),
		SyncPanics: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "sync_panics_total",
			Help: "Syncs that panicked, by controller; the item is retried with backoff."}, []string{"controller"}),
		queues: newQueueMetrics(),
	}
}

func (l *Loops) register(r *prometheus.Registry) {
	r.MustRegister(l.Syncs, l.SyncDuration, l.SyncPanics)
	l.queues.register(r)
}

// QueueMetrics is the workqueue metrics provider to name in a queue's config.
func (l *Loops) QueueMetrics() workqueue.MetricsProvider { return l.queues }

// ObserveSync counts one sync of controller: its result (success, error) and how long it took.
func (l *Loops) ObserveSync(controller, result string, took time.Duration) {
	l.SyncDuration.WithLabelValues(controller).Observe(took.Seconds())
	l.Syncs.WithLabelValues(controller, result).Inc()
}

// SyncPanicked counts a sync of controller that panicked.
func (l *Loops) SyncPanicked(controller string) { l.SyncPanics.WithLabelValues(controller).Inc() }

// queueMetrics is a workqueue metrics provider with the names workqueue dashboards expect
// (workqueue_depth, workqueue_adds_total, ...), labelled by queue name.
type queueMetrics struct {
	depth      *prometheus.GaugeVec
	adds       *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	work       *prometheus.HistogramVec
	unfinished *prometheus.GaugeVec
	longest    *prometheus.GaugeVec
	retries    *prometheus.CounterVec
}

func newQueueMetrics() queueMetrics {
	return queueMetrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "depth", Help: "Current depth of the workqueue."}, []string{"name"}),
		adds:  prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: "adds_total", Help: "Adds handled by the workqueue."}, []string{"name"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: "queue_duration_seconds",
			Help: "How long an item stays in the workqueue before being requested.", Buckets: prometheus.ExponentialBuckets(1e-6, 10, 10)}, []string{"name"}),
		work: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: "work_duration_seconds",
			Help: "How long processing an item takes.", Buckets: prometheus.ExponentialBuckets(1e-6, 10, 10)}, []string{"name"}),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "unfinished_work_seconds",
			Help: "Seconds of work in progress not yet observed by work_duration."}, []string{"name"}),
		longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "longest_running_processor_seconds",
			Help: "Seconds the longest running processor has been running."}, []string{"name"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: "retries_total", Help: "Retries handled by the workqueue."}, []string{"name"}),
	}
}

func (q queueMetrics) register(r *prometheus.Registry) {
	r.MustRegister(q.depth, q.adds, q.latency, q.work, q.unfinished, q.longest, q.retries)
}

func (q queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return q.depth.WithLabelValues(name)
}
func (q queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return q.adds.WithLabelValues(name)
}
func (q queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return q.latency.WithLabelValues(name)
}
func (q queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return q.work.WithLabelValues(name)
}
func (q queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.unfinished.WithLabelValues(name)
}
func (q queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.longest.WithLabelValues(name)
}
func (q queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return q.retries.WithLabelValues(name)
}
