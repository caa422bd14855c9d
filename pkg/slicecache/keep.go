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

// Package slicecache is where NVIDIA's DRA ResourceSlices (driver gpu.nvidia.com) are
// cached: each as a compact form holding what inventory.DeviceFactsOf reads, indexed by
// node, with each node's DeviceFacts recomputed from that node's slices when one of them
// changes. docs/design/slice-cache.md says why.
package slicecache

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/intern"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// The keep-rules: what the cache holds of a device is what inventory.DeviceFactsOf reads,
// the attributes inventory.Attr* and the capacity inventory.CapMemory, each as it reads them,
// and the counters it consumes; of a slice, its shared counter sets. Counter values are kept
// as inventory.CounterMilli reads them.

// memoryBytes is the device's memory capacity as DeviceFactsOf reads it: in bytes, rounded
// up as Quantity.Value does; a negative capacity is kept as -1 and one beyond int64 as
// MaxInt64, both out of the range DeviceFactsOf accepts, as the original is.
func memoryBytes(d *resourcev1.Device) (bytes int64, present bool) {
	c, ok := inventory.CapMemory.Capacity(d)
	switch {
	case !ok:
		return 0, false
	case c.Sign() < 0:
		return -1, true
	case c.CmpInt64(math.MaxInt64) > 0:
		return math.MaxInt64, true
	}
	return c.Value(), true
}

// nodeLocal reports whether a slice is one the cache reads: the NVIDIA driver's, bound to a
// node (network-attached pools, with a node selector or all nodes, are not node-local).
func nodeLocal(s *resourcev1.ResourceSlice) bool {
	return s.Spec.Driver == inventory.DRADriver && s.Spec.NodeName != nil && *s.Spec.NodeName != ""
}

// compactSlice is how the cache holds a ResourceSlice: the fields DeviceFactsOf reads, as
// plain values, with the strings that repeat across slices shared. A slice that is not
// node-local keeps its metadata and driver only (node is ""), so that the informer can
// still track and delete it. Slices are never modified once cached.
type compactSlice struct {
	kubeproto.Compact // name, resourceVersion, the watch-list bookmark's annotation
	driver            string
	node              string // spec.nodeName; "" when not node-local
	pool              pool
	devices           []device
	counterSets       *[]counterSet // spec.sharedCounters, shared; nil when none
}

type pool struct {
	name                           string
	generation, resourceSliceCount int64
}

// device is one device of a slice. Its attributes that repeat across the devices of one
// model and driver share one model; its UUIDs and PCI bus ID are packed (ids.go).
type device struct {
	name             string
	model            *model
	more             *deviceMore // nil unless the device has taints or an ID not packed
	uuid, parentUUID packedUUID
	pciBusID         packedPCI
}

// deviceMore is what few devices have: taints, and the IDs whose spelling is not packed.
// Those with taints only are shared by content: read-only.
type deviceMore struct {
	uuid, parentUUID, pciBusID string // each only if its packed form is held elsewhere
	taints                     []taint
}

// model is what devices of one GPU model, driver and MIG profile, drawing the same counters
// and of the same memory, have in common. Models are shared by the cached slices: read-only.
type model struct {
	kind, productName, architecture, computeCapability string
	driverVersion, cudaDriverVersion, profile          string
	consumes                                           *[]consumption   // shared; nil when it draws on no counters
	shares                                             *[]shareCapacity // shared; nil unless it allows several allocations
	memory                                             int64            // bytes, see memoryBytes; only if hasMemory
	hasMemory                                          bool
}

// shareCapacity is a capacity of a device that allows several allocations: its value and
// the smallest share a request can take of it (inventory.SmallestShare), in thousandths.
// Lists of them are sorted by name.
type shareCapacity struct {
	name            string
	milli, smallest int64
}

// counter is a counter of a set, or what a device consumes of it: its value as
// inventory.CounterMilli reads it. Lists of counters are sorted by name.
type counter struct {
	name  string
	milli int64
}

// counterSet is one of a slice's shared counter sets.
type counterSet struct {
	name     string
	counters []counter
}

