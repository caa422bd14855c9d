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

	"google.golang.org/protobuf/encoding/protowire"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// Field numbers of the protobuf messages the decoder reads (k8s.io/api resource/v1 and
// k8s.io/apimachinery generated.proto): part of the API's compatibility guarantee.
const (
	sliceMetadata = 1
	sliceSpec     = 2

	metaName            = 1
	metaResourceVersion = 6
	metaAnnotations     = 12

	specDriver   = 1
	specPool     = 2
	specNodeName = 3
	specDevices  = 6

	poolNameField          = 1
	poolGeneration         = 2
	poolResourceSliceCount = 3

	deviceName             = 1
	deviceAttributes       = 2
	deviceCapacity         = 3
	deviceConsumesCounters = 4
	deviceTaints           = 8

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

// decodeSlice decodes a protobuf ResourceSlice (the message, without the envelope) straight
// into its compact form: what trim makes of the generated decoder's ResourceSlice, reading
// only the fields trim reads and keeping no byte of b. A memory capacity too long to parse
// safely (kubeproto.Quantity) is kept as out of range (-1), as DeviceFactsOf takes a
// negative one.
func (t *trimmer) decodeSlice(b []byte) (*compactSlice, error) {
	var out compactSlice
	var nodeName []byte
	var hasNode bool
	var devices [][]byte
	var poolName []byte
	err := kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case sliceMetadata:
			return decodeMeta(v, &out)
		case sliceSpec:
			return kubeproto.Fields(v, func(num protowire.Number, typ protowire.Type, v []byte, varint uint64) error {
				if typ != protowire.BytesType {
					return nil
				}
				switch num {
				case specDriver:
					out.driver = t.intern(kubeproto.View(v))
				case specNodeName:
					nodeName, hasNode = v, true
				case specPool:
					return kubeproto.Fields(v, func(num protowire.Number, typ protowire.Type, v []byte, varint uint64) error {
						switch {
						case num == poolNameField && typ == protowire.BytesType:
							poolName = v
						case num == poolGeneration && typ == protowire.VarintType:
							out.pool.generation = int64(varint)
						case num == poolResourceSliceCount && typ == protowire.VarintType:
							out.pool.resourceSliceCount = int64(varint)
						}
						return nil
					})
				case specDevices:
					if len(devices) == maxDevices {
						return errTooManyDevices
					}
					devices = append(devices, v)
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if out.driver != inventory.DRADriver || !hasNode || len(nodeName) == 0 {
		out.pool = pool{}
		return &out, nil // not node-local: tracked, never read
	}
	out.node = string(nodeName)
	out.pool.name = out.node // the driver names a node's pool after it: one copy
	if string(poolName) != out.node {
		out.pool.name = string(poolName)
	}
	if len(devices) > 0 {
		out.devices = make([]device, len(devices))
		for i, d := range devices {
			if out.devices[i], err = t.decodeDevice(d); err != nil {
				return nil, fmt.Errorf("device %d: %w", i, err)
			}
		}
	}
	return &out, nil
}

// decodeMeta reads the name, the resourceVersion and the watch-list bookmark's marker.
func decodeMeta(b []byte, out *compactSlice) error {
	return kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case metaName:
			out.name = string(v)
		case metaResourceVersion:
			out.resourceVersion = string(v)
		case metaAnnotations:
			key, value, err := kubeproto.MapEntry(v)
			if err == nil && kubeproto.View(key) == metav1.InitialEventsAnnotationKey {
				out.initialEventsEnd = string(value)
			}
			return err
		}
		return nil
	})
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

// decodeDevice decodes one Device message as trimmer.device makes it of the generated one.
func (t *trimmer) decodeDevice(b []byte) (device, error) {
	var out device
	var attrs [attrCount]attribute
	var memory, memoryAlt struct {
		present bool
		value   []byte // the DeviceCapacity message, nil when the entry had none
	}
	var name []byte
	var taints [][]byte
	err := kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case deviceName:
			name = v
		case deviceAttributes:
			key, value, err := kubeproto.MapEntry(v)
			if err != nil {
				return err
			}
			for i := range attrs {
				var slot *attributeValue
				switch kubeproto.View(key) {
				case string(deviceAttributeNames[i].Name):
					slot = &attrs[i].name
				case string(deviceAttributeNames[i].Alt):
					slot = &attrs[i].alt
				default:
					continue
				}
				// A later entry of the same key replaces the earlier one whole; no other
				// attribute has this key.
				*slot = attributeValue{present: true}
				if err := kubeproto.Fields(value, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
					switch {
					case num == attributeString && typ == protowire.BytesType:
						slot.str, slot.hasString = v, true
					case num == attributeVersion && typ == protowire.BytesType:
						slot.version, slot.hasVersion = v, true
					}
					return nil
				}); err != nil {
					return err
				}
				break
			}
		case deviceCapacity:
			key, value, err := kubeproto.MapEntry(v)
			if err != nil {
				return err
			}
			switch kubeproto.View(key) {
			case string(inventory.CapMemory.Name):
				memory.present, memory.value = true, value
			case string(inventory.CapMemory.Alt):
				memoryAlt.present, memoryAlt.value = true, value
			}
		case deviceConsumesCounters:
			out.consumesCounters = true
		case deviceTaints:
			if len(taints) == maxDeviceTaints {
				return errTooManyTaints
			}
			taints = append(taints, v)
		}
		return nil
	})
	if err != nil {
		return device{}, err
	}
	out.name = t.intern(kubeproto.View(name))
	out.uuid = string(attrs[attrUUID].value()) // differs on every device: not interned
	out.parentUUID = t.intern(kubeproto.View(attrs[attrParentUUID].value()))
	out.pciBusID = t.intern(kubeproto.View(attrs[attrPCIBusID].value()))
	out.model = t.model(model{
		kind:              kubeproto.View(attrs[attrType].value()),
		productName:       kubeproto.View(attrs[attrProductName].value()),
		architecture:      kubeproto.View(attrs[attrArchitecture].value()),
		computeCapability: kubeproto.View(attrs[attrCC].value()),
		driverVersion:     kubeproto.View(attrs[attrDriver].value()),
		cudaDriverVersion: kubeproto.View(attrs[attrCuda].value()),
		profile:           kubeproto.View(attrs[attrProfile].value()),
	})
	capacity := memory
	if !capacity.present {
		capacity = memoryAlt
	}
	if capacity.present {
		out.hasMemory = true
		if out.memory, err = capacityBytes(capacity.value); err != nil {
			return device{}, err
		}
	}
	if len(taints) > 0 {
		out.taints = make([]taint, len(taints))
		for i, b := range taints {
			var key, effect []byte
			if err := kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				switch {
				case num == taintKey && typ == protowire.BytesType:
					key = v
				case num == taintEffect && typ == protowire.BytesType:
					effect = v
				}
				return nil
			}); err != nil {
				return device{}, err
			}
			out.taints[i] = taint{key: t.intern(kubeproto.View(key)), effect: resourcev1.DeviceTaintEffect(t.intern(kubeproto.View(effect)))}
		}
	}
	return out, nil
}

