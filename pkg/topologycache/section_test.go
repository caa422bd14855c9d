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
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/section"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/topology"
)

const h100 = "NVIDIA-H100-80GB-HBM3"

// fleet is GPU nodes of 8 H100s with the labels given and free GPUs, as Nodes and entries.
type fleet struct {
	nodes   []*corev1.Node
	entries []homelabv1.GpuNodeEntry
}

func (f *fleet) add(name string, labels map[string]string, free int32, ready, cordoned bool) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	n.Spec.Unschedulable = cordoned
	f.nodes = append(f.nodes, n)
	e := homelabv1.GpuNodeEntry{Name: name, Product: h100, GpuCount: 8, Ready: ready}
	if ready && !cordoned {
		e.FreeGpus = free
	} else {
		e.UnschedulableFreeGpus = free
	}
	f.entries = append(f.entries, e)
}

// input is the section's input for an inventory of the fleet.
func (f *fleet) input(spec homelabv1.GpuInventorySpec) section.Input {
	gi := &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: "all", Generation: 3}, Spec: spec}
	content := inventory.FromNodeEntries(f.entries, f.nodes)
	return section.Input{Inventory: gi, Nodes: f.nodes, Logger: klog.Background(), Content: &content}
}

// racks: rack-a with 4 free nodes, rack-b with 2 free, 1 busy, 1 cordoned (free), rack-c
// with 1 free and a NotReady node.
func racks() *fleet {
	f := &fleet{}
	rack := func(r string) map[string]string { return map[string]string{topology.Zone: "z1", topology.Rack: r} }
	for i := range 4 {
		f.add(fmt.Sprintf("a%d", i), rack("rack-a"), 8, true, false)
	}
	f.add("b0", rack("rack-b"), 8, true, false)
	f.add("b1", rack("rack-b"), 8, true, false)
	f.add("b2", rack("rack-b"), 0, true, false)
	f.add("b3", rack("rack-b"), 8, true, true)
	f.add("c0", rack("rack-c"), 8, true, false)
	f.add("c1", rack("rack-c"), 8, false, false)
	return f
}

func noKueue() ([]Topology, string) { return nil, "" }

// The well-known labels some node carries make one hierarchy: domains with their free GPUs
// and gang slots, the largest gang per level, the unschedulable nodes first, exact counts.
func TestSectionGroupsNodesByTheirLabels(t *testing.T) {
	s := NewSection(noKueue, nil, Options{})
	part := s.Compute(racks().input(homelabv1.GpuInventorySpec{}))
	if part == nil {
		t.Fatal("no topology part for racks")
	}
	var status homelabv1.GpuInventoryStatus
	part.Set(&status)
	trees := status.Topology.Topologies
	if len(trees) != 1 || trees[0].Name != LabelsTree {
		t.Fatalf("topologies = %+v, want one of the labels", trees)
	}
	tree := trees[0]
	if got := tree.Levels; !slices.Equal(got, []homelabv1.TopologyLevel{{Key: topology.Zone, Domains: 1}, {Key: topology.Rack, Domains: 3}}) {
		t.Errorf("levels = %+v", got)
	}
	if tree.RequiredLevel != topology.Rack || !slices.Equal(tree.GangSizes, []int32{8, 16, 32, 64, 128}) {
		t.Errorf("required %q, sizes %v", tree.RequiredLevel, tree.GangSizes)
	}
	// rack-b and rack-c have unschedulable nodes: first, rack-b (2) before rack-c (1)?
	// Both have one: then the most free GPUs.
	var names []string
	for _, d := range tree.Domains {
		names = append(names, d.Level+"="+d.Name)
	}
	if want := []string{"topology.kubernetes.io/zone=z1", "topology.kubernetes.io/rack=rack-b", "topology.kubernetes.io/rack=rack-c", "topology.kubernetes.io/rack=rack-a"}; !slices.Equal(names, want) {
		t.Errorf("domains listed %q, want %q", names, want)
	}
	a := tree.Domains[3].Models[0]
	if a.FreeGpus != 32 || !slices.Equal(a.GangSlots, []int32{4, 2, 1, 0, 0}) || a.LargestGang != 32 {
		t.Errorf("rack-a = %+v, want 32 free, slots 4/2/1/0/0, largest 32", a)
	}
	b := tree.Domains[1]
	if b.UnschedulableNodes != 1 || b.Parent != "z1" || b.Models[0].FreeGpus != 16 || b.Models[0].UnschedulableFreeGpus != 8 {
		t.Errorf("rack-b = %+v, want 1 unschedulable node, 16 free and 8 unschedulable free", b)
	}
	cond := meta.FindStatusCondition(part.Conditions, homelabv1.ConditionTopologyFragmented)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.ObservedGeneration != 3 {
		t.Errorf("condition = %+v, want False", cond)
	}
	var m metrics.Content
	part.Observe(&m)
	if m.Topology == nil || len(m.Topology.Rows) != 2 || m.Topology.Rows[1].LargestGang != 32 {
		t.Errorf("metrics = %+v", m.Topology)
	}
}

