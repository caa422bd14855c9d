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
	"cmp"
	"slices"
	"strconv"
	"strings"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

// Bounds of CounterFacts, against hostile or broken slices (the API allows far fewer).
const (
	maxCounterSets    = 256
	maxCounterDevices = 4096
)

// CounterFacts is what the scheduler's allocator weighs of a node's partitionable devices
// (devices that consume shared counters, as NVIDIA's DynamicMIG publishes them): the pools'
// counter sets and what each device consumes of them. Read-only; nil when no device
// consumes counters.
type CounterFacts struct {
	// Sets are sorted by pool and name.
	Sets []CounterSet
	// Devices are those of type gpu or mig that consume counters, sorted by name.
	Devices []CounterDevice
}

// CounterSet is one shared counter set of a pool: Values[i] is counter Counters[i], in
// thousandths (CounterMilli); Counters are sorted.
type CounterSet struct {
	Pool, Name string
	Counters   []string
	Values     []int64
}

// CounterDevice is one device that consumes counters.
type CounterDevice struct {
	Name string
	// Profile is a MIG partition's profile; "" for a whole GPU.
	Profile string
	// GPU is n of a whole GPU gpu-<n> (n < 64), else -1.
	GPU int8
	// Tainted: the device carries a NoSchedule or NoExecute taint.
	Tainted bool
	// Uses are what it consumes, per counter set; devices consuming the same share them.
	Uses []CounterUse
}

// CounterUse is what a device consumes of one counter set: Amounts[i] of the set's
// Counters[i].
type CounterUse struct {
	Set     int32
	Amounts []int64
}

// CounterMilli is a counter's or capacity's value as the facts hold it
// (allocation.CapacityMilli).
func CounterMilli(q resource.Quantity) int64 { return allocation.CapacityMilli(q) }

// counters reads the newest generations' counter sets and the devices that consume them.
func (b *factsBuilder) counters(in []*resourcev1.ResourceSlice, pools []poolGen, devs []draDevice) {
	sets := counterSets(in, pools)
	if len(sets) > maxCounterSets {
		b.warn("more than %d counter sets: the rest not read", maxCounterSets)
		sets = sets[:maxCounterSets]
	}
	n := 0
	for _, d := range devs {
		if len(d.dev.ConsumesCounters) > 0 {
			n++
		}
	}
	if n == 0 {
		return
	}
	out := make([]CounterDevice, 0, min(n, maxCounterDevices))
	for _, d := range devs {
		if len(d.dev.ConsumesCounters) == 0 || d.kind != draTypeGPU && d.kind != draTypeMIG {
			continue
		}
		if len(out) == maxCounterDevices {
			b.warn("more than %d devices consume counters: the rest not counted", maxCounterDevices)
			break
		}
		uses, key, ok := deviceUses(sets, d)
		if !ok {
			b.warn("device %s consumes a counter its pool does not publish: not counted", Cut(d.dev.Name, 64))
			continue
		}
		uses = sharedCounters.share("u"+key, uses).([]CounterUse)
		cd := CounterDevice{Name: d.dev.Name, GPU: -1, Tainted: noScheduleTaint(d.dev), Uses: uses}
		if d.kind == draTypeMIG {
			cd.Profile = Cut(AttrProfile.Value(d.dev), 64)
		} else if n, ok := allocation.GPUIndex(d.dev.Name); ok {
			cd.GPU = int8(n)
		}
		if d.kind == draTypeMIG && cd.Profile == "" {
			continue // no profile to count it under
		}
		out = append(out, cd)
	}
	if len(out) > 0 {
		b.facts.Counters = &CounterFacts{Sets: sets, Devices: out}
	}
}

// counterSets are the counter sets of the pools' newest generations, sorted by pool and
// name; of a set published twice, the one of the slice first by name.
func counterSets(in []*resourcev1.ResourceSlice, pools []poolGen) []CounterSet {
	type found struct {
		set   CounterSet
		slice string
	}
	var all []found
	for _, s := range in {
		if s == nil || s.Spec.Driver != DRADriver || len(s.Spec.SharedCounters) == 0 {
			continue
		}
		i := slices.IndexFunc(pools, func(g poolGen) bool { return g.name == s.Spec.Pool.Name })
		if i < 0 || pools[i].gen != s.Spec.Pool.Generation {
			continue
		}
		for _, cs := range s.Spec.SharedCounters {
			set := CounterSet{Pool: s.Spec.Pool.Name, Name: cs.Name, Counters: make([]string, 0, len(cs.Counters))}
			for name := range cs.Counters {
				set.Counters = append(set.Counters, name)
			}
			slices.Sort(set.Counters)
			set.Values = make([]int64, len(set.Counters))
			key := make([]byte, 0, 256)
			for j, name := range set.Counters {
				set.Values[j] = CounterMilli(cs.Counters[name].Value)
				key = strconv.AppendInt(append(key, ','), set.Values[j], 10)
			}
			set.Values = sharedCounters.share("v"+string(key), set.Values).([]int64)
			names := make([]byte, 0, 256)
			for _, name := range set.Counters {
				names = append(strconv.AppendInt(append(names, ','), int64(len(name)), 10), name...)
			}
			set.Counters = sharedCounters.share("n"+string(names), set.Counters).([]string)
			all = append(all, found{set, s.Name})
		}
	}
	slices.SortFunc(all, func(a, b found) int {
		return cmp.Or(strings.Compare(a.set.Pool, b.set.Pool), strings.Compare(a.set.Name, b.set.Name), strings.Compare(a.slice, b.slice))
	})
	all = slices.CompactFunc(all, func(a, b found) bool { return a.set.Pool == b.set.Pool && a.set.Name == b.set.Name })
	out := make([]CounterSet, len(all))
	for i := range all {
		out[i] = all[i].set
	}
	return out
}

