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

package kubeproto_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// everyField is every field SetObjectMeta sets.
const everyField = kubeproto.MetaName | kubeproto.MetaNamespace | kubeproto.MetaUID | kubeproto.MetaResourceVersion |
	kubeproto.MetaCreationTimestamp | kubeproto.MetaDeletionTimestamp | kubeproto.MetaInitialEventsEnd

// readMeta is what ReadObjectMeta reads of b, keeping the labels that start with "k", as a
// metav1.ObjectMeta: every field SetObjectMeta sets, and the labels.
func readMeta(b []byte) (metav1.ObjectMeta, error) {
	var meta kubeproto.ObjectMeta
	if err := kubeproto.ReadObjectMeta(b, func(key string) bool { return strings.HasPrefix(key, "k") }, &meta); err != nil {
		return metav1.ObjectMeta{}, err
	}
	var out metav1.ObjectMeta
	if err := kubeproto.SetObjectMeta(&out, &meta, everyField); err != nil {
		return out, err
	}
	for _, e := range meta.Labels {
		key, value, err := kubeproto.MapEntry(e)
		if err != nil {
			return out, err
		}
		if out.Labels == nil {
			out.Labels = map[string]string{}
		}
		out.Labels[string(key)] = string(value)
	}
	return out, nil
}

// generatedMeta is what the generated decoder reads of the fields ReadObjectMeta reads.
func generatedMeta(b []byte) (metav1.ObjectMeta, bool) {
	var full metav1.ObjectMeta
	ok := func() (ok bool) {
		defer func() {
			if recover() != nil {
				ok = false
			}
		}()
		return full.Unmarshal(b) == nil
	}()
	if !ok {
		return full, false
	}
	out := metav1.ObjectMeta{Name: full.Name, Namespace: full.Namespace, UID: full.UID, ResourceVersion: full.ResourceVersion,
		CreationTimestamp: full.CreationTimestamp, DeletionTimestamp: full.DeletionTimestamp}
	for k, v := range full.Labels {
		if strings.HasPrefix(k, "k") {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			out.Labels[k] = v
		}
	}
	if v, ok := full.Annotations[metav1.InitialEventsAnnotationKey]; ok {
		out.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: v}
	}
	return out, true
}

// Whatever the bytes, ReadObjectMeta and SetObjectMeta return or fail and never panic;
// whenever the generated decoder accepts them, they read the identity, timestamps, kept labels
// and the bookmark's annotation as that decoder does.
func FuzzReadObjectMetaLikeGenerated(f *testing.F) {
	deleted := metav1.Unix(20, 5)
	meta := metav1.ObjectMeta{Name: "n", Namespace: "ns", UID: "u", ResourceVersion: "7", Generation: 3,
		CreationTimestamp: metav1.Unix(10, 0), DeletionTimestamp: &deleted,
		Labels:          map[string]string{"kept": "1", "other": "2", "k": ""},
		Annotations:     map[string]string{"x": "y", metav1.InitialEventsAnnotationKey: "true"},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationApply}},
		OwnerReferences: []metav1.OwnerReference{{Name: "o", UID: "ou"}},
	}
	data, err := meta.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add(append(append([]byte{}, data...), data...))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := readMeta(data)
		want, ok := generatedMeta(data)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("ReadObjectMeta fails (%v) where the generated decoder does not", err)
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
			t.Fatalf("ReadObjectMeta differs from the generated decoder (-generated +ReadObjectMeta):\n%s", diff)
		}
	})
}

