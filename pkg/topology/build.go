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

package topology

import (
	"cmp"
	"slices"
)

// The counters kept per domain and model, before the gang sizes' pod counts.
const (
	fNodes = iota
	fGPUs
	fFree
	fFreeUnschedulable
	fWholeNodePods
	fPods // then one per gang size, then MaxFreeNodes for the free-GPU histogram
)

// builder holds Build's scratch.
type builder struct {
	levels   []string
	nodes    []Node
	sizes    []int64
	models   []string
	modelOf  []int32 // per node: its model's index, -1 without GPUs
	nodeGPUs []int64
	podGPUs  [][]int64
	stride   int
	partial  bool
	leaf     []int32 // per node: its domain on its deepest level
	depth    []int8  // per node: that level, -1 outside the tree
	// index finds, per level, the first domain of a value; next chains the domains of the
	// same value under other parents. A domain is its parent and value, so a value reused
	// under two parents makes two domains, as Kueue's domain IDs (the values of every
	// level) do.
	index    []map[string]int32
	next     [][]int32
	doms     [][]Domain
	missing  []int // per level: the nodes lacking its label
	examples [][]string
	outside  int
	acc      [][]int64 // per level: domains x models x stride counters
	cluster  []int64   // models x stride counters over every node
}

func newBuilder(levels []string, nodes []Node, sizes []int64, partial bool) *builder {
	b := &builder{
		levels:   levels,
		nodes:    nodes,
		sizes:    sizes,
		stride:   fPods + len(sizes) + MaxFreeNodes,
		partial:  partial,
		leaf:     make([]int32, len(nodes)),
		depth:    make([]int8, len(nodes)),
		index:    make([]map[string]int32, len(levels)),
		next:     make([][]int32, len(levels)),
		doms:     make([][]Domain, len(levels)),
		missing:  make([]int, len(levels)),
		examples: make([][]string, len(levels)),
		acc:      make([][]int64, len(levels)),
	}
	for l := range levels {
		b.index[l] = map[string]int32{}
	}
	b.findModels()
	return b
}

// findModels names the models, the GPUs of one node of each and the pod sizes of gangs.
func (b *builder) findModels() {
	index := map[string]int32{}
	var most []int64 // per model in the order first seen: the most GPUs of a node
	b.modelOf = make([]int32, len(b.nodes))
	for i := range b.nodes {
		n := &b.nodes[i]
		b.modelOf[i] = -1
		if n.GPUs <= 0 {
			continue
		}
		m, ok := index[n.Model]
		if !ok {
			m = int32(len(b.models))
			index[n.Model] = m
			b.models = append(b.models, n.Model)
			most = append(most, 0)
		}
		b.modelOf[i] = m
		most[m] = max(most[m], n.GPUs)
	}
	order := make([]int32, len(b.models))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(x, y int32) int { return cmp.Compare(b.models[x], b.models[y]) })
	moved := make([]int32, len(order))
	sorted := make([]string, len(order))
	for to, from := range order {
		moved[from], sorted[to] = int32(to), b.models[from]
		b.nodeGPUs = append(b.nodeGPUs, most[from])
		pods := make([]int64, len(b.sizes))
		for s, size := range b.sizes {
			pods[s] = gcd(size, most[from])
		}
		b.podGPUs = append(b.podGPUs, pods)
	}
	b.models = sorted
	for i, m := range b.modelOf {
		if m >= 0 {
			b.modelOf[i] = moved[m]
		}
	}
}

// place puts each node in its domain of every level, making the domains as it goes. A node
// lacking a level's label is outside the tree, or with partial in the domains of the levels
// above that one.
func (b *builder) place() {
	values := make([]string, len(b.levels))
	for i := range b.nodes {
		n := &b.nodes[i]
		depth := len(b.levels)
		for l, key := range b.levels {
			v, ok := n.label(key)
			values[l] = v
			if !ok {
				depth = min(depth, l)
				b.missing[l]++
				if len(b.examples[l]) < maxExamples {
					b.examples[l] = append(b.examples[l], n.Name)
				}
			}
		}
		if depth < len(b.levels) && !b.partial || depth == 0 {
			b.outside++
			b.depth[i] = -1
			continue
		}
		parent := int32(-1)
		for l, v := range values[:depth] {
			parent = b.domain(l, parent, v)
		}
		b.leaf[i], b.depth[i] = parent, int8(depth-1)
	}
}

// domain returns the index of the domain of value under parent on level l, made if new.
func (b *builder) domain(l int, parent int32, value string) int32 {
	first, ok := b.index[l][value]
	if ok {
		for idx := first; idx >= 0; idx = b.next[l][idx] {
			if b.doms[l][idx].Parent == int(parent) {
				return idx
			}
		}
	}
	idx := int32(len(b.doms[l]))
	b.doms[l] = append(b.doms[l], Domain{Value: value, Parent: int(parent)})
	b.next[l] = append(b.next[l], -1)
	if ok {
		b.next[l][idx], b.next[l][first] = b.next[l][first], idx
	} else {
		b.index[l][value] = idx
	}
	return idx
}

