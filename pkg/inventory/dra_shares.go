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
	"strconv"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

// DRASharedResource names, in a node's free units, the DRA devices that allow several
// allocations (consumable capacity) on which a pod could still get a share.
const DRASharedResource = "gpu.nvidia.com/shared"

// ShareableDevice is a device that allows several allocations (consumable capacity).
type ShareableDevice struct {
	Name string
	// Tainted: the device carries a NoSchedule or NoExecute taint.
	Tainted bool
	// Capacity is every capacity of the device, sorted by name.
	Capacity []ShareCapacity
}

// ShareCapacity is one capacity of a shareable device, in thousandths (CounterMilli).
type ShareCapacity struct {
	Name string
	// Value is the device's capacity; Smallest the least a share takes of it (SmallestShare).
	Value, Smallest int64
}

// SmallestShare is the least a request takes of a capacity of a device that allows several
// allocations, in thousandths, as the scheduler's allocator rounds a request: the policy's
// minimum, else its smallest valid value, else 0 (a request may ask any amount).
func SmallestShare(p *resourcev1.CapacityRequestPolicy) int64 {
	switch {
	case p == nil:
		return 0
	case p.ValidRange != nil && p.ValidRange.Min != nil:
		return CounterMilli(*p.ValidRange.Min)
	case len(p.ValidValues) > 0:
		return CounterMilli(p.ValidValues[0])
	}
	return 0
}

// shareable reads the gpu and mig devices that allow several allocations.
func (b *factsBuilder) shareable(devs []draDevice) {
	for _, d := range devs {
		if d.dev.AllowMultipleAllocations == nil || !*d.dev.AllowMultipleAllocations || d.kind != draTypeGPU && d.kind != draTypeMIG {
			continue
		}
		if len(b.facts.Shareable) == maxCounterDevices {
			b.warn("more than %d devices allow several allocations: the rest not counted", maxCounterDevices)
			return
		}
		sd := ShareableDevice{Name: d.dev.Name, Tainted: noScheduleTaint(d.dev), Capacity: make([]ShareCapacity, 0, len(d.dev.Capacity))}
		for name, c := range d.dev.Capacity {
			sd.Capacity = append(sd.Capacity, ShareCapacity{Name: string(name), Value: CounterMilli(c.Value), Smallest: SmallestShare(c.RequestPolicy)})
		}
		slices.SortFunc(sd.Capacity, func(a, c ShareCapacity) int { return strings.Compare(a.Name, c.Name) })
		key := make([]byte, 0, 128)
		for _, c := range sd.Capacity {
			key = strconv.AppendInt(append(key, ','), int64(len(c.Name)), 10)
			key = strconv.AppendInt(append(append(key, c.Name...), ','), c.Value, 10)
			key = strconv.AppendInt(append(key, ','), c.Smallest, 10)
		}
		sd.Capacity = sharedCounters.share("c"+string(key), sd.Capacity).([]ShareCapacity)
		b.facts.Shareable = append(b.facts.Shareable, sd)
	}
}

// sharedFree is the free unit of the node's shareable devices: those, untainted, on which
// what the allocated shares left of every capacity is at least its smallest share (and more
// than nothing). A device held without a share recorded is taken as held whole. nil when the
// node has no shareable device.
func sharedFree(devices []ShareableDevice, h *allocation.Held) []homelabv1.ResourceFree {
	if len(devices) == 0 {
		return nil
	}
	held := heldDevices(h)
	var free int32
	for _, d := range devices {
		var consumed []allocation.ResourceCount
		if h != nil {
			if i := slices.IndexFunc(h.Shares, func(s allocation.Share) bool { return s.Device == d.Name }); i >= 0 {
				consumed = h.Shares[i].Consumed
			} else if held[d.Name] {
				continue
			}
		}
		if !d.Tainted && shareLeft(d.Capacity, consumed) {
			free = saturating.Add(free, 1)
		}
	}
	return []homelabv1.ResourceFree{{Resource: DRASharedResource, Free: free}}
}

// shareLeft reports whether a share of the smallest size fits in every capacity.
func shareLeft(capacity []ShareCapacity, consumed []allocation.ResourceCount) bool {
	for _, c := range capacity {
		var used int64
		if i := slices.IndexFunc(consumed, func(r allocation.ResourceCount) bool { return r.Name == c.Name }); i >= 0 {
			used = consumed[i].Count
		}
		if left := c.Value - min(used, c.Value); left < max(c.Smallest, 1) {
			return false
		}
	}
	return true
}
