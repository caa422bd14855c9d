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
	"reflect"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
)

// The hand decoder (decodeSlice) against what client-go's protobuf serializer does (the
// generated Unmarshal) followed by the trim the cache then needs: per-decode CPU and garbage,
// and what the cache holds per slice afterwards.

// decodeBenchSliceCount is how many slices each input set has: one per DRA node of a fleet.
const decodeBenchSliceCount = 1000

// decodeBenchSet is one set of protobuf ResourceSlices (Marshal of the generated type, the
// message inside the API server's envelope) and the slices they encode.
type decodeBenchSet struct {
	name   string
	slices []*resourcev1.ResourceSlice
	data   [][]byte
}

// decodeBenchSets are the fleet generator's 8-GPU slices and the NVIDIA driver's slices of
// testdata (a real EKS H100 dump, static MIG and DynamicMIG), one set of each per node, with
// the metadata the API server adds.
func decodeBenchSets(tb testing.TB) []decodeBenchSet {
	realSlices := decodeBenchRealSlices(tb)
	fleet := decodeBenchSet{name: "fleet"}
	realSet := decodeBenchSet{name: "real"}
	for i := range decodeBenchSliceCount {
		fleet.slices = append(fleet.slices, decodeBenchServerMeta(fixtures.FleetSlice(2*i, types.UID(fmt.Sprintf("node-uid-%d", i))), i))
		realSet.slices = append(realSet.slices, decodeBenchServerMeta(decodeBenchRealSlice(realSlices[i%len(realSlices)], i), i))
	}
	sets := []decodeBenchSet{fleet, realSet}
	for s := range sets {
		for _, sl := range sets[s].slices {
			data, err := sl.Marshal()
			if err != nil {
				tb.Fatal(err)
			}
			sets[s].data = append(sets[s].data, data)
		}
	}
	return sets
}

// decodeBenchRealSlice is a real slice moved to a node of its own (the i-th), its device
// UUIDs made that node's.
func decodeBenchRealSlice(src *resourcev1.ResourceSlice, i int) *resourcev1.ResourceSlice {
	s := src.DeepCopy()
	node := fmt.Sprintf("%s-%04d", *s.Spec.NodeName, i)
	s.Name = strings.Replace(s.Name, *s.Spec.NodeName, node, 1)
	s.Spec.NodeName = &node
	s.Spec.Pool.Name = strings.Clone(node)
	for j := range s.Spec.Devices {
		if uuid := s.Spec.Devices[j].Attributes["uuid"].StringValue; uuid != nil {
			unique := fmt.Sprintf("%s%04x", (*uuid)[:len(*uuid)-4], i)
			s.Spec.Devices[j].Attributes["uuid"] = resourcev1.DeviceAttribute{StringValue: &unique}
		}
	}
	return s
}

// decodeBenchServerMeta adds what the API server holds of a slice besides the driver's
// spec: uid, resourceVersion, creation time, generation, owner, managed fields.
func decodeBenchServerMeta(s *resourcev1.ResourceSlice, i int) *resourcev1.ResourceSlice {
	at := metav1.NewTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	s.UID = types.UID(fmt.Sprintf("9b0e5d1a-2c4f-4a6b-8d3e-%012d", i))
	s.ResourceVersion = fmt.Sprint(7000000 + i)
	s.Generation = 1
	s.CreationTimestamp = at
	s.GenerateName = *s.Spec.NodeName + "-gpu.nvidia.com-"
	if len(s.OwnerReferences) == 0 {
		controller := true
		s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: *s.Spec.NodeName,
			UID: types.UID(fmt.Sprintf("node-uid-%d", i)), Controller: &controller}}
	}
	s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "gpu-kubelet-plugin", Operation: metav1.ManagedFieldsOperationUpdate,
		APIVersion: "resource.k8s.io/v1", Time: &at, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(
			`{"f:metadata":{"f:generateName":{},"f:ownerReferences":{".":{},"k:{\"uid\":\"` + string(s.OwnerReferences[0].UID) +
				`\"}":{}}},"f:spec":{"f:devices":{},"f:driver":{},"f:nodeName":{},"f:pool":{".":{},"f:generation":{},"f:name":{},"f:resourceSliceCount":{}},"f:sharedCounters":{}}}`)}}
	return s
}

// decodeBenchRealSlices reads the gpu.nvidia.com ResourceSlices of testdata (copied from what
// NVIDIA's DRA driver publishes); the list's field selector leaves out other drivers'.
func decodeBenchRealSlices(tb testing.TB) []*resourcev1.ResourceSlice {
	var slices []*resourcev1.ResourceSlice
	for _, doc := range prototest.YAMLDocuments(tb, "testdata/*.yaml") {
		var kind metav1.TypeMeta
		if err := yaml.Unmarshal(doc.YAML, &kind); err != nil || kind.Kind != "ResourceSlice" {
			continue
		}
		s := &resourcev1.ResourceSlice{}
		if err := yaml.UnmarshalStrict(doc.YAML, s); err != nil {
			tb.Fatalf("%s: %v", doc.File, err)
		}
		if s.Spec.Driver == inventory.DRADriver {
			slices = append(slices, s)
		}
	}
	return slices
}

// decodeBenchDecoders are the two ways to a cached slice: each call of a maker returns a
// decoder with a fresh trimmer, as a cache starts with.
var decodeBenchDecoders = []prototest.Decoder[any]{
	{Name: "hand", Make: func() func([]byte) (any, error) {
		t := &trimmer{}
		return func(b []byte) (any, error) { return t.decodeSlice(b) }
	}},
	{Name: "generated+trim", Make: func() func([]byte) (any, error) {
		t := &trimmer{}
		return func(b []byte) (any, error) {
			s := &resourcev1.ResourceSlice{}
			if err := s.Unmarshal(b); err != nil {
				return nil, err
			}
			return t.trim(s), nil
		}
	}},
}

// The two decoders of the benchmark give the same cached slice for every input, so that the
// benchmark compares equal work.
func TestDecodeBenchDecodersAgree(t *testing.T) {
	for _, set := range decodeBenchSets(t) {
		hand, generated := decodeBenchDecoders[0].Make(), decodeBenchDecoders[1].Make()
		for i, data := range set.data {
			want, err := generated(data)
			if err != nil {
				t.Fatal(err)
			}
			got, err := hand(data)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s %s: the hand decoder gives\n%+v\nthe generated one and trim\n%+v", set.name, set.slices[i].Name, got, want)
			}
		}
		if len(set.slices[0].ManagedFields) == 0 || len(set.slices[0].Spec.Devices) == 0 {
			t.Errorf("%s: the inputs lack managed fields or devices", set.name)
		}
	}
}

// BenchmarkDecodeBenchSlice decodes one slice per op, cycling through a set of a thousand;
// held-B/obj is the heap the cache holds per slice after decoding the whole set with a fresh
// trimmer (its shared tables included), once the garbage is collected.
func BenchmarkDecodeBenchSlice(b *testing.B) {
	var sets []prototest.Inputs
	for _, set := range decodeBenchSets(b) {
		sets = append(sets, prototest.Inputs{Name: set.name, Data: set.data})
	}
	prototest.DecodeBench(b, sets, decodeBenchDecoders, false)
}