// consumption is what a device consumes of one counter set (a DynamicMIG partition or its
// GPU).
type consumption struct {
	set      string
	counters []counter
}

type taint struct {
	key    string
	effect resourcev1.DeviceTaintEffect
}

// DeepCopyObject implements runtime.Object. Models and what devices have more are shared,
// as in the cache.
func (s *compactSlice) DeepCopyObject() runtime.Object {
	out := *s
	if s.devices != nil {
		out.devices = slices.Clone(s.devices)
	}
	return &out
}

// expand returns the slice as a ResourceSlice holding what DeviceFactsOf reads, for
// computing its node's facts. The ResourceSlice shares strings with the cached slice and is
// read-only.
func (s *compactSlice) expand() *resourcev1.ResourceSlice {
	out := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, ResourceVersion: s.ResourceVersion},
		Spec:       resourcev1.ResourceSliceSpec{Driver: s.driver},
	}
	if s.node == "" {
		return out
	}
	out.Spec.NodeName = &s.node
	out.Spec.Pool = resourcev1.ResourcePool{Name: s.pool.name, Generation: s.pool.generation, ResourceSliceCount: s.pool.resourceSliceCount}
	if s.counterSets != nil {
		out.Spec.SharedCounters = make([]resourcev1.CounterSet, len(*s.counterSets))
		for i, cs := range *s.counterSets {
			out.Spec.SharedCounters[i] = resourcev1.CounterSet{Name: cs.name, Counters: expandCounters(cs.counters)}
		}
	}
	if len(s.devices) > 0 {
		out.Spec.Devices = make([]resourcev1.Device, len(s.devices))
		for i := range s.devices {
			out.Spec.Devices[i] = s.devices[i].expand()
		}
	}
	return out
}

func (d *device) expand() resourcev1.Device {
	out := resourcev1.Device{Name: d.name, Attributes: make(map[resourcev1.QualifiedName]resourcev1.DeviceAttribute, 10)}
	uuid, parentUUID, pciBusID := d.ids()
	for _, a := range [...]struct {
		key   inventory.DeviceAttribute
		value *string
	}{
		{inventory.AttrType, &d.model.kind}, {inventory.AttrUUID, &uuid}, {inventory.AttrParentUUID, &parentUUID},
		{inventory.AttrProfile, &d.model.profile}, {inventory.AttrProductName, &d.model.productName},
		{inventory.AttrArchitecture, &d.model.architecture}, {inventory.AttrCC, &d.model.computeCapability},
		{inventory.AttrDriver, &d.model.driverVersion}, {inventory.AttrCuda, &d.model.cudaDriverVersion},
		{inventory.AttrPCIBusID, &pciBusID},
	} {
		if *a.value != "" {
			out.Attributes[a.key.Name] = resourcev1.DeviceAttribute{StringValue: a.value}
		}
	}
	if d.model.shares != nil {
		out.AllowMultipleAllocations = &allowMultiple
		out.Capacity = make(map[resourcev1.QualifiedName]resourcev1.DeviceCapacity, len(*d.model.shares)+1)
		for _, c := range *d.model.shares {
			dc := resourcev1.DeviceCapacity{Value: *resource.NewMilliQuantity(c.milli, resource.DecimalSI)}
			if c.smallest > 0 {
				dc.RequestPolicy = &resourcev1.CapacityRequestPolicy{ValidRange: &resourcev1.CapacityRequestPolicyRange{
					Min: resource.NewMilliQuantity(c.smallest, resource.DecimalSI)}}
			}
			out.Capacity[resourcev1.QualifiedName(c.name)] = dc
		}
	}
	_, hasMemory := inventory.CapMemory.Capacity(&out) // a shared capacity stands for it
	if d.model.hasMemory && !hasMemory {
		if out.Capacity == nil {
			out.Capacity = make(map[resourcev1.QualifiedName]resourcev1.DeviceCapacity, 1)
		}
		out.Capacity[inventory.CapMemory.Name] = resourcev1.DeviceCapacity{Value: *resource.NewQuantity(d.model.memory, resource.BinarySI)}
	}
	if d.model.consumes != nil {
		out.ConsumesCounters = make([]resourcev1.DeviceCounterConsumption, len(*d.model.consumes))
		for i, c := range *d.model.consumes {
			out.ConsumesCounters[i] = resourcev1.DeviceCounterConsumption{CounterSet: c.set, Counters: expandCounters(c.counters)}
		}
	}
	if taints := d.taints(); len(taints) > 0 {
		out.Taints = make([]resourcev1.DeviceTaint, len(taints))
		for i, t := range taints {
			out.Taints[i] = resourcev1.DeviceTaint{Key: t.key, Effect: t.effect}
		}
	}
	return out
}

