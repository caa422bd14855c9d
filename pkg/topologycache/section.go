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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/section"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/topology"
)

// Bounds of status.topology.
const (
	maxTrees    = 8
	maxDomains  = 32
	maxLargest  = 128
	maxProblems = 8
	// maxBytes bounds status.topology's JSON, beside the node list's own bound, so that the
	// whole status stays under 256 KiB: the domains listed last go first.
	maxBytes = 16 << 10
	// LabelsTree names the hierarchy of spec.topology.levels or the well-known labels.
	LabelsTree = "labels"
)

// Section is the topology part of an inventory's status: status.topology and the
// TopologyFragmented condition.
type Section struct {
	topologies func() ([]Topology, string)
	changes    source.Changes
	keys       []string
	sizes      []int64
}

// NewSection is the topology section over the Kueue Topologies topologies returns (and why
// they cannot be read), which changes tells of.
func NewSection(topologies func() ([]Topology, string), changes source.Changes, opts Options) *Section {
	return newSection(topologies, changes, opts)
}

func newSection(topologies func() ([]Topology, string), changes source.Changes, opts Options) *Section {
	s := &Section{topologies: topologies, changes: changes, keys: opts.Keys, sizes: opts.GangSizes}
	if len(s.keys) == 0 {
		s.keys = topology.DefaultLevels
	}
	if len(s.sizes) == 0 {
		s.sizes = topology.DefaultGangSizes
	}
	return s
}

// Name names the part in the inventory's hash.
func (*Section) Name() string { return "topology" }

// Conditions are the conditions only an inventory with topology carries.
func (*Section) Conditions() []string {
	return []string{homelabv1.ConditionTopologyFragmented}
}

// Changes are the Kueue Topologies'.
func (s *Section) Changes() source.Changes { return s.changes }

// Forget keeps nothing per inventory.
func (*Section) Forget(string) {}

// hierarchy is one set of levels the nodes are grouped by.
type hierarchy struct {
	name    string
	levels  []string
	partial bool
}

// Compute groups the inventory's GPU nodes into the domains of each hierarchy; nil when no
// GPU node carries a topology label.
func (s *Section) Compute(in section.Input) *section.Part {
	if in.Content.TotalGpuNodes == 0 {
		return nil
	}
	buf := nodeSlices.Get().(*[]topology.Node)
	nodes := topologyNodes((*buf)[:0], in.Content)
	defer func() { clear(nodes); *buf = nodes[:0]; nodeSlices.Put(buf) }() // keep no labels alive
	spec := in.Inventory.Spec.Topology
	hierarchies, problems := s.hierarchies(spec, nodes)
	if len(hierarchies) == 0 {
		return nil
	}
	threshold := int64(in.Inventory.Spec.FragmentationThreshold())
	sizes := s.gangSizes(spec, threshold)
	out := &homelabv1.GpuTopology{}
	var found []string
	var rows []metrics.TopologyRow
	var missing []string
	for _, h := range hierarchies {
		for _, key := range h.levels {
			if in.KeepsLevel != nil && !in.KeepsLevel(key) && !slices.Contains(missing, key) {
				missing = append(missing, key)
			}
		}
		tree, err := topology.Build(h.levels, nodes, topology.Options{GangSizes: sizes, Partial: h.partial})
		if err != nil {
			problems = append(problems, fmt.Sprintf("topology %s: %v", h.name, err))
			continue
		}
		required := requiredLevel(spec, h.levels)
		status, treeRows, findings := treeStatus(h.name, tree, required, threshold)
		status.Problems = append(status.Problems, problems...)
		status.Problems = cut(status.Problems)
		problems = nil
		out.Topologies = append(out.Topologies, status)
		rows, found = append(rows, treeRows...), append(found, findings...)
	}
	if len(out.Topologies) == 0 {
		return nil
	}
	cond := fragmentedCondition(found, threshold, in.Inventory.Generation)
	boundBytes(out)
	data, _ := json.Marshal(struct {
		Status    *homelabv1.GpuTopology
		Condition metav1.Condition
	}{out, cond})
	sum := sha256.Sum256(data)
	content := &metrics.TopologyContent{Rows: rows}
	return &section.Part{Hash: hex.EncodeToString(sum[:8]), Conditions: []metav1.Condition{cond}, MissingLabels: missing,
		Set:     func(st *homelabv1.GpuInventoryStatus) { st.Topology = out },
		Observe: func(m *metrics.Content) { m.Topology = content }}
}

