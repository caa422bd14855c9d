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
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// gfdNode builds a Ready node with the labels GPU Feature Discovery writes on real clusters.
func gfdNode(name string, labels map[string]string, capacity, allocatable map[corev1.ResourceName]int64) *corev1.Node {
	n := node(name, corev1.ConditionTrue, map[string]string{
		"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true", "nvidia.com/gpu.machine": "DGX-H100",
		"nvidia.com/gpu.mode": "compute", "nvidia.com/gpu.replicas": "0", "nvidia.com/gpu.sharing-strategy": "none",
		"nvidia.com/cuda.driver-version.full": "570.124.06", "nvidia.com/cuda.driver-version.major": "570",
		"nvidia.com/cuda.driver-version.minor": "124", "nvidia.com/cuda.driver-version.revision": "06",
		"nvidia.com/cuda.runtime-version.full": "12.8", "nvidia.com/cuda.runtime-version.major": "12",
		"nvidia.com/cuda.runtime-version.minor": "8",
	})
	for k, v := range labels {
		if v == "" {
			delete(n.Labels, k)
		} else {
			n.Labels[k] = v
		}
	}
	n.Status.Capacity, n.Status.Allocatable = corev1.ResourceList{}, corev1.ResourceList{}
	for r, q := range capacity {
		n.Status.Capacity[r] = *resource.NewQuantity(q, resource.DecimalSI)
	}
	for r, q := range allocatable {
		n.Status.Allocatable[r] = *resource.NewQuantity(q, resource.DecimalSI)
	}
	return n
}

func gpus(n int64) map[corev1.ResourceName]int64 {
	return map[corev1.ResourceName]int64{ResourceGPU: n}
}

