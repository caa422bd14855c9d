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
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// shapes are slices of every shape the decoder must read as trim does: the driver's
// fixtures, and the spellings and values the API allows around them.
func shapes(t testing.TB) map[string]*resourcev1.ResourceSlice {
	out := map[string]*resourcev1.ResourceSlice{}
	for _, name := range []string{dra.H100, dra.H100Tainted, dra.A100StaticMIG, dra.H100DynMIG, dra.H100VFIO, dra.PoolMidUpdate} {
		slices, err := dra.Slices(name)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range slices {
			out[fmt.Sprintf("%s/%d", name, i)] = s
		}
	}
	str := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }
	ver := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{VersionValue: &s} }
	num := func(n int64) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{IntValue: &n} }
	capacity := func(name, q string) map[resourcev1.QualifiedName]resourcev1.DeviceCapacity {
		return map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{resourcev1.QualifiedName(name): {Value: resource.MustParse(q)}}
	}

	spellings := slice("spellings", "n1", 4, 1, "580.126.9", "gpu-0", "gpu-1", "gpu-2")
	spellings.Spec.Pool.Name = "a-pool-of-its-own"
	d := spellings.Spec.Devices
	d[0].Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		"gpu.nvidia.com/type": str("gpu"), "gpu.nvidia.com/uuid": str("GPU-alt"), "gpu.nvidia.com/productName": str("NVIDIA A100-SXM4-40GB"),
		"pciBusID": str("0000:3b:00.0"), "driverVersion": ver("570.1.2"), "cudaDriverVersion": ver("12.8.0"),
	}
	d[0].Capacity = capacity("gpu.nvidia.com/memory", "40Gi")
	d[1].Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		"type": num(3), "gpu.nvidia.com/type": str("hidden by the unqualified name"), "uuid": str("GPU-1"),
		"architecture": {}, "profile": str(""),
	}
	d[1].Capacity = capacity("memory", "-1")
	d[2].Capacity = capacity("memory", "100E")
	d[2].Taints = []resourcev1.DeviceTaint{
		{Key: "gpu.nvidia.com/gpu-lost", Value: "true", Effect: resourcev1.DeviceTaintEffectNoExecute, TimeAdded: &metav1.Time{}},
		{Key: "gpu.nvidia.com/unmonitored", Effect: resourcev1.DeviceTaintEffectNone},
	}
	d[2].ConsumesCounters = []resourcev1.DeviceCounterConsumption{{CounterSet: "gpu-2"}}
	out["spellings"] = spellings

	counters := slice("counters", "n1", 4, 2, "580.126.9")
	counter := func(q string) resourcev1.Counter { return resourcev1.Counter{Value: resource.MustParse(q)} }
	counters.Spec.SharedCounters = []resourcev1.CounterSet{
		{Name: "gpu-0", Counters: map[string]resourcev1.Counter{"memory": counter("80Gi"), "fraction": counter("1.5m"), "negative": counter("-3"), "huge": counter("100E"), "none": {}}},
		{Name: "gpu-1"},
	}
	out["counter sets"] = counters
	consumer := slice("consumer", "n1", 4, 2, "580.126.9", "gpu-0-mig-1", "gpu-0-mig-2")
	consumer.Spec.Devices[0].ConsumesCounters = []resourcev1.DeviceCounterConsumption{
		{CounterSet: "gpu-0", Counters: map[string]resourcev1.Counter{"memory": counter("10Gi"), "huge": counter("9e18")}},
		{CounterSet: "gpu-1", Counters: map[string]resourcev1.Counter{}},
	}
	consumer.Spec.Devices[1].ConsumesCounters = consumer.Spec.Devices[0].ConsumesCounters[:1]
	out["counter consumers"] = consumer

	shareable := slice("shareable", "n1", 1, 1, "580.126.9", "gpu-0", "gpu-1", "gpu-2")
	q := func(v string) *resource.Quantity { return ptr(resource.MustParse(v)) }
	d = shareable.Spec.Devices
	d[0].AllowMultipleAllocations = ptr(true)
	d[0].Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
		"memory": {Value: resource.MustParse("80Gi"), RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: q("80Gi"),
			ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: q("10Gi"), Step: q("10Gi")}}},
		"cores": {Value: resource.MustParse("132"), RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: q("4"),
			ValidValues: []resource.Quantity{resource.MustParse("4"), resource.MustParse("8")}}},
		"bandwidth": {Value: resource.MustParse("1.5"), RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: q("1")}},
		"links":     {Value: resource.MustParse("-2"), RequestPolicy: &resourcev1.CapacityRequestPolicy{ValidRange: &resourcev1.CapacityRequestPolicyRange{Max: q("1")}}},
	}
	d[1].AllowMultipleAllocations = ptr(true)
	d[1].Capacity = nil
	d[2].AllowMultipleAllocations = ptr(false)
	out["shareable"] = shareable

	other := slice("other-driver", "n1", 1, 1, "1", "dev-0")
	other.Spec.Driver = "example.com/fpga"
	out["other driver"] = other
	network := slice("network", "", 1, 1, "1", "gpu-0")
	network.Spec.NodeName, network.Spec.AllNodes = nil, ptr(true)
	out["network-attached"] = network
	empty := slice("empty-node", "", 1, 1, "1", "gpu-0")
	empty.Spec.NodeName = ptr("")
	out["empty node name"] = empty
	out["bookmark"] = &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "77",
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true", "other": "x"}}}
	return out
}