// maxDeviceTaints bounds the taints decoded of one device (the API allows 16).
const maxDeviceTaints = 1024

var errTooManyTaints = fmt.Errorf("more than %d taints on one device", maxDeviceTaints)

// capacityBytes is a DeviceCapacity message's value as memoryBytes reads it. A quantity too
// long to parse safely is out of range (-1).
func capacityBytes(b []byte) (int64, error) {
	var q resource.Quantity
	err := kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != capacityValue || typ != protowire.BytesType {
			return nil
		}
		return kubeproto.Quantity(v, &q) // occurrences merge, as the generated decoder's do
	})
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

// decodingSerializer wraps a client's serializer so that ResourceSlices and their lists
// come out as compactSlices: decodeSlice reads protobuf, and a ResourceSlice in JSON (a
// server that does not speak protobuf) is decoded whole and trimmed. Other objects (a
// watch's error Status) pass through.
type decodingSerializer struct {
	runtime.NegotiatedSerializer
	trimmer *trimmer
}

func (s decodingSerializer) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return sliceDecoder{next: s.NegotiatedSerializer.DecoderToVersion(d, gv), trimmer: s.trimmer}
}

type sliceDecoder struct {
	next    runtime.Decoder
	trimmer *trimmer
}

var (
	sliceGVK     = resourcev1.SchemeGroupVersion.WithKind("ResourceSlice")
	sliceListGVK = resourcev1.SchemeGroupVersion.WithKind("ResourceSliceList")
)

func (d sliceDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if into != nil {
		return d.next.Decode(data, defaults, into)
	}
	if apiVersion, kind, raw, err := kubeproto.Envelope(data); err == nil && string(apiVersion) == resourcev1.SchemeGroupVersion.String() {
		switch string(kind) {
		case "ResourceSlice":
			s, err := d.trimmer.decodeSlice(raw)
			if err != nil {
				return nil, nil, fmt.Errorf("decode ResourceSlice: %w", err)
			}
			return s, &sliceGVK, nil
		case "ResourceSliceList":
			list := &compactSliceList{}
			count := 0
			err := kubeproto.DecodeList(raw, &list.ListMeta, func(item []byte) error {
				count++
				s, err := d.trimmer.decodeSlice(item)
				if err != nil {
					return fmt.Errorf("slice %d of the list: %w", count, err)
				}
				list.Items = append(list.Items, s)
				return nil
			})
			if err != nil {
				return nil, nil, fmt.Errorf("decode ResourceSliceList: %w", err)
			}
			return list, &sliceListGVK, nil
		}
	}
	obj, gvk, err := d.next.Decode(data, defaults, nil)
	if err != nil {
		return obj, gvk, err
	}
	switch o := obj.(type) {
	case *resourcev1.ResourceSlice:
		return d.trimmer.trim(o), gvk, nil
	case *resourcev1.ResourceSliceList:
		list := &compactSliceList{ListMeta: o.ListMeta, Items: make([]*compactSlice, len(o.Items))}
		for i := range o.Items {
			list.Items[i] = d.trimmer.trim(&o.Items[i])
		}
		return list, gvk, nil
	}
	return obj, gvk, nil
}
