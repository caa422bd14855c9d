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
	"slices"
	"testing"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// A model's nodes by free GPUs count only what a pod can get (a node with none, or more than
// 32, as said); its taints only on nodes a pod can land on, the most common first, at most
// 8; folded models add theirs up.
func TestModelsCountNodesByFreeGPUsAndTaints(t *testing.T) {
	const h100 = "NVIDIA-H100-80GB-HBM3"
	entries := []homelabv1.GpuNodeEntry{
		{Name: "a", Product: h100, Ready: true, FreeGpus: 8, Taints: []string{"gpu=h100:NoSchedule"}},
		{Name: "b", Product: h100, Ready: true, FreeGpus: 8, Taints: []string{"gpu=h100:NoSchedule", "rack=a:NoExecute"}},
		{Name: "c", Product: h100, Ready: true, FreeGpus: 3, Taints: []string{"gpu=h100:NoSchedule"}},
		{Name: "d", Product: h100, Ready: true},
		{Name: "e", Product: h100, Ready: false, UnschedulableFreeGpus: 8, Taints: []string{"node.kubernetes.io/unreachable:NoExecute"}},
		{Name: "f", Product: h100, Ready: true, Conditions: []string{NodeCordoned}, UnschedulableFreeGpus: 8, Taints: []string{"cordon=yes:NoSchedule"}},
		{Name: "g", Product: "NVIDIA-B200", Ready: true, FreeGpus: 40},
	}
	models := Models(entries)
	h := models[slices.IndexFunc(models, func(m homelabv1.GpuModel) bool { return m.Product == h100 })]
	if want := []int32{0, 0, 1, 0, 0, 0, 0, 2}; !slices.Equal(h.FreeNodes, want) {
		t.Errorf("H100 freeNodes %v, want %v", h.FreeNodes, want)
	}
	if want := []homelabv1.TaintCount{{Taint: "gpu=h100:NoSchedule", Nodes: 3}, {Taint: "rack=a:NoExecute", Nodes: 1}}; !slices.Equal(h.Taints, want) {
		t.Errorf("H100 taints %v, want %v", h.Taints, want)
	}
	b := models[slices.IndexFunc(models, func(m homelabv1.GpuModel) bool { return m.Product == "NVIDIA-B200" })]
	if len(b.FreeNodes) != MaxFreeNodes || b.FreeNodes[MaxFreeNodes-1] != 1 {
		t.Errorf("B200 freeNodes %v, want its node of 40 free counted at 32", b.FreeNodes)
	}

	var many []homelabv1.GpuNodeEntry
	for i := range MaxModels + 2 {
		many = append(many, homelabv1.GpuNodeEntry{Name: fmt.Sprint(i), Product: fmt.Sprintf("M-%02d", i), Ready: true, FreeGpus: 1,
			Taints: []string{fmt.Sprintf("t%d=x:NoSchedule", i)}})
	}
	folded := FoldModels(Models(many))
	other := folded[slices.IndexFunc(folded, func(m homelabv1.GpuModel) bool { return m.Product == OtherModels })]
	if !slices.Equal(other.FreeNodes, []int32{3}) || len(other.Taints) != 3 {
		t.Errorf("%s: freeNodes %v, taints %v; want the 3 folded models' nodes and taints", OtherModels, other.FreeNodes, other.Taints)
	}
}