// What the decoder makes of a slice's protobuf is exactly what trim makes of the generated
// decoder's slice, and keeps nothing of the bytes it read.
func TestDecodeSliceEqualsTrim(t *testing.T) {
	for name, s := range shapes(t) {
		t.Run(name, func(t *testing.T) {
			data, err := s.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			tr := &trimmer{}
			got, err := tr.decodeSlice(data)
			if err != nil {
				t.Fatal(err)
			}
			clear(data) // a kept view of the message would change with it
			if want := tr.trim(s); !reflect.DeepEqual(got, want) {
				t.Errorf("decoded:\n%+v\ntrimmed:\n%+v", got, want)
			}
		})
	}
}

// Two messages one after the other are one message whose repeated fields merge (the later
// metadata, spec and pool fields over the earlier, the devices appended): the decoder merges
// them as the generated decoder does, whole slices and fields alone.
func TestDecodeSliceMergesLikeGenerated(t *testing.T) {
	all := shapes(t)
	tails := partialSlices()
	for name, s := range all {
		tails["slice "+name] = marshal(t, s)
	}
	for first, a := range all {
		for second, tail := range tails {
			data := append(marshal(t, a), tail...)
			full, ok := unmarshalSlice(data)
			if !ok {
				t.Fatalf("%s then %s: the generated decoder fails", first, second)
			}
			tr := &trimmer{}
			got, err := tr.decodeSlice(data)
			if err != nil {
				t.Fatalf("%s then %s: %v", first, second, err)
			}
			if want := tr.trim(full); !reflect.DeepEqual(got, want) {
				t.Errorf("%s then %s: decoded:\n%+v\ntrimmed:\n%+v", first, second, got, want)
			}
		}
	}
}

