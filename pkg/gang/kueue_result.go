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

package gang

import (
	"fmt"
	"maps"
	"slices"
)

// pods lists the gang's pods as the assignments place them: a PodSet's pods fill its
// domains in the assignment's order; without assignments, no pod has a node.
func (t *tasSnapshot) pods(g Gang, assignments []TopologyAssignment) []Pod {
	var out []Pod
	prefixes := g.prefixes()
	for ti := range g.Templates {
		var domains []DomainCount
		if ti < len(assignments) {
			domains = assignments[ti].Domains
		}
		i := 0
		for _, d := range domains {
			leaf := t.byID[domainID(d.Values)]
			for range d.Count {
				p := Pod{Name: fmt.Sprintf("%s-%d", prefixes[ti], i), Template: ti}
				if leaf != nil {
					p.Domain = domainID(leaf.values)
					if t.lowestIsNode {
						p.Node = leaf.nodes[0]
					}
				}
				out = append(out, p)
				i++
			}
		}
		for ; i < g.Templates[ti].Count; i++ {
			out = append(out, Pod{Name: fmt.Sprintf("%s-%d", prefixes[ti], i), Template: ti})
		}
	}
	return out
}

// rooms says, per domain of the gang's level (the top level without a key), how many of
// the first PodSet's pods fit now and why its nodes have no room for the rest.
func (t *tasSnapshot) rooms(g Gang, k Kueue) []Domain {
	r, reason := t.newRequest(g.Templates[0], g.Topology, k.PodSets[0])
	if reason != "" {
		return nil
	}
	sel, aff, reason := t.selectors(r.pod)
	if reason != "" {
		return nil
	}
	t.fillInCounts(r, nil, false, sel, aff)
	level := 0
	if g.Topology.Key != "" {
		level = slices.Index(t.levels, g.Topology.Key)
	}
	domains := slices.SortedFunc(maps.Values(t.byLevel[level]), func(a, b *kdomain) int { return slices.Compare(a.values, b.values) })
	var out []Domain
	for _, d := range domains {
		room := Domain{Value: d.values[len(d.values)-1], Pods: int(min(d.sliceState*r.sliceSize, r.count))}
		stats := newExclusions()
		for leaf := range leavesOf(d) {
			room.Nodes += len(leaf.nodes)
			stats.totalNodes++
			stats.add(leaf.excluded)
		}
		if room.Pods < int(r.count) {
			reasons := stats.reasons()
			if reasons == "" {
				reasons = "none"
			}
			room.Held = fmt.Sprintf("Total nodes: %d; excluded: %s", stats.totalNodes, reasons)
		}
		out = append(out, room)
	}
	return out
}

// leavesOf yields the leaves under d.
func leavesOf(d *kdomain) func(yield func(*kdomain) bool) {
	return func(yield func(*kdomain) bool) {
		var walk func(*kdomain) bool
		walk = func(d *kdomain) bool {
			if len(d.children) == 0 {
				return yield(d)
			}
			for _, c := range d.children {
				if !walk(c) {
					return false
				}
			}
			return true
		}
		walk(d)
	}
}