// ids are the device's UUID, parent UUID and PCI bus ID, as the driver spelt them.
func (d *device) ids() (uuid, parentUUID, pciBusID string) {
	uuid, parentUUID, pciBusID = d.uuid.String(), d.parentUUID.String(), d.pciBusID.String()
	if d.uuid.spelling == idElsewhere {
		uuid = d.more.uuid
	}
	if d.parentUUID.spelling == idElsewhere {
		parentUUID = d.more.parentUUID
	}
	if d.pciBusID.spelling == idElsewhere {
		pciBusID = d.more.pciBusID
	}
	return uuid, parentUUID, pciBusID
}

func (d *device) taints() []taint {
	if d.more == nil {
		return nil
	}
	return d.more.taints
}

var allowMultiple = true

func expandCounters(cs []counter) map[string]resourcev1.Counter {
	out := make(map[string]resourcev1.Counter, len(cs))
	for _, c := range cs {
		out[c.name] = resourcev1.Counter{Value: *resource.NewMilliQuantity(c.milli, resource.DecimalSI)}
	}
	return out
}

// Trim is the informer's transform: a ResourceSlice becomes a compactSlice. Anything else,
// a compactSlice included, passes untouched, so it may run twice.
func (t *trimmer) Trim(obj any) (any, error) {
	s, ok := obj.(*resourcev1.ResourceSlice)
	if !ok {
		return obj, nil
	}
	return t.trim(s), nil
}

func (t *trimmer) trim(s *resourcev1.ResourceSlice) *compactSlice {
	out := &compactSlice{Compact: kubeproto.CompactOfMeta(&s.ObjectMeta), driver: t.intern(s.Spec.Driver)}
	if !nodeLocal(s) {
		return out
	}
	out.node = *s.Spec.NodeName
	out.pool = pool{name: s.Spec.Pool.Name, generation: s.Spec.Pool.Generation, resourceSliceCount: s.Spec.Pool.ResourceSliceCount}
	if out.pool.name == out.node {
		out.pool.name = out.node // the driver names a node's pool after it: one copy
	}
	if len(s.Spec.SharedCounters) > 0 {
		sets := make([]counterSet, len(s.Spec.SharedCounters))
		for i, cs := range s.Spec.SharedCounters {
			sets[i] = counterSet{name: t.intern(cs.Name), counters: t.counterMap(cs.Counters)}
		}
		out.counterSets = t.sharedSets(sets)
	}
	if len(s.Spec.Devices) > 0 {
		out.devices = make([]device, len(s.Spec.Devices))
		for i := range s.Spec.Devices {
			out.devices[i] = t.device(&s.Spec.Devices[i])
		}
	}
	return out
}

func (t *trimmer) device(d *resourcev1.Device) device {
	m := model{
		kind:              inventory.AttrType.Value(d),
		productName:       inventory.AttrProductName.Value(d),
		architecture:      inventory.AttrArchitecture.Value(d),
		computeCapability: inventory.AttrCC.Value(d),
		driverVersion:     inventory.AttrDriver.Value(d),
		cudaDriverVersion: inventory.AttrCuda.Value(d),
		profile:           inventory.AttrProfile.Value(d),
		consumes:          t.consumption(d.ConsumesCounters),
		shares:            t.shareCapacities(d),
	}
	m.memory, m.hasMemory = memoryBytes(d)
	var taints []taint
	if len(d.Taints) > 0 {
		taints = make([]taint, len(d.Taints))
		for i, dt := range d.Taints {
			taints[i] = taint{key: t.intern(dt.Key), effect: resourcev1.DeviceTaintEffect(t.intern(string(dt.Effect)))}
		}
	}
	return t.newDevice(d.Name, inventory.AttrUUID.Value(d), inventory.AttrParentUUID.Value(d), inventory.AttrPCIBusID.Value(d), m, taints)
}