// partialSlices are messages of a few fields each, to follow a whole slice's message.
func partialSlices() map[string][]byte {
	annotation := protoBytes(protoBytes(nil, 1, []byte(metav1.InitialEventsAnnotationKey)), 2, []byte("true"))
	tails := map[string][]byte{
		"a resourceVersion":  protoBytes(nil, sliceMetadata, protoBytes(nil, 6, []byte("99"))),
		"a namespace":        protoBytes(nil, sliceMetadata, protoBytes(nil, 3, []byte("ns"))),
		"the bookmark":       protoBytes(nil, sliceMetadata, protoBytes(nil, 12, annotation)),
		"a node":             protoBytes(nil, sliceSpec, protoBytes(nil, specNodeName, []byte("elsewhere"))),
		"a pool generation":  protoBytes(nil, sliceSpec, protoBytes(nil, specPool, []byte{poolGeneration << 3, 9})),
		"a device":           protoBytes(nil, sliceSpec, protoBytes(nil, specDevices, protoBytes(nil, deviceName, []byte("gpu-9")))),
		"the driver's name":  protoBytes(nil, sliceSpec, protoBytes(nil, specDriver, []byte(inventory.DRADriver))),
		"an empty metadata":  protoBytes(nil, sliceMetadata, nil),
		"an empty spec":      protoBytes(nil, sliceSpec, nil),
		"an unknown field":   protoBytes(nil, 3, []byte("status")),
		"nothing after that": nil,
	}
	tails["a namespace, then a resourceVersion"] = slices.Concat(tails["a namespace"], tails["a resourceVersion"])
	return tails
}

func marshal(t testing.TB, s *resourcev1.ResourceSlice) []byte {
	data, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The decoder reads the memory capacity as memoryBytes does, and keeps one it could not
// parse in bounded time as out of range, at once.
func TestDecodeSliceCapacities(t *testing.T) {
	for q, want := range map[string]int64{
		"80Gi": 80 << 30, "1": 1, "0.5": 1, "-3": -1, "1e999": math.MaxInt64, "9223372036854775808": math.MaxInt64,
		"1e-999999999": -1, strings.Repeat("9", 65): -1,
	} {
		s := slice("s", "n", 1, 1, "1", "gpu-0")
		s.Spec.Devices[0].Capacity = nil
		data, err := s.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		data = withMemoryCapacity(data, q)
		got, err := (&trimmer{}).decodeSlice(data)
		if err != nil || len(got.devices) != 1 || !got.devices[0].model.hasMemory || got.devices[0].model.memory != want {
			t.Errorf("memory %.20s: decoded %+v, %v; want %d bytes", q, got, err, want)
		}
	}
}

// withMemoryCapacity replaces a slice's devices with one whose memory capacity is the
// quantity string q as it is, unparsed (resource.MustParse would refuse or normalise it): a
// second spec field, which the decoders merge into the first.
func withMemoryCapacity(data []byte, q string) []byte {
	quantity := protoBytes(nil, 1, []byte(q))
	value := protoBytes(nil, capacityValue, quantity)
	entry := protoBytes(protoBytes(nil, 1, []byte("memory")), 2, value)
	dev := protoBytes(protoBytes(nil, deviceName, []byte("gpu-9")), deviceCapacity, entry)
	return append(withoutDevices(data), protoBytes(nil, sliceSpec, protoBytes(nil, specDevices, dev))...)
}

// withoutDevices is a slice message with its spec's devices dropped.
func withoutDevices(data []byte) []byte {
	s := &resourcev1.ResourceSlice{}
	if err := s.Unmarshal(data); err != nil {
		panic(err)
	}
	s.Spec.Devices = nil
	out, err := s.Marshal()
	if err != nil {
		panic(err)
	}
	return out
}

func protoBytes(b []byte, num int, v []byte) []byte {
	b = append(b, byte(num<<3|2))
	b = appendVarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// Whatever bytes arrive, the decoder returns a slice or an error, never panics; and for any
// bytes the generated decoder accepts it says what trim says of that slice.
func FuzzDecodeSlice(f *testing.F) {
	for _, s := range shapes(f) {
		data, err := s.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	h100 := marshal(f, shapes(f)[dra.H100+"/0"])
	for _, tail := range partialSlices() {
		f.Add(append(h100[:len(h100):len(h100)], tail...))
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		tr := &trimmer{}
		got, err := tr.decodeSlice(data)
		if mayParseForever.Match(data) {
			return // the generated decoder could take unbounded time: nothing to compare with
		}
		full, ok := unmarshalSlice(data)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("decodeSlice fails (%v) where the generated decoder does not", err)
		}
		if want := tr.trim(full); !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded:\n%+v\ntrimmed:\n%+v", got, want)
		}
	})
}

