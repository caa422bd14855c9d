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

package capacity

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
)

func TestFreeDevices(t *testing.T) {
	all := []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"}
	for _, tc := range []struct {
		name, fixture, node string
		claims              []*resourcev1.ResourceClaim
		want                int64
	}{
		{"allocated and admin access", dra.H100, "dra-h100-1",
			[]*resourcev1.ResourceClaim{allocated("dcgm", "dra-h100-1", true, all...), allocated("train", "dra-h100-1", false, "gpu-0", "gpu-1")}, 6},
		{"another node", dra.H100, "other", nil, 0},
		{"a NoSchedule taint", dra.H100Tainted, "dra-h100-1", nil, 7},
		{"whole partitionable GPUs", dra.H100DynMIG, "dra-h100-dyn-1", nil, 2},
		{"a partition taken", dra.H100DynMIG, "dra-h100-dyn-1",
			[]*resourcev1.ResourceClaim{allocated("small", "dra-h100-dyn-1", false, "gpu-0-mig-1g10gb-19-0")}, 1},
		{"the newest generation only", dra.PoolMidUpdate, "dra-h100-upd-1", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSnapshot(Cluster{Nodes: []*corev1.Node{node(tc.node, nil)}, Slices: slicesOf(t, tc.fixture), Claims: tc.claims})
			if got := s.FreeDevices(tc.node, "gpu.nvidia.com"); got != tc.want {
				t.Errorf("FreeDevices = %d, want %d", got, tc.want)
			}
			if got := s.FreeDevices(tc.node, "other.example.com"); got != 0 {
				t.Errorf("FreeDevices of another driver = %d, want 0", got)
			}
		})
	}
}
