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

package gpuinventory

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Inventories that list the same nodes share one copy of each entry, so remembering 1,000
// inventories over the same 300 nodes keeps 300 entries, not 300,000.
func TestMemorySharesEntriesBetweenInventories(t *testing.T) {
	nodes := make([]homelabv1.GpuNodeEntry, 300)
	for i := range nodes {
		nodes[i] = homelabv1.GpuNodeEntry{Name: fmt.Sprintf("gpu-%03d", i), Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8,
			Conditions: []string{"NotReady"}}
	}
	m := newMemory()
	for i := range 1000 {
		key := cache.ObjectName{Name: fmt.Sprintf("inv-%d", i)}
		copied := make([]homelabv1.GpuNodeEntry, len(nodes)) // as each inventory's own write or read produces it
		for j := range nodes {
			copied[j] = nodes[j]
			copied[j].Conditions = []string{"NotReady"}
		}
		if i%2 == 0 {
			m.wrote(key, "h", "1", copied)
		} else {
			m.read(key, "1", copied)
		}
	}
	if len(m.entries) != len(nodes) {
		t.Fatalf("%d entries kept for 1,000 inventories over %d nodes, want %d", len(m.entries), len(nodes), len(nodes))
	}
	first, last := m.byKey[cache.ObjectName{Name: "inv-0"}], m.byKey[cache.ObjectName{Name: "inv-999"}]
	for j := range nodes {
		if first.nodes[j] != last.nodes[j] {
			t.Fatalf("entry %s is kept twice", nodes[j].Name)
		}
	}

	// A changed node gets a new entry; the lists that hold the old one keep it as it was.
	changed := []homelabv1.GpuNodeEntry{nodes[0]}
	changed[0].Ready = true
	m.wrote(cache.ObjectName{Name: "inv-0"}, "h2", "2", changed)
	old, ok := m.nodesAt(cache.ObjectName{Name: "inv-1"}, "1")
	if !ok || old[0].Ready || len(old) != len(nodes) {
		t.Errorf("inv-1's remembered list changed with inv-0's write: %+v", old[0])
	}
	now, ok := m.nodesAt(cache.ObjectName{Name: "inv-0"}, "2")
	if !ok || len(now) != 1 || !now[0].Ready {
		t.Errorf("inv-0 remembers %+v, want the written ready entry", now)
	}
	if _, ok := m.nodesAt(cache.ObjectName{Name: "inv-0"}, "1"); ok {
		t.Error("inv-0 answered for a resourceVersion it no longer holds")
	}
}

// sameEntry notices a change in any field of an entry, however deep: a field added to the
// API and not to sameEntry fails here.
func TestSameEntrySeesEveryField(t *testing.T) {
	base := homelabv1.GpuNodeEntry{Sharing: &homelabv1.GpuSharing{}, MIG: &homelabv1.MigInfo{Devices: []homelabv1.MigDevice{{}}},
		LabelsMissingSince: &metav1.Time{}, Conditions: []string{""}}
	if !sameEntry(&base, base.DeepCopy()) {
		t.Fatal("an entry differs from its copy")
	}
	paths := leafPaths(reflect.TypeFor[homelabv1.GpuNodeEntry](), nil)
	if len(paths) < 25 {
		t.Fatalf("only %d fields found", len(paths))
	}
	for _, path := range paths {
		changed := base.DeepCopy()
		setLeaf(reflect.ValueOf(changed).Elem(), path)
		if equality.Semantic.DeepEqual(&base, changed) {
			t.Fatalf("the test did not change %s", strings.Join(path, "."))
		}
		if sameEntry(&base, changed) {
			t.Errorf("sameEntry does not see a change of %s", strings.Join(path, "."))
		}
	}
	for _, drop := range []func(e *homelabv1.GpuNodeEntry){
		func(e *homelabv1.GpuNodeEntry) { e.Sharing = nil },
		func(e *homelabv1.GpuNodeEntry) { e.MIG = nil },
		func(e *homelabv1.GpuNodeEntry) { e.LabelsMissingSince = nil },
	} {
		changed := base.DeepCopy()
		drop(changed)
		if sameEntry(&base, changed) || sameEntry(changed, &base) {
			t.Errorf("sameEntry does not see a pointer set to nil: %+v", changed)
		}
	}
}

// leafPaths lists the field paths to every leaf of t: basic fields and times, through
// pointers and slices (their first element).
func leafPaths(t reflect.Type, prefix []string) [][]string {
	switch {
	case t == reflect.TypeFor[metav1.Time]():
		return [][]string{prefix}
	case t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice:
		return leafPaths(t.Elem(), prefix)
	case t.Kind() == reflect.Struct:
		var paths [][]string
		for i := range t.NumField() {
			paths = append(paths, leafPaths(t.Field(i).Type, append(slices.Clone(prefix), t.Field(i).Name))...)
		}
		return paths
	}
	return [][]string{prefix}
}

// setLeaf changes the leaf at path under v, allocating the pointers and elements on the way.
func setLeaf(v reflect.Value, path []string) {
	for {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
			continue
		case reflect.Slice:
			if v.Len() == 0 {
				v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
			}
			v = v.Index(0)
			continue
		}
		if v.Type() == reflect.TypeFor[metav1.Time]() {
			v.Set(reflect.ValueOf(metav1.Unix(1, 0)))
			return
		}
		if len(path) == 0 {
			break
		}
		v, path = v.FieldByName(path[0]), path[1:]
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int32, reflect.Int64, reflect.Int:
		v.SetInt(v.Int() + 1)
	default:
		panic("setLeaf: a field of kind " + v.Kind().String())
	}
}