// A model whose free nodes together take a gang of spec.fragmentationGpus, with no rack that
// can, is TopologyFragmented, naming the model and the level; a rack that can clears it.
func TestSectionFindsTopologyFragmentation(t *testing.T) {
	f := &fleet{}
	for r := range 4 {
		rack := map[string]string{topology.Rack: fmt.Sprintf("r%d", r)}
		f.add(fmt.Sprintf("free-%d", r), rack, 8, true, false)
		f.add(fmt.Sprintf("busy-%d", r), rack, 0, true, false)
	}
	s := NewSection(noKueue, nil, Options{})
	part := s.Compute(f.input(homelabv1.GpuInventorySpec{FragmentationGpus: 16}))
	cond := meta.FindStatusCondition(part.Conditions, homelabv1.ConditionTopologyFragmented)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != homelabv1.ReasonGangsFragmented ||
		!strings.Contains(cond.Message, h100+" has 32 free GPUs, enough for a gang of 16, but no topology.kubernetes.io/rack domain") {
		t.Fatalf("condition = %+v, want True naming the model, its free GPUs and the rack level", cond)
	}
	var m metrics.Content
	part.Observe(&m)
	if !m.Topology.Rows[0].Fragmented {
		t.Errorf("metrics row = %+v, want fragmented", m.Topology.Rows[0])
	}
	f.entries[1].FreeGpus = 8 // busy-0 freed: r0 takes a gang of 16
	part = s.Compute(f.input(homelabv1.GpuInventorySpec{FragmentationGpus: 16}))
	if cond := meta.FindStatusCondition(part.Conditions, homelabv1.ConditionTopologyFragmented); cond.Status != metav1.ConditionFalse {
		t.Errorf("condition = %+v once a rack takes the gang, want False", cond)
	}
}

