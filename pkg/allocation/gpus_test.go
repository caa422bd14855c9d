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

package allocation

import (
	"math"
	"slices"
	"testing"
)

func TestMilliOf(t *testing.T) {
	tests := []struct {
		resource string
		count    int64
		shape    Shape
		want     int64
	}{
		{ResourceGPU, 2, Shape{}, 2000},
		{ResourceGPU, 3, Shape{Replicas: 1}, 3000},
		{ResourceGPU, 1, Shape{Replicas: 4}, 250},
		{ResourceGPU, 3, Shape{Replicas: 3}, 1000},
		{ResourceGPU, 1, Shape{SingleMIGProfile: "1g.5gb"}, 142},
		{ResourceGPU, 7, Shape{SingleMIGProfile: "1g.10gb"}, 1000},
		{ResourceGPU, 2, Shape{SingleMIGProfile: "2g.12gb", SlicesPerGPU: 4}, 1000},
		{ResourceGPUShared, 1, Shape{}, 1000},
		{ResourceGPUShared, 1, Shape{Replicas: 4}, 250},
		{ResourceGPUShared, 2, Shape{Replicas: 8}, 250},
		{ResourceMIGPrefix + "3g.20gb", 1, Shape{}, 428},
		{ResourceMIGPrefix + "3g.20gb", 2, Shape{}, 857},
		{ResourceMIGPrefix + "7g.80gb", 1, Shape{}, 1000},
		{ResourceMIGPrefix + "1g.6gb", 1, Shape{SlicesPerGPU: 4}, 250},
		{ResourceMIGPrefix + "1g.10gb+me", 7, Shape{}, 1000},
		{ResourceMIGPrefix + "weird", 7, Shape{}, 1000},
		{ResourceMIGPrefix + "99g.1tb", 1, Shape{}, 1000},
		{"example.com/fpga", 3, Shape{}, 0},
		{ResourceGPU, -1, Shape{}, 0},
		{ResourceGPU, math.MaxInt64, Shape{}, math.MaxInt64},
	}
	for _, tt := range tests {
		if got := MilliOf(tt.resource, tt.count, tt.shape); got != tt.want {
			t.Errorf("MilliOf(%s, %d, %+v) = %d, want %d", tt.resource, tt.count, tt.shape, got, tt.want)
		}
	}
}

func TestDeviceShare(t *testing.T) {
	tests := []struct {
		device    string
		shape     Shape
		parent    string
		wantMilli int64
	}{
		{"gpu-0", Shape{}, "gpu-0", 1000},
		{"gpu-12", Shape{}, "gpu-12", 1000},
		{"gpu-0-mig-1g5gb-19-0", Shape{}, "gpu-0", 142},
		{"gpu-0-mig-3g20gb-9-4", Shape{}, "gpu-0", 428},
		{"gpu-3-mig-2g12gb-14-0", Shape{SlicesPerGPU: 4}, "gpu-3", 500},
		{"gpu-1-mig-odd", Shape{}, "gpu-1", 142},
		{"gpu-x", Shape{}, "gpu-x", 1000},
		{"gpu-", Shape{}, "gpu-", 1000},
		{"gpu-1-other", Shape{}, "gpu-1-other", 1000},
		{"nvme0", Shape{}, "nvme0", 1000},
	}
	for _, tt := range tests {
		parent, milli := DeviceShare(tt.device, tt.shape)
		if parent != tt.parent || milli != tt.wantMilli {
			t.Errorf("DeviceShare(%q) = %q, %d; want %q, %d", tt.device, parent, milli, tt.parent, tt.wantMilli)
		}
	}
}

func TestHeldGPUs(t *testing.T) {
	mig := func(p string) string { return ResourceMIGPrefix + p }
	tests := []struct {
		name  string
		held  *Held
		shape Shape
		gpus  int32
		milli int64
	}{
		{name: "nothing", held: nil, gpus: 0, milli: 0},
		{
			name:  "whole GPUs in two namespaces",
			held:  &Held{Namespaces: []NamespaceHeld{{Namespace: "a", Resources: gpus(2)}, {Namespace: "b", Resources: gpus(1)}}},
			gpus:  3,
			milli: 3000,
		},
		{
			name: "mixed MIG profiles round up to whole GPUs",
			held: &Held{Namespaces: []NamespaceHeld{
				{Namespace: "a", Resources: []ResourceCount{rc(mig("1g.10gb"), 3), rc(mig("3g.40gb"), 1)}},
				{Namespace: "b", Resources: []ResourceCount{rc(mig("3g.40gb"), 1)}},
			}},
			// 3*1/7 + 2*3/7 = 9/7 of a GPU: two GPUs touched.
			gpus:  2,
			milli: 428 + 857,
		},
		{
			name:  "shared replicas",
			held:  &Held{Namespaces: []NamespaceHeld{{Namespace: "a", Resources: []ResourceCount{rc(ResourceGPUShared, 5)}}}},
			shape: Shape{Replicas: 4},
			gpus:  2,
			milli: 1250,
		},
		{
			name:  "time-slicing without renaming",
			held:  &Held{Namespaces: []NamespaceHeld{{Namespace: "a", Resources: gpus(4)}}},
			shape: Shape{Replicas: 4},
			gpus:  1,
			milli: 1000,
		},
		{
			name:  "single MIG strategy",
			held:  &Held{Namespaces: []NamespaceHeld{{Namespace: "a", Resources: gpus(8)}}},
			shape: Shape{SingleMIGProfile: "1g.10gb"},
			gpus:  2,
			milli: 1142,
		},
		{
			name: "DRA MIG devices of one parent count one GPU",
			held: &Held{Namespaces: []NamespaceHeld{
				{Namespace: "a", Devices: []string{"gpu-0-mig-1g5gb-19-0", "gpu-0-mig-3g20gb-9-4"}},
				{Namespace: "b", Devices: []string{"gpu-0-mig-1g5gb-19-1", "gpu-1"}},
			}},
			gpus:  2,
			milli: 142 + 428 + 142 + 1000,
		},
		{
			name: "device plugin and DRA together",
			held: &Held{Namespaces: []NamespaceHeld{
				{Namespace: "a", Resources: []ResourceCount{rc(ResourceGPU, 1), rc(mig("1g.5gb"), 1)}, Devices: []string{"gpu-2"}},
			}},
			gpus:  3,
			milli: 2142,
		},
		{
			name:  "capped at the node's GPUs",
			held:  &Held{Namespaces: []NamespaceHeld{{Namespace: "a", Resources: gpus(12)}}},
			shape: Shape{GPUs: 8},
			gpus:  8,
			milli: 8000,
		},
		{
			name:  "absurd counts saturate",
			held:  &Held{Namespaces: []NamespaceHeld{{Namespace: "a", Resources: gpus(math.MaxInt64)}, {Namespace: "b", Resources: gpus(math.MaxInt64)}}},
			gpus:  math.MaxInt32,
			milli: math.MaxInt64,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, m := tt.held.GPUs(tt.shape)
			if g != tt.gpus || m != tt.milli {
				t.Errorf("GPUs = %d, %d milli; want %d, %d", g, m, tt.gpus, tt.milli)
			}
		})
	}
}

