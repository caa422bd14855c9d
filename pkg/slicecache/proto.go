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

package slicecache

import (
	"errors"
	"fmt"
	"math"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// Field numbers of the resource/v1 protobuf messages the decoder reads (k8s.io/api
// generated.proto): part of the API's compatibility guarantee.
const (
	sliceMetadata = 1
	sliceSpec     = 2

	specDriver   = 1
	specPool     = 2
	specNodeName = 3
	specDevices  = 6
	specCounters = 8 // sharedCounters

	counterSetName     = 1
	counterSetCounters = 2
	counterValue       = 1

	consumptionSet      = 1 // DeviceCounterConsumption.counterSet
	consumptionCounters = 2

	poolNameField          = 1
	poolGeneration         = 2
	poolResourceSliceCount = 3

	deviceName             = 1
	deviceAttributes       = 2
	deviceCapacity         = 3
	deviceConsumesCounters = 4
	deviceTaints           = 8
	deviceAllowMultiple    = 12 // allowMultipleAllocations

	capacityPolicy = 2 // DeviceCapacity.requestPolicy
	policyValues   = 3 // CapacityRequestPolicy.validValues
	policyRange    = 4
	policyRangeMin = 1

	attributeString  = 4
	attributeVersion = 5

	capacityValue = 1

	taintKey    = 1
	taintEffect = 3
)

// maxDevices bounds the devices decoded of one slice (the API allows 128; a hostile message
// of empty entries would otherwise build a Go value many times its size).
const maxDevices = 4096

var errTooManyDevices = fmt.Errorf("more than %d devices in one slice", maxDevices)

// sliceDevices is how many Device messages decodeSlice collects without allocating: those of
// most slices.
const sliceDevices = 16

// sliceMessage is what decodeSlice reads of a ResourceSlice message before it knows whether
// the slice is node-local: views into the message.
type sliceMessage struct {
	meta                       kubeproto.ObjectMeta
	driver, nodeName, poolName []byte
	pool                       pool     // its generation and resourceSliceCount
	counterSets                [][]byte // the CounterSet messages
	header                     bool     // where the slice is only: devices and counter sets skipped
}

// decodeSlice decodes a protobuf ResourceSlice (the message, without the envelope) straight
// into its compact form: what trim makes of the generated decoder's ResourceSlice, reading
// only the fields trim reads and keeping no byte of b. A memory capacity too long to parse
// safely (kubeproto.Quantity) is kept as out of range (-1), as DeviceFactsOf takes a
// negative one.
func (t *trimmer) decodeSlice(b []byte) (*compactSlice, error) {
	var s sliceMessage
	var buf [sliceDevices][]byte
	devices, err := s.read(b, buf[:0])
	if err != nil {
		return nil, err
	}
	out := &compactSlice{Compact: kubeproto.CompactOf(&s.meta), driver: t.intern(kubeproto.View(s.driver))}
	if out.driver != inventory.DRADriver || len(s.nodeName) == 0 {
		return out, nil // not node-local: tracked, never read
	}
	out.node = string(s.nodeName)
	out.pool = s.pool
	out.pool.name = out.node // the driver names a node's pool after it: one copy
	if string(s.poolName) != out.node {
		out.pool.name = string(s.poolName)
	}
	if len(s.counterSets) > 0 {
		sets := make([]counterSet, len(s.counterSets))
		for i, b := range s.counterSets {
			var err error
			if sets[i], err = t.decodeCounterSet(b); err != nil {
				return nil, fmt.Errorf("counter set %d: %w", i, err)
			}
		}
		out.counterSets = t.sharedSets(sets)
	}
	if len(devices) > 0 {
		out.devices = make([]device, len(devices))
		for i, d := range devices {
			var err error
			if out.devices[i], err = t.decodeDevice(d); err != nil {
				return nil, fmt.Errorf("device %d: %w", i, err)
			}
		}
	}
	return out, nil
}

// read reads a ResourceSlice message into s and appends its Device messages to devices
// (unless s.header).
func (s *sliceMessage) read(b []byte, devices [][]byte) ([][]byte, error) {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		var err error
		switch m.Tag() {
		case kubeproto.Bytes(sliceMetadata):
			err = kubeproto.ReadObjectMeta(m.Value(), nil, &s.meta)
		case kubeproto.Bytes(sliceSpec):
			devices, err = s.readSpec(m.Value(), devices)
		}
		if err != nil {
			return nil, err
		}
	}
	return devices, m.Err()
}