// Kueue's Topologies each make a hierarchy (their hostname level is the node itself); one
// naming a label twice is a problem, not a hierarchy; spec.topology.levels overrides both;
// a level the node cache drops is asked for.
func TestSectionFollowsKueueAndTheSpec(t *testing.T) {
	f := racks()
	kueue := func() ([]Topology, string) {
		return []Topology{
			{Levels: []string{topology.Rack, topology.Hostname}, Compact: compact("default")},
			{Levels: []string{topology.Zone, topology.Zone}, Compact: compact("twice"), Problem: "Kueue Topology twice: topology levels[1] repeats levels[0]: label \"topology.kubernetes.io/zone\""},
		}, ""
	}
	s := NewSection(kueue, nil, Options{})
	part := s.Compute(f.input(homelabv1.GpuInventorySpec{}))
	var status homelabv1.GpuInventoryStatus
	part.Set(&status)
	trees := status.Topology.Topologies
	if len(trees) != 1 || trees[0].Name != "default" || len(trees[0].Levels) != 1 || trees[0].Levels[0].Key != topology.Rack {
		t.Fatalf("topologies = %+v, want Kueue's default of racks", trees)
	}
	if !slices.ContainsFunc(trees[0].Problems, func(p string) bool { return strings.Contains(p, "repeats") }) {
		t.Errorf("problems = %q, want the Topology that names a label twice", trees[0].Problems)
	}
	spec := homelabv1.GpuInventorySpec{Topology: &homelabv1.TopologySpec{Levels: []string{topology.Zone, "example.com/pod"}, GangSizes: []int32{16}}}
	keeps := func(key string) bool { return key != "example.com/pod" }
	in := f.input(spec)
	in.KeepsLevel = keeps
	part = s.Compute(in)
	part.Set(&status)
	tree := status.Topology.Topologies[0]
	if tree.Name != LabelsTree || !slices.Equal(tree.GangSizes, []int32{8, 16}) || !slices.Equal(part.MissingLabels, []string{"example.com/pod"}) {
		t.Errorf("tree %q sizes %v missing %q; want the spec's levels, 16 and the threshold 8, the dropped key asked for", tree.Name, tree.GangSizes, part.MissingLabels)
	}
}

// No GPU node carries a topology label: no part, so status.topology and the condition go.
func TestSectionWithoutLabelsHasNoPart(t *testing.T) {
	f := &fleet{}
	f.add("gpu-1", map[string]string{"kubernetes.io/hostname": "gpu-1"}, 8, true, false)
	if part := NewSection(noKueue, nil, Options{}).Compute(f.input(homelabv1.GpuInventorySpec{})); part != nil {
		t.Errorf("part = %+v, want none", part)
	}
}

// A label with a distinct value on every node is listed boundedly, with exact counts, and
// said to be a problem; the part stays within its bounds at 2,000 racks.
func TestSectionIsBounded(t *testing.T) {
	f := &fleet{}
	for i := range 2000 {
		f.add(fmt.Sprintf("n%d", i), map[string]string{topology.Rack: fmt.Sprintf("r%d", i)}, 8, true, false)
	}
	part := NewSection(noKueue, nil, Options{}).Compute(f.input(homelabv1.GpuInventorySpec{}))
	var status homelabv1.GpuInventoryStatus
	part.Set(&status)
	tree := status.Topology.Topologies[0]
	if len(tree.Domains) != maxDomains || tree.Levels[0].Domains != 2000 {
		t.Errorf("%d domains listed of %d, want %d of 2000", len(tree.Domains), tree.Levels[0].Domains, maxDomains)
	}
	if len(tree.Problems) == 0 || len(tree.Problems) > maxProblems {
		t.Errorf("problems = %q, want the distinct-per-node label said, boundedly", tree.Problems)
	}
}

func compact(name string) kubeproto.Compact { return kubeproto.Compact{Name: name} }

// Domains of many models each are listed until status.topology reaches its byte bound.
func TestSectionIsBoundedInBytes(t *testing.T) {
	f := &fleet{}
	for r := range 40 {
		for m := range 12 {
			f.add(fmt.Sprintf("n%d-%d", r, m), map[string]string{topology.Rack: fmt.Sprintf("r%d", r)}, 8, true, false)
			f.entries[len(f.entries)-1].Product = fmt.Sprintf("NVIDIA-MODEL-%02d", m)
		}
	}
	part := NewSection(noKueue, nil, Options{}).Compute(f.input(homelabv1.GpuInventorySpec{}))
	var status homelabv1.GpuInventoryStatus
	part.Set(&status)
	data, _ := json.Marshal(status.Topology)
	tree := status.Topology.Topologies[0]
	if len(data) > maxBytes || len(tree.Domains) == 0 || len(tree.Domains) >= maxDomains || tree.Levels[0].Domains != 40 {
		t.Errorf("%d bytes, %d domains listed of %d; want at most %d bytes, some domains, fewer than %d", len(data), len(tree.Domains), tree.Levels[0].Domains, maxBytes, maxDomains)
	}
}
