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

package plugin

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
)

const (
	zoneKey = "topology.kubernetes.io/zone"
	rackKey = "topology.kubernetes.io/rack"
)

// racksTopology is two zones of H100 racks: r1 and r2 in zone a (r2 with a cordoned node),
// r3 in zone b; 24 GPUs free in all, but no rack can take a gang of 16.
func racksTopology() *homelabv1.GpuTopology {
	h100 := func(nodes, gpus, free int32, slots []int32, largest int32) homelabv1.TopologyModel {
		return homelabv1.TopologyModel{Model: "NVIDIA-H100", Nodes: nodes, Gpus: gpus, FreeGpus: free, GangSlots: slots, LargestGang: largest}
	}
	cordoned := h100(2, 16, 4, []int32{0, 0}, 0)
	cordoned.UnschedulableFreeGpus = 8
	return &homelabv1.GpuTopology{Topologies: []homelabv1.TopologyTree{{
		Name: "labels", RequiredLevel: rackKey, GangSizes: []int32{8, 16}, OutsideNodes: 1,
		Levels: []homelabv1.TopologyLevel{{Key: zoneKey, Domains: 2}, {Key: rackKey, Domains: 4}},
		Largest: []homelabv1.TopologyLargest{
			{Model: "NVIDIA-H100", Level: zoneKey, Gpus: 16, Domain: "a"},
			{Model: "NVIDIA-H100", Level: rackKey, Gpus: 8, Domain: "r1"},
		},
		Domains: []homelabv1.TopologyDomain{
			{Level: zoneKey, Name: "a", Nodes: 4, UnschedulableNodes: 1, Models: []homelabv1.TopologyModel{h100(4, 32, 12, []int32{1, 0}, 8)}},
			{Level: rackKey, Name: "r2", Parent: "a", Nodes: 2, UnschedulableNodes: 1, Models: []homelabv1.TopologyModel{cordoned}},
			{Level: rackKey, Name: "r1", Parent: "a", Nodes: 2, Models: []homelabv1.TopologyModel{h100(2, 16, 8, []int32{1, 0}, 8)}},
			{Level: zoneKey, Name: "b", Nodes: 2, Models: []homelabv1.TopologyModel{h100(2, 16, 12, []int32{1, 0}, 8)}},
			{Level: rackKey, Name: "r3", Parent: "b", Nodes: 2, Models: []homelabv1.TopologyModel{h100(2, 16, 12, []int32{1, 0}, 8)}},
		},
		Problems: []string{`1 GPU node lacks the label "topology.kubernetes.io/zone" (gpu-lone)`},
	}}}
}

var topologyFragmented = metav1.Condition{Type: homelabv1.ConditionTopologyFragmented, Status: metav1.ConditionTrue, Reason: homelabv1.ReasonGangsFragmented,
	Message: "NVIDIA-H100 has 24 free GPUs, enough for a gang of 16, but no topology.kubernetes.io/rack domain can take it (the largest gang one takes now: 8 GPUs)"}

func topologyInventory(t *homelabv1.GpuTopology, conditions ...metav1.Condition) *homelabv1.GpuInventory {
	gi := inventoryObject("cluster", fixtures.MixedFleet(), mixedFleetPrevious, nil)
	gi.Status.Topology = t
	gi.Status.Conditions = append(gi.Status.Conditions, conditions...)
	return gi
}

func TestTopology(t *testing.T) {
	gi := topologyInventory(racksTopology(), topologyFragmented)
	r := runPlugin(context.Background(), fakeClients(t, nil, true, gi), false, nil, "topology")
	if r.code != factory.ExitOK || r.err != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	golden(t, "topology.golden", r.out)
	// The tree: each rack under its zone, in the status's order.
	var rows []string
	for _, line := range strings.Split(r.out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.Contains(f[0], "=") {
			rows = append(rows, f[0])
		}
	}
	if diff := cmp.Diff([]string{"zone=a", "rack=r2", "rack=r1", "zone=b", "rack=r3"}, rows); diff != "" {
		t.Errorf("domains (-want +got):\n%s", diff)
	}
	for _, want := range []string{"4 (+8 unschedulable)", "TopologyFragmented (FreeGPUsSpreadOverDomains): NVIDIA-H100 has 24 free GPUs", "1 GPU node lacks the topology.kubernetes.io/zone label", "NVIDIA-H100 per rack: 8 GPUs, in rack r1"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
}

// -o json is status.topology as stored; without one, an empty object on stdout and the
// reason on stderr (the text says it in one line).
func TestTopologyJSON(t *testing.T) {
	r := runPlugin(context.Background(), fakeClients(t, nil, true, topologyInventory(racksTopology())), false, nil, "topology", "-o", "json")
	var got homelabv1.GpuTopology
	if err := json.Unmarshal([]byte(r.out), &got); err != nil || r.code != factory.ExitOK {
		t.Fatalf("exit %d, output %q: %v", r.code, r.out, err)
	}
	if diff := cmp.Diff(racksTopology(), &got); diff != "" {
		t.Errorf("-o json (-want +got):\n%s", diff)
	}
	none := fakeClients(t, nil, true, topologyInventory(nil))
	r = runPlugin(context.Background(), none, false, nil, "topology", "-o", "yaml")
	if r.code != factory.ExitOK || strings.TrimSpace(r.out) != "{}" || !strings.Contains(r.err, "no topology") {
		t.Errorf("no topology, -o yaml: exit %d, stdout %q, stderr %q; want {} and the reason", r.code, r.out, r.err)
	}
	r = runPlugin(context.Background(), none, false, nil, "topology")
	if r.code != factory.ExitOK || r.out != "GpuInventory cluster: "+"no topology: no GPU node carries a topology label the operator reads and no Kueue Topology is served (spec.topology.levels names the labels; docs/api.md#topology).\n" {
		t.Errorf("no topology: exit %d, stdout %q", r.code, r.out)
	}
	r = runPlugin(context.Background(), none, false, nil, "topology", "other")
	if r.code != factory.ExitError || !strings.Contains(r.err, `GpuInventory "other" not found`) {
		t.Errorf("missing inventory: exit %d, stderr %q", r.code, r.err)
	}
}
