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
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// A node that lost its labels and is in no previous list (an unlisted node of a large fleet)
// is counted from its GpuNode record: the fleet does not shrink.
func TestRecordsRememberUnlistedNodes(t *testing.T) {
	bare := node("gpu-0042", corev1.ConditionTrue, map[string]string{"nvidia.com/gpu.present": "true"})
	since := metav1.NewTime(t0)
	records := func(name string) *homelabv1.GpuNodeSpec {
		if name != "gpu-0042" {
			return nil
		}
		return &homelabv1.GpuNodeSpec{Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8, GpuMemoryMiB: 81559, Family: "hopper", MissingSince: &since}
	}
	without, _ := Compute([]*corev1.Node{bare}, nil, t1)
	if without.TotalGpus != 0 || without.LabelsMissingNodes != 0 {
		t.Fatalf("without a record: %d GPUs, %d labels-missing nodes; want 0 and 0", without.TotalGpus, without.LabelsMissingNodes)
	}
	inv, _ := (*EntryCache)(nil).ComputeWithRecords([]*corev1.Node{bare}, nil, records, t1)
	n := inv.Nodes[0]
	if inv.TotalGpus != 8 || inv.UnlabeledGpus != 8 || inv.LabelsMissingNodes != 1 || n.Product != "NVIDIA-H100-80GB-HBM3" ||
		n.Family != "hopper" || !n.LabelsMissing || !n.LabelsMissingSince.Equal(&since) {
		t.Errorf("from the record: %d GPUs (%d unlabeled), %d missing; entry %+v; want 8 H100 GPUs missing since %s",
			inv.TotalGpus, inv.UnlabeledGpus, inv.LabelsMissingNodes, n, t0)
	}
	if len(inv.Models) != 1 || inv.Models[0].Product != "NVIDIA-H100-80GB-HBM3" || inv.Models[0].Gpus != 8 {
		t.Errorf("models %+v, want the H100 with 8 GPUs", inv.Models)
	}
}

// The record wins over a stale previous entry; a record that knows nothing of the GPUs does
// not hide what the previous entry knows; labels present win over both.
func TestRecordsAgainstPreviousEntries(t *testing.T) {
	earlier := metav1.NewTime(t0)
	previous := []homelabv1.GpuNodeEntry{
		{Name: "a", Product: "NVIDIA-A100-SXM4-40GB", GpuCount: 4, LabelsMissing: true, LabelsMissingSince: &earlier},
		{Name: "b", Product: "NVIDIA-L4", GpuCount: 2},
	}
	records := map[string]*homelabv1.GpuNodeSpec{
		"a": {Product: "NVIDIA-A100-SXM4-40GB", GpuCount: 8},
		"b": {Source: homelabv1.SourceGPUFeatureDiscovery},
		"c": {Product: "NVIDIA-L4", GpuCount: 2},
	}
	nodes := []*corev1.Node{
		node("a", corev1.ConditionTrue, map[string]string{"nvidia.com/gpu.present": "true"}),
		node("b", corev1.ConditionTrue, map[string]string{"nvidia.com/gpu.present": "true"}),
		node("c", corev1.ConditionTrue, map[string]string{"nvidia.com/gpu.present": "true", LabelProduct: "Tesla-T4", LabelCount: "1"}),
	}
	inv, _ := (*EntryCache)(nil).ComputeWithRecords(nodes, previous, func(name string) *homelabv1.GpuNodeSpec { return records[name] }, t1)
	a, b, c := inv.Nodes[0], inv.Nodes[1], inv.Nodes[2]
	if a.GpuCount != 8 || !a.LabelsMissingSince.Equal(&earlier) {
		t.Errorf("a: %d GPUs missing since %v; want the record's 8, since the stored %s", a.GpuCount, a.LabelsMissingSince, t0)
	}
	if b.Product != "NVIDIA-L4" || b.GpuCount != 2 || !b.LabelsMissing {
		t.Errorf("b: %+v; want the previous entry's L4 x2, labels missing", b)
	}
	if c.Product != "Tesla-T4" || c.GpuCount != 1 || c.LabelsMissing {
		t.Errorf("c: %+v; want its own labels", c)
	}
}