func TestNamespaceHeldGPUs(t *testing.T) {
	n := &NamespaceHeld{Namespace: "a", Resources: []ResourceCount{rc(ResourceGPUShared, 2)}, Devices: []string{"gpu-0-mig-1g5gb-19-0", "gpu-0-mig-1g5gb-19-1"}}
	g, m := n.GPUs(Shape{Replicas: 4})
	if g != 2 || m != 500+284 {
		t.Errorf("GPUs = %d, %d milli; want 2, 784", g, m)
	}
	if g, m := (*NamespaceHeld)(nil).GPUs(Shape{}); g != 0 || m != 0 {
		t.Errorf("nil GPUs = %d, %d", g, m)
	}
}

func TestNamespaceMilliAddsUpToTheNode(t *testing.T) {
	oneReplica := []ResourceCount{{Name: ResourceGPU, Count: 1}}
	tests := []struct {
		name  string
		held  Held
		shape Shape
		want  []int64
	}{
		{"three namespaces share a GPU three ways", Held{Namespaces: []NamespaceHeld{
			{Namespace: "a", Resources: oneReplica}, {Namespace: "b", Resources: oneReplica}, {Namespace: "c", Resources: oneReplica},
		}}, Shape{GPUs: 1, Replicas: 3}, []int64{334, 333, 333}},
		{"whole GPUs need no rounding", Held{Namespaces: []NamespaceHeld{
			{Namespace: "a", Resources: []ResourceCount{{Name: ResourceGPU, Count: 2}}}, {Namespace: "b", Resources: oneReplica},
		}}, Shape{GPUs: 8}, []int64{2000, 1000}},
		{"the node's cap scales the namespaces down", Held{Namespaces: []NamespaceHeld{
			{Namespace: "a", Resources: []ResourceCount{{Name: ResourceGPU, Count: 3}}}, {Namespace: "b", Resources: []ResourceCount{{Name: ResourceGPU, Count: 3}}},
		}}, Shape{GPUs: 4}, []int64{2000, 2000}},
		{"MIG slices of one GPU", Held{Namespaces: []NamespaceHeld{
			{Namespace: "a", Resources: []ResourceCount{{Name: ResourceMIGPrefix + "1g.10gb", Count: 4}}},
			{Namespace: "b", Resources: []ResourceCount{{Name: ResourceMIGPrefix + "1g.10gb", Count: 3}}},
		}}, Shape{GPUs: 1}, []int64{572, 428}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.held.NamespaceMilli(tt.shape)
			_, total := tt.held.GPUs(tt.shape)
			var sum int64
			for _, m := range got {
				sum += m
			}
			if sum != total {
				t.Errorf("namespaces add up to %d, the node holds %d", sum, total)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("NamespaceMilli = %v, want %v", got, tt.want)
			}
		})
	}
	if got := (*Held)(nil).NamespaceMilli(Shape{}); got != nil {
		t.Errorf("nil Held: %v", got)
	}
}

func TestApportion(t *testing.T) {
	tests := []struct {
		total int64
		parts []int64
		want  []int64
	}{
		{1000, []int64{333, 333, 333}, []int64{334, 333, 333}},
		{1000, []int64{0, 0}, []int64{500, 500}},
		{1001, []int64{0, 0}, []int64{501, 500}},
		{10, []int64{1, 2, 3}, []int64{2, 3, 5}},
		{5, []int64{5, 5}, []int64{3, 2}},
		{math.MaxInt64, []int64{math.MaxInt64 / 2, math.MaxInt64 / 2}, []int64{math.MaxInt64/2 + 1, math.MaxInt64 / 2}},
		{7, nil, nil},
	}
	for _, tt := range tests {
		got := Apportion(tt.total, tt.parts)
		if !slices.Equal(got, tt.want) {
			t.Errorf("Apportion(%d, %v) = %v, want %v", tt.total, tt.parts, got, tt.want)
		}
	}
}