// DecodeSliceHeader decodes where a protobuf ResourceSlice (any driver's) is, as the cache's
// decoder reads it: its name, driver, pool and node. Its devices and counter sets are
// skipped unread.
func DecodeSliceHeader(b []byte) (*resourcev1.ResourceSlice, error) {
	s := sliceMessage{header: true}
	if _, err := s.read(b, nil); err != nil {
		return nil, err
	}
	out := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: string(s.meta.Name)},
		Spec: resourcev1.ResourceSliceSpec{Driver: string(s.driver), Pool: resourcev1.ResourcePool{Name: string(s.poolName),
			Generation: s.pool.generation, ResourceSliceCount: s.pool.resourceSliceCount}}}
	if s.nodeName != nil {
		node := string(s.nodeName)
		out.Spec.NodeName = &node
	}
	return out, nil
}

// readSpec reads a ResourceSliceSpec message into s and appends its Device messages to
// devices. A later spec merges into the earlier, as the generated decoder's does.
func (s *sliceMessage) readSpec(b []byte, devices [][]byte) ([][]byte, error) {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case kubeproto.Bytes(specDriver):
			s.driver = m.Value()
		case kubeproto.Bytes(specNodeName):
			s.nodeName = m.Value()
		case kubeproto.Bytes(specPool):
			if err := s.readPool(m.Value()); err != nil {
				return nil, err
			}
		case kubeproto.Bytes(specDevices):
			if s.header {
				continue
			}
			if len(devices) == maxDevices {
				return nil, errTooManyDevices
			}
			devices = append(devices, m.Value())
		case kubeproto.Bytes(specCounters):
			if s.header {
				continue
			}
			if len(s.counterSets) == maxCounterLists {
				return nil, errTooManyCounters
			}
			s.counterSets = append(s.counterSets, m.Value())
		}
	}
	return devices, m.Err()
}

// readPool reads a ResourcePool message into s, merging as readSpec does.
func (s *sliceMessage) readPool(b []byte) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case kubeproto.Bytes(poolNameField):
			s.poolName = m.Value()
		case kubeproto.Varint(poolGeneration):
			s.pool.generation = int64(m.Varint())
		case kubeproto.Varint(poolResourceSliceCount):
			s.pool.resourceSliceCount = int64(m.Varint())
		}
	}
	return m.Err()
}

// attribute is what the decoder saw of one attribute of interest, under its name and its
// alternative spelling: the last map entry of each, its string and version values.
type attribute struct {
	name, alt attributeValue
}

type attributeValue struct {
	present               bool
	str, version          []byte
	hasString, hasVersion bool
}

// value is the attribute as inventory.DeviceAttribute.Value reads it.
func (a *attribute) value() []byte {
	v := &a.name
	if !v.present {
		v = &a.alt
	}
	switch {
	case v.hasString:
		return v.str
	case v.hasVersion:
		return v.version
	}
	return nil
}

// The attributes a device is read for, in the order of deviceAttributes below.
const (
	attrType = iota
	attrUUID
	attrParentUUID
	attrProfile
	attrProductName
	attrArchitecture
	attrCC
	attrDriver
	attrCuda
	attrPCIBusID
	attrCount
)

