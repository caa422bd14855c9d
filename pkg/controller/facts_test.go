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

package controller

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
)

// source is a NodeFacts the test drives: notify calls its listeners, synced is HasSynced.
type source struct {
	listeners []func(string)
	synced    bool
}

func (s *source) OnChange(f func(string)) { s.listeners = append(s.listeners, f) }
func (s *source) HasSynced() bool         { return s.synced }

func (s *source) notify(node string) {
	for _, f := range s.listeners {
		f(node)
	}
}

// A merged source hears every part, each part's listeners in the order they registered (the
// entry cache first), and has synced once every part has; nil parts are left out.
func TestMergeHearsEveryPartInOrder(t *testing.T) {
	devices, holdings := &source{synced: true}, &source{}
	var heard []string
	devices.OnChange(func(node string) { heard = append(heard, "entries:"+node) })
	merged := Merge(devices, nil, holdings)
	merged.OnChange(func(node string) { heard = append(heard, "controller:"+node) })
	devices.notify("dgx-1")
	holdings.notify("")
	if want := []string{"entries:dgx-1", "controller:dgx-1", "controller:"}; !slices.Equal(heard, want) {
		t.Errorf("heard %q, want %q", heard, want)
	}
	if merged.HasSynced() {
		t.Error("synced before every part has")
	}
	holdings.synced = true
	if !merged.HasSynced() {
		t.Error("not synced once every part has")
	}
	if none := Merge(nil, nil); !none.HasSynced() {
		t.Error("a merge of no sources has not synced")
	}
}

// Only passes on the changes of the nodes it keeps, at the time of the change.
func TestOnlyFiltersByNode(t *testing.T) {
	records := &source{synced: true}
	unlabelled := map[string]bool{"nuc1": true}
	var heard []string
	Only(records, func(node string) bool { return unlabelled[node] }).OnChange(func(node string) { heard = append(heard, node) })
	records.notify("nuc1")
	records.notify("dgx-1")
	unlabelled["dgx-1"] = true
	records.notify("dgx-1")
	if want := []string{"nuc1", "dgx-1"}; !slices.Equal(heard, want) {
		t.Errorf("heard %q, want %q", heard, want)
	}
	if Only(nil, nil) != nil {
		t.Error("Only of no source is a source")
	}
}

// FactsOf wraps a registration and the caches it waits for.
func TestFactsOfWaitsForEveryCache(t *testing.T) {
	tracker := &source{}
	pods, claims := false, false
	facts := FactsOf(tracker.OnChange, func() bool { return pods }, func() bool { return claims })
	var heard []string
	facts.OnChange(func(node string) { heard = append(heard, node) })
	tracker.notify("dgx-1")
	if !slices.Equal(heard, []string{"dgx-1"}) {
		t.Errorf("heard %q", heard)
	}
	pods = true
	if facts.HasSynced() {
		t.Error("synced before the claims")
	}
	claims = true
	if !facts.HasSynced() {
		t.Error("not synced once pods and claims are")
	}
}

// Every add, update and delete of a record (a tombstone too) is a change of its node's facts.
func TestObjectFactsNameTheRecordsNode(t *testing.T) {
	events := &nodecache.Events{}
	synced := false
	facts, err := ObjectFacts(events, func() bool { return synced })
	if err != nil {
		t.Fatal(err)
	}
	var first, second []string
	facts.OnChange(func(node string) { first = append(first, node) })
	facts.OnChange(func(node string) { second = append(second, node) })
	record := func(name string) *homelabv1.GpuNode {
		return &homelabv1.GpuNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	events.OnAdd(record("a"), true)
	events.OnUpdate(record("b"), record("c"))
	events.OnDelete(record("d"))
	events.OnDelete(cache.DeletedFinalStateUnknown{Key: "e", Obj: record("e")})
	want := []string{"a", "c", "d", "e"}
	if !slices.Equal(first, want) || !slices.Equal(second, want) {
		t.Errorf("heard %q and %q, want %q each", first, second, want)
	}
	if facts.HasSynced() {
		t.Error("synced before the informer")
	}
	synced = true
	if !facts.HasSynced() {
		t.Error("not synced with the informer")
	}
}
