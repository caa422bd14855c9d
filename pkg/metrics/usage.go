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

// UsageContent is what pods that hold an inventory's GPUs use of them (status.usage).
type UsageContent struct {
	// Rows are per namespace and model: the ones status.usage lists, and every other one
	// with idle GPUs.
	Rows []UsageRow
	// Unknown: the last query of Prometheus failed; the rows are from the last good one.
	Unknown bool
}

// UsageRow is one namespace's GPUs of one model: held now, held by pods idle for longer
// than --idle-after, and the GPU-hours held and idle over the window (rounded down).
type UsageRow struct {
	Namespace, Model     string
	Held, Idle           int32
	HeldHours, IdleHours int64
}

// usageDescs are the gauges of held and idle GPUs.
type usageDescs struct {
	held, idle, heldHours, idleHours, unknown *prometheus.Desc
}

func newUsageDescs(desc func(name, help string, labels ...string) *prometheus.Desc) usageDescs {
	return usageDescs{
		held:      desc("held_gpus", "GPUs (MIG devices count as one) pods hold now that DCGM exporter reports on, per namespace and model.", "namespace", "model"),
		idle:      desc("idle_gpus", "GPUs held by pods whose GPUs have been idle (below --idle-below) for longer than --idle-after, per namespace and model.", "namespace", "model"),
		heldHours: desc("held_gpu_hours", "GPU-hours held over --idle-window by the pods holding now, rounded down, per namespace and model.", "namespace", "model"),
		idleHours: desc("idle_gpu_hours", "GPU-hours held idle (below --idle-below) over --idle-window by the pods holding now, rounded down, per namespace and model.", "namespace", "model"),
		unknown:   desc("usage_unknown", "1 when the last query of Prometheus for DCGM exporter's utilisation failed (the UsageUnknown condition): the usage series are from the last good answer."),
	}
}

func (d usageDescs) all() []*prometheus.Desc {
	return []*prometheus.Desc{d.held, d.idle, d.heldHours, d.idleHours, d.unknown}
}

func (d usageDescs) collect(gauge func(*prometheus.Desc, float64, ...string), u *UsageContent) {
	if u == nil {
		return
	}
	for _, r := range u.Rows {
		gauge(d.held, float64(r.Held), r.Namespace, r.Model)
		gauge(d.idle, float64(r.Idle), r.Namespace, r.Model)
		gauge(d.heldHours, float64(r.HeldHours), r.Namespace, r.Model)
		gauge(d.idleHours, float64(r.IdleHours), r.Namespace, r.Model)
	}
	unknown := 0.0
	if u.Unknown {
		unknown = 1
	}
	gauge(d.unknown, unknown)
}
