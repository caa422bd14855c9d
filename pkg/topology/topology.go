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

// Package topology groups GPU nodes into the domains of a topology (zones, network blocks,
// racks, NVLink cliques), named by node labels as Kueue's Topology levels and kube-scheduler's
// PodGroup topology constraints name them, and counts per domain and GPU model what is free
// and how many gangs of a given size fit there now. It is pure: the caller gives plain node
// facts, and the whole computation is one pass over the nodes (see docs/design/gangs.md).
package topology

import (
	"fmt"
	"slices"
)

// The topology label keys this package knows.
const (
	// Zone is Kubernetes' well-known zone label.
	Zone = "topology.kubernetes.io/zone"
	// Rack is the rack label many on-premises clusters set by hand.
	Rack = "topology.kubernetes.io/rack"
	// AWSNetworkLayer1 to 3 are EC2's network node layers, layer 1 the farthest from the node.
	AWSNetworkLayer1 = "topology.k8s.aws/network-node-layer-1"
	AWSNetworkLayer2 = "topology.k8s.aws/network-node-layer-2"
	AWSNetworkLayer3 = "topology.k8s.aws/network-node-layer-3"
	// GKEBlock, GKESubblock and GKEHost are GKE's compact-placement topology labels.
	GKEBlock    = "cloud.google.com/gce-topology-block"
	GKESubblock = "cloud.google.com/gce-topology-subblock"
	GKEHost     = "cloud.google.com/gce-topology-host"
	// NVLinkClique is GPU Feature Discovery's NVLink domain: nodes of one clique share NVLink.
	NVLinkClique = "nvidia.com/gpu.clique"
	// Hostname is the node's hostname label, Kueue's node level.
	Hostname = "kubernetes.io/hostname"
)

// DefaultLevels are the label keys looked for when no Topology names the levels, broadest
// first. Present keeps those some node carries.
var DefaultLevels = []string{
	Zone, AWSNetworkLayer1, AWSNetworkLayer2, AWSNetworkLayer3,
	GKEBlock, GKESubblock, Rack, NVLinkClique, GKEHost,
}

// DefaultGangSizes are the gang sizes, in GPUs, counted when the caller names none.
var DefaultGangSizes = []int64{8, 16, 32, 64, 128}

// MaxLevels is the most levels a Kueue Topology may have.
const MaxLevels = 16

// maxExamples bounds the names a Problem lists.
const maxExamples = 3

// Node is what the topology needs of a node.
type Node struct {
	Name   string
	Labels map[string]string
	// Levels are labels held apart from Labels (the node cache's nodecache.Levels), read
	// where Labels lack a key.
	Levels map[string]string
	// Model is the GPU model; nodes without GPUs count as nodes but belong to no model.
	Model string
	// GPUs is the number of whole GPUs the node has; Free is how many are free now.
	GPUs int64
	Free int64
	// Schedulable is false for a node no new pod can land on (NotReady, cordoned,
	// tainted): its free GPUs are counted apart.
	Schedulable bool
}

// label is the node's label key, from Labels or Levels.
func (n *Node) label(key string) (string, bool) {
	if v, ok := n.Labels[key]; ok {
		return v, true
	}
	v, ok := n.Levels[key]
	return v, ok
}

// Present returns the keys of levels that at least one node carries, in their order.
func Present(levels []string, nodes []Node) []string {
	found := make([]bool, len(levels))
	left := len(levels)
	for i := 0; i < len(nodes) && left > 0; i++ {
		for l, key := range levels {
			if !found[l] {
				if _, ok := nodes[i].label(key); ok {
					found[l], left = true, left-1
				}
			}
		}
	}
	var out []string
	for l, key := range levels {
		if found[l] {
			out = append(out, key)
		}
	}
	return out
}

