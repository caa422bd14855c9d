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
	"fmt"
	"sync"

	"k8s.io/client-go/tools/cache"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
)

// NodeFacts tells a controller of nodes whose GPU facts changed beyond what the Node objects
// say: their DRA devices (pkg/slicecache), what pods hold there (pkg/allocation's Tracker),
// or their GpuNode record.
type NodeFacts interface {
	// OnChange registers f, called with a node's name whenever its facts changed; a source
	// of what pods hold calls it with "" when what waiting pods ask for changed. Register
	// before the caches start.
	OnChange(f func(node string))
	// HasSynced reports whether the caches behind the facts have been listed once.
	HasSynced() bool
}

// Merge is one NodeFacts of several, leaving out nil ones: f is registered with each source
// in the order given, and it has synced when every source has. Of none, it never calls f
// and has always synced.
func Merge(sources ...NodeFacts) NodeFacts {
	var merged merged
	for _, s := range sources {
		if s != nil {
			merged = append(merged, s)
		}
	}
	return merged
}

type merged []NodeFacts

func (m merged) OnChange(f func(node string)) {
	for _, s := range m {
		s.OnChange(f)
	}
}

func (m merged) HasSynced() bool {
	for _, s := range m {
		if !s.HasSynced() {
			return false
		}
	}
	return true
}

// Only is source (nil: nil) telling only of the nodes keep accepts when the change comes.
func Only(source NodeFacts, keep func(node string) bool) NodeFacts {
	if source == nil {
		return nil
	}
	return only{source, keep}
}

type only struct {
	NodeFacts
	keep func(node string) bool
}

func (o only) OnChange(f func(node string)) {
	o.NodeFacts.OnChange(func(node string) {
		if o.keep(node) {
			f(node)
		}
	})
}

// FactsOf is the NodeFacts of a source's OnChange registration (such as the allocation
// Tracker's), synced when every one of synced is.
func FactsOf(onChange func(f func(node string)), synced ...cache.InformerSynced) NodeFacts {
	return registration{onChange: onChange, synced: synced}
}

type registration struct {
	onChange func(f func(node string))
	synced   []cache.InformerSynced
}

func (r registration) OnChange(f func(node string)) { r.onChange(f) }

func (r registration) HasSynced() bool {
	for _, synced := range r.synced {
		if !synced() {
			return false
		}
	}
	return true
}

// ObjectFacts is the NodeFacts of an informer of objects named after their node (GpuNode
// records): every add, update and delete is a change of that node. It adds one handler to
// events, however many listeners register.
func ObjectFacts(events nodecache.EventSource, synced cache.InformerSynced) (NodeFacts, error) {
	o := &objectFacts{synced: synced}
	if _, err := events.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    o.changed,
		UpdateFunc: func(_, cur any) { o.changed(cur) },
		DeleteFunc: o.changed,
	}); err != nil {
		return nil, fmt.Errorf("add event handler: %w", err)
	}
	return o, nil
}

type objectFacts struct {
	synced    cache.InformerSynced
	mu        sync.RWMutex
	listeners []func(node string)
}

func (o *objectFacts) OnChange(f func(node string)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.listeners = append(o.listeners, f)
}

func (o *objectFacts) HasSynced() bool { return o.synced() }

func (o *objectFacts) changed(obj any) {
	name, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		return
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	for _, f := range o.listeners {
		f(name.Name)
	}
}
