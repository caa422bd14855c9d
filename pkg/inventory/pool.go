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

package inventory

import (
	"slices"
	"strings"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

// Bounds of a model's pool.partitions: MIG profiles, and the length of a profile's name
// (NVIDIA's are like 1g.10gb+me; a longer name is no MIG profile and is left out).
const (
	MaxPartitions       = 16
	maxMIGProfileLength = 16
)

// schedulable reports whether the scheduler could place a pod on the entry's node now: it is
// Ready and not cordoned. What other nodes have free is counted apart.
func schedulable(e *homelabv1.GpuNodeEntry) bool {
	return e.Ready && !slices.Contains(e.Conditions, NodeCordoned)
}

// pooler sums a model's nodes into a pool summary shaped like KEP-5677's ResourcePoolStatus.
type pooler struct {
	pool       homelabv1.GpuPool
	partitions map[string]int32 // free MIG devices by profile, on schedulable nodes
}

func (p *pooler) add(e *homelabv1.GpuNodeEntry) {
	gpus := max(e.GpuCount, 0)
	held := min(max(e.AllocatedGpus, 0), gpus)
	unavailable := gpus - held // nothing can be placed on the node
	ok := schedulable(e)
	if ok {
		// An unhealthy GPU may be held or not: it is unavailable only as far as it is neither
		// held nor free, so that a tainted, allocated GPU counts once, as allocated.
		unavailable = min(max(e.UnhealthyGpus, 0), max(gpus-held-max(e.FreeGpus, 0), 0))
	}
	p.pool.TotalDevices = saturating.Add(p.pool.TotalDevices, gpus)
	p.pool.AllocatedDevices = saturating.Add(p.pool.AllocatedDevices, held)
	p.pool.UnavailableDevices = saturating.Add(p.pool.UnavailableDevices, unavailable)
	if !ok {
		return
	}
	for _, r := range e.Free {
		profile, mig := strings.CutPrefix(r.Resource, allocation.ResourceMIGPrefix)
		if !mig {
			profile, mig = strings.CutPrefix(r.Resource, DRAPartitionPrefix)
		}
		if r.Resource == allocation.ResourceGPU {
			// With MIG's single strategy (a <model>-MIG-<profile> product, as ShapeOf reads
			// it) each nvidia.com/gpu is a MIG device.
			_, variant := BaseModel(e.Product)
			profile, mig = strings.CutPrefix(variant, "MIG-")
		}
		if mig && len(profile) <= maxMIGProfileLength {
			p.addPartition(profile, r.Free)
		}
	}
}

func (p *pooler) addPartition(profile string, free int32) {
	if p.partitions == nil {
		p.partitions = map[string]int32{}
	}
	p.partitions[profile] = saturating.Add(p.partitions[profile], max(free, 0))
}

// merge adds another model's pool (folding models into OtherModels).
func (p *pooler) merge(g *homelabv1.GpuPool) {
	if g == nil {
		return
	}
	p.pool.TotalDevices = saturating.Add(p.pool.TotalDevices, g.TotalDevices)
	p.pool.AllocatedDevices = saturating.Add(p.pool.AllocatedDevices, g.AllocatedDevices)
	p.pool.UnavailableDevices = saturating.Add(p.pool.UnavailableDevices, g.UnavailableDevices)
	for _, part := range g.Partitions {
		p.addPartition(part.Profile, part.Free)
	}
}

// result is the pool: available is what is neither allocated nor unavailable, and the
// partitions are sorted by profile, the first MaxPartitions kept.
func (p *pooler) result() *homelabv1.GpuPool {
	pool := p.pool
	pool.AvailableDevices = max(0, pool.TotalDevices-pool.AllocatedDevices-pool.UnavailableDevices)
	for profile, free := range p.partitions {
		pool.Partitions = append(pool.Partitions, homelabv1.GpuPartition{Profile: profile, Free: free})
	}
	slices.SortFunc(pool.Partitions, func(a, b homelabv1.GpuPartition) int { return strings.Compare(a.Profile, b.Profile) })
	if len(pool.Partitions) > MaxPartitions {
		pool.Partitions = pool.Partitions[:MaxPartitions:MaxPartitions]
	}
	return &pool
}
