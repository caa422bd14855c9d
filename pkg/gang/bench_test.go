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

package gang

import (
	"fmt"
	"testing"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
)

// benchCluster is racks of 16 8-GPU nodes, every other node half full.
func benchCluster(nodes int) capacity.Cluster {
	var c capacity.Cluster
	for i := range nodes {
		name := fmt.Sprintf("n%05d", i)
		c.Nodes = append(c.Nodes, gpuNode(name, "z1", fmt.Sprintf("rack-%03d", i/16), gpus("8")))
		if i%2 == 0 {
			c.Pods = append(c.Pods, bound("held-"+name, name, 4, 0))
		}
	}
	return c
}

func BenchmarkPlace(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		s := capacity.NewSnapshot(benchCluster(nodes))
		gang := Gang{Templates: []Template{replicas("train", 8, 8)}, Topology: Topology{Key: rack}}
		b.Run(fmt.Sprintf("scheduler/nodes=%d", nodes), func(b *testing.B) {
			for b.Loop() {
				if _, err := PlaceAsScheduler(s, gang); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("kueue/nodes=%d", nodes), func(b *testing.B) {
			for b.Loop() {
				if _, err := PlaceAsKueue(s, gang, Kueue{Levels: byHost}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
