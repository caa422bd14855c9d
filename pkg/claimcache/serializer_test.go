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

package claimcache

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// codecs are the encoder the API server would use and the claim decoder over the same
// serializer, for protobuf and JSON.
func codecs() map[string][2]any {
	proto := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	js := jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, jsonserializer.SerializerOptions{})
	out := map[string][2]any{}
	for name, s := range map[string]runtime.Serializer{"protobuf": proto, "JSON": js} {
		out[name] = [2]any{
			scheme.Codecs.EncoderForVersion(s, resourcev1.SchemeGroupVersion),
			claimCodec.Serializer(scheme.Codecs.WithoutConversion()).DecoderToVersion(s, resourcev1.SchemeGroupVersion),
		}
	}
	return out
}

func wantObject(c *resourcev1.ResourceClaim) Object {
	return Object{Compact: kubeproto.Compact{Namespace: c.Namespace, Name: c.Name, ResourceVersion: c.ResourceVersion},
		Claim: allocation.FromClaim(c)}
}

// Single claims and lists come out as Objects holding what FromClaim keeps, with the key and
// resource version the reflector reads, in protobuf and in JSON.
func TestSerializerDecodesClaimsAndLists(t *testing.T) {
	for name, codec := range codecs() {
		encoder, decoder := codec[0].(runtime.Encoder), codec[1].(runtime.Decoder)
		t.Run(name, func(t *testing.T) {
			list := &resourcev1.ResourceClaimList{ListMeta: metav1.ListMeta{ResourceVersion: "99", Continue: "next"}}
			want := &ObjectList{ListMeta: list.ListMeta}
			for _, tc := range claimTable() {
				data, err := runtime.Encode(encoder, tc.claim)
				if err != nil {
					t.Fatal(err)
				}
				got, err := runtime.Decode(decoder, data)
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				if diff := cmp.Diff(wantObject(tc.claim), *got.(*Object)); diff != "" {
					t.Errorf("%s (-want +got):\n%s", tc.name, diff)
				}
				list.Items = append(list.Items, *tc.claim)
				want.Items = append(want.Items, wantObject(tc.claim))
			}
			data, err := runtime.Encode(encoder, list)
			if err != nil {
				t.Fatal(err)
			}
			got, err := runtime.Decode(decoder, data)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("list (-want +got):\n%s", diff)
			}
			// What the reflector reads of a list and its items.
			items, err := meta.ExtractList(got)
			if err != nil || len(items) != len(want.Items) {
				t.Fatalf("ExtractList = %d items, %v; want %d", len(items), err, len(want.Items))
			}
			if m, err := meta.Accessor(items[0]); err != nil || m.GetName() != want.Items[0].Name || m.GetResourceVersion() != "417" {
				t.Errorf("Accessor of the first item = %v, %v", m, err)
			}
			if l, err := meta.ListAccessor(got); err != nil || l.GetResourceVersion() != "99" || l.GetContinue() != "next" {
				t.Errorf("ListAccessor = %v, %v", l, err)
			}
		})
	}
}

// The streaming list ends with a bookmark carrying the initial-events-end annotation; the
// decoder keeps it, or the reflector would never sync. Status objects pass through, and so
// does decoding into a ResourceClaim; decoding into an Object gives what a decode without a
// target gives.
func TestSerializerKeepsTheBookmarkAndPassesOthers(t *testing.T) {
	for name, codec := range codecs() {
		encoder, decoder := codec[0].(runtime.Encoder), codec[1].(runtime.Decoder)
		t.Run(name, func(t *testing.T) {
			bookmark := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "77",
				Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
			data, err := runtime.Encode(encoder, bookmark)
			if err != nil {
				t.Fatal(err)
			}
			got, err := runtime.Decode(decoder, data)
			if err != nil {
				t.Fatal(err)
			}
			m, err := meta.Accessor(got)
			if err != nil || m.GetResourceVersion() != "77" || m.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
				t.Errorf("bookmark decoded as %+v (%v)", got, err)
			}

			full := claimTable()[0].claim
			if data, err = runtime.Encode(encoder, full); err != nil {
				t.Fatal(err)
			}
			into := &resourcev1.ResourceClaim{}
			if _, _, err := decoder.Decode(data, nil, into); err != nil || into.Labels["app"] != "trainer" || len(into.ManagedFields) != 1 {
				t.Errorf("decoding into a ResourceClaim gave %+v, %v; want the whole claim", into.ObjectMeta, err)
			}
			intoObject := &Object{}
			if _, _, err := decoder.Decode(data, nil, intoObject); err != nil || !cmp.Equal(wantObject(full), *intoObject) {
				t.Errorf("decoding into an Object gave %+v, %v; want %+v", *intoObject, err, wantObject(full))
			}
		})
	}
	status := &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old"}
	proto := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	data, err := runtime.Encode(scheme.Codecs.EncoderForVersion(proto, metav1.SchemeGroupVersion), status)
	if err != nil {
		t.Fatal(err)
	}
	got, err := runtime.Decode(claimCodec.Serializer(scheme.Codecs.WithoutConversion()).DecoderToVersion(proto, resourcev1.SchemeGroupVersion), data)
	if s, ok := got.(*metav1.Status); err != nil || !ok || s.Code != 410 {
		t.Errorf("a Status decoded as %#v, %v", got, err)
	}
}

// A malformed protobuf claim, alone or in a list, is an error.
func TestSerializerReportsMalformedClaims(t *testing.T) {
	proto := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	decoder := claimCodec.Serializer(scheme.Codecs.WithoutConversion()).DecoderToVersion(proto, resourcev1.SchemeGroupVersion)
	// metadata of 3 bytes holding a name of 5
	item := []byte{0x0a, 0x03, 0x0a, 0x05, 'a'}
	envelope := func(kind string, raw []byte) []byte {
		u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: kind}, Raw: raw}
		data, err := u.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return append([]byte("k8s\x00"), data...)
	}
	for name, data := range map[string][]byte{
		"claim": envelope("ResourceClaim", item),
		"list":  envelope("ResourceClaimList", append([]byte{0x12, byte(len(item))}, item...)),
	} {
		if got, err := runtime.Decode(decoder, data); err == nil || !strings.Contains(err.Error(), "ResourceClaim") {
			t.Errorf("%s: %#v, %v; want an error naming ResourceClaim", name, got, err)
		}
	}
}
