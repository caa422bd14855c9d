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

package gpuinventory

import (
	"fmt"
	"testing"

	"k8s.io/client-go/tools/cache"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Inventories that list the same nodes share one copy of each entry, so remembering 1,000
// inventories over the same 300 nodes keeps 300 entries, not 300,000.
func TestMemorySharesEntriesBetweenInventories(t *testing.T) {
	nodes := make([]homelabv1.GpuNodeEntry, 300)
	for i := range nodes {
		nodes[i] = homelabv1.GpuNodeEntry{Name: fmt.Sprintf("gpu-%03d", i), Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8,
			Conditions: []string{"NotReady"}}
	}
	m := newMemory()
	for i := range 1000 {
		key := cache.ObjectName{Name: fmt.Sprintf("inv-%d", i)}
		copied := make([]homelabv1.GpuNodeEntry, len(nodes)) // as each inventory's own write or read produces it
		for j := range nodes {
			copied[j] = nodes[j]
			copied[j].Conditions = []string{"NotReady"}
		}
		if i%2 == 0 {
			m.wrote(key, "h", "1", copied)
		} else {
			m.read(key, "1", copied)
		}
	}
	if len(m.entries) != len(nodes) {
		t.Fatalf("%d entries kept for 1,000 inventories over %d nodes, want %d", len(m.entries), len(nodes), len(nodes))
	}
	first, last := m.byKey[cache.ObjectName{Name: "inv-0"}], m.byKey[cache.ObjectName{Name: "inv-999"}]
	for j := range nodes {
		if first.nodes[j] != last.nodes[j] {
			t.Fatalf("entry %s is kept twice", nodes[j].Name)
		}
	}

	// A changed node gets a new entry; the lists that hold the old one keep it as it was.
	changed := []homelabv1.GpuNodeEntry{nodes[0]}
	changed[0].Ready = true
	m.wrote(cache.ObjectName{Name: "inv-0"}, "h2", "2", changed)
	old, ok := m.nodesAt(cache.ObjectName{Name: "inv-1"}, "1")
	if !ok || old[0].Ready || len(old) != len(nodes) {
		t.Errorf("inv-1's remembered list changed with inv-0's write: %+v", old[0])
	}
	now, ok := m.nodesAt(cache.ObjectName{Name: "inv-0"}, "2")
	if !ok || len(now) != 1 || !now[0].Ready {
		t.Errorf("inv-0 remembers %+v, want the written ready entry", now)
	}
	if _, ok := m.nodesAt(cache.ObjectName{Name: "inv-0"}, "1"); ok {
		t.Error("inv-0 answered for a resourceVersion it no longer holds")
	}
}
