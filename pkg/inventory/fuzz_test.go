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
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
)

// FuzzEntry feeds arbitrary label sets (as "key=value" lines) and capacities to the parser:
// it must never panic, always name the node, and keep counts non-negative.
func FuzzEntry(f *testing.F) {
	for _, n := range fixtures.HomeLab() {
		var lines []string
		for k, v := range n.Labels {
			lines = append(lines, k+"="+v)
		}
		f.Add(strings.Join(lines, "\n"), int64(4), int64(4))
	}
	f.Add("nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB-MIG-1g.5gb\nnvidia.com/gpu.count=56\nnvidia.com/mig.strategy=single", int64(56), int64(56))
	f.Add("nvidia.com/gpu.memory=42505273344\nnvidia.com/gpu.count=99999999999999999999", int64(8), int64(6))
	f.Add("nvidia.com/mig-1g.5gb.count=abc\nnvidia.com/mig-.count=1\nnvidia.com/gpu.replicas=-3", int64(-1), int64(9))
	f.Add("nvidia.com/gpu.count=2\nnvidia.com/gpu.replicas=2147483647\nnvidia.com/gpu.sharing-strategy=mps", int64(1<<40), int64(0))
	f.Fuzz(func(t *testing.T, labelLines string, capacity, allocatable int64) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "fuzz", Labels: map[string]string{}}}
		for _, line := range strings.Split(labelLines, "\n") {
			k, v, _ := strings.Cut(line, "=")
			n.Labels[k] = v
		}
		n.Status.Capacity = corev1.ResourceList{ResourceGPU: *resource.NewQuantity(capacity, resource.DecimalSI)}
		n.Status.Allocatable = corev1.ResourceList{ResourceGPU: *resource.NewQuantity(allocatable, resource.DecimalSI)}
		entry, _ := Entry(n)
		if entry.Name != "fuzz" || entry.GpuCount < 0 || entry.GpuMemoryMiB < 0 || entry.UnhealthyGpus < 0 || entry.Capacity < 0 {
			t.Fatalf("bad entry %+v", entry)
		}
		inv, _ := Compute([]*corev1.Node{n}, nil, t0)
		if inv.TotalGpus < 0 || inv.Hash == "" {
			t.Fatalf("bad inventory %+v", inv)
		}
	})
}

// FuzzSelector feeds arbitrary selector strings and label sets to the selector path: a bad
// selector is an error, never a panic.
func FuzzSelector(f *testing.F) {
	f.Add("pool", "In", "a100,h100", "pool=a100")
	f.Add("bad key!", "Exists", "", "x=y")
	f.Add("", "Near", "v", "")
	f.Fuzz(func(t *testing.T, key, op, values, labelLine string) {
		var vals []string
		if values != "" {
			vals = strings.Split(values, ",")
		}
		ls := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOperator(op), Values: vals}}}
		sel, err := Selector(ls)
		if err != nil {
			return
		}
		k, v, _ := strings.Cut(labelLine, "=")
		_ = sel.Matches(labels.Set{k: v})
	})
}