// A malformed timestamp is an error even when a valid one follows it, as in the generated
// decoder, which reads each occurrence.
func TestReadObjectMetaRejectsAnEarlierMalformedTimestamp(t *testing.T) {
	deleted := metav1.Unix(20, 0)
	valid, err := (&metav1.ObjectMeta{CreationTimestamp: metav1.Unix(10, 0), DeletionTimestamp: &deleted}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []byte{8, 9} { // creationTimestamp, deletionTimestamp
		malformed := []byte{field<<3 | 2, 2, 0x08, 0x80} // seconds: a varint cut short
		data := append(malformed, valid...)
		if _, ok := generatedMeta(data); ok {
			t.Fatalf("field %d: the generated decoder accepts the data", field)
		}
		var meta kubeproto.ObjectMeta
		if err := kubeproto.ReadObjectMeta(data, nil, &meta); err == nil {
			t.Errorf("field %d: no error for a malformed timestamp before a valid one", field)
		}
	}
}

// Metadata given twice merges as in the generated decoder: the later fields replace the
// earlier, labels add up.
func TestReadObjectMetaMerges(t *testing.T) {
	first, err := (&metav1.ObjectMeta{Name: "a", Namespace: "ns", Labels: map[string]string{"k1": "1", "k2": "1"}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	second, err := (&metav1.ObjectMeta{Name: "b", ResourceVersion: "9", Labels: map[string]string{"k2": "2"}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var meta kubeproto.ObjectMeta
	for _, b := range [][]byte{first, second} {
		if err := kubeproto.ReadObjectMeta(b, func(string) bool { return true }, &meta); err != nil {
			t.Fatal(err)
		}
	}
	labels := map[string]string{}
	for _, e := range meta.Labels {
		k, v, err := kubeproto.MapEntry(e)
		if err != nil {
			t.Fatal(err)
		}
		labels[string(k)] = string(v)
	}
	got := fmt.Sprintf("%s/%s@%s %v", meta.Namespace, meta.Name, meta.ResourceVersion, labels)
	// The generated Marshal writes every string, empty ones too: the second namespace is "".
	generated, ok := generatedMeta(append(first, second...)) // concatenated messages merge
	if !ok {
		t.Fatal("the generated decoder rejects the two messages")
	}
	want := fmt.Sprintf("%s/%s@%s %v", generated.Namespace, generated.Name, generated.ResourceVersion, generated.Labels)
	if got != want || want != "/b@9 map[k1:1 k2:2]" {
		t.Errorf("merged metadata %s; the generated decoder: %s", got, want)
	}
}

// SetObjectMeta sets the fields it is told to and leaves the others as they were: each
// cache keeps its own set.
func TestSetObjectMetaSetsOnlyItsFields(t *testing.T) {
	deleted := metav1.Unix(20, 0)
	data, err := (&metav1.ObjectMeta{Name: "n", Namespace: "ns", UID: "u", ResourceVersion: "7",
		CreationTimestamp: metav1.Unix(10, 0), DeletionTimestamp: &deleted,
		Annotations: map[string]string{"x": "y", metav1.InitialEventsAnnotationKey: "true"}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var meta kubeproto.ObjectMeta
	if err := kubeproto.ReadObjectMeta(data, nil, &meta); err != nil {
		t.Fatal(err)
	}
	before := metav1.ObjectMeta{Name: "old", Namespace: "old", UID: "old", ResourceVersion: "1", CreationTimestamp: metav1.Unix(1, 0),
		Annotations: map[string]string{"old": "1"}}
	full := metav1.ObjectMeta{Name: "n", Namespace: "ns", UID: "u", ResourceVersion: "7", CreationTimestamp: metav1.Unix(10, 0),
		DeletionTimestamp: &deleted, Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}
	for _, tc := range []struct {
		fields kubeproto.MetaFields
		set    func(out *metav1.ObjectMeta)
	}{
		{kubeproto.MetaName, func(out *metav1.ObjectMeta) { out.Name = full.Name }},
		{kubeproto.MetaNamespace, func(out *metav1.ObjectMeta) { out.Namespace = full.Namespace }},
		{kubeproto.MetaUID, func(out *metav1.ObjectMeta) { out.UID = full.UID }},
		{kubeproto.MetaResourceVersion, func(out *metav1.ObjectMeta) { out.ResourceVersion = full.ResourceVersion }},
		{kubeproto.MetaCreationTimestamp, func(out *metav1.ObjectMeta) { out.CreationTimestamp = full.CreationTimestamp }},
		{kubeproto.MetaDeletionTimestamp, func(out *metav1.ObjectMeta) { out.DeletionTimestamp = full.DeletionTimestamp }},
		{kubeproto.MetaInitialEventsEnd, func(out *metav1.ObjectMeta) { out.Annotations = full.Annotations }},
		{everyField, func(out *metav1.ObjectMeta) { *out = full }},
		{0, func(*metav1.ObjectMeta) {}},
	} {
		got, want := *before.DeepCopy(), *before.DeepCopy()
		tc.set(&want)
		if err := kubeproto.SetObjectMeta(&got, &meta, tc.fields); err != nil {
			t.Fatalf("fields %b: %v", tc.fields, err)
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
			t.Errorf("fields %b: (-want +got)\n%s", tc.fields, diff)
		}
	}
}

// A malformed timestamp is an error where SetObjectMeta sets it, and not looked at where it
// does not (ReadObjectMeta checks only a timestamp that a later one replaces).
func TestSetObjectMetaRejectsAMalformedTimestampItSets(t *testing.T) {
	for _, tc := range []struct {
		field byte // creationTimestamp, deletionTimestamp
		sets  kubeproto.MetaFields
	}{{8, kubeproto.MetaCreationTimestamp}, {9, kubeproto.MetaDeletionTimestamp}} {
		data := []byte{tc.field<<3 | 2, 2, 0x08, 0x80} // seconds: a varint cut short
		var meta kubeproto.ObjectMeta
		if err := kubeproto.ReadObjectMeta(data, nil, &meta); err != nil {
			t.Fatalf("field %d: ReadObjectMeta: %v", tc.field, err)
		}
		var out metav1.ObjectMeta
		if err := kubeproto.SetObjectMeta(&out, &meta, tc.sets); err == nil {
			t.Errorf("field %d: no error for a malformed timestamp", tc.field)
		}
		if err := kubeproto.SetObjectMeta(&out, &meta, everyField&^tc.sets); err != nil {
			t.Errorf("field %d: error %v for a timestamp it does not set", tc.field, err)
		}
	}
}
