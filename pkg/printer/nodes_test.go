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
)

func gpuNodeRow(name, ready string, spec homelabv1.GpuNodeSpec) GpuNodeRow {
	return GpuNodeRow{Record: &homelabv1.GpuNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, Ready: ready}
}

func TestGpuNodesMessagesWithoutRows(t *testing.T) {
	for _, tc := range []struct {
		name     string
		total    int
		model    string
		problems bool
		want     string
	}{
		{"no records", 0, "", false, "No GpuNode records: the operator has not recorded any GPU node (no node has GPU labels yet, or the operator is not running); `kubectl gpuinv scan` reads the Nodes directly.\n"},
		{"no problems", 5, "", true, "No GPU node needs attention (5 GPU nodes).\n"},
		{"no model", 1, "B200", false, "No GPU node matches --model B200 (1 GPU node in all).\n"},
		{"no problem of a model", 5, "H100", true, "No GPU node matches --model H100 --problems (5 GPU nodes in all).\n"},
	} {
		var b strings.Builder
		if err := GpuNodes(&b, nil, tc.total, tc.model, Options{Problems: tc.problems}); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, b.String(), tc.want)
		}
	}
}

func TestGpuNodesSummaryCountsEachProblemOnce(t *testing.T) {
	missing := &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	rows := []GpuNodeRow{
		gpuNodeRow("a", "True", homelabv1.GpuNodeSpec{}),
		gpuNodeRow("b", "False", homelabv1.GpuNodeSpec{MissingSince: missing}), // two problems, one node
		gpuNodeRow("c", NodeGone, homelabv1.GpuNodeSpec{}),
		gpuNodeRow("d", "True", homelabv1.GpuNodeSpec{MissingSince: missing}),
	}
	for _, tc := range []struct {
		rows  []GpuNodeRow
		total int
		model string
		want  string
	}{
		{rows, 4, "", "4 GPU nodes, 3 problems (1 not Ready, 1 Node gone, 2 with facts missing)"},
		{rows[:1], 1, "", "1 GPU node, no problems"},
		{rows[1:2], 4, "x", "1 of 4 GPU nodes (--model x), 1 problem (1 not Ready, 1 with facts missing)"},
	} {
		if got := gpuNodesSummary(tc.rows, tc.total, nodesFilter(tc.model, false)); got != tc.want {
			t.Errorf("summary %q, want %q", got, tc.want)
		}
	}
}

func TestGpuNodesMIGAndSharing(t *testing.T) {
	for _, tc := range []struct {
		spec homelabv1.GpuNodeSpec
		want string
	}{
		{homelabv1.GpuNodeSpec{Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8}, ""},
		{homelabv1.GpuNodeSpec{Product: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", GpuCount: 14, MIG: &homelabv1.MigInfo{Strategy: "single"}}, "MIG 14x1g.5gb"},
		{homelabv1.GpuNodeSpec{Product: "NVIDIA-A100-SXM4-40GB", GpuCount: 24, MIG: &homelabv1.MigInfo{Strategy: "mixed",
			Devices: []homelabv1.MigDevice{{Profile: "1g.5gb", Count: 16}, {Profile: "2g.10gb", Count: 8}}}}, "MIG 16x1g.5gb+8x2g.10gb"},
		{homelabv1.GpuNodeSpec{Product: "NVIDIA-A100-SXM4-40GB", MIG: &homelabv1.MigInfo{Strategy: "mixed"}}, "MIG mixed"},
		{homelabv1.GpuNodeSpec{Product: "NVIDIA-A100-SXM4-40GB", MIG: &homelabv1.MigInfo{Capable: true}}, ""},
		{homelabv1.GpuNodeSpec{Product: "Tesla-T4-SHARED", Sharing: &homelabv1.GpuSharing{Strategy: "time-slicing", Replicas: 4}}, "time-slicing x4"},
		{homelabv1.GpuNodeSpec{Product: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", GpuCount: 7, MIG: &homelabv1.MigInfo{Strategy: "single"},
			Sharing: &homelabv1.GpuSharing{Strategy: "mps", Replicas: 2}}, "MIG 7x1g.5gb, mps x2"},
	} {
		if got := migSharing(&tc.spec); got != tc.want {
			t.Errorf("%s: MIG/SHARING %q, want %q", tc.spec.Product, got, tc.want)
		}
	}
}

// A record with health conditions is a problem; they follow the table, and the summary counts
// the nodes with any. The record's other conditions are the report's and change nothing here.
func TestGpuNodesHealthConditions(t *testing.T) {
	rows := []GpuNodeRow{
		gpuNodeRow("dgx-1", "True", homelabv1.GpuNodeSpec{Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8, Source: homelabv1.SourceGPUFeatureDiscovery,
			Conditions: []string{"UnhealthyGPUs"}, Warnings: []string{`nvidia.com/gpu.count="abc": not a whole number`}}),
		gpuNodeRow("dra-h100-1", "True", homelabv1.GpuNodeSpec{Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8, Source: "gpu-feature-discovery,dra",
			Conditions: []string{"DeviceTainted", "UnhealthyGPUs", "XIDError"}}),
		gpuNodeRow("gke-l4-1", "True", homelabv1.GpuNodeSpec{Product: "NVIDIA-L4", GpuCount: 1, Source: homelabv1.SourceGKE,
			Conditions: []string{"DriverUpgrading"}}),
	}
	if rows[0].Problem() || !rows[1].Problem() || !rows[2].Problem() {
		t.Errorf("problems: %v %v %v, want only the nodes with health conditions", rows[0].Problem(), rows[1].Problem(), rows[2].Problem())
	}
	var b strings.Builder
	if err := GpuNodes(&b, rows[1:], 3, "", Options{Problems: true}); err != nil {
		t.Fatal(err)
	}
	want := `NAME        READY  PRODUCT                GPUS  MEMORY  MIG/SHARING  DRIVER  SOURCE                     MISSING-SINCE
dra-h100-1  True   NVIDIA-H100-80GB-HBM3  8                                  gpu-feature-discovery,dra
gke-l4-1    True   NVIDIA-L4              1                                  gke

Health conditions:
  dra-h100-1:  DeviceTainted, XIDError
  gke-l4-1:    DriverUpgrading

2 of 3 GPU nodes (--problems), 2 problems (2 with health conditions)
`
	if b.String() != want {
		t.Errorf("--problems:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := GpuNodes(&b, rows[:1], 1, "", Options{}); err != nil {
		t.Fatal(err)
	}
	if want := "\n1 GPU node, no problems\n"; !strings.HasSuffix(b.String(), want) || strings.Contains(b.String(), "Health") {
		t.Errorf("a node with only UnhealthyGPUs and a warning:\n%s\nwant no health conditions and a summary %q", b.String(), want)
	}
	b.Reset()
	if err := GpuNodes(&b, rows, 3, "", Options{Color: true}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{red + "XIDError" + reset, yellow + "DriverUpgrading" + reset} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("coloured output lacks %q:\n%q", want, b.String())
		}
	}
}
