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

package gpunode

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned/scheme"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/intern"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// draRecord is a record of a DRA node with 8 GPUs in the operator's shape, with managed
// fields, in JSON as the API server sends it; its hash annotation names some other spec (as
// after an edit), so the cache keeps it whole.
func draRecord(t testing.TB, name string) []byte {
	t.Helper()
	r := &homelabv1.GpuNode{
		TypeMeta: metav1.TypeMeta{APIVersion: homelabv1.SchemeGroupVersion.String(), Kind: "GpuNode"},
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: "6b1f0c8e-3a5d-4e8f-9c1d-2b7a9e4f6c3d", ResourceVersion: "1234567",
			Annotations:     map[string]string{homelabv1.IdentityHashAnnotation: "3f2a9b8c7d6e5f4a3b2c1d0e9f8a7b6c"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name, UID: "0b1f0c8e-3a5d-4e8f-9c1d-2b7a9e4f6c3d"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: homelabv1.FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)}}},
		Spec: homelabv1.GpuNodeSpec{Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8, GpuMemoryMiB: 81559, Family: "hopper",
			ComputeCapability: "9.0", DriverVersion: "550.54.15", CudaVersion: "12.4", Source: "dra", Conditions: []string{"GpuThermalWatch"}},
	}
	for i := range 8 {
		r.Spec.Devices = append(r.Spec.Devices, homelabv1.GpuDevice{Name: fmt.Sprintf("gpu-%d", i), Type: "gpu",
			UUID: fmt.Sprintf("GPU-%s-%d", name, i), PCIBusID: fmt.Sprintf("0000:%02x:00.0", i*16), MemoryMiB: 81559})
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// consistentDRARecord is draRecord as the controller writes it: its annotation is its spec's
// hash.
func consistentDRARecord(t testing.TB, name string) []byte {
	t.Helper()
	r := decodeRecord(t, draRecord(t, name))
	r.Annotations[homelabv1.IdentityHashAnnotation] = inventory.IdentityHash(r.Spec)
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func decodeRecord(t testing.TB, data []byte) *homelabv1.GpuNode {
	t.Helper()
	r := &homelabv1.GpuNode{}
	if err := k8sruntime.DecodeInto(scheme.Codecs.UniversalDecoder(), data, r); err != nil {
		t.Fatal(err)
	}
	return r
}

// The transform drops the managed fields and changes nothing else a reader sees, while two
// records share the strings they repeat; what each has of its own stays its own.
func TestRecordTransformSharesRepeatedStrings(t *testing.T) {
	a, b := decodeRecord(t, draRecord(t, "dgx-a")), decodeRecord(t, draRecord(t, "dgx-b"))
	want := a.DeepCopy()
	want.ManagedFields = nil
	for _, r := range []*homelabv1.GpuNode{a, b} {
		if _, err := TrimRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("the transform changed the record (-want +got):\n%s", diff)
	}
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	for what, pair := range map[string][2]string{
		"apiVersion":       {a.APIVersion, b.APIVersion},
		"owner kind":       {a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind},
		"product":          {a.Spec.Product, b.Spec.Product},
		"driver version":   {a.Spec.DriverVersion, b.Spec.DriverVersion},
		"device name":      {a.Spec.Devices[3].Name, b.Spec.Devices[3].Name},
		"device type":      {a.Spec.Devices[0].Type, b.Spec.Devices[7].Type},
		"condition":        {a.Spec.Conditions[0], b.Spec.Conditions[0]},
		"annotation's key": {keyOf(a.Annotations), keyOf(b.Annotations)},
	} {
		if !same(pair[0], pair[1]) {
			t.Errorf("%s %q: two copies", what, pair[0])
		}
	}
	if same(a.Spec.Devices[0].UUID, b.Spec.Devices[0].UUID) || a.Spec.Devices[0].UUID == b.Spec.Devices[0].UUID {
		t.Errorf("device UUIDs %q and %q", a.Spec.Devices[0].UUID, b.Spec.Devices[0].UUID)
	}
	if _, err := TrimRecord(&metav1.PartialObjectMetadata{}); err != nil {
		t.Errorf("another object: %v", err)
	}
}

func keyOf(m map[string]string) string {
	for k := range m {
		return k
	}
	return ""
}

// The cache keeps a summary of a record as the controller writes it, and only of such a
// record whose node is not missing: a record someone edited, or the memory of a node whose
// sources are gone, is kept whole. The lister expands the summary into what it keeps.
func TestRecordTransformSummarizesOnlyRecordsAsWritten(t *testing.T) {
	consistent := decodeRecord(t, consistentDRARecord(t, "dgx-a"))
	want := consistent.DeepCopy()
	missing := decodeRecord(t, consistentDRARecord(t, "dgx-b"))
	missing.Spec.MissingSince = &metav1.Time{}
	missing.Annotations[homelabv1.IdentityHashAnnotation] = inventory.IdentityHash(missing.Spec)
	edited := decodeRecord(t, consistentDRARecord(t, "dgx-c"))
	edited.Spec.Devices[0].UUID = "GPU-edited"
	labelled := decodeRecord(t, consistentDRARecord(t, "dgx-d"))
	labelled.Labels = map[string]string{"team": "a"}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, r := range []*homelabv1.GpuNode{consistent, missing, edited, labelled} {
		obj, err := TrimRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := indexer.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	lister := recordLister{indexer}
	got, err := lister.Get("dgx-a")
	if err != nil || !Summarized(got) {
		t.Fatalf("the record as written: %+v, %v; want its summary", got, err)
	}
	want.ManagedFields = nil
	want.Annotations[summarized] = ""
	want.Spec = homelabv1.GpuNodeSpec{Product: want.Spec.Product, GpuCount: want.Spec.GpuCount, GpuMemoryMiB: want.Spec.GpuMemoryMiB,
		Family: want.Spec.Family, ComputeCapability: want.Spec.ComputeCapability, Source: want.Spec.Source}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the expanded summary (-want +got):\n%s", diff)
	}
	for _, name := range []string{"dgx-b", "dgx-c", "dgx-d"} {
		if r, err := lister.Get(name); err != nil || Summarized(r) || len(r.Spec.Devices) != 8 {
			t.Errorf("record %s: %+v, %v; want it whole, with its 8 devices", name, r, err)
		}
	}
	if all, _ := lister.List(labels.Everything()); len(all) != 4 {
		t.Errorf("List returned %d records, want 4", len(all))
	}
	if _, err := lister.Get("dgx-z"); !apierrors.IsNotFound(err) {
		t.Errorf("Get of no record: %v, want NotFound", err)
	}
}

// Sharing the repeated strings saves a good part of what a record costs in the cache, and a
// summary most of what is left.
func TestRecordBytes(t *testing.T) {
	data := draRecord(t, "dgx-0001")
	const n = 2000
	measure := func(keep func(r *homelabv1.GpuNode) any) uint64 {
		kept := make([]any, n)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range kept {
			kept[i] = keep(decodeRecord(t, data))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(kept)
		return (after.HeapAlloc - before.HeapAlloc) / n
	}
	stripped := measure(func(r *homelabv1.GpuNode) any { r.ManagedFields = nil; return r })
	trim := func(r *homelabv1.GpuNode) any { obj, _ := TrimRecord(r); return obj }
	kept := measure(trim)
	t.Logf("a DRA record of 8 GPUs without managed fields: %d bytes; with the repeated strings shared: %d", stripped, kept)
	if kept > stripped*19/20 {
		t.Errorf("the record cache keeps %d bytes per record, %d without sharing strings; want a twentieth less at least", kept, stripped)
	}
	data = consistentDRARecord(t, "dgx-0001")
	summary := measure(trim)
	t.Logf("the same record as the controller writes it, kept as a summary: %d bytes", summary)
	if summary > 128 {
		t.Errorf("the record cache keeps %d bytes of a record it summarizes (%d of one it keeps whole); want 128 at most: the name and one allocation", summary, kept)
	}
}

// Records written with ever new values keep their values (the shared table's bounds are
// the intern package's).
func TestSharedStringsKeepEverNewValues(t *testing.T) {
	for i := range 30_000 {
		r := &homelabv1.GpuNode{Spec: homelabv1.GpuNodeSpec{Product: fmt.Sprintf("EVER-NEW-%d", i)}}
		if _, err := TrimRecord(r); err != nil || r.Spec.Product != fmt.Sprintf("EVER-NEW-%d", i) {
			t.Fatalf("product %q, %v", r.Spec.Product, err)
		}
	}
	if got := sharedStrings.Bytes(); got > intern.MaxBytes {
		t.Errorf("the shared strings hold %d bytes; want at most %d", got, intern.MaxBytes)
	}
}

// A summary keeps the record's UIDs, resourceVersion and hash packed when the API server
// spells them as it does, and as they came otherwise: either way the lister gives them back
// exactly.
func TestRecordSummaryGivesIDsBackAsTheyCame(t *testing.T) {
	for _, tc := range []struct {
		name, uid, ownerUID, rv string
		packed                  bool
	}{
		{"as the API server spells them", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "8796a5b4-c3d2-e1f0-0f1e-2d3c4b5a6978", "4182991", true},
		{"an upper-case UID", "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0", "8796a5b4-c3d2-e1f0-0f1e-2d3c4b5a6978", "4182991", false},
		{"an owner UID of another shape", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "uid-dgx-a", "4182991", false},
		{"a resourceVersion with a leading zero", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "8796a5b4-c3d2-e1f0-0f1e-2d3c4b5a6978", "04182991", false},
		{"a resourceVersion that is no number", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "8796a5b4-c3d2-e1f0-0f1e-2d3c4b5a6978", "rv-7", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := decodeRecord(t, consistentDRARecord(t, "dgx-a"))
			r.UID, r.OwnerReferences[0].UID, r.ResourceVersion = types.UID(tc.uid), types.UID(tc.ownerUID), tc.rv
			s := summaryOf(r)
			if s == nil {
				t.Fatal("no summary of a record as written")
			}
			if packed := s.odd == nil; packed != tc.packed {
				t.Errorf("kept packed: %t, want %t", packed, tc.packed)
			}
			got := s.expand()
			if got.UID != r.UID || got.OwnerReferences[0].UID != r.OwnerReferences[0].UID || got.ResourceVersion != r.ResourceVersion ||
				got.Annotations[homelabv1.IdentityHashAnnotation] != r.Annotations[homelabv1.IdentityHashAnnotation] {
				t.Errorf("expanded: uid %q, owner %q, resourceVersion %q, hash %q; want %q, %q, %q, %q", got.UID, got.OwnerReferences[0].UID,
					got.ResourceVersion, got.Annotations[homelabv1.IdentityHashAnnotation], r.UID, r.OwnerReferences[0].UID, r.ResourceVersion,
					r.Annotations[homelabv1.IdentityHashAnnotation])
			}
			if meta := s.GetObjectMeta(); meta.GetResourceVersion() != tc.rv || meta.GetName() != "dgx-a" {
				t.Errorf("the store reads name %q, resourceVersion %q", meta.GetName(), meta.GetResourceVersion())
			}
		})
	}
}
