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

package source

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// fake is a Changes the test drives: notify calls its listeners, synced is HasSynced.
type fake struct {
	listeners []func(string)
	synced    bool
}

func (s *fake) OnChange(f func(string)) { s.listeners = append(s.listeners, f) }
func (s *fake) HasSynced() bool         { return s.synced }

func (s *fake) notify(key string) {
	for _, f := range s.listeners {
		f(key)
	}
}

// A merged source hears every part, each part's listeners in the order they registered (the
// entry cache first), and has synced once every part has; nil parts are left out.
func TestMergeHearsEveryPartInOrder(t *testing.T) {
	devices, holdings := &fake{synced: true}, &fake{}
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

// Only passes on the changes of the keys it keeps, at the time of the change.
func TestOnlyFiltersByKey(t *testing.T) {
	records := &fake{synced: true}
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

// Of wraps a registration and the caches it waits for.
func TestOfWaitsForEveryCache(t *testing.T) {
	tracker := &fake{}
	pods, claims := false, false
	changes := Of(tracker.OnChange, func() bool { return pods }, func() bool { return claims })
	var heard []string
	changes.OnChange(func(node string) { heard = append(heard, node) })
	tracker.notify("dgx-1")
	if !slices.Equal(heard, []string{"dgx-1"}) {
		t.Errorf("heard %q", heard)
	}
	pods = true
	if changes.HasSynced() {
		t.Error("synced before the claims")
	}
	claims = true
	if !changes.HasSynced() {
		t.Error("not synced once pods and claims are")
	}
}

// listThenWatch makes the reflector list, then watch, as a fake watch cannot stream a list.
type listThenWatch struct{ *cache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// An informer source runs its informer, syncs with it, and tells every listener the name of
// each record added, updated or deleted, through one handler.
func TestInformerNamesTheChangedObjects(t *testing.T) {
	w := watch.NewFake()
	record := func(name, rv string) *homelabv1.GpuNode {
		return &homelabv1.GpuNode{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &homelabv1.GpuNodeList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: []homelabv1.GpuNode{*record("a", "1")}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return w, nil },
	}
	s := FromInformer("records", cache.NewSharedIndexInformer(listThenWatch{lw}, &homelabv1.GpuNode{}, 0, cache.Indexers{}))
	heard, second := make(chan string, 10), make(chan string, 10)
	s.OnChange(func(name string) { heard <- name })
	s.OnChange(func(name string) { second <- name })
	if s.Name() != "records" || s.HasSynced() {
		t.Fatalf("before Run: name %q, synced %t", s.Name(), s.HasSynced())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if !cache.WaitForCacheSync(ctx.Done(), s.HasSynced) {
		t.Fatal("never synced")
	}
	w.Modify(record("a", "2"))
	w.Add(record("b", "3"))
	w.Delete(record("a", "4"))
	var got []string
	for range 4 {
		got = append(got, <-heard+"/"+<-second)
	}
	if want := []string{"a/a", "a/a", "b/b", "a/a"}; !slices.Equal(got, want) {
		t.Errorf("heard %q, want %q", got, want)
	}
	if s.Err() != nil {
		t.Errorf("Err = %v", s.Err())
	}
}
