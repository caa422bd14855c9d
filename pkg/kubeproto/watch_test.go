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
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

func watchEvent(t testing.TB, typ string, raw []byte) []byte {
	t.Helper()
	b, err := (&metav1.WatchEvent{Type: typ, Object: k8sruntime.RawExtension{Raw: raw}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// DecodeWatchEvent reads what the generated decoder reads, without copying the object.
func TestDecodeWatchEvent(t *testing.T) {
	object := append(bytes.Clone(ProtobufMagic), 0x12, 0x02, 0x08, 0x01)
	tests := map[string]struct {
		data    []byte
		wantErr bool
	}{
		"added":                      {data: watchEvent(t, "ADDED", object)},
		"error event":                {data: watchEvent(t, "ERROR", []byte("k8s\x00"))},
		"unknown type passes":        {data: watchEvent(t, "RESIZED", object)},
		"no object":                  {data: []byte{0x0a, 0x05, 'A', 'D', 'D', 'E', 'D'}},
		"object without raw":         {data: []byte{0x0a, 0x01, 'A', 0x12, 0x00}},
		"empty raw":                  {data: []byte{0x12, 0x02, 0x0a, 0x00}},
		"the last object wins":       {data: append(watchEvent(t, "ADDED", []byte("one")), watchEvent(t, "DELETED", []byte("two"))...)},
		"unknown fields are skipped": {data: append([]byte{0x18, 0x07, 0x25, 1, 2, 3, 4}, watchEvent(t, "MODIFIED", object)...)},
		"type as a varint":           {data: []byte{0x08, 0x01}, wantErr: true},
		"raw as a varint":            {data: []byte{0x12, 0x02, 0x08, 0x01}, wantErr: true},
		"truncated":                  {data: watchEvent(t, "ADDED", object)[:5], wantErr: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			typ, raw, err := DecodeWatchEvent(tt.data)
			var want metav1.WatchEvent
			genErr := want.Unmarshal(tt.data)
			if (err != nil) != tt.wantErr || (genErr != nil) != tt.wantErr {
				t.Fatalf("error %v, generated decoder's %v, want an error: %v", err, genErr, tt.wantErr)
			}
			if err != nil {
				return
			}
			if typ != want.Type || !bytes.Equal(raw, want.Object.Raw) || (raw == nil) != (want.Object.Raw == nil) {
				t.Errorf("got %q %q, the generated decoder %q %q", typ, raw, want.Type, want.Object.Raw)
			}
			if len(raw) > 0 && &raw[0] != &tt.data[bytes.LastIndex(tt.data, raw)] {
				t.Errorf("the object was copied")
			}
		})
	}
	if typ, _, _ := DecodeWatchEvent(watchEvent(t, "ADDED", nil)); testing.AllocsPerRun(10, func() {
		_, _, _ = DecodeWatchEvent(watchEvent(t, typ, object))
	}) > 2 { // watchEvent's own Marshal
		t.Errorf("a usual event allocates")
	}
}

// The serializer decodes watch events itself and everything else through the wrapped one.
func TestWithWatchEvents(t *testing.T) {
	ns := WithWatchEvents(scheme.Codecs.WithoutConversion())
	info, ok := k8sruntime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), ContentType)
	if !ok || info.StreamSerializer == nil {
		t.Fatal("no protobuf stream serializer")
	}
	frame := watchEvent(t, "BOOKMARK", []byte("object"))
	var event metav1.WatchEvent
	got, _, err := info.StreamSerializer.Decode(frame, nil, &event)
	if err != nil || got != &event || event.Type != "BOOKMARK" || string(event.Object.Raw) != "object" {
		t.Fatalf("decoded %v %+v, error %v", got, event, err)
	}
	json, _ := k8sruntime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), "application/json")
	if _, isOurs := json.StreamSerializer.Serializer.(eventDecoder); isOurs {
		t.Error("the JSON stream serializer was wrapped")
	}
	var status metav1.Status
	if _, _, err := info.StreamSerializer.Decode([]byte{0x12}, nil, &status); err == nil {
		t.Error("a broken Status decoded through the wrapped serializer without error")
	}
}

func FuzzDecodeWatchEvent(f *testing.F) {
	f.Add(watchEvent(f, "ADDED", []byte("k8s\x00\x12\x00")))
	f.Add([]byte{0x12, 0x04, 0x0a, 0x00, 0x0a, 0x00})
	f.Add([]byte{0x13, 0x08, 0x01, 0x14})
	f.Fuzz(func(t *testing.T, data []byte) {
		typ, raw, err := DecodeWatchEvent(data)
		var want metav1.WatchEvent
		if !generated(func() error { return want.Unmarshal(data) }) {
			if err == nil {
				t.Fatalf("the generated decoder refuses %x, DecodeWatchEvent read %q %q", data, typ, raw)
			}
			return
		}
		if err != nil {
			t.Fatalf("the generated decoder reads %x, DecodeWatchEvent: %v", data, err)
		}
		if typ != want.Type || !bytes.Equal(raw, want.Object.Raw) || (raw == nil) != (want.Object.Raw == nil) {
			t.Fatalf("%x: got %q %q, the generated decoder %q %q", data, typ, raw, want.Type, want.Object.Raw)
		}
	})
}
