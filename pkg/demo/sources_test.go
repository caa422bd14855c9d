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

package demo

import (
	"strings"
	"testing"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// The DRA node's slices are the driver's: one complete pool named after the node, bound to it.
func TestDRASlicesBelongToTheDRANode(t *testing.T) {
	slices, err := draSlices()
	if err != nil {
		t.Fatal(err)
	}
	if len(slices) != 1 {
		t.Fatalf("%d slices, want the fixture's one", len(slices))
	}
	s := slices[0]
	if s.Spec.Driver != "gpu.nvidia.com" || s.Spec.NodeName == nil || *s.Spec.NodeName != DRANode ||
		s.Spec.Pool.Name != DRANode || s.Spec.Pool.Generation != 1 || s.Spec.Pool.ResourceSliceCount != 1 {
		t.Errorf("slice spec: driver %q, node %v, pool %+v; want gpu.nvidia.com on %s, pool %s generation 1 of 1 slice",
			s.Spec.Driver, s.Spec.NodeName, s.Spec.Pool, DRANode, DRANode)
	}
	if s.Name != "" || s.GenerateName != DRANode+"-gpu.nvidia.com-" {
		t.Errorf("name %q, generateName %q; want a generated name as the kubelet gives a driver's slices", s.Name, s.GenerateName)
	}
	if got := fullGPUs(s); got != 8 {
		t.Errorf("%d whole GPUs, want 8", got)
	}
}

// Neither node carries GPU Feature Discovery's labels; both are GPU nodes all the same.
func TestSourceNodesHaveNoGFDLabels(t *testing.T) {
	for _, n := range sourceNodes() {
		for key := range n.Labels {
			if strings.HasPrefix(key, "nvidia.com/gpu.") && key != "nvidia.com/gpu.present" && !strings.HasPrefix(key, "nvidia.com/gpu.deploy.") {
				t.Errorf("%s has the GFD label %s", n.Name, key)
			}
		}
		if !inventory.IsGPUNode(n) {
			t.Errorf("%s is not a GPU node", n.Name)
		}
	}
}
