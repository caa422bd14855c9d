package inventory

import (
	"encoding/json"
	"fmt"
	"testing"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// fleet returns n realistic entries, one in every 200 not Ready.
func fleet(n int) []homelabv1.GpuNode {
	entries := make([]homelabv1.GpuNode, n)
	for i := range entries {
		e := homelabv1.GpuNode{
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
