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
	clienttesting "k8s.io/client-go/testing"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/plugintest"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// freeClients serve the mixed fleet's inventory with what allocatedFleet's pods hold.
func freeClients(t *testing.T) *factory.Factory {
	t.Helper()
	nodes, pods, claims := allocatedFleet()
	return fakeClients(t, nodes, true, allocatedInventory(t, "cluster", nodes, mixedFleetPrevious, pods, claims, 0))
}

// bigPool is an inventory of 40 H100 nodes that lists 3 of them: a --count between the
// fit summary's buckets has a range for an answer.
func bigPool() *homelabv1.GpuInventory {
	return &homelabv1.GpuInventory{
		ObjectMeta: metav1.ObjectMeta{Name: "big", ResourceVersion: "1"},
		Status: homelabv1.GpuInventoryStatus{
			InventoryHash: "sha256:x", ObservedAt: &metav1.Time{Time: statusTime},
			TotalGpuNodes: 40, ReadyGpuNodes: 40, TotalGpus: 320, ReadyGpus: 320, ListedNodes: 3,
			Models: []homelabv1.GpuModel{{Product: "NVIDIA-H100-80GB-HBM3", Nodes: 40, ReadyNodes: 40, Gpus: 320, ReadyGpus: 320,
				AllocatedGpus: 250, FreeGpus: 70, Fit: &homelabv1.GpuFit{NodesWith1Free: 20, NodesWith2Free: 12, NodesWith4Free: 7, NodesWith8Free: 2,
					Most: []homelabv1.NodeFree{{Name: "h-07", FreeGpus: 8}, {Name: "h-31", FreeGpus: 8}, {Name: "h-02", FreeGpus: 6}}}}},
			Nodes: []homelabv1.GpuNodeEntry{
				{Name: "h-01", Ready: true, Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8, AllocatedGpus: 3, FreeGpus: 5},
				{Name: "h-02", Ready: true, Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8, AllocatedGpus: 2, FreeGpus: 6},
				{Name: "h-03", Ready: true, Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8, AllocatedGpus: 8},
			},
			Allocation: &homelabv1.GpuAllocation{AllocatedGpus: 250, FreeGpus: 70, GpuPods: 100},
		},
	}
}

func TestFreeGolden(t *testing.T) {
	for _, tc := range []struct {
		name    string
		clients func(*testing.T) *factory.Factory
		args    []string
		code    int
	}{
		{"free", freeClients, nil, factory.ExitOK},
		{"free-count-3", freeClients, []string{"--count", "3"}, factory.ExitOK},
		{"free-none-fits", freeClients, []string{"--model", "h100", "--count", "5"}, factory.ExitNoFit},
		{"free-json", freeClients, []string{"--model", "NVIDIA H100 80GB HBM3", "--count", "2", "-o", "json"}, factory.ExitOK},
		{"free-none-fits-json", freeClients, []string{"--count", "9", "-o", "json"}, factory.ExitNoFit},
		{"free-range", func(t *testing.T) *factory.Factory { return fakeClients(t, nil, true, bigPool()) }, []string{"big", "--count", "5"}, factory.ExitOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPlugin(context.Background(), tc.clients(t), false, nil, append([]string{"free"}, tc.args...)...)
			if r.code != tc.code || r.err != "" {
				t.Fatalf("exit %d (want %d), stderr %q", r.code, tc.code, r.err)
			}
			golden(t, tc.name+".golden", r.out)
		})
	}
}

