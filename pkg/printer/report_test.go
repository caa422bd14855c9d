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

package printer

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

var reportTime = time.Date(2026, 11, 29, 21, 45, 38, 0, time.UTC)

// sourcedInventory has a GFD node in an NVLink clique, a DRA node with an XID error, and a
// GKE node.
func sourcedInventory() *homelabv1.GpuInventory {
	clique := "7f1c2e8a-4b0d-4c1e-9a55-2d1b3c4e5f60.1"
	return &homelabv1.GpuInventory{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Status: homelabv1.GpuInventoryStatus{
			TotalGpuNodes: 3, ReadyGpuNodes: 3, TotalGpus: 17, ReadyGpus: 17, UnhealthyGpus: 1,
			InventoryHash: "h", ObservedAt: &metav1.Time{Time: reportTime},
			Cliques: []homelabv1.GpuClique{{Name: clique, Nodes: 1, Gpus: 8, ReadyGpus: 8}},
			Nodes: []homelabv1.GpuNodeEntry{
				{Name: "dgx-1", Ready: true, Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8, Clique: clique},
				{Name: "dra-h100-1", Ready: true, Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8, Source: homelabv1.SourceDRA,
					UnhealthyGpus: 1, Conditions: []string{inventory.NodeUnhealthyGPUs, inventory.NodeXIDError}},
				{Name: "gke-l4-1", Ready: true, Product: "NVIDIA-L4", GpuCount: 1, Source: homelabv1.SourceGKE},
			},
		},
	}
}

