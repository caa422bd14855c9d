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

package inventory

import (
	"encoding/json"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// fleet returns n realistic entries, one in every 200 not Ready.
func fleet(n int) []homelabv1.GpuNodeEntry {
	entries := make([]homelabv1.GpuNodeEntry, n)
	for i := range entries {
		e := homelabv1.GpuNodeEntry{
			Name: fmt.Sprintf("gpu-node-%05d.us-east-1.compute.internal", i), Ready: i%200 != 0,
			Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8, GpuMemoryMiB: 81559, WorkloadConfig: "container",
			Family: "hopper", ComputeCapability: "9.0", DriverVersion: "570.124.06", CudaVersion: "12.8",
			Capacity: 8, Allocatable: 8,
		}
		if !e.Ready {
			e.Conditions = []string{NodeNotReady}
		}
		entries[i] = e
	}
	return entries
}

// The whole status, as stored, stays under 256 KiB at 65,000 nodes, lists problem nodes
// first, and its totals stay exact.
func TestStatusSizeBoundAt65000Nodes(t *testing.T) {
	const n = 65000
	inv := FromEntries(fleet(n))
	listed, omitted := Truncate(inv.Nodes, DefaultMaxStatusNodes, MaxNodeListBytes)
	if len(listed) != DefaultMaxStatusNodes || omitted != n-DefaultMaxStatusNodes {
		t.Fatalf("listed %d, omitted %d; want %d and %d", len(listed), omitted, DefaultMaxStatusNodes, n-DefaultMaxStatusNodes)
	}
	problems := 0
	for _, e := range listed {
		if IsProblem(e) {
			problems++
		}
	}
	if problems != n/200 {
		t.Errorf("listed %d problem nodes, want all %d of them first", problems, n/200)
	}
	for i := 1; i < len(listed); i++ {
		if listed[i-1].Name >= listed[i].Name {
			t.Fatalf("listed nodes are not sorted by name at %d", i)
		}
	}
	status := homelabv1.GpuInventoryStatus{
		InventoryHash: inv.Hash, TotalGpuNodes: inv.TotalGpuNodes, ReadyGpuNodes: inv.ReadyGpuNodes,
		TotalGpus: inv.TotalGpus, ReadyGpus: inv.ReadyGpus, Models: inv.Models, Nodes: listed,
		Conditions: Conditions(inv, omitted, 1),
	}
	b, err := json.Marshal(status)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 256<<10 {
		t.Errorf("status is %d bytes, want at most 256 KiB", len(b))
	}
	if inv.TotalGpuNodes != n || inv.TotalGpus != 8*n || inv.Models[0].Nodes != n {
		t.Errorf("totals not exact: %d nodes, %d GPUs, model nodes %d", inv.TotalGpuNodes, inv.TotalGpus, inv.Models[0].Nodes)
	}
	var truncated bool
	for _, c := range status.Conditions {
		if c.Type == homelabv1.ConditionTruncated {
			truncated = c.Status == "True" && c.Reason == homelabv1.ReasonNodesOmitted
		}
	}
	if !truncated {
		t.Errorf("Truncated condition is not True: %+v", status.Conditions)
	}
}

func TestTruncateByBytes(t *testing.T) {
	entries := fleet(100)
	listed, omitted := Truncate(entries, 1000, 10<<10)
	b, _ := json.Marshal(listed)
	if omitted == 0 || len(b) > 10<<10 {
		t.Errorf("byte budget 10 KiB: listed %d (%d bytes), omitted %d", len(listed), len(b), omitted)
	}
	if all, omitted := Truncate(entries, 1000, 1<<20); len(all) != 100 || omitted != 0 {
		t.Errorf("everything fits: listed %d, omitted %d", len(all), omitted)
	}
}

// Thousands of distinct products (and variants) keep the status under 256 KiB: the smallest
// models are counted together, and the totals per model still add up to the fleet's.
func TestStatusSizeBoundWithThousandsOfProducts(t *testing.T) {
	entries := fleet(65000)
	for i := range entries {
		suffix := ""
		if i%3 == 0 {
			suffix = fmt.Sprintf("-MIG-%dg.%dgb", i%20, i%40) // a variant
		}
		entries[i].Product = fmt.Sprintf("VENDOR-ACCELERATOR-%05d%s", i%5000, suffix)
		entries[i].GpuCount = int32(1 + i%8)
	}
	inv := FromEntries(entries)
	if len(inv.Models) > MaxModels || inv.ModelCount != 5000 {
		t.Errorf("%d models listed of %d; want at most %d listed of the 5,000", len(inv.Models), inv.ModelCount, MaxModels)
	}
	var gpus, nodes int32
	for _, m := range inv.Models {
		gpus += m.Gpus
		nodes += m.Nodes
		if len(m.Variants) > MaxVariants {
			t.Errorf("model %s lists %d variants; want at most %d", m.Product, len(m.Variants), MaxVariants)
		}
	}
	if gpus != inv.TotalGpus || nodes != inv.TotalGpuNodes {
		t.Errorf("models count %d GPUs on %d nodes; the fleet has %d on %d", gpus, nodes, inv.TotalGpus, inv.TotalGpuNodes)
	}
	listed, omitted := Truncate(inv.Nodes, DefaultMaxStatusNodes, MaxNodeListBytes)
	gi := homelabv1.GpuInventory{Status: inv.Status(listed, Conditions(inv, omitted, 1), 1, metav1.Now())}
	data, err := json.Marshal(gi)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 256<<10 {
		t.Errorf("the status is %d bytes with 5,000 products; want at most 256 KiB", len(data))
	}
}