// mayParseForever matches bytes that could hold a quantity whose parsing takes unbounded
// time (the decoder keeps such a memory capacity as out of range, unparsed).
var mayParseForever = regexp.MustCompile(`[eE][+-]?[0-9]{4}|[0-9.]{40}`)

// unmarshalSlice decodes data with the generated decoder; false when it fails, or panics.
func unmarshalSlice(data []byte) (s *resourcev1.ResourceSlice, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	s = &resourcev1.ResourceSlice{}
	return s, s.Unmarshal(data) == nil
}

// The client's serializer hands out compact slices and lists of them, from protobuf and,
// for a server that does not speak it, from JSON; a Status passes through.
func TestSliceCodec(t *testing.T) {
	proto := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	js := jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, jsonserializer.SerializerOptions{})
	all := shapes(t)
	s := all[dra.H100+"/0"]
	list := &resourcev1.ResourceSliceList{ListMeta: metav1.ListMeta{ResourceVersion: "80", Continue: "next"},
		Items: []resourcev1.ResourceSlice{*s, *all["spellings"]}}
	status := &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired}
	for name, serializer := range map[string]k8sruntime.Serializer{"protobuf": proto, "JSON": js} {
		t.Run(name, func(t *testing.T) {
			tr := &trimmer{}
			ns := tr.codec().Serializer(scheme.Codecs.WithoutConversion())
			encoder := scheme.Codecs.EncoderForVersion(serializer, resourcev1.SchemeGroupVersion)
			decoder := ns.DecoderToVersion(serializer, resourcev1.SchemeGroupVersion)
			decode := func(obj k8sruntime.Object) k8sruntime.Object {
				t.Helper()
				data, err := k8sruntime.Encode(encoder, obj)
				if err != nil {
					t.Fatal(err)
				}
				got, err := k8sruntime.Decode(decoder, data)
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			if got, want := decode(s), tr.trim(s); !reflect.DeepEqual(got, want) {
				t.Errorf("slice decoded as\n%+v\nwant\n%+v", got, want)
			}
			bookmark := decode(all["bookmark"]).(*compactSlice).GetObjectMeta()
			if bookmark.GetResourceVersion() != "77" || bookmark.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
				t.Errorf("bookmark decoded as %+v", bookmark)
			}
			want := &compactSliceList{ListMeta: list.ListMeta, Items: []*compactSlice{tr.trim(&list.Items[0]), tr.trim(&list.Items[1])}}
			if got := decode(list); !reflect.DeepEqual(got, want) {
				t.Errorf("list decoded as\n%+v\nwant\n%+v", got, want)
			}
			if got, ok := decode(status).(*metav1.Status); !ok || got.Reason != metav1.StatusReasonExpired {
				t.Errorf("a Status came out as %#v", got)
			}
		})
	}
}

// benchSlice is the protobuf of an 8-GPU slice as the fleet's DRA nodes publish it.
func benchSlice(b *testing.B) []byte {
	full, err := dra.Slices(dra.H100)
	if err != nil {
		b.Fatal(err)
	}
	data, err := fleetSlice(full[0], 7).Marshal()
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// Decoding a slice allocates a fraction of what the generated decoder and trim do.
func BenchmarkDecodeSlice(b *testing.B) {
	data := benchSlice(b)
	tr := &trimmer{}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.decodeSlice(data); err != nil {
			b.Fatal(err)
		}
	}
}

// The generated decoder and trim, for comparison with BenchmarkDecodeSlice.
func BenchmarkUnmarshalAndTrim(b *testing.B) {
	data := benchSlice(b)
	tr := &trimmer{}
	b.ReportAllocs()
	for b.Loop() {
		s := &resourcev1.ResourceSlice{}
		if err := s.Unmarshal(data); err != nil {
			b.Fatal(err)
		}
		tr.trim(s)
	}
}
