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
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Held and idle GPUs are served per namespace and model, with usage_unknown; an inventory
// without usage serves none of them.
func TestUsageGauges(t *testing.T) {
	m := New()
	m.SetContent("cluster", Content{Usage: &UsageContent{Unknown: true, Rows: []UsageRow{
		{Namespace: "ml", Model: "NVIDIA-H100-80GB-HBM3", Held: 8, Idle: 2, HeldHours: 190, IdleHours: 40},
	}}})
	m.SetContent("pool", Content{})
	want := `
# HELP gpu_inventory_held_gpus GPUs (MIG devices count as one) pods hold now that DCGM exporter reports on, per namespace and model.
# TYPE gpu_inventory_held_gpus gauge
gpu_inventory_held_gpus{inventory="cluster",model="NVIDIA-H100-80GB-HBM3",namespace="ml"} 8
# HELP gpu_inventory_idle_gpus GPUs held by pods whose GPUs have been idle (below --idle-below) for longer than --idle-after, per namespace and model.
# TYPE gpu_inventory_idle_gpus gauge
gpu_inventory_idle_gpus{inventory="cluster",model="NVIDIA-H100-80GB-HBM3",namespace="ml"} 2
# HELP gpu_inventory_held_gpu_hours GPU-hours held over --idle-window by the pods holding now, rounded down, per namespace and model.
# TYPE gpu_inventory_held_gpu_hours gauge
gpu_inventory_held_gpu_hours{inventory="cluster",model="NVIDIA-H100-80GB-HBM3",namespace="ml"} 190
# HELP gpu_inventory_idle_gpu_hours GPU-hours held idle (below --idle-below) over --idle-window by the pods holding now, rounded down, per namespace and model.
# TYPE gpu_inventory_idle_gpu_hours gauge
gpu_inventory_idle_gpu_hours{inventory="cluster",model="NVIDIA-H100-80GB-HBM3",namespace="ml"} 40
# HELP gpu_inventory_usage_unknown 1 when the last query of Prometheus for DCGM exporter's utilisation failed (the UsageUnknown condition): the usage series are from the last good answer.
# TYPE gpu_inventory_usage_unknown gauge
gpu_inventory_usage_unknown{inventory="cluster"} 1
`
	names := []string{"gpu_inventory_held_gpus", "gpu_inventory_idle_gpus", "gpu_inventory_held_gpu_hours",
		"gpu_inventory_idle_gpu_hours", "gpu_inventory_usage_unknown"}
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}
