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

package main

import (
	"slices"
	"testing"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/topology"
)

// The fleet of make bench is 10 network blocks of 5 racks, in 3 zones; that of make
// bench-large four times as many blocks and racks. Each rack lies in one block and each block
// in one zone, so that the operator's levels nest.
func TestTheFleetsTopologyNests(t *testing.T) {
	for _, tc := range []struct {
		nodes int
		want  []homelabv1.TopologyLevel
	}{
		{5000, fiveThousandLevels},
		{20000, []homelabv1.TopologyLevel{{Key: topology.Zone, Domains: 3}, {Key: topology.AWSNetworkLayer1, Domains: 40}, {Key: topology.Rack, Domains: 200}}},
	} {
		fleet := gpuFleet(tc.nodes, 0.5)
		if got := fleetLevels(fleet); !slices.Equal(got, tc.want) {
			t.Errorf("%d nodes: levels %s, want %s", tc.nodes, levelsText(got), levelsText(tc.want))
		}
		parent := map[string]string{}
		for _, n := range fleet {
			for l := 1; l < len(fleetTopologyKeys); l++ {
				domain, above := fleetTopologyKeys[l]+"="+n.labels[fleetTopologyKeys[l]], n.labels[fleetTopologyKeys[l-1]]
				if p, seen := parent[domain]; seen && p != above {
					t.Fatalf("%d nodes: %s lies in %s and in %s", tc.nodes, domain, p, above)
				}
				parent[domain] = above
			}
		}
	}
}

// A status.topology whose levels are not the fleet's fails the run.
func TestTopologyOtherThanTheFleetsIsAMistake(t *testing.T) {
	right := &topologyResult{want: fiveThousandLevels, status: fleetTopology(3, 10, 50, 63)}
	if err := right.mistakes(); err != nil {
		t.Errorf("the fleet's levels: %v", err)
	}
	for name, status := range map[string]*homelabv1.GpuTopology{
		"absent":           nil,
		"blocks not found": fleetTopology(3, 30, 150, 64),
		"two topologies":   {Topologies: append(fleetTopology(3, 10, 50, 63).Topologies, fleetTopology(3, 10, 50, 63).Topologies...)},
	} {
		if err := (&topologyResult{want: fiveThousandLevels, status: status}).mistakes(); err == nil {
			t.Errorf("%s: no mistake", name)
		}
	}
}
