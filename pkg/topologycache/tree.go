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
	"cmp"
	"math"
	"slices"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/topology"
)

// treeStatus is one hierarchy as status.topology lists it, its metrics, and its
// fragmentation findings at the required level for gangs of threshold GPUs.
func treeStatus(name string, t *topology.Tree, required string, threshold int64) (homelabv1.TopologyTree, []metrics.TopologyRow, []string) {
	out := homelabv1.TopologyTree{Name: name, RequiredLevel: required, OutsideNodes: clamp(int64(t.Outside))}
	for _, size := range t.GangSizes {
		out.GangSizes = append(out.GangSizes, clamp(size))
	}
	for l, key := range t.Levels {
		out.Levels = append(out.Levels, homelabv1.TopologyLevel{Key: key, Domains: clamp(int64(len(t.Domains[l])))})
	}
	for _, p := range t.Problems {
		out.Problems = append(out.Problems, p.Message)
	}
	largest := t.Largest()
	for i, lg := range largest {
		if i >= maxLargest {
			break
		}
		out.Largest = append(out.Largest, homelabv1.TopologyLargest{Model: lg.Model, Level: lg.Level, Gpus: clamp(lg.GPUs), Domain: lg.Domain})
	}
	out.Domains = listedDomains(t)
	fragmented := fragmentedAt(t, required, threshold)
	var found []string
	for _, f := range fragmented {
		found = append(found, f.Message)
	}
	return out, treeRows(name, t, largest, required, fragmented), found
}

// listedDomains are the domains of every level, those with unschedulable nodes first, then
// the most free GPUs, bounded.
func listedDomains(t *topology.Tree) []homelabv1.TopologyDomain {
	type ranked struct {
		d    homelabv1.TopologyDomain
		free int64
		l    int
	}
	var all []ranked
	for l, key := range t.Levels {
		for _, d := range t.Domains[l] {
			r := ranked{l: l, d: homelabv1.TopologyDomain{Level: key, Name: d.Value, Nodes: clamp(int64(d.Nodes)),
				UnschedulableNodes: clamp(int64(d.Unschedulable))}}
			if d.Parent >= 0 && l > 0 {
				r.d.Parent = t.Domains[l-1][d.Parent].Value
			}
			for _, st := range d.Models {
				m := homelabv1.TopologyModel{Model: st.Model, Nodes: clamp(int64(st.Nodes)), Gpus: clamp(st.GPUs),
					FreeGpus: clamp(st.Free), UnschedulableFreeGpus: clamp(st.FreeUnschedulable), LargestGang: clamp(st.LargestGang)}
				for _, slots := range st.Slots {
					m.GangSlots = append(m.GangSlots, clamp(slots))
				}
				for _, n := range st.FreeNodes {
					m.FreeNodes = append(m.FreeNodes, clamp(n))
				}
				r.d.Models = append(r.d.Models, m)
				r.free += st.Free
			}
			all = append(all, r)
		}
	}
	slices.SortStableFunc(all, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(b.d.UnschedulableNodes, a.d.UnschedulableNodes), cmp.Compare(b.free, a.free),
			cmp.Compare(a.l, b.l), cmp.Compare(a.d.Name, b.d.Name))
	})
	out := make([]homelabv1.TopologyDomain, 0, min(len(all), maxDomains))
	for i := range all {
		if i >= maxDomains {
			break
		}
		if len(all[i].d.Models) > 16 {
			all[i].d.Models = all[i].d.Models[:16]
		}
		out = append(out, all[i].d)
	}
	return out
}

// fragmentation is a model whose schedulable nodes together take a gang of threshold GPUs
// that no domain of the required level takes.
type fragmentation struct {
	model   string
	largest int64
	Message string
}

func fragmentedAt(t *topology.Tree, required string, threshold int64) []fragmentation {
	l := slices.Index(t.Levels, required)
	s := slices.Index(t.GangSizes, threshold)
	if l < 0 || s < 0 {
		return nil
	}
	largest := t.Largest()
	var out []fragmentation
	for _, cluster := range t.Cluster {
		if cluster.Slots[s] == 0 {
			continue
		}
		fits := slices.ContainsFunc(t.Domains[l], func(d topology.Domain) bool {
			return slices.ContainsFunc(d.Models, func(st topology.ModelStats) bool { return st.Model == cluster.Model && st.Slots[s] > 0 })
		})
		if fits {
			continue
		}
		lg := largest[l*len(t.Models)+slices.Index(t.Models, cluster.Model)]
		out = append(out, fragmentation{model: cluster.Model, largest: lg.GPUs,
			Message: fmtFragmented(cluster.Model, cluster.Free, threshold, required, lg.GPUs)})
	}
	return out
}

// treeRows are the hierarchy's metrics: per level and model, the largest gang and the slots.
func treeRows(name string, t *topology.Tree, largest []topology.Largest, required string, fragmented []fragmentation) []metrics.TopologyRow {
	var rows []metrics.TopologyRow
	for l, key := range t.Levels {
		for m, model := range t.Models {
			row := metrics.TopologyRow{Topology: name, Level: key, Model: model, LargestGang: largest[l*len(t.Models)+m].GPUs,
				Fragmented: key == required && slices.ContainsFunc(fragmented, func(f fragmentation) bool { return f.model == model })}
			for s, size := range t.GangSizes {
				total := int64(0)
				for _, d := range t.Domains[l] {
					for _, st := range d.Models {
						if st.Model == model {
							total += st.Slots[s]
						}
					}
				}
				row.Slots = append(row.Slots, metrics.GangSlots{GPUs: size, Slots: total})
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// clamp is n held to int32.
func clamp(n int64) int32 {
	return int32(min(max(n, math.MinInt32), math.MaxInt32))
}
