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

package status

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

func TestMatchModels(t *testing.T) {
	models := []homelabv1.GpuModel{{Product: ""}, {Product: "NVIDIA-A100-80GB-PCIe"}, {Product: "NVIDIA-A100-SXM4-40GB"},
		{Product: "NVIDIA-H100-80GB-HBM3"}, {Product: "NVIDIA-L4"}, {Product: "NVIDIA-L40S"}}
	for _, tc := range []struct {
		model string
		want  []string
	}{
		{"", []string{"", "NVIDIA-A100-80GB-PCIe", "NVIDIA-A100-SXM4-40GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-L4", "NVIDIA-L40S"}},
		{"h100", []string{"NVIDIA-H100-80GB-HBM3"}},
		{"nvidia-h100-80gb-hbm3", []string{"NVIDIA-H100-80GB-HBM3"}},
		{"NVIDIA H100 80GB HBM3", []string{"NVIDIA-H100-80GB-HBM3"}},        // DRA's productName
		{" NVIDIA H100 80GB HBM3 ", []string{"NVIDIA-H100-80GB-HBM3"}},      // as pasted
		{"NVIDIA-H100-80GB-HBM3-SHARED", []string{"NVIDIA-H100-80GB-HBM3"}}, // a variant's label
		{"NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", []string{"NVIDIA-A100-SXM4-40GB"}},
		{"A100", []string{"NVIDIA-A100-80GB-PCIe", "NVIDIA-A100-SXM4-40GB"}},
		{"NVIDIA-L4", []string{"NVIDIA-L4"}}, // equal wins over containing (L40S)
		{"l4", []string{"NVIDIA-L4", "NVIDIA-L40S"}},
	} {
		got, err := matchModels(models, tc.model)
		if err != nil {
			t.Errorf("--model %q: %v", tc.model, err)
			continue
		}
		var names []string
		for _, m := range got {
			names = append(names, m.Product)
		}
		if diff := cmp.Diff(tc.want, names); diff != "" {
			t.Errorf("--model %q picks (-want +got):\n%s", tc.model, diff)
		}
	}
	// A model that matches nothing names the models, and says when some are folded.
	folded := append(models[1:3:3], homelabv1.GpuModel{Product: inventory.OtherModels})
	_, err := matchModels(folded, "b200")
	want := `no GPU model matches "b200" (models: NVIDIA-A100-80GB-PCIe, NVIDIA-A100-SXM4-40GB, <other models>; the smallest models are folded into <other models>, which --model cannot pick)`
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

// frees are listed nodes n-0, n-1, ... with these free GPUs.

func frees(free ...int32) []homelabv1.NodeFree {
	var out []homelabv1.NodeFree
	for i, f := range free {
		out = append(out, homelabv1.NodeFree{Name: fmt.Sprintf("n-%d", i), FreeGpus: f})
	}
	return out
}

func TestNodesWithFree(t *testing.T) {
	// 20 nodes with a free GPU, 12 with 2, 7 with 4, 2 with 8; the most: 8, 8, 6.
	fit := &homelabv1.GpuFit{NodesWith1Free: 20, NodesWith2Free: 12, NodesWith4Free: 7, NodesWith8Free: 2,
		Most: []homelabv1.NodeFree{{Name: "a", FreeGpus: 8}, {Name: "b", FreeGpus: 8}, {Name: "c", FreeGpus: 6}}}
	few := &homelabv1.GpuFit{NodesWith1Free: 2, NodesWith2Free: 2, NodesWith4Free: 1,
		Most: []homelabv1.NodeFree{{Name: "a", FreeGpus: 5}, {Name: "b", FreeGpus: 3}}}
	for _, tc := range []struct {
		name     string
		fit      *homelabv1.GpuFit
		listed   []homelabv1.NodeFree
		complete bool
		n        int32
		lo, hi   int32
	}{
		{"no free GPU", nil, nil, false, 1, 0, 0},
		{"bucket 1", fit, nil, false, 1, 20, 20},
		{"bucket 2", fit, nil, false, 2, 12, 12},
		{"bucket 4", fit, nil, false, 4, 7, 7},
		{"bucket 8", fit, nil, false, 8, 2, 2},
		{"more than the most free", fit, nil, false, 9, 0, 0},
		{"3: at least the 4s, at most the 2s", fit, nil, false, 3, 7, 12},
		{"5: at least the named nodes, at most the 4s", fit, nil, false, 5, 3, 7},
		{"6: listed nodes raise the lower bound", fit, frees(6, 7, 0), false, 6, 5, 7},
		{"6: enough listed nodes make it exact", fit, frees(6, 7, 6, 6, 0), false, 6, 7, 7},
		{"6: a node both named and listed counts once", fit, []homelabv1.NodeFree{{Name: "c", FreeGpus: 6}, {Name: "x", FreeGpus: 7}}, false, 6, 4, 7},
		{"7: at least the 8s and the named 8s", fit, nil, false, 7, 2, 7},
		{"complete list: exact", fit, frees(8, 8, 6, 5, 5, 3, 0), true, 5, 5, 5},
		{"complete list, bucket: the summary", fit, frees(8), true, 4, 7, 7},
		{"fewer named than the limit: the named are all", few, nil, false, 3, 2, 2},
		{"fewer named: 5", few, nil, false, 5, 1, 1},
		{"fewer named: 6", few, nil, false, 6, 0, 0},
	} {
		lo, hi := nodesWithFree(tc.fit, tc.listed, tc.complete, tc.n)
		if lo != tc.lo || hi != tc.hi {
			t.Errorf("%s: nodes with %d free: %d-%d, want %d-%d", tc.name, tc.n, lo, hi, tc.lo, tc.hi)
		}
	}
}
