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

package kubeproto

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
)

// field is what a Message reads of one field.
type field struct {
	Num    protowire.Number
	Typ    protowire.Type
	Value  string
	Varint uint64
}

func walk(b []byte) ([]field, error) {
	var got []field
	m := NewMessage(b)
	for m.Next() {
		got = append(got, field{m.Num(), protowire.Type(m.Tag() & 7), string(m.Value()), m.Varint()})
	}
	return got, m.Err()
}

// A Message reads varint and length-delimited fields in order and skips the others, with
// the generated decoders' rules where they are laxer than protowire's: a tenth varint byte
// above 1, field numbers beyond 2^29.
func TestMessageReadsFields(t *testing.T) {
	var b []byte
	b = protowire.AppendVarint(protowire.AppendTag(b, 1, protowire.VarintType), 300)
	b = protowire.AppendFixed32(protowire.AppendTag(b, 2, protowire.Fixed32Type), 1)
	b = protowire.AppendString(protowire.AppendTag(b, 3, protowire.BytesType), "three")
	b = protowire.AppendFixed64(protowire.AppendTag(b, 4, protowire.Fixed64Type), 1)
	b = protowire.AppendTag(b, 5, protowire.StartGroupType)
	b = protowire.AppendString(protowire.AppendTag(b, 3, protowire.BytesType), "in a group")
	b = protowire.AppendTag(b, 6, protowire.StartGroupType)
	b = protowire.AppendTag(b, 6, protowire.EndGroupType)
	b = protowire.AppendTag(b, 5, protowire.EndGroupType)
	b = protowire.AppendString(protowire.AppendTag(b, 3, protowire.BytesType), "")
	b = append(b, 0x38, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f) // field 7: ten bytes, the last above 1
	b = protowire.AppendVarint(b, uint64(1<<30)<<3|uint64(protowire.VarintType))    // field 2^30
	b = protowire.AppendVarint(b, 9)
	got, err := walk(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []field{
		{1, protowire.VarintType, "", 300},
		{3, protowire.BytesType, "three", 0},
		{3, protowire.BytesType, "", 0},
		{7, protowire.VarintType, "", 1<<63 | (1<<63 - 1)},
		{1 << 30, protowire.VarintType, "", 9},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}

	// A length-delimited value's capacity ends with the message (MapEntry reads up to it).
	msg := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "ab")
	msg = append(msg, 0x10, 0x01)
	withRoom := append(make([]byte, 0, len(msg)+10), msg...) // more capacity than the message
	m := NewMessage(withRoom)
	for m.Next() {
		if v := m.Value(); m.Tag() == Bytes(1) && cap(v) != len(msg)-2 {
			t.Errorf("value %q has capacity %d; want %d, to the end of the message", v, cap(v), len(msg)-2)
		}
	}
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
}

// Malformed messages are errors, as they are for the generated decoders.
func TestMessageRejectsMalformedMessages(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"truncated", []byte{0x0a, 0x05, 'a'}, io.ErrUnexpectedEOF},
		{"a length beyond the end", []byte{0x0a, 0x20, 0x0a, 0x01}, io.ErrUnexpectedEOF},
		{"an unterminated varint", []byte{0x10, 0xff, 0xff}, io.ErrUnexpectedEOF},
		{"an unterminated tag", []byte{0xff}, io.ErrUnexpectedEOF},
		{"a fixed64 cut short", []byte{0x19, 1, 2, 3}, io.ErrUnexpectedEOF},
		{"a fixed32 cut short", []byte{0x1d, 1, 2, 3}, io.ErrUnexpectedEOF},
		{"a group without end", []byte{0x1b, 0x08, 0x01}, io.ErrUnexpectedEOF},
		{"field number zero", []byte{0x02, 0x00}, ErrFieldNum},
		{"a field number beyond int32", protowire.AppendVarint(nil, uint64(1<<31)<<3|2), ErrFieldNum},
		{"an end group without start", []byte{0x0c}, ErrGroupEnd},
		{"an end group after a group", []byte{0x1b, 0x1c, 0x1c}, ErrGroupEnd},
		{"wire type 6", []byte{0x1e}, ErrWireType},
		{"wire type 7 in a group", []byte{0x1b, 0x0f}, ErrWireType},
		{"a varint of eleven bytes", []byte{0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, ErrOverflow},
		{"a negative length", []byte{0x1a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, ErrLength},
		{"a negative length in a group", []byte{0x1b, 0x1a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, ErrLength},
	} {
		if _, err := walk(tc.data); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v; want %v", tc.name, err, tc.want)
		}
		if generated(func() error { return new(corev1.ConfigMap).Unmarshal(tc.data) }) {
			t.Errorf("%s: the generated decoder accepts it", tc.name)
		}
	}
}