// deviceUses is what the device consumes, per set of its pool, and a key that is equal for
// equal uses; false when it names a set or counter that the pool does not publish (the
// scheduler cannot allocate such a device).
func deviceUses(sets []CounterSet, d draDevice) ([]CounterUse, string, bool) {
	uses := make([]CounterUse, 0, len(d.dev.ConsumesCounters))
	for _, c := range d.dev.ConsumesCounters {
		i, ok := slices.BinarySearchFunc(sets, [2]string{d.pool, c.CounterSet}, func(s CounterSet, k [2]string) int {
			return cmp.Or(strings.Compare(s.Pool, k[0]), strings.Compare(s.Name, k[1]))
		})
		if !ok {
			return nil, "", false
		}
		k := slices.IndexFunc(uses, func(u CounterUse) bool { return u.Set == int32(i) })
		if k < 0 {
			uses = append(uses, CounterUse{Set: int32(i), Amounts: make([]int64, len(sets[i].Counters))})
			k = len(uses) - 1
		}
		for name, counter := range c.Counters {
			j, ok := slices.BinarySearch(sets[i].Counters, name)
			if !ok {
				return nil, "", false
			}
			uses[k].Amounts[j] = saturating.Add(uses[k].Amounts[j], CounterMilli(counter.Value))
		}
	}
	slices.SortFunc(uses, func(a, b CounterUse) int { return cmp.Compare(a.Set, b.Set) })
	var key []byte
	for _, u := range uses {
		key = strconv.AppendInt(key, int64(u.Set), 10)
		for _, a := range u.Amounts {
			key = strconv.AppendInt(append(key, ','), a, 10)
		}
		key = append(key, ';')
	}
	return uses, string(key), true
}

func noScheduleTaint(d *resourcev1.Device) bool {
	for _, t := range d.Taints {
		if t.Effect == resourcev1.DeviceTaintEffectNoSchedule || t.Effect == resourcev1.DeviceTaintEffectNoExecute {
			return true
		}
	}
	return false
}

// sharedCounters holds the counter names, values and uses that nodes' facts share: the
// devices at one placement of every GPU of a kind consume alike, on every node of the kind.
var sharedCounters = &contentTable{}

// maxShared bounds contentTable: a full table starts over (facts keep what they have).
const maxShared = 4096

// contentTable holds one copy of each read-only value by a key of its content.
type contentTable struct {
	mu     sync.Mutex
	values map[string]any
}

// share returns the value held under key, holding v there first if there is none.
func (t *contentTable) share(key string, v any) any {
	t.mu.Lock()
	defer t.mu.Unlock()
	if held, ok := t.values[key]; ok {
		return held
	}
	if t.values == nil || len(t.values) >= maxShared {
		t.values = map[string]any{}
	}
	t.values[key] = v
	return v
}

// DRAPartitionPrefix names a DRA partition profile in a node's free units, as the NVIDIA
// driver's device class for MIG devices: mig.nvidia.com/<profile>.
const DRAPartitionPrefix = "mig.nvidia.com/"

// free is what the node's partitionable devices offer once the held devices (admin access
// aside, as allocation.Held lists them) took their counters: the whole GPUs whose counters are
// not all left (bit n for gpu-n), and per profile the partitions a pod could get, carved one
// after the other while the counters last, as the allocator places one device after another.
// A held or tainted device offers nothing.
func (c *CounterFacts) free(h *allocation.Held) (blocked uint64, partitions []homelabv1.ResourceFree) {
	if c == nil {
		return 0, nil
	}
	held := heldDevices(h)
	left := make([][]int64, len(c.Sets))
	for i := range c.Sets {
		left[i] = slices.Clone(c.Sets[i].Values)
	}
	for _, d := range c.Devices {
		if held[d.Name] {
			take(left, d.Uses)
		}
	}
	var profiles []string
	for _, d := range c.Devices {
		switch {
		case d.Profile != "":
			if !slices.Contains(profiles, d.Profile) {
				profiles = append(profiles, d.Profile)
			}
		case d.GPU >= 0 && (held[d.Name] || d.Tainted || !fits(left, d.Uses)):
			blocked |= 1 << d.GPU
		}
	}
	slices.Sort(profiles)
	for _, p := range profiles {
		carve := make([][]int64, len(left))
		for i := range left {
			carve[i] = slices.Clone(left[i])
		}
		var n int32
		for _, d := range c.Devices {
			if d.Profile == p && !held[d.Name] && !d.Tainted && fits(carve, d.Uses) {
				take(carve, d.Uses)
				n = saturating.Add(n, 1)
			}
		}
		partitions = append(partitions, homelabv1.ResourceFree{Resource: DRAPartitionPrefix + p, Free: n})
	}
	return blocked, partitions
}

// fits reports whether what is left of every counter covers the uses.
func fits(left [][]int64, uses []CounterUse) bool {
	for _, u := range uses {
		for j, a := range u.Amounts {
			if a > left[u.Set][j] {
				return false
			}
		}
	}
	return true
}

// take subtracts the uses from what is left (without overflowing).
func take(left [][]int64, uses []CounterUse) {
	for _, u := range uses {
		for j, a := range u.Amounts {
			left[u.Set][j] = saturating.Sub(left[u.Set][j], a)
		}
	}
}
