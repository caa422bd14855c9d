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

package inventorycache

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// The reference decoders: the same object types with "nodes" and "topology" fields at a
// shallower depth, which hide the embedded ones, decoded the ordinary way.
type skipped struct{}

func (*skipped) UnmarshalJSON([]byte) error { return nil }

type statusWithoutNodes struct {
	homelabv1.GpuInventoryStatus
	Nodes    skipped `json:"nodes"`
	Topology skipped `json:"topology"`
}

type shadowInventory struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              homelabv1.GpuInventorySpec `json:"spec"`
	Status            statusWithoutNodes         `json:"status"`
}

func (s *shadowInventory) inventory() *homelabv1.GpuInventory {
	return &homelabv1.GpuInventory{ObjectMeta: s.ObjectMeta, Spec: s.Spec, Status: s.Status.GpuInventoryStatus}
}

type shadowList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []shadowInventory `json:"items"`
}

func referenceDecode(data []byte) (*homelabv1.GpuInventory, bool) {
	var shadow shadowInventory
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &shadow); err != nil || shadow.GroupVersionKind() != inventoryGVK {
		return nil, false
	}
	return shadow.inventory(), true
}

func referenceDecodeList(data []byte) (*homelabv1.GpuInventoryList, bool) {
	var shadow shadowList
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &shadow); err != nil || shadow.GroupVersionKind() != inventoryListGVK {
		return nil, false
	}
	list := &homelabv1.GpuInventoryList{ListMeta: shadow.ListMeta, Items: make([]homelabv1.GpuInventory, len(shadow.Items))}
	for i := range shadow.Items {
		list.Items[i] = *shadow.Items[i].inventory()
	}
	return list, true
}

// Decoding with the node lists cut out gives what decoding them into a skipped field gives,
// for any input the ordinary decoder reads.
func FuzzDecodeWithoutNodes(f *testing.F) {
	served := servedInventory(f)
	one, err := json.Marshal(served)
	if err != nil {
		f.Fatal(err)
	}
	list, err := json.Marshal(homelabv1.GpuInventoryList{
		TypeMeta: metav1.TypeMeta{APIVersion: homelabv1.SchemeGroupVersion.String(), Kind: "GpuInventoryList"},
		Items:    []homelabv1.GpuInventory{*served, {}, *served},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(one)
	f.Add(list)
	var indented bytes.Buffer
	_ = json.Indent(&indented, one, " ", "\t")
	f.Add(indented.Bytes())
	f.Add([]byte(`{"apiVersion":"homelab.youngju.dev/v1","kind":"GpuInventory","status":{"nodes":[{"name":"a\"}]"}],"nodes":null,"listedNodes":2},"status":{"nodes":{}}}`))
	f.Add([]byte(`{"kind":"GpuInventoryList","apiVersion":"homelab.youngju.dev/v1","items":[{"status":{"nodes":[1,2]}}],"items":[]}`))
	f.Add([]byte(`{"apiVersion":"homelab.youngju.dev/v1","kind":"GpuInventory","status":"none"}`))
	f.Add([]byte(`{"apiVersion":"homelab.youngju.dev/v1","kind":"GpuInventory","status":{"nodes":[}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if json.Valid(data) && bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("{")) {
			for _, items := range []bool{false, true} {
				if _, ok := cutNodeLists(data, items); !ok {
					t.Fatalf("a valid object was not scanned (items %v): %q", items, data)
				}
			}
		}
		if want, ok := referenceDecode(data); ok {
			got, ok := decodeWithoutNodes(data)
			if !ok {
				t.Fatalf("the reference decodes %q, the cutting decoder does not", data)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("%q (-reference +cut):\n%s", data, diff)
			}
		}
		if want, ok := referenceDecodeList(data); ok {
			got, ok := decodeListWithoutNodes(data)
			if !ok {
				t.Fatalf("the reference decodes the list %q, the cutting decoder does not", data)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("list %q (-reference +cut):\n%s", data, diff)
			}
		}
	})
}

// A JSON watch event is read in place as the ordinary decoder reads it; anything else is left
// to that decoder.
func TestWatchEvent(t *testing.T) {
	for _, tc := range []struct {
		name, in, typ, object string
		ok                    bool
	}{
		{"as the API server writes it", `{"type":"MODIFIED","object":{"a":[1,"}"]}}` + "\n", "MODIFIED", `{"a":[1,"}"]}`, true},
		{"object first, spaces", ` { "object" : {} , "type" : "ADDED" } `, "ADDED", `{}`, true},
		{"an unusual type is still read", `{"type":"RESYNC","object":{}}`, "RESYNC", `{}`, true},
		{"escaped type: the ordinary decoder's", `{"type":"ADD\u0045D","object":{}}`, "", "", false},
		{"a third member", `{"type":"ADDED","object":{},"extra":1}`, "", "", false},
		{"no object", `{"type":"ADDED"}`, "", "", false},
		{"type not a string", `{"type":1,"object":{}}`, "", "", false},
		{"truncated", `{"type":"ADDED","object":{"a":"}`, "", "", false},
		{"trailing bytes", `{"type":"ADDED","object":{}} x`, "", "", false},
		{"not an object", `["ADDED",{}]`, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typ, object, ok := watchEvent([]byte(tc.in))
			if ok != tc.ok || typ != tc.typ || string(object) != tc.object {
				t.Errorf("watchEvent(%s) = %q, %s, %v; want %q, %s, %v", tc.in, typ, object, ok, tc.typ, tc.object, tc.ok)
			}
		})
	}
}

// Whatever watchEvent reads, the ordinary decoder reads the same way.
func FuzzWatchEvent(f *testing.F) {
	f.Add([]byte(`{"type":"MODIFIED","object":{"metadata":{"name":"x"}}}`))
	f.Add([]byte(`{"object":"x","type":"ADDED"}`))
	f.Add([]byte(`{"type":"ADDED","type":"DELETED","object":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		typ, object, ok := watchEvent(data)
		if !ok {
			return
		}
		var want struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := json.Unmarshal(data, &want); err != nil {
			if json.Valid(data) {
				t.Fatalf("%q: read as %q, %s; the ordinary decoder fails: %v", data, typ, object, err)
			}
			return // invalid JSON: the object's decoder reports it
		}
		if typ != want.Type || !bytes.Equal(object, want.Object) {
			t.Fatalf("%q: read as %q, %s; the ordinary decoder reads %q, %s", data, typ, object, want.Type, want.Object)
		}
	})
}