// sortLevels orders each level's domains by their parents' order, then by value, so the
// tree is the same whatever order the nodes came in.
func (b *builder) sortLevels() {
	moved := make([][]int32, len(b.levels)) // per level, the new index of each old index
	for l := range b.levels {
		doms := b.doms[l]
		for i := range doms {
			if doms[i].Parent >= 0 {
				doms[i].Parent = int(moved[l-1][doms[i].Parent])
			}
		}
		order := make([]int32, len(doms))
		for i := range order {
			order[i] = int32(i)
		}
		slices.SortFunc(order, func(x, y int32) int {
			return cmp.Or(cmp.Compare(doms[x].Parent, doms[y].Parent), cmp.Compare(doms[x].Value, doms[y].Value))
		})
		sorted := make([]Domain, len(doms))
		moved[l] = make([]int32, len(doms))
		for to, from := range order {
			sorted[to] = doms[from]
			moved[l][from] = int32(to)
		}
		b.doms[l] = sorted
	}
	for i, d := range b.depth {
		if d >= 0 {
			b.leaf[i] = moved[d][b.leaf[i]]
		}
	}
}

// count adds each node to its lowest domain and to the cluster, then each domain to its
// parent, from the lowest level up.
func (b *builder) count() {
	perDomain := len(b.models) * b.stride
	for l := range b.levels {
		b.acc[l] = make([]int64, len(b.doms[l])*perDomain)
	}
	b.cluster = make([]int64, perDomain)
	last := len(b.levels) - 1
	for i := range b.nodes {
		n, depth, leaf := &b.nodes[i], b.depth[i], b.leaf[i]
		if depth >= 0 {
			d := &b.doms[depth][leaf]
			d.Nodes++
			if !n.Schedulable {
				d.Unschedulable++
			}
		}
		m := b.modelOf[i]
		if m < 0 {
			continue
		}
		b.add(b.cluster[int(m)*b.stride:], n, m)
		if depth >= 0 {
			b.add(b.acc[depth][int(leaf)*perDomain+int(m)*b.stride:], n, m)
		}
	}
	for l := last; l > 0; l-- {
		for d := range b.doms[l] {
			child := &b.doms[l][d]
			parent := &b.doms[l-1][child.Parent]
			parent.Nodes += child.Nodes
			parent.Unschedulable += child.Unschedulable
			from := b.acc[l][d*perDomain : (d+1)*perDomain]
			to := b.acc[l-1][child.Parent*perDomain : (child.Parent+1)*perDomain]
			for k, v := range from {
				to[k] += v
			}
		}
	}
}

// add counts a node of model m into counters c.
func (b *builder) add(c []int64, n *Node, m int32) {
	c[fNodes]++
	c[fGPUs] += n.GPUs
	free := max(n.Free, 0)
	if !n.Schedulable {
		c[fFreeUnschedulable] += free
		return
	}
	c[fFree] += free
	c[fWholeNodePods] += free / b.nodeGPUs[m]
	for s, p := range b.podGPUs[m] {
		c[fPods+s] += free / p
	}
	if free > 0 {
		c[fPods+len(b.sizes)+int(min(free, MaxFreeNodes))-1]++
	}
}

// tree turns the counters into the Tree.
func (b *builder) tree() *Tree {
	t := &Tree{
		Levels:    b.levels,
		Models:    b.models,
		GangSizes: b.sizes,
		NodeGPUs:  b.nodeGPUs,
		PodGPUs:   b.podGPUs,
		Domains:   b.doms,
		Outside:   b.outside,
		Cluster:   b.stats(b.cluster, len(b.models)),
	}
	perDomain := len(b.models) * b.stride
	for l := range b.doms {
		used := 0
		for k := fNodes; k < len(b.acc[l]); k += b.stride {
			if b.acc[l][k] > 0 {
				used++
			}
		}
		all := b.stats(b.acc[l], used)
		for d := range b.doms[l] {
			n := 0
			for m := range b.models {
				if b.acc[l][d*perDomain+m*b.stride+fNodes] > 0 {
					n++
				}
			}
			b.doms[l][d].Models, all = all[:n:n], all[n:]
		}
	}
	return t
}

// stats turns counters (blocks of models) into the used of them with nodes, sharing one
// backing array for all the Slots.
func (b *builder) stats(acc []int64, used int) []ModelStats {
	out := make([]ModelStats, 0, used)
	slots := make([]int64, used*len(b.sizes))
	var hist []int64 // the FreeNodes of every stat, one backing array
	for k := 0; k < len(acc); k += b.stride {
		c := acc[k : k+b.stride]
		if c[fNodes] == 0 {
			continue
		}
		m := (k / b.stride) % len(b.models)
		st := ModelStats{
			Model:             b.models[m],
			Nodes:             int(c[fNodes]),
			GPUs:              c[fGPUs],
			Free:              c[fFree],
			FreeUnschedulable: c[fFreeUnschedulable],
			LargestGang:       c[fWholeNodePods] * b.nodeGPUs[m],
		}
		st.Slots, slots = slots[:len(b.sizes):len(b.sizes)], slots[len(b.sizes):]
		for s, size := range b.sizes {
			st.Slots[s] = c[fPods+s] / (size / b.podGPUs[m][s])
		}
		h := c[fPods+len(b.sizes):]
		if n := len(h) - countTrailingZeros(h); n > 0 {
			start := len(hist)
			hist = append(hist, h[:n]...)
			st.FreeNodes = hist[start : start+n : start+n]
		}
		out = append(out, st)
	}
	return out
}

// countTrailingZeros is how many zeros end c.
func countTrailingZeros(c []int64) int {
	n := 0
	for i := len(c) - 1; i >= 0 && c[i] == 0; i-- {
		n++
	}
	return n
}