// Tree is the domains of every level and what they hold.
type Tree struct {
	Levels []string
	// Models are the GPU models of the nodes, sorted.
	Models []string
	// GangSizes are the gang sizes counted, in GPUs.
	GangSizes []int64
	// NodeGPUs is, per model, the GPUs of one node: the most any node of the model has.
	NodeGPUs []int64
	// PodGPUs is, per model and gang size, the GPUs of each of the gang's pods: the
	// greatest common divisor of the size and NodeGPUs (one node's worth when that divides
	// the size; the whole gang in one pod when the size divides it).
	PodGPUs [][]int64
	// Domains are, per level, the level's domains, sorted by their parents and values.
	Domains [][]Domain
	// Cluster is what all nodes hold, per model, inside the tree or not.
	Cluster []ModelStats
	// Outside counts the nodes that lack a level's label and so belong to no domain (with
	// Options.Partial, those that lack the top level's).
	Outside  int
	Problems []Problem
}

// Domain is one domain of a level.
type Domain struct {
	Value string
	// Parent is the index of the domain's parent in the level above; -1 on the top level.
	Parent int
	Nodes  int
	// Unschedulable counts the nodes no new pod can land on.
	Unschedulable int
	// Models are the models of the domain's GPU nodes, in the tree's model order.
	Models []ModelStats
}

// ModelStats is what the nodes of one GPU model hold in a domain.
type ModelStats struct {
	Model string
	Nodes int
	GPUs  int64
	// Free counts the free GPUs of schedulable nodes; FreeUnschedulable the others'.
	Free              int64
	FreeUnschedulable int64
	// Slots is, per gang size, how many gangs of that size fit at once now: gangs of
	// size/p pods of p GPUs each (p from Tree.PodGPUs), each pod on one schedulable node.
	Slots []int64
	// LargestGang is the largest gang, in GPUs, of whole-node pods (NodeGPUs each) that
	// fits here now.
	LargestGang int64
	// FreeNodes counts the schedulable nodes by their free GPUs: FreeNodes[k-1] those with
	// k free (a node with more than MaxFreeNodes free as MaxFreeNodes), trailing zeros left
	// out; nil when no node has any free. Whether N pods of G GPUs fit here follows from it.
	FreeNodes []int64
}

// MaxFreeNodes is the most free GPUs a node counts with in FreeNodes.
const MaxFreeNodes = 16

// Options tune Build.
type Options struct {
	// Partial keeps a node that lacks a level's label in the domains of the levels above
	// it (a fleet where only some nodes have NVLink cliques), instead of leaving it out of
	// the tree as Kueue does. Without the top level's label a node is outside either way.
	Partial bool
	// GangSizes are the gang sizes to count, in GPUs; DefaultGangSizes when empty. They
	// are counted in increasing order.
	GangSizes []int64
}

// CheckLevels reports levels a Topology could not have: none, too many, an empty key, a
// key named twice.
func CheckLevels(levels []string) error {
	if len(levels) == 0 {
		return fmt.Errorf("topology has no levels")
	}
	if len(levels) > MaxLevels {
		return fmt.Errorf("topology has %d levels; at most %d are allowed", len(levels), MaxLevels)
	}
	for i, key := range levels {
		if key == "" {
			return fmt.Errorf("topology levels[%d] names no label", i)
		}
		if j := slices.Index(levels[:i], key); j >= 0 {
			return fmt.Errorf("topology levels[%d] repeats levels[%d]: label %q", i, j, key)
		}
	}
	return nil
}

// Build groups nodes into the domains of levels (label keys, broadest first) and counts
// what each domain holds. A node lacking any level's label belongs to no domain, as Kueue
// leaves such nodes out of a topology (unless Options.Partial). The error reports levels CheckLevels refuses or a
// gang size that is not positive; what the nodes' labels get wrong is in Tree.Problems.
func Build(levels []string, nodes []Node, opts Options) (*Tree, error) {
	if err := CheckLevels(levels); err != nil {
		return nil, err
	}
	sizes := slices.Clone(opts.GangSizes)
	if len(sizes) == 0 {
		sizes = slices.Clone(DefaultGangSizes)
	}
	slices.Sort(sizes)
	sizes = slices.Compact(sizes)
	for _, s := range sizes {
		if s <= 0 {
			return nil, fmt.Errorf("gang size %d is not a positive number of GPUs", s)
		}
	}
	b := newBuilder(levels, nodes, sizes, opts.Partial)
	b.place()
	b.sortLevels()
	b.count()
	t := b.tree()
	t.Problems = b.problems()
	return t, nil
}

// gcd is the greatest common divisor of two positive numbers.
func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
