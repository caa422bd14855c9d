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
	"testing"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
)

// The fleet of `make bench-large` (testenv.CreateDRAFleet of 20,000 nodes, the default
// --dra-share; gpuFleet picks its GPU and DRA nodes alike) has 10,000 GPU nodes, half of them
// DRA nodes, and no two nodes share a name.
func TestTwentyThousandNodeFleetHasTenThousandGPUNodes(t *testing.T) {
	const n, share = 20000, 0.5
	names := make(map[string]bool, n)
	gpu, dra := 0, 0
	for i := range n {
		names[fixtures.FleetNodeName(i)] = true
		if fixtures.IsFleetGPUNode(i) {
			gpu++
		}
		if fixtures.IsFleetDRANode(i, share) {
			dra++
		}
	}
	if gpu != 10000 || dra != 5000 {
		t.Errorf("%d nodes: %d GPU nodes, %d of them DRA nodes; want 10000 and 5000", n, gpu, dra)
	}
	if want := int((n + 1) / 2); gpu != want {
		t.Errorf("%d GPU nodes; run expects (n+1)/2 = %d", gpu, want)
	}
	if len(names) != n {
		t.Errorf("%d distinct names among %d nodes", len(names), n)
	}
}