func TestEntryFromRealLabelSets(t *testing.T) {
	h100 := map[string]string{
		LabelProduct: "NVIDIA-H100-80GB-HBM3", LabelCount: "8", LabelMemory: "81559", LabelFamily: "hopper",
		LabelComputeMajor: "9", LabelComputeMinor: "0",
	}
	cases := []struct {
		name string
		node *corev1.Node
		want homelabv1.GpuNodeEntry
	}{
		{
			name: "8x H100, container",
			node: gfdNode("h100", h100, gpus(8), gpus(8)),
			want: homelabv1.GpuNodeEntry{Name: "h100", Ready: true, Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8, GpuMemoryMiB: 81559,
				WorkloadConfig: "container", Family: "hopper", ComputeCapability: "9.0", DriverVersion: "570.124.06", CudaVersion: "12.8",
				Capacity: 8, Allocatable: 8},
		},
		{
			name: "A100 with MIG single",
			node: gfdNode("a100-single", map[string]string{
				LabelProduct: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", LabelCount: "56", LabelMemory: "4864", LabelFamily: "ampere",
				LabelComputeMajor: "8", LabelComputeMinor: "0", LabelMIGCapable: "true", LabelMIGStrategy: "single",
				LabelMIGConfig: "all-1g.5gb", LabelMIGState: "success",
			}, gpus(56), gpus(56)),
			want: homelabv1.GpuNodeEntry{Name: "a100-single", Ready: true, Product: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", GpuCount: 56, GpuMemoryMiB: 4864,
				WorkloadConfig: "container", Family: "ampere", ComputeCapability: "8.0", DriverVersion: "570.124.06", CudaVersion: "12.8",
				MIG: &homelabv1.MigInfo{Capable: true, Strategy: "single", Config: "all-1g.5gb", ConfigState: "success"}, Capacity: 56, Allocatable: 56},
		},
		{
			name: "A100 with MIG mixed",
			node: gfdNode("a100-mixed", map[string]string{
				LabelProduct: "NVIDIA-A100-SXM4-40GB", LabelCount: "8", LabelMemory: "40960", LabelMIGCapable: "true",
				LabelMIGStrategy: "mixed", LabelMIGConfig: "all-balanced", LabelMIGState: "success",
				"nvidia.com/mig-1g.5gb.count": "16", "nvidia.com/mig-1g.5gb.memory": "4864", "nvidia.com/mig-1g.5gb.multiprocessors": "14",
				"nvidia.com/mig-2g.10gb.count": "8", "nvidia.com/mig-2g.10gb.memory": "9728",
				"nvidia.com/mig-3g.20gb.count": "8", "nvidia.com/mig-3g.20gb.memory": "19968",
			}, map[corev1.ResourceName]int64{ResourceGPU: 0, "nvidia.com/mig-1g.5gb": 16, "nvidia.com/mig-2g.10gb": 8, "nvidia.com/mig-3g.20gb": 8},
				map[corev1.ResourceName]int64{ResourceGPU: 0, "nvidia.com/mig-1g.5gb": 16, "nvidia.com/mig-2g.10gb": 8, "nvidia.com/mig-3g.20gb": 8}),
			want: homelabv1.GpuNodeEntry{Name: "a100-mixed", Ready: true, Product: "NVIDIA-A100-SXM4-40GB", GpuCount: 8, GpuMemoryMiB: 40960,
				WorkloadConfig: "container", DriverVersion: "570.124.06", CudaVersion: "12.8",
				MIG: &homelabv1.MigInfo{Capable: true, Strategy: "mixed", Config: "all-balanced", ConfigState: "success", Devices: []homelabv1.MigDevice{
					{Profile: "1g.5gb", Count: 16, MemoryMiB: 4864}, {Profile: "2g.10gb", Count: 8, MemoryMiB: 9728}, {Profile: "3g.20gb", Count: 8, MemoryMiB: 19968},
				}}},
		},
		{
			name: "time-sliced, replicas 4",
			node: gfdNode("t4-shared", map[string]string{
				LabelProduct: "Tesla-T4-SHARED", LabelCount: "2", LabelMemory: "15360", LabelReplicas: "4", LabelSharing: "time-slicing",
			}, gpus(8), gpus(8)),
			want: homelabv1.GpuNodeEntry{Name: "t4-shared", Ready: true, Product: "Tesla-T4-SHARED", GpuCount: 2, GpuMemoryMiB: 15360,
				WorkloadConfig: "container", DriverVersion: "570.124.06", CudaVersion: "12.8",
				Sharing: &homelabv1.GpuSharing{Strategy: "time-slicing", Replicas: 4}, Capacity: 8, Allocatable: 8},
		},
		{
			name: "old GFD: memory in bytes, deprecated CUDA labels",
			node: gfdNode("old-gfd", map[string]string{
				LabelProduct: "A100-SXM4-40GB", LabelCount: "4", LabelMemory: "42505273344",
				LabelDriverFull: "", LabelDriverMajor: "", LabelDriverMinor: "", LabelDriverRev: "",
				LabelRuntimeFull: "", LabelRuntimeMajor: "", LabelRuntimeMinor: "",
				LabelOldDriverMajor: "450", LabelOldDriverMinor: "80", LabelOldDriverRev: "02",
				LabelOldRuntimeMajor: "11", LabelOldRuntimeMinor: "0",
			}, gpus(4), gpus(4)),
			want: homelabv1.GpuNodeEntry{Name: "old-gfd", Ready: true, Product: "A100-SXM4-40GB", GpuCount: 4, GpuMemoryMiB: 40536,
				WorkloadConfig: "container", DriverVersion: "450.80.02", CudaVersion: "11.0", Capacity: 4, Allocatable: 4},
		},
		{
			name: "vm-passthrough",
			node: gfdNode("vfio", map[string]string{LabelWorkloadConfig: "vm-passthrough", LabelProduct: "", LabelCount: "", LabelMemory: "",
				"nvidia.com/gpu.deploy.vfio-manager": "true"}, nil, nil),
			want: homelabv1.GpuNodeEntry{Name: "vfio", Ready: true, WorkloadConfig: "vm-passthrough", DriverVersion: "570.124.06", CudaVersion: "12.8"},
		},
		{
			name: "capacity 8, allocatable 6",
			node: gfdNode("xid", h100, gpus(8), gpus(6)),
			want: homelabv1.GpuNodeEntry{Name: "xid", Ready: true, Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8, GpuMemoryMiB: 81559,
				WorkloadConfig: "container", Family: "hopper", ComputeCapability: "9.0", DriverVersion: "570.124.06", CudaVersion: "12.8",
				Capacity: 8, Allocatable: 6, UnhealthyGpus: 2, Conditions: []string{NodeUnhealthyGPUs}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, warnings := Entry(tc.node)
			if len(warnings) != 0 {
				t.Errorf("unexpected warnings: %v", warnings)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("entry (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeConditions(t *testing.T) {
	base := map[string]string{LabelProduct: "NVIDIA-L4", LabelCount: "1"}
	notReady := gfdNode("n", base, gpus(1), gpus(1))
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	unknown := gfdNode("n", base, gpus(1), gpus(1))
	unknown.Status.Conditions[0].Status = corev1.ConditionUnknown
	cordoned := gfdNode("n", base, gpus(1), gpus(1))
	cordoned.Spec.Unschedulable = true
	tainted := gfdNode("n", base, gpus(1), gpus(1))
	tainted.Spec.Taints = []corev1.Taint{{Key: TaintUnreachable, Effect: corev1.TaintEffectNoExecute}}
	migFailed := gfdNode("n", map[string]string{LabelProduct: "NVIDIA-A100-SXM4-40GB-MIG-INVALID", LabelCount: "0", LabelMIGStrategy: "single", LabelMIGState: "failed"}, gpus(0), gpus(0))
	cases := map[string]struct {
		node *corev1.Node
		want []string
	}{
		"healthy":           {gfdNode("n", base, gpus(1), gpus(1)), nil},
		"NotReady":          {notReady, []string{NodeNotReady}},
		"Ready Unknown":     {unknown, []string{NodeNotReady, NodeUnreachable}},
		"unreachable taint": {tainted, []string{NodeUnreachable}},
		"cordoned":          {cordoned, []string{NodeCordoned}},
		"MIG config failed": {migFailed, []string{NodeMIGConfigFailed}},
	}
	for name, tc := range cases {
		got, _ := Entry(tc.node)
		if diff := cmp.Diff(tc.want, got.Conditions); diff != "" {
			t.Errorf("%s: conditions (-want +got):\n%s", name, diff)
		}
	}
}

func TestContradictoryLabelsWarn(t *testing.T) {
	n := gfdNode("n", map[string]string{LabelProduct: "NVIDIA-H100-80GB-HBM3", LabelCount: "2"}, gpus(8), gpus(8))
	entry, warnings := Entry(n)
	if len(warnings) != 1 || len(entry.Warnings) != 1 || entry.GpuCount != 2 {
		t.Fatalf("count 2 with capacity 8: warnings %v, entry warnings %v, count %d; want one warning and count 2", warnings, entry.Warnings, entry.GpuCount)
	}
	if want := `nvidia.com/gpu.count="2": contradicts nvidia.com/gpu capacity 8 (expected 2)`; entry.Warnings[0] != want {
		t.Errorf("warning = %q, want %q", entry.Warnings[0], want)
	}
}

// A node whose GFD labels vanish keeps its last-known product, count and memory.
func TestLastKnownLabels(t *testing.T) {
	labelled := gfdNode("gpu1", map[string]string{LabelProduct: "NVIDIA-H100-80GB-HBM3", LabelCount: "8", LabelMemory: "81559", LabelFamily: "hopper"}, gpus(8), gpus(8))
	first, _ := Compute([]*corev1.Node{labelled}, nil, t0)

	vanished := labelled.DeepCopy()
	for _, k := range []string{LabelProduct, LabelCount, LabelMemory, LabelFamily} {
		delete(vanished.Labels, k)
	}
	vanished.Status.Conditions[0].Status = corev1.ConditionFalse
	second, _ := Compute([]*corev1.Node{vanished}, first.Nodes, t1)
	got := second.Nodes[0]
	if got.Product != "NVIDIA-H100-80GB-HBM3" || got.GpuCount != 8 || got.GpuMemoryMiB != 81559 || got.Family != "hopper" {
		t.Errorf("last-known values lost: %+v", got)
	}
	if !got.LabelsMissing || got.LabelsMissingSince == nil || !got.LabelsMissingSince.Time.Equal(t1) {
		t.Errorf("labelsMissing %v since %v, want true since %s", got.LabelsMissing, got.LabelsMissingSince, t1)
	}
	if diff := cmp.Diff([]string{NodeNotReady, NodeLabelsMissing}, got.Conditions); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if second.TotalGpus != 8 || second.UnlabeledGpus != 8 || second.LabelsMissingNodes != 1 {
		t.Errorf("totals: %d GPUs, %d unlabeled, %d nodes missing labels; want 8, 8, 1", second.TotalGpus, second.UnlabeledGpus, second.LabelsMissingNodes)
	}

	// Later scans keep the first time the labels were seen missing: the hash is stable.
	third, _ := Compute([]*corev1.Node{vanished}, second.Nodes, t1.Add(time.Hour))
	if !third.Nodes[0].LabelsMissingSince.Time.Equal(t1) || third.Hash != second.Hash {
		t.Errorf("labelsMissingSince moved to %v (hash changed: %v)", third.Nodes[0].LabelsMissingSince, third.Hash != second.Hash)
	}

	// Labels come back: the entry is read from them again.
	fourth, _ := Compute([]*corev1.Node{labelled}, third.Nodes, t1.Add(2*time.Hour))
	if n := fourth.Nodes[0]; n.LabelsMissing || n.LabelsMissingSince != nil || fourth.UnlabeledGpus != 0 {
		t.Errorf("after the labels came back: %+v, unlabeled %d", n, fourth.UnlabeledGpus)
	}

	// A node never labelled stays unknown, not "missing".
	never := gfdNode("never", map[string]string{LabelProduct: "", LabelCount: "", LabelMemory: ""}, nil, nil)
	inv, _ := Compute([]*corev1.Node{never}, []homelabv1.GpuNodeEntry{{Name: "never", WorkloadConfig: "container"}}, t1)
	if n := inv.Nodes[0]; n.LabelsMissing || n.Product != "" {
		t.Errorf("never-labelled node: %+v", n)
	}
}

func TestModels(t *testing.T) {
	entries := []homelabv1.GpuNodeEntry{
		{Name: "a", Ready: true, Product: "NVIDIA-A100-SXM4-40GB", GpuCount: 8, GpuMemoryMiB: 40960, Allocatable: 8},
		{Name: "b", Ready: false, Product: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", GpuCount: 56, GpuMemoryMiB: 4864, Allocatable: 56},
		{Name: "c", Ready: true, Product: "Tesla-T4-SHARED", GpuCount: 2, GpuMemoryMiB: 15360, Allocatable: 6, UnhealthyGpus: 1},
		{Name: "d", Ready: false},
	}
	want := []homelabv1.GpuModel{
		{Product: "", Nodes: 1},
		{Product: "NVIDIA-A100-SXM4-40GB", Variants: []string{"MIG-1g.5gb"}, Nodes: 2, ReadyNodes: 1, Gpus: 64, ReadyGpus: 8, AllocatableGpus: 64, MemoryMiB: 40960},
		{Product: "Tesla-T4", Variants: []string{"SHARED"}, Nodes: 1, ReadyNodes: 1, Gpus: 2, ReadyGpus: 2, AllocatableGpus: 6, UnhealthyGpus: 1, MemoryMiB: 15360},
	}
	if diff := cmp.Diff(want, Models(entries)); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
}

func TestConditionsOfAnInventory(t *testing.T) {
	since := metav1.NewTime(t0)
	inv := FromEntries([]homelabv1.GpuNodeEntry{
		{Name: "a", Ready: true, GpuCount: 8, UnhealthyGpus: 2, Conditions: []string{NodeUnhealthyGPUs}},
		{Name: "b", Ready: true, GpuCount: 4, LabelsMissing: true, LabelsMissingSince: &since, Conditions: []string{NodeLabelsMissing}},
	})
	conds := Conditions(inv, 0, 2)
	byType := map[string]metav1.Condition{}
	for _, c := range conds {
		byType[c.Type] = c
	}
	if c := byType["Degraded"]; c.Status != metav1.ConditionTrue || c.Reason != homelabv1.ReasonGPUsUnhealthy || c.Message != "2 GPUs are unhealthy on a" {
		t.Errorf("Degraded = %+v", c)
	}
	if c := byType["LabelsMissing"]; c.Status != metav1.ConditionTrue ||
		c.Message != "1 GPU nodes lost their GPU Feature Discovery labels and are reported from last-known values (4 GPUs): b" {
		t.Errorf("LabelsMissing = %+v", c)
	}
	if c := byType["Truncated"]; c.Status != metav1.ConditionFalse || c.ObservedGeneration != 2 {
		t.Errorf("Truncated = %+v", c)
	}
}

func TestHundredsOfLabelsAndHugeValues(t *testing.T) {
	labels := map[string]string{LabelProduct: strings.Repeat("H", 100_000), LabelCount: strings.Repeat("9", 5000), LabelMemory: "80GB"}
	for i := range 500 {
		labels[fmt.Sprintf("feature.node.kubernetes.io/cpu-cpuid.X%03d", i)] = "true"
		labels[fmt.Sprintf("nvidia.com/mig-%dg.%dgb.count", i, i)] = strings.Repeat("7", i)
	}
	n := gfdNode("big", labels, gpus(8), gpus(8))
	entry, warnings := Entry(n)
	if entry.Name != "big" || entry.GpuCount != 0 || entry.GpuMemoryMiB != 0 || len(entry.Warnings) != maxEntryWarnings || len(warnings) <= maxEntryWarnings {
		t.Errorf("entry %q count %d memory %d with %d warnings (%d returned); want %d in the entry, all returned for the log",
			entry.Name, entry.GpuCount, entry.GpuMemoryMiB, len(entry.Warnings), len(warnings), maxEntryWarnings)
	}
	if size := len(encode(&entry)); size > 4<<10 {
		t.Errorf("the entry is %d bytes; want it bounded to a few KiB whatever the labels", size)
	}
	inv := FromEntries([]homelabv1.GpuNodeEntry{entry})
	if listed, omitted := Truncate(inv.Nodes, DefaultMaxStatusNodes, MaxNodeListBytes); len(listed) != 1 || omitted != 0 {
		t.Errorf("the only node is not listed: listed %d omitted %d", len(listed), omitted)
	}
}

// A NotReady node with thousands of MIG labels is bounded like any other, and an entry
// that does not fit the node list is skipped: it does not keep every other node out.
func TestOneHugeProblemNodeDoesNotBlankTheList(t *testing.T) {
	labels := map[string]string{LabelProduct: "NVIDIA-A100-SXM4-40GB", LabelCount: "8", LabelMIGStrategy: "mixed"}
	for i := range 3000 {
		labels[fmt.Sprintf("nvidia.com/mig-%dg.%dgb.count", i, i)] = "1"
	}
	huge := gfdNode("huge", labels, gpus(8), gpus(8))
	huge.Status.Conditions[0].Status = corev1.ConditionFalse
	entry, _ := Entry(huge)
	if entry.MIG == nil || len(entry.MIG.Devices) != maxMIGDevices || len(encode(&entry)) > 4<<10 {
		t.Fatalf("entry of a node with 3,000 MIG labels: %d devices, %d bytes; want %d devices and a few KiB", len(entry.MIG.Devices), len(encode(&entry)), maxMIGDevices)
	}
	// An entry over the budget (as an older operator wrote it) is skipped, not the end.
	big := homelabv1.GpuNodeEntry{Name: "a-big", Product: strings.Repeat("x", 300<<10)}
	nodes := []homelabv1.GpuNodeEntry{big, {Name: "b"}, {Name: "c", Ready: true}}
	listed, omitted := Truncate(nodes, DefaultMaxStatusNodes, MaxNodeListBytes)
	if len(listed) != 2 || omitted != 1 || listed[0].Name != "b" {
		t.Errorf("listed %v, omitted %d; want b and c listed, the oversized entry skipped", listed, omitted)
	}
}
