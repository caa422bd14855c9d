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

package quota

import (
	"cmp"
	"math/bits"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

// unknownProduct names the product of a GPU node whose model the inventory does not know, so
// that an empty model keeps meaning "no node".
const unknownProduct = "unknown"

// nodeSet is a set of node indices, one bit each.
type nodeSet []uint64

func newNodeSet(n int) nodeSet { return make(nodeSet, (n+63)/64) }

func (s nodeSet) add(i int) { s[i/64] |= 1 << (i % 64) }

func (s nodeSet) has(i int) bool { return s[i/64]&(1<<(i%64)) != 0 }

func (s nodeSet) or(o nodeSet) {
	for i := range s {
		s[i] |= o[i]
	}
}

func (s nodeSet) and(o nodeSet) {
	for i := range s {
		s[i] &= o[i]
	}
}

// first returns the indices of at most n members, lowest first.
func (s nodeSet) first(n int) []int {
	var out []int
	for i := 0; i < len(s)*64 && len(out) < n; i++ {
		if s.has(i) {
			out = append(out, i)
		}
	}
	return out
}

func (s nodeSet) count() int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

// figures is the hardware a set of nodes offers of one resource.
type figures struct {
	model                 string
	capacity, ready, free int64
}

// taintKey is a taint as a flavor names it and a node carries it.
type taintKey struct {
	key, value string
	effect     corev1.TaintEffect
}

// hardware indexes the GPU nodes: which offer which resource, which each flavor selects,
// their products. Sets are bitsets over the nodes so that unions of flavors stay cheap.
type hardware struct {
	n         int
	names     []string // per node
	products  []string // sorted
	product   []int    // per node, an index into products
	byProduct map[string]nodeSet
	ready     nodeSet
	gpu       nodeSet // nodes with some GPU resource
	resources map[corev1.ResourceName]int
	has       []nodeSet // per resource: nodes with capacity
	capacity  [][]int64 // per resource, per node
	free      [][]int64 // per resource, per node: 0 on nodes that are not Ready
	flavors   map[string]nodeSet
	memo      map[string]figures
	single    map[flavorResource]figures
}

func newHardware(nodes []Node, isGPU func(corev1.ResourceName) bool) *hardware {
	h := &hardware{n: len(nodes), resources: map[corev1.ResourceName]int{}, byProduct: map[string]nodeSet{},
		flavors: map[string]nodeSet{}, memo: map[string]figures{}, single: map[flavorResource]figures{}}
	h.ready, h.gpu, h.product = newNodeSet(h.n), newNodeSet(h.n), make([]int, h.n)
	h.names = make([]string, h.n)
	names := make([]string, h.n)
	for i, node := range nodes {
		h.names[i] = node.Name
		names[i] = cmp.Or(node.Model, unknownProduct)
		for _, r := range node.Resources {
			if !isGPU(r.Name) || r.Capacity <= 0 {
				continue
			}
			ri, ok := h.resources[r.Name]
			if !ok {
				ri = len(h.has)
				h.resources[r.Name] = ri
				h.has = append(h.has, newNodeSet(h.n))
				h.capacity = append(h.capacity, make([]int64, h.n))
				h.free = append(h.free, make([]int64, h.n))
			}
			h.has[ri].add(i)
			h.gpu.add(i)
			h.capacity[ri][i] = saturating.Add(h.capacity[ri][i], r.Capacity)
			if node.Ready {
				h.free[ri][i] = min(saturating.Add(h.free[ri][i], max(0, r.Free)), h.capacity[ri][i])
			}
		}
		if node.Ready {
			h.ready.add(i)
		}
	}
	h.products = slices.Compact(slices.Sorted(slices.Values(names)))
	for i, name := range names {
		h.product[i], _ = slices.BinarySearch(h.products, name)
		set, ok := h.byProduct[name]
		if !ok {
			set = newNodeSet(h.n)
			h.byProduct[name] = set
		}
		set.add(i)
	}
	return h
}

// selectFlavors computes which nodes each flavor selects: every one of its node labels and
// every one of its NoSchedule/NoExecute taints (Kueue ignores PreferNoSchedule). Only the
// label pairs and taints that flavors name are looked up on the nodes.
func (h *hardware) selectFlavors(nodes []Node, flavors []Flavor) {
	pairs := map[string]map[string]nodeSet{}
	taints := map[taintKey]nodeSet{}
	for _, f := range flavors {
		for k, v := range f.NodeLabels {
			if pairs[k] == nil {
				pairs[k] = map[string]nodeSet{}
			}
			if pairs[k][v] == nil {
				pairs[k][v] = newNodeSet(h.n)
			}
		}
		for _, t := range f.NodeTaints {
			if t.Effect != corev1.TaintEffectPreferNoSchedule && taints[taintOf(t)] == nil {
				taints[taintOf(t)] = newNodeSet(h.n)
			}
		}
	}
	for i, node := range nodes {
		for k, values := range pairs {
			if v, ok := node.Labels[k]; ok {
				if set := values[v]; set != nil {
					set.add(i)
				}
			}
		}
		for _, t := range node.Taints {
			if set := taints[taintOf(t)]; set != nil {
				set.add(i)
			}
		}
	}
	for _, f := range flavors {
		set := h.everyNode()
		for k, v := range f.NodeLabels {
			set.and(pairs[k][v])
		}
		for _, t := range f.NodeTaints {
			if t.Effect != corev1.TaintEffectPreferNoSchedule {
				set.and(taints[taintOf(t)])
			}
		}
		h.flavors[f.Name] = set
	}
}

func taintOf(t corev1.Taint) taintKey { return taintKey{t.Key, t.Value, t.Effect} }

// union is the nodes any of the named flavors selects (unknown flavors select none).
func (h *hardware) union(flavors []string) nodeSet {
	set := newNodeSet(h.n)
	for _, f := range flavors {
		if s, ok := h.flavors[f]; ok {
			set.or(s)
		}
	}
	return set
}

// figuresOf is the hardware of resource r on the nodes the flavors select, memoised per
// flavor set and resource: many queues share the same flavors.
func (h *hardware) figuresOf(flavors []string, r corev1.ResourceName) figures {
	if len(flavors) == 1 {
		return h.ofFlavor(flavorResource{flavors[0], r})
	}
	key := string(r) + "\x00" + strings.Join(flavors, "\x00")
	if f, ok := h.memo[key]; ok {
		return f
	}
	f := h.sum(h.union(flavors), r)
	h.memo[key] = f
	return f
}

// sum is the hardware of resource r on the nodes of sel that offer it, and their model.
func (h *hardware) sum(sel nodeSet, r corev1.ResourceName) figures {
	ri, ok := h.resources[r]
	if !ok {
		return figures{}
	}
	var f figures
	seen := make([]bool, len(h.products))
	capacity, free, has := h.capacity[ri], h.free[ri], h.has[ri]
	for wi, w := range sel {
		w &= has[wi]
		for w != 0 {
			i := wi*64 + bits.TrailingZeros64(w)
			w &= w - 1
			seen[h.product[i]] = true
			f.capacity = saturating.Add(f.capacity, capacity[i])
			if h.ready.has(i) {
				f.ready = saturating.Add(f.ready, capacity[i])
				f.free = saturating.Add(f.free, free[i])
			}
		}
	}
	var models []string
	for pi, ok := range seen {
		if ok {
			models = append(models, h.products[pi])
		}
	}
	f.model = strings.Join(models, "+")
	return f
}

// everyNode is the set of all nodes.
func (h *hardware) everyNode() nodeSet {
	set := newNodeSet(h.n)
	for i := range set {
		set[i] = ^uint64(0)
	}
	if r := h.n % 64; r != 0 {
		set[len(set)-1] = 1<<r - 1
	}
	return set
}

// ofFlavor is figuresOf for one flavor.
func (h *hardware) ofFlavor(fr flavorResource) figures {
	if f, ok := h.single[fr]; ok {
		return f
	}
	var f figures
	if set, ok := h.flavors[fr.flavor]; ok {
		f = h.sum(set, fr.resource)
	}
	h.single[fr] = f
	return f
}