// newDevice is a device as the cache keeps it, of its name, IDs, model and taints (whose
// strings are interned already). The strings may be views of bytes that change later: what
// is kept is a copy. Device names repeat across nodes and are interned; IDs do not and are
// packed, or copied when not in a spelling that packs.
func (t *trimmer) newDevice(name, uuid, parentUUID, pciBusID string, m model, taints []taint) device {
	out := device{name: t.intern(name), model: t.model(m)}
	var more deviceMore
	if !out.uuid.pack(uuid) {
		more.uuid = strings.Clone(uuid)
	}
	if !out.parentUUID.pack(parentUUID) {
		more.parentUUID = strings.Clone(parentUUID)
	}
	if !out.pciBusID.pack(pciBusID) {
		more.pciBusID = strings.Clone(pciBusID)
	}
	more.taints = taints
	switch {
	case more.uuid != "" || more.parentUUID != "" || more.pciBusID != "":
		kept := more // allocated only here
		out.more = &kept
	case len(taints) > 0:
		out.more = t.sharedTaints(taints)
	}
	return out
}

// sharedTaints returns the one deviceMore of taints alone the cached slices share. The
// taints' strings must be interned already.
func (t *trimmer) sharedTaints(taints []taint) *deviceMore {
	var buf [256]byte
	key := binary.AppendUvarint(append(buf[:0], 't'), uint64(len(taints)))
	for _, tt := range taints {
		key = appendString(appendString(key, tt.key), string(tt.effect))
	}
	return t.share(key, &deviceMore{taints: taints}).(*deviceMore)
}

// maxModels bounds the table of models shared by the cached slices, so that ever-changing
// values cannot grow it forever: a full table starts over (cached slices keep theirs).
const maxModels = 4096

// trimmer holds what cached slices share: device names, taint keys, counter names, models,
// counter sets, consumptions and taints, each as one copy.
type trimmer struct {
	strings intern.Strings

	mu       sync.Mutex
	models   map[model]*model
	counters map[string]any // counter lists, set lists, consumption lists and taints, by content
}

// intern returns the one copy of s that the cached slices share. s may be a view of bytes
// that change later: what is kept is a copy.
func (t *trimmer) intern(s string) string { return t.strings.Intern(s) }

