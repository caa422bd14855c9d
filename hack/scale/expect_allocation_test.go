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
	"math/rand/v2"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
)

func TestHeldOnCountsPartsAsDocumented(t *testing.T) {
	h100 := fleetNode{product: "NVIDIA-H100-80GB-HBM3", gpus: 8, labels: labels.Set{"nvidia.com/gpu.replicas": "0"}}
	migSingle := fleetNode{product: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", gpus: 56, labels: labels.Set{}}
	migMixed := fleetNode{product: "NVIDIA-A100-SXM4-40GB", gpus: 8, labels: labels.Set{"nvidia.com/mig.strategy": "mixed"}}
	shared := fleetNode{product: "Tesla-T4-SHARED", gpus: 4, labels: labels.Set{"nvidia.com/gpu.replicas": "4"}}
	for _, tc := range []struct {
		name  string
		node  fleetNode
		units map[string]int64
		gpus  int32
		milli int64
	}{
		{"whole GPUs", h100, map[string]int64{"nvidia.com/gpu": 3}, 3, 3000},
		{"whole GPUs beyond the node's count are capped", h100, map[string]int64{"nvidia.com/gpu": 9}, 8, 8000},
		{"single-strategy MIG devices count as the node counts them, their share by slices", migSingle, map[string]int64{"nvidia.com/gpu": 10}, 10, 1428},
		{"mixed-strategy MIG devices: slices out of 7 per profile, rounded up to a GPU", migMixed, map[string]int64{"nvidia.com/mig-1g.5gb": 3, "nvidia.com/mig-3g.20gb": 1}, 1, 428 + 428},
		{"mixed-strategy MIG devices filling the node", migMixed, map[string]int64{"nvidia.com/mig-1g.5gb": 16, "nvidia.com/mig-2g.10gb": 8, "nvidia.com/mig-3g.20gb": 8}, 8, 2285 + 2285 + 3428},
		{"time-sliced replicas are quarter GPUs, rounded up", shared, map[string]int64{"nvidia.com/gpu": 5}, 2, 1250},
		{"nothing held", h100, nil, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gpus, milli := heldOn(tc.node, tc.units)
			if gpus != tc.gpus || milli != tc.milli {
				t.Errorf("heldOn = %d GPUs, %d milli; want %d, %d", gpus, milli, tc.gpus, tc.milli)
			}
		})
	}
}

// Free whole GPUs are those of a whole-GPU unit only, as the status counts them.
func TestWholeFreeCountsWholeGPUsOnly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		node  fleetNode
		units map[string]int64
		free  int32
	}{
		{"whole GPUs", fleetNode{product: "NVIDIA-H100-80GB-HBM3", gpus: 8, labels: labels.Set{"nvidia.com/gpu.replicas": "0"}}, map[string]int64{"nvidia.com/gpu": 3}, 5},
		{"a DRA node's GPUs", fleetNode{product: "NVIDIA-H100-80GB-HBM3", gpus: 8, dra: true, labels: labels.Set{}}, nil, 8},
		{"MIG's single strategy: none", fleetNode{product: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", gpus: 56, labels: labels.Set{}}, nil, 0},
		{"MIG's mixed strategy: none", fleetNode{product: "NVIDIA-A100-SXM4-40GB", gpus: 8, labels: labels.Set{"nvidia.com/mig.strategy": "mixed"}}, nil, 0},
		{"time-sliced: none", fleetNode{product: "Tesla-T4-SHARED", gpus: 4, labels: labels.Set{"nvidia.com/gpu.replicas": "4"}}, nil, 0},
	} {
		if got := wholeFree(tc.node, tc.units); got != tc.free {
			t.Errorf("%s: wholeFree = %d, want %d", tc.name, got, tc.free)
		}
	}
}

// The shares cut from each GPU node add up to its allocatable GPU resources, exactly, so
// that bound pods never ask a node for more than it has.
func TestGPUSlotsFillEachNodeExactly(t *testing.T) {
	fleet := gpuFleet(200, 0.5)
	slots := gpuSlots(fleet, rand.New(rand.NewPCG(1, 2)))
	got := map[string]map[string]int64{}
	for _, s := range slots {
		n := fleet[s.fleet]
		if n.dra {
			t.Fatalf("DRA node %s got a device-plugin share", n.name)
		}
		if s.count <= 0 {
			t.Fatalf("share of %d %s on %s", s.count, s.resource, n.name)
		}
		if got[n.name] == nil {
			got[n.name] = map[string]int64{}
		}
		got[n.name][s.resource] += s.count
	}
	for _, n := range gfdNodes(fleet) {
		node, _ := fixtures.FleetNode(n.index)
		for name, q := range node.Status.Allocatable {
			if !isGPUResource(string(name)) || q.Value() == 0 {
				continue
			}
			if got[n.name][string(name)] != q.Value() {
				t.Errorf("%s (%s): shares of %s add up to %d, allocatable %d", n.name, n.product, name, got[n.name][string(name)], q.Value())
			}
			delete(got[n.name], string(name))
		}
		for name, v := range got[n.name] {
			t.Errorf("%s (%s): %d of %s, which it does not have", n.name, n.product, v, name)
		}
	}
}

func isGPUResource(name string) bool {
	return name == resourceGPU || len(name) > len("nvidia.com/mig-") && name[:len("nvidia.com/mig-")] == "nvidia.com/mig-"
}
