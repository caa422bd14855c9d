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

package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// TopologyContent is how an inventory's GPU nodes group into topology domains
// (status.topology), per topology, level and model.
type TopologyContent struct {
	Rows []TopologyRow
}

// TopologyRow is one model at one level of a topology: the largest gang one domain takes
// now, the gangs of each size the level's domains take at once, and whether the level is
// the required one and fragmented (TopologyFragmented names it).
type TopologyRow struct {
	Topology, Level, Model string
	LargestGang            int64
	// Slots are per gang size (GPUs): the gangs of that size the level's domains take now.
	Slots      []GangSlots
	Fragmented bool
}

// GangSlots is how many gangs of a size fit at once.
type GangSlots struct {
	GPUs, Slots int64
}

// topologyDescs are the gauges of the topology domains.
type topologyDescs struct {
	largest, slots, fragmented *prometheus.Desc
}

func newTopologyDescs(desc func(name, help string, labels ...string) *prometheus.Desc) topologyDescs {
	return topologyDescs{
		largest: desc("topology_largest_gang_gpus", "The largest gang (GPUs, pods of one node's worth) that fits in one domain of the level now, per topology, level and model.", "topology", "level", "product"),
		slots: desc("topology_gang_slots", "How many gangs of gang_gpus GPUs the level's domains take at once now, each inside one domain, per topology, level and model.",
			"topology", "level", "product", "gang_gpus"),
		fragmented: desc("topology_fragmented", "1 when the model has at least spec.fragmentationGpus free GPUs but no domain of the required level can take a gang of that many (the TopologyFragmented condition).",
			"topology", "level", "product"),
	}
}

func (d topologyDescs) all() []*prometheus.Desc {
	return []*prometheus.Desc{d.largest, d.slots, d.fragmented}
}

func (d topologyDescs) collect(gauge func(*prometheus.Desc, float64, ...string), t *TopologyContent) {
	if t == nil {
		return
	}
	for _, r := range t.Rows {
		gauge(d.largest, float64(r.LargestGang), r.Topology, r.Level, r.Model)
		for _, s := range r.Slots {
			gauge(d.slots, float64(s.Slots), r.Topology, r.Level, r.Model, strconv.FormatInt(s.GPUs, 10))
		}
		if r.Fragmented {
			gauge(d.fragmented, 1, r.Topology, r.Level, r.Model)
		}
	}
}