// model returns the one copy of m that the cached slices share. m's strings may be views
// of bytes that change later: what is kept is a copy.
func (t *trimmer) model(m model) *model {
	if len(m.kind)+len(m.productName)+len(m.architecture)+len(m.computeCapability)+
		len(m.driverVersion)+len(m.cudaDriverVersion)+len(m.profile) > intern.MaxString {
		return m.copy()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.models[m]; ok {
		return p
	}
	if t.models == nil || len(t.models) >= maxModels {
		t.models = map[model]*model{}
	}
	p := m.copy()
	t.models[*p] = p
	return p
}

// copy returns a copy of m on the heap, its strings copied too.
func (m model) copy() *model {
	return &model{
		kind: strings.Clone(m.kind), productName: strings.Clone(m.productName), architecture: strings.Clone(m.architecture),
		computeCapability: strings.Clone(m.computeCapability), driverVersion: strings.Clone(m.driverVersion),
		cudaDriverVersion: strings.Clone(m.cudaDriverVersion), profile: strings.Clone(m.profile), consumes: m.consumes,
		shares: m.shares, memory: m.memory, hasMemory: m.hasMemory,
	}
}

// shareCapacities are a device's capacities as the cache keeps them when it allows several
// allocations; nil when it does not.
func (t *trimmer) shareCapacities(d *resourcev1.Device) *[]shareCapacity {
	if d.AllowMultipleAllocations == nil || !*d.AllowMultipleAllocations {
		return nil
	}
	cs := make([]shareCapacity, 0, len(d.Capacity))
	for name, c := range d.Capacity {
		cs = append(cs, shareCapacity{name: t.intern(string(name)), milli: inventory.CounterMilli(c.Value), smallest: inventory.SmallestShare(c.RequestPolicy)})
	}
	return t.sharedShares(cs)
}

// sharedShares sorts a device's share capacities by name (of a name given twice, the last
// is kept) and returns the one copy of them the cached slices share. Its names must be
// interned already.
func (t *trimmer) sharedShares(cs []shareCapacity) *[]shareCapacity {
	slices.SortStableFunc(cs, func(a, b shareCapacity) int { return strings.Compare(a.name, b.name) })
	out := cs[:0]
	for i, c := range cs {
		if i+1 < len(cs) && cs[i+1].name == c.name {
			continue
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		out = nil
	}
	var buf [256]byte
	key := binary.AppendUvarint(append(buf[:0], 'm'), uint64(len(out)))
	for _, c := range out {
		key = binary.AppendVarint(binary.AppendVarint(appendString(key, c.name), c.milli), c.smallest)
	}
	return t.share(key, &out).(*[]shareCapacity)
}

// counterMap is a counter map as the cache keeps it: sorted, shared.
func (t *trimmer) counterMap(in map[string]resourcev1.Counter) []counter {
	cs := make([]counter, 0, len(in))
	for name, c := range in {
		cs = append(cs, counter{name: t.intern(name), milli: inventory.CounterMilli(c.Value)})
	}
	return t.sharedCounters(cs)
}

// consumption is a device's counter consumption as the cache keeps it: nil when none.
func (t *trimmer) consumption(in []resourcev1.DeviceCounterConsumption) *[]consumption {
	if len(in) == 0 {
		return nil
	}
	cs := make([]consumption, len(in))
	for i, c := range in {
		cs[i] = consumption{set: t.intern(c.CounterSet), counters: t.counterMap(c.Counters)}
	}
	return t.sharedConsumption(cs)
}

// sharedCounters sorts a list of counters by name (of a name given twice, the last is
// kept, as a map keeps it) and returns the one copy of it the cached slices share. Its
// names must be interned already.
func (t *trimmer) sharedCounters(cs []counter) []counter {
	slices.SortStableFunc(cs, func(a, b counter) int { return strings.Compare(a.name, b.name) })
	out := cs[:0]
	for i, c := range cs {
		if i+1 < len(cs) && cs[i+1].name == c.name {
			continue
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		out = nil
	}
	var buf [256]byte
	key := appendCounters(append(buf[:0], 'c'), out)
	return t.share(key, out).([]counter)
}

// sharedSets returns the one copy of a list of counter sets the cached slices share. Its
// names and counters must be shared already.
func (t *trimmer) sharedSets(sets []counterSet) *[]counterSet {
	var buf [512]byte
	key := append(buf[:0], 's')
	for _, s := range sets {
		key = appendCounters(appendString(key, s.name), s.counters)
	}
	return t.share(key, &sets).(*[]counterSet)
}

// sharedConsumption returns the one copy of a device's consumption the cached slices share.
// Its names and counters must be shared already.
func (t *trimmer) sharedConsumption(cs []consumption) *[]consumption {
	var buf [256]byte
	key := append(buf[:0], 'u')
	for _, c := range cs {
		key = appendCounters(appendString(key, c.set), c.counters)
	}
	return t.share(key, &cs).(*[]consumption)
}

// share returns what the table holds under key, storing v there first if nothing is; a full
// table starts over, as the models' does.
func (t *trimmer) share(key []byte, v any) any {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.counters[string(key)]; ok {
		return p
	}
	if t.counters == nil || len(t.counters) >= maxModels {
		t.counters = map[string]any{}
	}
	t.counters[string(key)] = v
	return v
}

func appendCounters(key []byte, cs []counter) []byte {
	key = binary.AppendUvarint(key, uint64(len(cs)))
	for _, c := range cs {
		key = binary.AppendVarint(appendString(key, c.name), c.milli)
	}
	return key
}

func appendString(key []byte, s string) []byte {
	return append(binary.AppendUvarint(key, uint64(len(s))), s...)
}