// The JSON answer says what the table says, for scripts.
func TestFreeJSON(t *testing.T) {
	r := runPlugin(context.Background(), freeClients(t), false, nil, "free", "--count", "3", "-o", "json")
	if r.code != factory.ExitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	var got printer.Free
	if err := json.Unmarshal([]byte(r.out), &got); err != nil {
		t.Fatal(err)
	}
	// Free as the scheduler counts it: dgx-01 4 (8 allocatable, train-0 requests 4; the
	// orphan claim's device is no device-plugin GPU), dgx-07 4 (6 allocatable, 2 requested),
	// l4-odd 1; the A100s allocate no nvidia.com/gpu (all MIG, or MIG config failed) and the
	// T4s' units are shared replicas: no whole GPU is free there.
	fits := map[string]int32{}
	for _, m := range got.Models {
		fits[m.Model] = m.Nodes
	}
	want := map[string]int32{"NVIDIA-A100-SXM4-40GB": 0, "NVIDIA-H100-80GB-HBM3": 2, "NVIDIA-L4": 0, "Tesla-T4": 0}
	if diff := cmp.Diff(want, fits); diff != "" || !got.Fits || !got.Exact || got.Nodes != 2 || got.FreeGpus != 9 {
		t.Errorf("fits %v, nodes %d, exact %v, free %d; per model (-want +got):\n%s", got.Fits, got.Nodes, got.Exact, got.FreeGpus, diff)
	}
}

func TestFreeErrors(t *testing.T) {
	home := fixtures.HomeLab()
	for _, tc := range []struct {
		name    string
		clients func(*testing.T) *factory.Factory
		args    []string
		want    string
	}{
		{"no allocation", func(t *testing.T) *factory.Factory {
			return fakeClients(t, home, true, inventoryObject("cluster", home, nil, nil))
		}, nil,
			"error: GpuInventory \"cluster\" does not say which GPUs are free: the operator does not read pods (it runs with --allocation=false, or predates allocation); `kubectl gpuinv who` lists the pods holding GPUs from the pods themselves\n"},
		{"not reported", func(t *testing.T) *factory.Factory {
			return fakeClients(t, home, true, &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: "new", ResourceVersion: "1"}})
		}, []string{"new"}, "error: GpuInventory \"new\" has no status yet: is the operator running?\n"},
		{"unknown model", freeClients, []string{"--model", "b200"},
			"error: GpuInventory \"cluster\": no GPU model matches \"b200\" (models: NVIDIA-A100-SXM4-40GB, NVIDIA-H100-80GB-HBM3, NVIDIA-L4, Tesla-T4)\n"},
		{"no such inventory", freeClients, []string{"nope"}, "error: GpuInventory \"nope\" not found; `kubectl gpuinv list` shows the inventories that exist\n"},
		{"count 0", freeClients, []string{"--count", "0"}, "error: --count must be at least 1\nSee 'kubectl gpuinv --help' for usage.\n"},
		{"wide", freeClients, []string{"-o", "wide"}, "error: unknown output format \"wide\": use json or yaml\nSee 'kubectl gpuinv --help' for usage.\n"},
		{"no CRD", func(t *testing.T) *factory.Factory { return fakeClients(t, home, false) }, nil, "error: " + factory.CRDNotInstalled + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPlugin(context.Background(), tc.clients(t), false, nil, append([]string{"free"}, tc.args...)...)
			if r.code != factory.ExitError || r.err != tc.want || r.out != "" {
				t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit 1, no stdout and:\n%s", r.code, r.out, r.err, tc.want)
			}
		})
	}
}

// free reads one object: the inventory, and nothing else.
func TestFreeReadsOneObject(t *testing.T) {
	nodes, pods, claims := allocatedFleet()
	server := &plugintest.NodeServer{Nodes: nodes, Pods: pods, Claims: claims}
	c := fakeClientsServing(t, server, true, allocatedInventory(t, "cluster", nodes, mixedFleetPrevious, pods, claims, 0))
	gpu := c.FakeGPU.(interface{ Actions() []clienttesting.Action })
	r := runPlugin(context.Background(), c, false, nil, "free", "--model", "h100", "--count", "4")
	if r.code != factory.ExitOK || !strings.Contains(r.out, "A job of 4 GPUs fits on 2 nodes now.") {
		t.Fatalf("exit %d, stderr %q, output:\n%s", r.code, r.err, r.out)
	}
	var got []string
	for _, a := range gpu.Actions() {
		got = append(got, a.GetVerb()+" "+a.GetResource().Resource)
	}
	if diff := cmp.Diff([]string{"get gpuinventories"}, got); diff != "" || len(server.ListRequests()) != 0 {
		t.Errorf("requests besides one GET of the inventory: %d lists, API calls (-want +got):\n%s", len(server.ListRequests()), diff)
	}
}
