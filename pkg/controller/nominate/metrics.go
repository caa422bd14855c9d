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

package nominate

import "github.com/prometheus/client_golang/prometheus"

const metricsNamespace = "gpu_fleet"

// Metrics are the dispatcher's: built once and registered on the hub's registry.
type Metrics struct {
	// Workloads counts the pending MultiKueue Workloads by result (nominated, fits_nowhere,
	// no_gpus).
	Workloads *prometheus.GaugeVec
	// Nominations counts nomination writes by outcome (written, conflict, failed) and why
	// (new, stopped_fitting, unreachable, timeout).
	Nominations *prometheus.CounterVec
	// Latency observes a Workload seen pending to its first nomination written.
	Latency prometheus.Histogram
}

// NewMetrics builds the dispatcher's metrics, not registered anywhere.
func NewMetrics() *Metrics {
	m := &Metrics{
		Workloads: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Subsystem: "dispatch", Name: "workloads",
			Help: "Pending MultiKueue Workloads the dispatcher answers, by result: nominated, fits_nowhere, no_gpus."}, []string{"result"}),
		Nominations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: "dispatch", Name: "nominations_total",
			Help: "Nomination writes by outcome (written, conflict, failed) and why (new, stopped_fitting, unreachable, timeout)."}, []string{"outcome", "why"}),
		Latency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metricsNamespace, Subsystem: "dispatch", Name: "seconds",
			Help: "Time from a Workload seen pending to its first nomination written.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
	}
	for _, result := range []string{resultNominated, resultFitsNowhere, resultNoGpus} {
		m.Workloads.WithLabelValues(result) // every series from the start, for alerts
	}
	return m
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Workloads, m.Nominations, m.Latency}
}
