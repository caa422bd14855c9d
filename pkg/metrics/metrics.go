// Package metrics holds the operator's Prometheus metrics: its own (syncs, status writes,
// inventory gauges, leadership), client-go's workqueue metrics for every named queue, and
// client-go's request latency and results.
package metrics

import (
	"context"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"
)

const namespace = "gpu_inventory"

// Registry holds every metric the operator serves on /metrics.
var Registry = prometheus.NewRegistry()

var (
	// Syncs counts syncs by controller and result (success, error).
	Syncs = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "syncs_total",
		Help: "Syncs by controller and result."}, []string{"controller", "result"})
	// SyncDuration observes how long syncs take.
	SyncDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "sync_duration_seconds",
		Help: "Duration of syncs by controller.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}, []string{"controller"})
	// StatusWrites counts status writes done and skipped because the hash was unchanged.
	StatusWrites = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "status_writes_total",
		Help: "GpuInventory status writes, by outcome: written, or skipped because the inventory hash was unchanged."}, []string{"inventory", "outcome"})
	// LastSuccessfulSync is the time of each inventory's last successful sync.
	LastSuccessfulSync = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "last_successful_sync_timestamp_seconds",
		Help: "Unix time of the last successful sync of each inventory (alert on time() minus this)."}, []string{"inventory"})
	// Leader is 1 while this instance leads (or runs without leader election).
	Leader = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "leader",
		Help: "1 while this instance is the leader (or runs without leader election), else 0."})

	// GPUNodes, GPUs and the rest describe each inventory's content.
	GPUNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "gpu_nodes",
		Help: "GPU nodes covered by an inventory, by readiness."}, []string{"inventory", "ready"})
	GPUs = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "gpus",
		Help: "GPUs covered by an inventory, by readiness of their node."}, []string{"inventory", "ready"})
	ModelGPUs = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "model_gpus",
		Help: "GPUs per model (product without MIG/-SHARED suffix), by readiness of their node."}, []string{"inventory", "product", "ready"})
	UnhealthyGPUs = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "unhealthy_gpus",
		Help: "GPUs the device plugin reports unhealthy (capacity minus allocatable)."}, []string{"inventory"})
	LabelsMissingNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "labels_missing_nodes",
		Help: "GPU nodes reported from last-known labels because GPU Feature Discovery's labels vanished."}, []string{"inventory"})
	NotReadyNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "node_not_ready",
		Help: "1 for each GPU node that is not Ready (only with --metrics-per-node)."}, []string{"inventory", "node"})

	requestLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "rest_client", Name: "request_duration_seconds",
		Help: "API request latency by verb and host.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}, []string{"verb", "host"})
	requestResult = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "rest_client", Name: "requests_total",
		Help: "API requests by status code, method and host."}, []string{"code", "method", "host"})
)

func init() {
	Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		Syncs, SyncDuration, StatusWrites, LastSuccessfulSync, Leader, GPUNodes, GPUs, ModelGPUs, UnhealthyGPUs,
		LabelsMissingNodes, NotReadyNodes, requestLatency, requestResult)
	workqueue.SetProvider(queueMetrics{})
	clientmetrics.Register(clientmetrics.RegisterOpts{
		RequestLatency: latencyAdapter{requestLatency},
		RequestResult:  resultAdapter{requestResult},
	})
}

type latencyAdapter struct{ m *prometheus.HistogramVec }

func (a latencyAdapter) Observe(_ context.Context, verb string, u url.URL, latency time.Duration) {
	a.m.WithLabelValues(verb, u.Host).Observe(latency.Seconds())
}

type resultAdapter struct{ m *prometheus.CounterVec }

func (a resultAdapter) Increment(_ context.Context, code, method, host string) {
	a.m.WithLabelValues(code, method, host).Inc()
}

// queueMetrics is client-go's workqueue metrics provider, with the names workqueue
// dashboards expect (workqueue_depth, workqueue_adds_total, ...), labelled by queue name.
type queueMetrics struct{}

var (
	queueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "depth", Help: "Current depth of the workqueue."}, []string{"name"})
	queueAdds  = prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: "adds_total", Help: "Adds handled by the workqueue."}, []string{"name"})
	queueLat   = prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: "queue_duration_seconds",
		Help: "How long an item stays in the workqueue before being requested.", Buckets: prometheus.ExponentialBuckets(1e-6, 10, 10)}, []string{"name"})
	queueWork = prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: "work_duration_seconds",
		Help: "How long processing an item takes.", Buckets: prometheus.ExponentialBuckets(1e-6, 10, 10)}, []string{"name"})
	queueUnfinished = prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "unfinished_work_seconds",
		Help: "Seconds of work in progress not yet observed by work_duration."}, []string{"name"})
	queueLongest = prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "longest_running_processor_seconds",
		Help: "Seconds the longest running processor has been running."}, []string{"name"})
	queueRetries = prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: "retries_total", Help: "Retries handled by the workqueue."}, []string{"name"})
)

func init() {
	Registry.MustRegister(queueDepth, queueAdds, queueLat, queueWork, queueUnfinished, queueLongest, queueRetries)
}

func (queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return queueDepth.WithLabelValues(name)
}
func (queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return queueAdds.WithLabelValues(name)
}
func (queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return queueLat.WithLabelValues(name)
}
func (queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return queueWork.WithLabelValues(name)
}
func (queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return queueUnfinished.WithLabelValues(name)
}
func (queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return queueLongest.WithLabelValues(name)
}
func (queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return queueRetries.WithLabelValues(name)
}
