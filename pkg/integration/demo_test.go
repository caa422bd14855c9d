//go:build integration

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

package integration

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/demo"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
)

// runDemo runs `make demo` once and returns what it printed.
func runDemo(t *testing.T, wide bool) string {
	t.Helper()
	var out bytes.Buffer
	if err := demo.Run(testContext(t), demo.Options{Operator: operatorBinary, Once: true, Out: &out, Wide: wide}); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	return out.String()
}

// nodeRow returns the fields of node's row in the report's node table (nil when absent).
func nodeRow(report, node string) []string {
	_, table, _ := strings.Cut(report, "\nNODE ")
	for line := range strings.SplitSeq(table, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == node {
			return f
		}
	}
	return nil
}

// draFixtureGPUs is the number of whole GPUs in the slices the demo publishes for its DRA node.
func draFixtureGPUs(t *testing.T) int {
	t.Helper()
	slices, err := dra.Slices(dra.H100)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			if v := d.Attributes["type"].StringValue; v != nil && *v == "gpu" {
				n++
			}
		}
	}
	return n
}

// `make demo` prints the home lab next to the healthy kwok nodes, as `kubectl gpuinv` does;
// the DRA node (GPUs in a ResourceSlice, no GFD labels) and the GKE node (accelerator label
// and nvidia.com/gpu capacity) are ordinary GPU nodes, their H100s and L4s counted under the
// same models as the labelled nodes'.
func TestDemoPrintsTheInventory(t *testing.T) {
	out := runDemo(t, false)
	for _, want := range []string{
		"GPU nodes:       5/9 ready",
		"GPUs:            33/34 ready, 0 unhealthy",
		"Degraded:        True (4 of 9 GPU nodes are not Ready: nuc1, nuc2, omen, omen2)",
		"NVIDIA-A100-SXM4-40GB               MIG-1g.5gb  1/1          14/14       0          4864 MiB",
		"NVIDIA-H100-80GB-HBM3                           2/2          16/16       0          81559 MiB",
		"NVIDIA-L4                                       2/2          3/3         0          23034 MiB",
		"NODE        READY  PRODUCT                                    GPUS  ALLOC  FREE  MEMORY     WORKLOAD        NOTES",
		"a100-mig-1  true   NVIDIA-A100-SXM4-40GB-MIG-1g.5gb           14    7      0     4864 MiB   container       MIG 14x1g.5gb, free 7x1g.5gb",
		"dgx-h100-1  true   NVIDIA-H100-80GB-HBM3                      8     8      0     81559 MiB  container",
		// The quota of Kueue's queues, beside the hardware (kubectl gpuinv quota).
		"QuotaOvercommitted:  cohort research (ClusterQueues research-a, research-b): quota 16 nvidia.com/gpu of NVIDIA-H100-80GB-HBM3, more than the 8 Ready its flavors reach",
		"(dra-h100-1, gke-l4-1)",
		"nuc1        false  NVIDIA-GeForce-RTX-4070-Laptop-GPU-SHARED  1     0      0     8188 MiB   vm-passthrough  NotReady",
		"omen2       false  <unlabeled>                                0     0      0                container       NotReady, Unreachable",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	for node, want := range map[string][]string{
		demo.DRANode: {demo.DRANode, "true", "NVIDIA-H100-80GB-HBM3", strconv.Itoa(draFixtureGPUs(t))},
		demo.GKENode: {demo.GKENode, "true", "NVIDIA-L4", strconv.Itoa(demo.GKENodeGPUs)},
	} {
		row := nodeRow(out, node)
		if len(row) < len(want) {
			t.Errorf("no row for %s in the node table:\n%s", node, out)
			continue
		}
		if diff := cmp.Diff(want, row[:len(want)]); diff != "" {
			t.Errorf("%s's NODE, READY, PRODUCT, GPUS (-want +got):\n%s\n%s", node, diff, out)
		}
	}
}

// With -o wide the demo says where each node's facts came from, in the SOURCE column.
func TestDemoWideShowsSources(t *testing.T) {
	out := runDemo(t, true)
	lines := strings.Split(out, "\n")
	column := -1
	for _, line := range lines {
		if strings.HasPrefix(line, "NODE ") {
			column = strings.Index(line, "  SOURCE ") + 2
		}
	}
	if column < 2 {
		t.Fatalf("the wide node table has no SOURCE column:\n%s", out)
	}
	for node, want := range map[string]string{demo.DRANode: "dra", demo.GKENode: "gke", "dgx-h100-1": "gpu-feature-discovery"} {
		var got string
		for _, line := range lines {
			if strings.HasPrefix(line, node+" ") && len(line) > column {
				got, _, _ = strings.Cut(line[column:], " ")
			}
		}
		if got != want {
			t.Errorf("%s's SOURCE is %q, want %q:\n%s", node, got, want, out)
		}
	}
}