// entry is a map entry's bytes.
func entry(fields ...[]byte) []byte { return bytes.Join(fields, nil) }

func str(num protowire.Number, typ protowire.Type, s string) []byte {
	return protowire.AppendString(protowire.AppendTag(nil, num, typ), s)
}

// readLabels reads an ObjectMeta's name, generation, labels and annotations with a Message
// and MapEntry.
func readLabels(b []byte) (metav1.ObjectMeta, error) {
	var meta metav1.ObjectMeta
	m := NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case Bytes(1):
			meta.Name = string(m.Value())
		case Varint(7):
			meta.Generation = int64(m.Varint())
		case Bytes(11), Bytes(12):
			key, value, err := MapEntry(m.Value())
			if err != nil {
				return meta, err
			}
			target := &meta.Labels
			if m.Num() == 12 {
				target = &meta.Annotations
			}
			if *target == nil {
				*target = map[string]string{}
			}
			(*target)[string(key)] = string(value)
		}
	}
	return meta, m.Err()
}

// generatedLabels is what the generated decoder reads of the fields readLabels reads.
func generatedLabels(b []byte) (metav1.ObjectMeta, bool) {
	var full metav1.ObjectMeta
	if !generated(func() error { return full.Unmarshal(b) }) {
		return full, false
	}
	return metav1.ObjectMeta{Name: full.Name, Generation: full.Generation, Labels: full.Labels, Annotations: full.Annotations}, true
}

// MapEntry reads an entry as the generated decoders do: fields 1 and 2 whatever their wire
// type, the last of each, running on into the rest of the message but not past it.
func TestMapEntryReadsLikeGenerated(t *testing.T) {
	label := func(e []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, 11, protowire.BytesType), e)
	}
	for _, tc := range []struct {
		name    string
		message []byte
		want    map[string]string // nil: an error
	}{
		{"key and value", label(entry(str(MapKey, 2, "k"), str(MapValue, 2, "v"))), map[string]string{"k": "v"}},
		{"value first", label(entry(str(MapValue, 2, "v"), str(MapKey, 2, "k"))), map[string]string{"k": "v"}},
		{"no value", label(entry(str(MapKey, 2, "k"))), map[string]string{"k": ""}},
		{"no key", label(entry(str(MapValue, 2, "v"))), map[string]string{"": "v"}},
		{"empty", label(nil), map[string]string{"": ""}},
		{"the last key", label(entry(str(MapKey, 2, "a"), str(MapKey, 2, "k"), str(MapValue, 2, "v"))), map[string]string{"k": "v"}},
		{"a key of wire type varint", label(entry(str(MapKey, 0, "k"), str(MapValue, 5, "v"))), map[string]string{"k": "v"}},
		{"unknown fields", label(entry(str(3, 2, "x"), []byte{0x20, 0x01, 0x2b, 0x2c}, str(MapKey, 2, "k"), str(MapValue, 2, "v"))), map[string]string{"k": "v"}},
		// The entry's key runs on into the next field of the message (generation: 0x38 0x05).
		{"a key into the rest of the message", append(label([]byte{0x0a, 0x03, 'a'}), 0x38, 0x05), map[string]string{"a\x38\x05": ""}},
		{"a key past the message", label([]byte{0x0a, 0x03, 'a'}), nil},
		{"an unknown field past the entry", append(label([]byte{0x1a, 0x03, 'a'}), 0x38, 0x05), nil},
		{"a truncated tag", label([]byte{0x8a}), nil},
	} {
		got, err := readLabels(tc.message)
		want, ok := generatedLabels(tc.message)
		if tc.want == nil {
			if err == nil || ok {
				t.Errorf("%s: MapEntry error %v, the generated decoder accepts it: %v; want both to refuse it", tc.name, err, ok)
			}
			continue
		}
		if err != nil || !ok {
			t.Errorf("%s: MapEntry error %v, the generated decoder accepts it: %v; want both to accept it", tc.name, err, ok)
			continue
		}
		if diff := cmp.Diff(tc.want, got.Labels); diff != "" {
			t.Errorf("%s: MapEntry (-want +got):\n%s", tc.name, diff)
		}
		if diff := cmp.Diff(want.Labels, got.Labels); diff != "" {
			t.Errorf("%s: MapEntry differs from the generated decoder (-generated +MapEntry):\n%s", tc.name, diff)
		}
	}
}

