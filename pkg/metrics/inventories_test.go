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

// An inventory's content is served as its gauges; a model listed twice is served once, the
// allocation's series only when pods are read, and a forgotten inventory has none.
func TestContentGauges(t *testing.T) {
	m := New()
	m.SetContent("cluster", Content{
		GPUNodes: 4, ReadyGPUNodes: 3, GPUs: 32, ReadyGPUs: 24, UnhealthyGPUs: 1,
		Models: []ModelContent{
			{Product: "NVIDIA-H100-80GB-HBM3", GPUs: 32, ReadyGPUs: 24, Allocated: 8, Free: 15, LargestFit: 4},
			{Product: "NVIDIA-H100-80GB-HBM3", GPUs: 1},
		},
		SourceNodes:       []Count{{Name: "dra", Value: 4}},
		ConditionNodes:    []Count{{Name: "NotReady", Value: 1}},
		Allocation:        true,
		Pending:           []Pending{{Product: "", GPUs: 8, Since: 1000}, {Product: "NVIDIA-B200", GPUs: 2}},
		Namespaces:        []Count{{Name: "ml", Value: 8}},
		NotReadyNodes:     []string{"gpu-3"},
		FragmentationGPUs: 8,
	})
	m.SetContent("pool", Content{GPUNodes: 1, Models: []ModelContent{{Product: "Tesla-T4", GPUs: 1}}})
	want := `
# HELP gpu_inventory_gpu_nodes GPU nodes covered by an inventory, by readiness.
# TYPE gpu_inventory_gpu_nodes gauge
gpu_inventory_gpu_nodes{inventory="cluster",ready="false"} 1
gpu_inventory_gpu_nodes{inventory="cluster",ready="true"} 3
gpu_inventory_gpu_nodes{inventory="pool",ready="false"} 1
gpu_inventory_gpu_nodes{inventory="pool",ready="true"} 0
# HELP gpu_inventory_model_gpus GPUs per model (product without MIG/-SHARED suffix), by readiness of their node.
# TYPE gpu_inventory_model_gpus gauge
gpu_inventory_model_gpus{inventory="cluster",product="NVIDIA-H100-80GB-HBM3",ready="false"} 8
gpu_inventory_model_gpus{inventory="cluster",product="NVIDIA-H100-80GB-HBM3",ready="true"} 24
gpu_inventory_model_gpus{inventory="pool",product="Tesla-T4",ready="false"} 1
gpu_inventory_model_gpus{inventory="pool",product="Tesla-T4",ready="true"} 0
# HELP gpu_inventory_free_gpus GPUs a pod could get whole now (healthy, not held, on a Ready node not cordoned), per model.
# TYPE gpu_inventory_free_gpus gauge
gpu_inventory_free_gpus{inventory="cluster",product="NVIDIA-H100-80GB-HBM3"} 15
# HELP gpu_inventory_largest_fit_gpus The most GPUs free on one Ready, uncordoned node of the model: the largest job that fits on one node now, per model.
# TYPE gpu_inventory_largest_fit_gpus gauge
gpu_inventory_largest_fit_gpus{inventory="cluster",product="NVIDIA-H100-80GB-HBM3"} 4
# HELP gpu_inventory_fragmentation_threshold_gpus The job size the inventory's Fragmented condition is judged for (spec.fragmentationGpus, 8 when unset).
# TYPE gpu_inventory_fragmentation_threshold_gpus gauge
gpu_inventory_fragmentation_threshold_gpus{inventory="cluster"} 8
# HELP gpu_inventory_pending_gpus GPUs asked for by pods (and DRA claims) waiting to be scheduled, per requested model (product="": any model).
# TYPE gpu_inventory_pending_gpus gauge
gpu_inventory_pending_gpus{inventory="cluster",product=""} 8
gpu_inventory_pending_gpus{inventory="cluster",product="NVIDIA-B200"} 2
# HELP gpu_inventory_pending_oldest_timestamp_seconds Creation time of the oldest waiting pod that asks for GPUs, per requested model (product="": any model).
# TYPE gpu_inventory_pending_oldest_timestamp_seconds gauge
gpu_inventory_pending_oldest_timestamp_seconds{inventory="cluster",product=""} 1000
# HELP gpu_inventory_node_not_ready 1 for each GPU node that is not Ready (only with --metrics-per-node).
# TYPE gpu_inventory_node_not_ready gauge
gpu_inventory_node_not_ready{inventory="cluster",node="gpu-3"} 1
`
	names := []string{"gpu_inventory_gpu_nodes", "gpu_inventory_model_gpus", "gpu_inventory_free_gpus",
		"gpu_inventory_largest_fit_gpus", "gpu_inventory_fragmentation_threshold_gpus",
		"gpu_inventory_pending_gpus", "gpu_inventory_pending_oldest_timestamp_seconds", "gpu_inventory_node_not_ready"}
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}

	m.ForgetInventory("cluster")
	if n, err := testutil.GatherAndCount(m.Registry, names...); err != nil || n != 4 {
		t.Errorf("after forgetting cluster: %d series (%v), want pool's 4", n, err)
	}
}
