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

package topologycache

import (
	"fmt"
	"testing"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/topology"
)

// BenchmarkCompute is one sync's topology section over make bench-large's GPU nodes: 10,000
// in 3 zones, 40 network blocks and 200 racks, the racks' labels held apart as the node cache
// holds them.
func BenchmarkCompute(b *testing.B) {
	f := &fleet{}
	for i := range 10000 {
		rack := i / 50
		f.add(fmt.Sprintf("node-%05d", i), map[string]string{"nvidia.com/gpu.product": h100}, int32(i%9), i%97 != 0, false)
		f.nodes[i].Annotations = map[string]string{topology.Zone: fmt.Sprintf("zone-%d", rack/5%3),
			topology.AWSNetworkLayer1: fmt.Sprintf("nn-%d", rack/5), topology.Rack: fmt.Sprintf("rack-%03d", rack)}
	}
	in := f.input(homelabv1.GpuInventorySpec{})
	s := NewSection(noKueue, nil, Options{})
	b.ReportAllocs()
	for b.Loop() {
		if s.Compute(in) == nil {
			b.Fatal("no topology")
		}
	}
}
