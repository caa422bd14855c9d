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
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

const fleetNamespace = "gpu_fleet"

// Fleet is every metric the fleet hub (cmd/gpu-fleet-hub) serves on /metrics, with the
// registry that serves them: built once and passed to its controllers, as Metrics is to the
// operator's.
type Fleet struct {
	Registry *prometheus.Registry

	// Loops are the worker loops' and their queues' metrics.
	Loops

	// Members counts each fleet's members by state.
	Members *prometheus.GaugeVec
	// MemberUp is 1 for a Reachable member of a fleet, else 0 with the reason.
	MemberUp *prometheus.GaugeVec
	// Gpus are a fleet's per-model totals (kind total, ready, free).
	Gpus *prometheus.GaugeVec
	// MemberReadErrors counts failed lists and watches of a member, by reason.
	MemberReadErrors *prometheus.CounterVec
	// StatusWrites counts GpuFleet status writes by outcome (written, skipped, failed).
	StatusWrites *prometheus.CounterVec
	// MemberChange observes the time from a member's change to the GpuFleet write that shows it.
	MemberChange prometheus.Histogram
	// Leader is 1 while this instance leads (or runs without leader election).
	Leader prometheus.Gauge

	client clientMetrics
}

// Outcomes of Fleet.StatusWrites.
const (
	FleetWritten = "written"
	FleetSkipped = "skipped"
	FleetFailed  = "failed"
)

// NewFleet builds the hub's metrics on a registry of their own, with the Go and process
// collectors.
func NewFleet() *Fleet {
	m := &Fleet{
		Registry: prometheus.NewRegistry(),
		Loops:    newLoops(fleetNamespace),
		Members: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: fleetNamespace, Name: "members",
			Help: "Members of each GpuFleet by state (Connecting, Reachable, Unreachable, Stale, Duplicate)."}, []string{"fleet", "state"}),
		MemberUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: fleetNamespace, Name: "member_up",
			Help: "1 while a member of a GpuFleet is Reachable; 0 with the reason it is not."}, []string{"fleet", "member", "reason"}),
		Gpus: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: fleetNamespace, Name: "gpus",
			Help: "A GpuFleet's GPUs per model across the members counted (kind: total, ready, free)."}, []string{"fleet", "model", "kind"}),
		MemberReadErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: fleetNamespace, Name: "member_read_errors_total",
			Help: "Failed lists and watches of a member's GpuInventory, by reason."}, []string{"member", "reason"}),
		StatusWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: fleetNamespace, Name: "status_writes_total",
			Help: "GpuFleet status writes by outcome: written, skipped (the hash was unchanged) or failed."}, []string{"outcome"}),
		MemberChange: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: fleetNamespace, Name: "member_change_seconds",
			Help:    "Time from a member's change (its inventory or its state) to the GpuFleet status write that shows it.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: fleetNamespace, Name: "leader",
			Help: "1 while this hub instance is the leader (or runs without leader election), else 0."}),
		client: newClientMetrics(fleetNamespace),
	}
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.Members, m.MemberUp, m.Gpus, m.MemberReadErrors, m.StatusWrites, m.MemberChange, m.Leader)
	m.Loops.register(m.Registry)
	m.client.register(m.Registry)
	for _, outcome := range []string{FleetWritten, FleetSkipped, FleetFailed} {
		m.StatusWrites.WithLabelValues(outcome) // every series from the start, for rate()
	}
	return m
}

// ServeClientMetrics makes m receive client-go's request latency and results.
func (m *Fleet) ServeClientMetrics() { clientMetricsTo.Store(&m.client) }

// SetFleet sets a fleet's gauges from its status: members per state, each listed member's
// up (the list holds every member but Reachable ones beyond its bound), the per-model
// totals. Members and models no longer there lose their series.
func (m *Fleet) SetFleet(name string, st *homelabv1.GpuFleetStatus) {
	labels := prometheus.Labels{"fleet": name}
	m.MemberUp.DeletePartialMatch(labels)
	m.Gpus.DeletePartialMatch(labels)
	var duplicate float64
	for _, r := range st.Members {
		up := 0.0
		switch r.State {
		case homelabv1.MemberReachable:
			up = 1
		case homelabv1.MemberDuplicate:
			duplicate++
		}
		m.MemberUp.WithLabelValues(name, r.Name, r.Reason).Set(up)
	}
	reachable, unreachable, stale := float64(st.ReachableMembers), float64(st.UnreachableMembers-st.StaleMembers), float64(st.StaleMembers)
	for state, n := range map[string]float64{
		homelabv1.MemberReachable: reachable, homelabv1.MemberUnreachable: unreachable, homelabv1.MemberStale: stale,
		homelabv1.MemberDuplicate: duplicate, homelabv1.MemberConnecting: float64(st.TotalMembers) - reachable - unreachable - stale - duplicate,
	} {
		m.Members.WithLabelValues(name, state).Set(n)
	}
	for _, model := range st.Models {
		m.Gpus.WithLabelValues(name, model.Model, "total").Set(float64(model.Gpus))
		m.Gpus.WithLabelValues(name, model.Model, "ready").Set(float64(model.ReadyGpus))
		m.Gpus.WithLabelValues(name, model.Model, "free").Set(float64(model.FreeGpus))
	}
}

// ForgetFleet drops a deleted fleet's series.
func (m *Fleet) ForgetFleet(name string) {
	labels := prometheus.Labels{"fleet": name}
	m.Members.DeletePartialMatch(labels)
	m.MemberUp.DeletePartialMatch(labels)
	m.Gpus.DeletePartialMatch(labels)
}
