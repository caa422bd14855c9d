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

package inventory

import (
	"reflect"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
)

// setField gives v a value that is not its type's zero.
func setField(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x-" + v.Type().Name())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		setField(t, v.Index(0))
	case reflect.Pointer:
		if v.Type() == reflect.TypeFor[*metav1.Time]() {
			v.Set(reflect.ValueOf(&metav1.Time{Time: time.Unix(1, 0)}))
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		setField(t, v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			setField(t, v.Field(i))
		}
	default:
		t.Fatalf("no value for a field of kind %s", v.Kind())
	}
}

// Every field of an entry survives the cache's compact form, alone and with all the others
// set: a field added to GpuNodeEntry and not to compactEntry fails here.
func TestCompactEntryKeepsEveryField(t *testing.T) {
	typ := reflect.TypeFor[homelabv1.GpuNodeEntry]()
	var all homelabv1.GpuNodeEntry
	for i := range typ.NumField() {
		var one homelabv1.GpuNodeEntry
		setField(t, reflect.ValueOf(&one).Elem().Field(i))
		setField(t, reflect.ValueOf(&all).Elem().Field(i))
		c := compact(&one)
		var got homelabv1.GpuNodeEntry
		c.expand(&got)
		if !reflect.DeepEqual(got, one) {
			t.Errorf("%s: kept as %+v, want %+v", typ.Field(i).Name, got, one)
		}
	}
	c := compact(&all)
	var got homelabv1.GpuNodeEntry
	c.expand(&got)
	if !reflect.DeepEqual(got, all) {
		t.Errorf("every field set: kept as %+v, want %+v", got, all)
	}
	empty := []string{}
	c = compact(&homelabv1.GpuNodeEntry{Conditions: empty})
	if c.expand(&got); got.Conditions == nil {
		t.Error("an empty list came back as none")
	}
}

// The EntryCache keeps a GPU node of a fleet in a few hundred bytes: it holds every GPU node
// of the cluster for as long as the operator runs.
func TestEntryCacheBytes(t *testing.T) {
	const n = 2000
	var nodes []*corev1.Node
	for i, node := range fleetNodes(2 * n) {
		if fixtures.IsFleetGPUNode(i) {
			nodes = append(nodes, node)
		}
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cache := NewEntryCache().Notified()
	inv, _ := cache.Compute(nodes, nil, t0)
	inv.Release()
	runtime.GC()
	runtime.GC() // a second time: the first leaves the released buffer in the pool's victim cache
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(cache)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / int64(len(nodes))
	t.Logf("%d GPU nodes: %d bytes each in the entry cache", len(nodes), per)
	if per > 600 {
		t.Errorf("the entry cache keeps %d bytes per GPU node; want 600 at most (it was 740 when it kept each entry whole)", per)
	}
}