// hierarchies are the level sets the nodes are grouped by: spec.topology.levels; else one
// per usable Kueue Topology; else the well-known keys some node carries. Problems say what
// of them cannot be used.
func (s *Section) hierarchies(spec *homelabv1.TopologySpec, nodes []topology.Node) ([]hierarchy, []string) {
	if spec != nil && len(spec.Levels) > 0 {
		levels := slices.Clone(spec.Levels)
		if err := topology.CheckLevels(levels); err != nil {
			return nil, nil
		}
		return []hierarchy{{name: LabelsTree, levels: levels, partial: true}}, nil
	}
	kueue, problem := s.topologies()
	var out []hierarchy
	var problems []string
	if problem != "" {
		problems = append(problems, problem)
	}
	for _, t := range kueue {
		if t.Problem != "" {
			problems = append(problems, t.Problem)
			continue
		}
		levels := slices.DeleteFunc(slices.Clone(t.Levels), func(k string) bool { return k == topology.Hostname })
		if len(levels) > 0 && len(out) < maxTrees {
			out = append(out, hierarchy{name: t.Name, levels: levels})
		}
	}
	if len(out) == 0 {
		if present := topology.Present(s.keys, nodes); len(present) > 0 {
			out = append(out, hierarchy{name: LabelsTree, levels: present, partial: true})
		}
	}
	return out, problems
}

// gangSizes are spec.topology.gangSizes (or the defaults) and the fragmentation threshold.
func (s *Section) gangSizes(spec *homelabv1.TopologySpec, threshold int64) []int64 {
	sizes := slices.Clone(s.sizes)
	if spec != nil && len(spec.GangSizes) > 0 {
		sizes = sizes[:0]
		for _, g := range spec.GangSizes {
			sizes = append(sizes, int64(g))
		}
	}
	if !slices.Contains(sizes, threshold) {
		sizes = append(sizes, threshold)
	}
	slices.Sort(sizes)
	return slices.Compact(sizes)
}

// requiredLevel is spec.topology.requiredLevel when the hierarchy has it, else its
// narrowest level.
func requiredLevel(spec *homelabv1.TopologySpec, levels []string) string {
	if spec != nil && spec.RequiredLevel != "" && slices.Contains(levels, spec.RequiredLevel) {
		return spec.RequiredLevel
	}
	return levels[len(levels)-1]
}

// topologyNodes appends to out the GPU nodes as the topology reads them: labels from the
// Node, model, GPUs and what is free from the inventory's entries.
func topologyNodes(out []topology.Node, content *inventory.Inventory) []topology.Node {
	for i := range content.Nodes {
		e := &content.Nodes[i]
		node := content.Source(i)
		if node == nil {
			continue // known from its record only: no labels to place it by
		}
		schedulable := e.Ready && !node.Spec.Unschedulable
		free := e.FreeGpus
		if !schedulable {
			free = e.UnschedulableFreeGpus
		}
		out = append(out, topology.Node{Name: e.Name, Labels: node.Labels, Levels: nodecache.Levels(node), Model: baseModel(e.Product),
			GPUs: int64(e.GpuCount), Free: int64(free), Schedulable: schedulable})
	}
	return out
}

// nodeSlices recycles topologyNodes' lists: a sync under churn makes one of every GPU node.
var nodeSlices = sync.Pool{New: func() any { return new([]topology.Node) }}

// boundBytes drops listed domains, the last of the topology that lists most first, until
// the topology's JSON is at most maxBytes (the levels still count every domain).
func boundBytes(t *homelabv1.GpuTopology) {
	for {
		data, _ := json.Marshal(t)
		if len(data) <= maxBytes {
			return
		}
		most := 0
		for i := range t.Topologies {
			if len(t.Topologies[i].Domains) > len(t.Topologies[most].Domains) {
				most = i
			}
		}
		domains := t.Topologies[most].Domains
		if len(domains) == 0 {
			return // the rest is bounded by count
		}
		// Drop a share at a time: one JSON marshal per step.
		drop := max(1, len(domains)/8)
		t.Topologies[most].Domains = domains[:len(domains)-drop]
	}
}

// fmtFragmented says that a model's free GPUs could take a gang no domain of level can.
func fmtFragmented(model string, free, gang int64, level string, largest int64) string {
	return fmt.Sprintf("%s has %d free GPUs, enough for a gang of %d, but no %s domain can take it (the largest gang one takes now: %d GPUs)",
		model, free, gang, level, largest)
}

// cut bounds a list of problems.
func cut(problems []string) []string {
	if len(problems) > maxProblems {
		problems = append(problems[:maxProblems-1], fmt.Sprintf("and %d more", len(problems)-maxProblems+1))
	}
	for i := range problems {
		problems[i] = inventory.Cut(problems[i], inventory.MaxMessageBytes)
	}
	return problems
}

// fragmentedCondition says whether a gang of threshold GPUs finds no domain of a required
// level although the model's nodes together could take it.
func fragmentedCondition(found []string, threshold int64, generation int64) metav1.Condition {
	cond := metav1.Condition{Type: homelabv1.ConditionTopologyFragmented, Status: metav1.ConditionFalse,
		Reason: homelabv1.ReasonGangsFit, ObservedGeneration: generation,
		Message: fmt.Sprintf("Every model whose nodes could take a gang of %d GPUs has a domain of the required level that can.", threshold)}
	if len(found) > 0 {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, homelabv1.ReasonGangsFragmented, strings.Join(found, "; ")
	}
	cond.Message = inventory.Cut(cond.Message, inventory.MaxMessageBytes)
	return cond
}

// baseModel is the product without its MIG or sharing suffix, the model status.models
// counts it under.
func baseModel(product string) string {
	model, _ := inventory.BaseModel(product)
	return model
}