func report(t *testing.T, gi *homelabv1.GpuInventory, opts Options) string {
	t.Helper()
	opts.Now = reportTime.Add(time.Hour)
	var b strings.Builder
	if err := Report(&b, gi, opts); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// -o wide says where each node's facts came from (GFD when the entry names no source) and
// its clique; the default table names a source other than GFD's in the notes.
func TestReportWideShowsSourceAndClique(t *testing.T) {
	wide := report(t, sourcedInventory(), Options{Wide: true})
	want := `NODE        READY  PRODUCT                GPUS  MEMORY  WORKLOAD  FAMILY  COMPUTE  DRIVER  CUDA  SHARING  SOURCE                 CLIQUE                                  NOTES
dgx-1       true   NVIDIA-H100-80GB-HBM3  8                                                               gpu-feature-discovery  7f1c2e8a-4b0d-4c1e-9a55-2d1b3c4e5f60.1
dra-h100-1  true   NVIDIA-H100-80GB-HBM3  8                                                               dra                                                            1 unhealthy, XIDError
gke-l4-1    true   NVIDIA-L4              1                                                               gke
`
	if got := wide[strings.Index(wide, "NODE "):]; got != want {
		t.Errorf("wide node table:\n%s\nwant:\n%s", got, want)
	}
	table := report(t, sourcedInventory(), Options{})
	if !strings.Contains(table, "\nNODE        READY  PRODUCT                GPUS  MEMORY  WORKLOAD  NOTES\n") {
		t.Errorf("the default node table has other columns than without sources:\n%s", table)
	}
	// The default table names a source other than GFD's labels in the notes.
	for _, line := range []string{
		"dgx-1       true   NVIDIA-H100-80GB-HBM3  8\n",
		"dra-h100-1  true   NVIDIA-H100-80GB-HBM3  8                       1 unhealthy, XIDError, via dra\n",
		"gke-l4-1    true   NVIDIA-L4              1                       via gke\n",
	} {
		if !strings.Contains(table, line) {
			t.Errorf("default node table lacks %q:\n%s", line, table)
		}
	}
}

// A status with cliques gets a section with each clique's nodes and GPUs; one without
// has none.
func TestReportListsNVLinkCliques(t *testing.T) {
	gi := sourcedInventory()
	gi.Status.Cliques = append(gi.Status.Cliques, homelabv1.GpuClique{Name: "<other cliques>", Nodes: 3, Gpus: 12, ReadyGpus: 8})
	got := report(t, gi, Options{})
	want := "\nNVLINK-CLIQUE                           NODES  READY-GPUS\n" +
		"7f1c2e8a-4b0d-4c1e-9a55-2d1b3c4e5f60.1  1      8/8\n" +
		"<other cliques>                         3      8/12\n\nNODE"
	if !strings.Contains(got, want) {
		t.Errorf("report lacks the clique section %q:\n%s", want, got)
	}
	gi.Status.Cliques = nil
	if got := report(t, gi, Options{}); strings.Contains(got, "CLIQUE") {
		t.Errorf("report without cliques has a clique section:\n%s", got)
	}
}

// A health monitor's GPU fault is red; a condition that leaves the GPUs usable is yellow.
func TestReportColoursHealthConditions(t *testing.T) {
	gi := sourcedInventory()
	gi.Status.Nodes[2].Conditions = []string{inventory.NodeDriverUpgrading}
	got := report(t, gi, Options{Color: true})
	for _, want := range []string{red + "XIDError" + reset, yellow + "DriverUpgrading" + reset} {
		if !strings.Contains(got, want) {
			t.Errorf("coloured report lacks %q:\n%q", want, got)
		}
	}
}

func TestMilliGPUs(t *testing.T) {
	for milli, want := range map[int64]string{
		0: "0", 1000: "1", 8000: "8", 142: "0.14", 285: "0.29", 250: "0.25", 1500: "1.50",
		1: "0.01", 4: "0.01", 995: "1.00", 12427: "12.43", 1<<63 - 1: "9223372036854775.81", -5: "0",
	} {
		if got := MilliGPUs(milli); got != want {
			t.Errorf("MilliGPUs(%d) = %q, want %q", milli, got, want)
		}
	}
}

// Under the model table the report lists the demand no model row shows: any model, and
// models no covered node has; a listed model's demand is in its PENDING column only.
func TestReportWaitingLines(t *testing.T) {
	gi := sourcedInventory()
	gi.Status.Models = inventory.Models(gi.Status.Nodes)
	since := metav1.NewTime(reportTime.Add(-30 * time.Minute))
	gi.Status.Allocation = &homelabv1.GpuAllocation{FreeGpus: 16, PendingPods: 4, PendingGpus: 19, Pending: []homelabv1.GpuDemand{
		{Model: "", Pods: 1, Gpus: 2, Since: &since},
		{Model: "NVIDIA-B200", Pods: 2, Gpus: 16},
		{Model: "NVIDIA-H100-80GB-HBM3", Pods: 1, Gpus: 1, Since: &since},
	}}
	got := report(t, gi, Options{})
	want := "\nWaiting for any model: 1 pod asking for 2 GPUs, the oldest for 90m.\n" +
		"Waiting for NVIDIA-B200, which no node here has: 2 pods asking for 16 GPUs.\n\nNVLINK-CLIQUE"
	if !strings.Contains(got, want) || strings.Contains(got, "Waiting for NVIDIA-H100") {
		t.Errorf("report:\n%s\nwant the waiting lines:\n%s", got, want)
	}
	if !strings.Contains(got, "Waiting:         4 pods asking for 19 GPUs\n") {
		t.Errorf("no Waiting line in the header:\n%s", got)
	}
}

// The notes say what a pod could still get of parts of GPUs, whichever serves them: the device
// plugin's MIG devices and shared replicas, DRA partitions and DRA GPUs with a share left.
func TestFreePartsNameEveryKindOfPart(t *testing.T) {
	for _, tc := range []struct {
		name string
		node homelabv1.GpuNodeEntry
		want string
	}{
		{"device-plugin MIG", homelabv1.GpuNodeEntry{Ready: true, Free: []homelabv1.ResourceFree{
			{Resource: "nvidia.com/mig-1g.10gb", Free: 3}, {Resource: "nvidia.com/mig-3g.40gb", Free: 0}}}, "3x1g.10gb"},
		{"DRA partitions and shares", homelabv1.GpuNodeEntry{Ready: true, Free: []homelabv1.ResourceFree{
			{Resource: inventory.DRAPartitionPrefix + "1g.10gb", Free: 7}, {Resource: inventory.DRAPartitionPrefix + "7g.80gb", Free: 1},
			{Resource: inventory.DRASharedResource, Free: 2}}}, "7x1g.10gb+1x7g.80gb+2 shared"},
		{"time-sliced", homelabv1.GpuNodeEntry{Ready: true, Free: []homelabv1.ResourceFree{{Resource: "nvidia.com/gpu.shared", Free: 5}}}, "5 replicas"},
		{"not ready", homelabv1.GpuNodeEntry{Free: []homelabv1.ResourceFree{{Resource: inventory.DRASharedResource, Free: 2}}}, ""},
	} {
		if got := freeParts(tc.node); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