var deviceAttributeNames = [attrCount]inventory.DeviceAttribute{
	attrType: inventory.AttrType, attrUUID: inventory.AttrUUID, attrParentUUID: inventory.AttrParentUUID,
	attrProfile: inventory.AttrProfile, attrProductName: inventory.AttrProductName,
	attrArchitecture: inventory.AttrArchitecture, attrCC: inventory.AttrCC, attrDriver: inventory.AttrDriver,
	attrCuda: inventory.AttrCuda, attrPCIBusID: inventory.AttrPCIBusID,
}

// attributeSlot is where the attribute named key is read into: nil for an attribute that is
// not read.
func attributeSlot(attrs *[attrCount]attribute, key string) *attributeValue {
	for i := range attrs {
		switch key {
		case string(deviceAttributeNames[i].Name):
			return &attrs[i].name
		case string(deviceAttributeNames[i].Alt):
			return &attrs[i].alt
		}
	}
	return nil
}

// readAttributeValue reads a DeviceAttribute message into v. It replaces what v held: a
// later map entry of the same key replaces the earlier one whole.
func readAttributeValue(b []byte, v *attributeValue) error {
	*v = attributeValue{present: true}
	m := kubeproto.NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case kubeproto.Bytes(attributeString):
			v.str, v.hasString = m.Value(), true
		case kubeproto.Bytes(attributeVersion):
			v.version, v.hasVersion = m.Value(), true
		}
	}
	return m.Err()
}

// capacityEntry is a capacity map entry of interest.
type capacityEntry struct {
	present bool
	value   []byte // the DeviceCapacity message, nil when the entry had none
}

// deviceMessage is what decodeDevice reads of a Device message: views into it.
type deviceMessage struct {
	name              []byte
	attrs             [attrCount]attribute
	memory, memoryAlt capacityEntry
	consumes          [][]byte // the DeviceCounterConsumption messages
	taints            [][]byte // the DeviceTaint messages
	allowMultiple     bool
}

// decodeDevice decodes one Device message as trimmer.device makes it of the generated one.
func (t *trimmer) decodeDevice(b []byte) (device, error) {
	var d deviceMessage
	if err := d.read(b); err != nil {
		return device{}, err
	}
	consumes, err := t.decodeConsumption(d.consumes)
	if err != nil {
		return device{}, err
	}
	var shares *[]shareCapacity
	if d.allowMultiple {
		if shares, err = t.decodeShares(b); err != nil {
			return device{}, err
		}
	}
	m := model{
		kind:              kubeproto.View(d.attrs[attrType].value()),
		productName:       kubeproto.View(d.attrs[attrProductName].value()),
		architecture:      kubeproto.View(d.attrs[attrArchitecture].value()),
		computeCapability: kubeproto.View(d.attrs[attrCC].value()),
		driverVersion:     kubeproto.View(d.attrs[attrDriver].value()),
		cudaDriverVersion: kubeproto.View(d.attrs[attrCuda].value()),
		profile:           kubeproto.View(d.attrs[attrProfile].value()),
		consumes:          consumes,
		shares:            shares,
	}
	capacity := d.memory
	if !capacity.present {
		capacity = d.memoryAlt
	}
	if capacity.present {
		m.hasMemory = true
		if m.memory, err = capacityBytes(capacity.value); err != nil {
			return device{}, err
		}
	}
	var taints []taint
	if len(d.taints) > 0 {
		taints = make([]taint, len(d.taints))
		for i, b := range d.taints {
			if taints[i], err = t.decodeTaint(b); err != nil {
				return device{}, err
			}
		}
	}
	return t.newDevice(kubeproto.View(d.name), kubeproto.View(d.attrs[attrUUID].value()), kubeproto.View(d.attrs[attrParentUUID].value()),
		kubeproto.View(d.attrs[attrPCIBusID].value()), m, taints), nil
}