// Whatever the bytes, a Message and MapEntry return or fail and never panic; and whenever the
// generated decoder accepts the bytes as an ObjectMeta, they read its name, generation,
// labels and annotations as it does.
func FuzzMessageReadsLikeGenerated(f *testing.F) {
	meta := metav1.ObjectMeta{Name: "n", Namespace: "ns", Generation: 3, Labels: map[string]string{"a": "b", "c": ""},
		Annotations: map[string]string{"x": "y"}, CreationTimestamp: metav1.Unix(1, 0),
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationApply}}}
	data, err := meta.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add([]byte{0x5a, 0x03, 0x0a, 0x03, 'a', 'b', 'c'})
	f.Add([]byte{0x7b, 0x10, 0x01, 0x7c, 0x38, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := readLabels(data)
		want, ok := generatedLabels(data)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("the Message fails (%v) where the generated decoder does not", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("the Message and MapEntry differ from the generated decoder (-generated +Message):\n%s", diff)
		}
	})
}

// Envelope reads what the API server wraps an object in, and only that.
func TestEnvelope(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"a": "b"}}
	data := prototest.Encode(t, cm)
	apiVersion, kind, raw, err := Envelope(data)
	if err != nil || string(apiVersion) != "v1" || string(kind) != "ConfigMap" {
		t.Fatalf("Envelope = %q, %q, %v; want v1 ConfigMap", apiVersion, kind, err)
	}
	var got corev1.ConfigMap
	if err := got.Unmarshal(raw); err != nil || got.Name != "c" || got.Data["a"] != "b" {
		t.Errorf("raw decodes to %+v, %v", got, err)
	}
	var js bytes.Buffer
	if err := jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, jsonserializer.SerializerOptions{}).Encode(cm, &js); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"JSON":           js.Bytes(),
		"nothing":        nil,
		"the magic only": ProtobufMagic,
		"no raw field":   append(bytes.Clone(ProtobufMagic), str(unknownTypeMeta, 2, "")...),
		"truncated":      data[:len(data)-5], // into raw, before the empty contentEncoding and contentType
	} {
		if _, _, _, err := Envelope(data); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// Whatever the bytes, Envelope returns or fails and never panics; whenever the generated
// decoder accepts them as a runtime.Unknown with content, Envelope reads the same.
func FuzzEnvelope(f *testing.F) {
	f.Add(prototest.Encode(f, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}))
	f.Add(append(bytes.Clone(ProtobufMagic), 0x0a, 0x04, 0x0a, 0x02, 'v', '1', 0x12, 0x00, 0x0a, 0x02, 0x12, 0x00))
	f.Fuzz(func(t *testing.T, data []byte) {
		apiVersion, kind, raw, err := Envelope(data)
		if !bytes.HasPrefix(data, ProtobufMagic) {
			if err == nil {
				t.Fatal("no error for data without the magic")
			}
			return
		}
		var u k8sruntime.Unknown
		if !generated(func() error { return u.Unmarshal(data[len(ProtobufMagic):]) }) {
			return
		}
		if errors.Is(err, errNoContent) && len(u.Raw) == 0 {
			return
		}
		if err != nil {
			t.Fatalf("Envelope fails (%v) where the generated decoder does not", err)
		}
		if string(apiVersion) != u.APIVersion || string(kind) != u.Kind || !bytes.Equal(raw, u.Raw) {
			t.Fatalf("Envelope = %q, %q, %q; the generated decoder: %q, %q, %q", apiVersion, kind, raw, u.APIVersion, u.Kind, u.Raw)
		}
	})
}
