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
	"fmt"
	"slices"
)

// Largest is, for one level and model, the largest gang that fits in one domain.
type Largest struct {
	Level string
	Model string
	// GPUs is the largest gang of whole-node pods that fits in one domain now; Domain is
	// the first (in the level's order) that holds it, "" when none holds any.
	GPUs   int64
	Domain string
	// GangSize is the largest of the tree's gang sizes that fits in one domain now, 0
	// when none does.
	GangSize int64
}

// Largest returns, per level and model, the largest gang that fits in one domain.
func (t *Tree) Largest() []Largest {
	var out []Largest
	for l, key := range t.Levels {
		best := make([]Largest, len(t.Models))
		for m, model := range t.Models {
			best[m] = Largest{Level: key, Model: model}
		}
		for _, d := range t.Domains[l] {
			for _, st := range d.Models {
				m, _ := slices.BinarySearch(t.Models, st.Model)
				if st.LargestGang > best[m].GPUs {
					best[m].GPUs, best[m].Domain = st.LargestGang, d.Value
				}
				for s := len(st.Slots) - 1; s >= 0; s-- {
					if st.Slots[s] > 0 {
						best[m].GangSize = max(best[m].GangSize, t.GangSizes[s])
						break
					}
				}
			}
		}
		out = append(out, best...)
	}
	return out
}

// Fragmentation is the finding "topology fragmentation": the nodes of a model could take
// a gang if topology did not matter, but no domain of a level the gang must stay in can.
type Fragmentation struct {
	Level string
	Model string
	// Free counts the model's free GPUs on schedulable nodes, in the tree or not.
	Free int64
	// GangGPUs is the smallest of the tree's gang sizes that the model's nodes could take
	// together but no domain of Level can.
	GangGPUs int64
	// Largest is the largest gang of whole-node pods one domain of Level takes now.
	Largest int64
	Message string
}

// Fragmentation returns a finding per level named in required and model where some gang
// size fits the model's schedulable nodes together but no single domain of the level.
// A level the tree does not have is ignored.
func (t *Tree) Fragmentation(required []string) []Fragmentation {
	var out []Fragmentation
	largest := t.Largest()
	for l, key := range t.Levels {
		if !slices.Contains(required, key) {
			continue
		}
		for _, cluster := range t.Cluster {
			m, _ := slices.BinarySearch(t.Models, cluster.Model)
			if f, ok := t.fragmented(l, m, cluster); ok {
				f.Largest = largest[l*len(t.Models)+m].GPUs
				f.Message = fmt.Sprintf("topology fragmentation: %d free %q GPUs could take a gang of %d, but no %q domain can (the largest gang in one: %d GPUs)",
					f.Free, f.Model, f.GangGPUs, f.Level, f.Largest)
				out = append(out, f)
			}
		}
	}
	return out
}

// fragmented finds the smallest gang size the model's nodes take together but no domain
// of level l takes.
func (t *Tree) fragmented(l, m int, cluster ModelStats) (Fragmentation, bool) {
	for s, size := range t.GangSizes {
		if cluster.Slots[s] == 0 {
			continue
		}
		fits := false
		for _, d := range t.Domains[l] {
			for _, st := range d.Models {
				if st.Model == t.Models[m] && st.Slots[s] > 0 {
					fits = true
					break
				}
			}
			if fits {
				break
			}
		}
		if !fits {
			return Fragmentation{Level: t.Levels[l], Model: t.Models[m], Free: cluster.Free, GangGPUs: size}, true
		}
	}
	return Fragmentation{}, false
}