// read reads a Device message into d: of a field that repeats, the last wins, as in the
// generated decoder; every taint is kept.
func (d *deviceMessage) read(b []byte) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case kubeproto.Bytes(deviceName):
			d.name = m.Value()
		case kubeproto.Bytes(deviceAttributes):
			key, value, err := kubeproto.MapEntry(m.Value())
			if err != nil {
				return err
			}
			if slot := attributeSlot(&d.attrs, kubeproto.View(key)); slot != nil {
				if err := readAttributeValue(value, slot); err != nil {
					return err
				}
			}
		case kubeproto.Bytes(deviceCapacity):
			key, value, err := kubeproto.MapEntry(m.Value())
			if err != nil {
				return err
			}
			switch kubeproto.View(key) {
			case string(inventory.CapMemory.Name):
				d.memory = capacityEntry{present: true, value: value}
			case string(inventory.CapMemory.Alt):
				d.memoryAlt = capacityEntry{present: true, value: value}
			}
		case kubeproto.Varint(deviceAllowMultiple):
			d.allowMultiple = m.Varint() != 0
		case kubeproto.Bytes(deviceConsumesCounters):
			if len(d.consumes) == maxCounterLists {
				return errTooManyCounters
			}
			d.consumes = append(d.consumes, m.Value())
		case kubeproto.Bytes(deviceTaints):
			if len(d.taints) == maxDeviceTaints {
				return errTooManyTaints
			}
			d.taints = append(d.taints, m.Value())
		}
	}
	return m.Err()
}

// maxDeviceTaints bounds the taints decoded of one device (the API allows 16).
const maxDeviceTaints = 1024

var errTooManyTaints = fmt.Errorf("more than %d taints on one device", maxDeviceTaints)

// decodeTaint decodes one DeviceTaint message: its key and effect.
func (t *trimmer) decodeTaint(b []byte) (taint, error) {
	var key, effect []byte
	m := kubeproto.NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case kubeproto.Bytes(taintKey):
			key = m.Value()
		case kubeproto.Bytes(taintEffect):
			effect = m.Value()
		}
	}
	if err := m.Err(); err != nil {
		return taint{}, err
	}
	return taint{key: t.intern(kubeproto.View(key)), effect: resourcev1.DeviceTaintEffect(t.intern(kubeproto.View(effect)))}, nil
}

// maxCounterLists bounds the counter sets of a slice, the consumptions of a device and the
// counters of either that are decoded (the API allows 8, 2 and 32).
const maxCounterLists = 1024

var errTooManyCounters = fmt.Errorf("more than %d counter sets or counters in one list", maxCounterLists)

// decodeCounterSet decodes one CounterSet message as trimmer.trim keeps it.
func (t *trimmer) decodeCounterSet(b []byte) (counterSet, error) {
	var name []byte
	var entries [][]byte
	m := kubeproto.NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case kubeproto.Bytes(counterSetName):
			name = m.Value()
		case kubeproto.Bytes(counterSetCounters):
			if len(entries) == maxCounterLists {
				return counterSet{}, errTooManyCounters
			}
			entries = append(entries, m.Value())
		}
	}
	if err := m.Err(); err != nil {
		return counterSet{}, err
	}
	counters, err := t.decodeCounters(entries)
	return counterSet{name: t.intern(kubeproto.View(name)), counters: counters}, err
}

// decodeConsumption decodes a device's DeviceCounterConsumption messages as
// trimmer.consumption keeps them.
func (t *trimmer) decodeConsumption(msgs [][]byte) (*[]consumption, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	out := make([]consumption, len(msgs))
	for i, b := range msgs {
		var set []byte
		var entries [][]byte
		m := kubeproto.NewMessage(b)
		for m.Next() {
			switch m.Tag() {
			case kubeproto.Bytes(consumptionSet):
				set = m.Value()
			case kubeproto.Bytes(consumptionCounters):
				if len(entries) == maxCounterLists {
					return nil, errTooManyCounters
				}
				entries = append(entries, m.Value())
			}
		}
		if err := m.Err(); err != nil {
			return nil, err
		}
		counters, err := t.decodeCounters(entries)
		if err != nil {
			return nil, err
		}
		out[i] = consumption{set: t.intern(kubeproto.View(set)), counters: counters}
	}
	return t.sharedConsumption(out), nil
}

// decodeCounters decodes the entries of a map<string, Counter> as trimmer.counterMap keeps
// them.
func (t *trimmer) decodeCounters(entries [][]byte) ([]counter, error) {
	cs := make([]counter, len(entries))
	for i, e := range entries {
		key, value, err := kubeproto.MapEntry(e)
		if err != nil {
			return nil, err
		}
		cs[i].name = t.intern(kubeproto.View(key))
		if cs[i].milli, err = counterMilli(value); err != nil {
			return nil, err
		}
	}
	return t.sharedCounters(cs), nil
}

// counterMilli is a Counter message's value as inventory.CounterMilli reads it. A quantity
// too long to parse safely is taken as too large (math.MaxInt64).
func counterMilli(b []byte) (int64, error) {
	var q resource.Quantity
	m := kubeproto.NewMessage(b)
	for m.Next() {
		if m.Tag() == kubeproto.Bytes(counterValue) {
			err := kubeproto.Quantity(m.Value(), &q) // occurrences merge, as the generated decoder's do
			if errors.Is(err, kubeproto.ErrAbsurdQuantity) {
				return math.MaxInt64, nil
			}
			if err != nil {
				return 0, err
			}
		}
	}
	return inventory.CounterMilli(q), m.Err()
}

// decodeShares decodes the capacities of a Device message that allows several allocations
// as trimmer.shareCapacities keeps them (read again: only such devices pay for it).
func (t *trimmer) decodeShares(b []byte) (*[]shareCapacity, error) {
	var cs []shareCapacity
	m := kubeproto.NewMessage(b)
	for m.Next() {
		if m.Tag() != kubeproto.Bytes(deviceCapacity) {
			continue
		}
		if len(cs) == maxCounterLists {
			return nil, errTooManyCounters
		}
		key, value, err := kubeproto.MapEntry(m.Value())
		if err != nil {
			return nil, err
		}
		c := shareCapacity{name: t.intern(kubeproto.View(key))}
		if c.milli, c.smallest, err = shareCapacityOf(value); err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	if err := m.Err(); err != nil {
		return nil, err
	}
	return t.sharedShares(cs), nil
}

// shareCapacityOf reads a DeviceCapacity message: its value and the smallest share, as
// inventory.CounterMilli and inventory.SmallestShare read them. Repeated messages merge as
// the generated decoder merges them; a quantity too long to parse safely is taken as too
// large (math.MaxInt64).
func shareCapacityOf(b []byte) (milli, smallest int64, err error) {
	var value, rangeMin, firstValue resource.Quantity
	var hasPolicy, hasRange, hasMin, hasValues bool
	m := kubeproto.NewMessage(b)
	for err == nil && m.Next() {
		switch m.Tag() {
		case kubeproto.Bytes(capacityValue):
			err = kubeproto.Quantity(m.Value(), &value)
		case kubeproto.Bytes(capacityPolicy):
			hasPolicy = true
			p := kubeproto.NewMessage(m.Value())
			for err == nil && p.Next() {
				switch p.Tag() {
				case kubeproto.Bytes(policyValues):
					if !hasValues {
						hasValues, err = true, kubeproto.Quantity(p.Value(), &firstValue)
					}
				case kubeproto.Bytes(policyRange):
					hasRange = true
					r := kubeproto.NewMessage(p.Value())
					for err == nil && r.Next() {
						if r.Tag() == kubeproto.Bytes(policyRangeMin) {
							hasMin, err = true, kubeproto.Quantity(r.Value(), &rangeMin)
						}
					}
					if err == nil {
						err = r.Err()
					}
				}
			}
			if err == nil {
				err = p.Err()
			}
		}
	}
	if err == nil {
		err = m.Err()
	}
	if errors.Is(err, kubeproto.ErrAbsurdQuantity) {
		return math.MaxInt64, math.MaxInt64, nil
	}
	if err != nil {
		return 0, 0, err
	}
	policy := &resourcev1.CapacityRequestPolicy{}
	switch {
	case !hasPolicy:
		policy = nil
	case hasRange && hasMin:
		policy.ValidRange = &resourcev1.CapacityRequestPolicyRange{Min: &rangeMin}
	case hasValues:
		policy.ValidValues = []resource.Quantity{firstValue}
	}
	return inventory.CounterMilli(value), inventory.SmallestShare(policy), nil
}

// capacityBytes is a DeviceCapacity message's value as memoryBytes reads it. A quantity too
// long to parse safely is out of range (-1).
func capacityBytes(b []byte) (int64, error) {
	var q resource.Quantity
	var err error
	m := kubeproto.NewMessage(b)
	for err == nil && m.Next() {
		if m.Tag() == kubeproto.Bytes(capacityValue) {
			err = kubeproto.Quantity(m.Value(), &q) // occurrences merge, as the generated decoder's do
		}
	}
	if err == nil {
		err = m.Err()
	}
	switch {
	case errors.Is(err, kubeproto.ErrAbsurdQuantity):
		return -1, nil
	case err != nil:
		return 0, err
	case q.Sign() < 0:
		return -1, nil
	case q.CmpInt64(math.MaxInt64) > 0:
		return math.MaxInt64, nil
	}
	return q.Value(), nil
}

// compactSliceList is what the slice client decodes a ResourceSliceList into.
type compactSliceList struct {
	metav1.ListMeta
	Items []*compactSlice
}

// GetObjectKind implements runtime.Object; the cache's objects have no kind.
func (l *compactSliceList) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (l *compactSliceList) DeepCopyObject() runtime.Object {
	out := &compactSliceList{Items: make([]*compactSlice, len(l.Items))}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	for i, s := range l.Items {
		out.Items[i] = s.DeepCopyObject().(*compactSlice)
	}
	return out
}

// codec is what the slice client decodes ResourceSlices and their lists with: protobuf
// straight into compact slices (decodeSlice), JSON (a server that does not speak protobuf)
// whole and then trimmed.
func (t *trimmer) codec() kubeproto.Codec[compactSlice, compactSliceList] {
	return kubeproto.Codec[compactSlice, compactSliceList]{
		GroupVersion: resourcev1.SchemeGroupVersion, Kind: "ResourceSlice", ListKind: "ResourceSliceList",
		Object: t.decodeSlice, List: t.decodeList, Reduce: t.reduce,
	}
}

// decodeList decodes a protobuf ResourceSliceList message.
func (t *trimmer) decodeList(b []byte) (*compactSliceList, error) {
	list := &compactSliceList{}
	err := kubeproto.DecodeList(b, &list.ListMeta, func(item []byte) error {
		s, err := t.decodeSlice(item)
		if err != nil {
			return fmt.Errorf("slice %d of the list: %w", len(list.Items)+1, err)
		}
		list.Items = append(list.Items, s)
		return nil
	})
	return list, err
}

// reduce trims a ResourceSlice or a ResourceSliceList decoded in full; anything else (a
// watch's error Status) passes through.
func (t *trimmer) reduce(obj runtime.Object) runtime.Object {
	switch o := obj.(type) {
	case *resourcev1.ResourceSlice:
		return t.trim(o)
	case *resourcev1.ResourceSliceList:
		list := &compactSliceList{ListMeta: o.ListMeta, Items: make([]*compactSlice, len(o.Items))}
		for i := range o.Items {
			list.Items[i] = t.trim(&o.Items[i])
		}
		return list
	}
	return obj
}
