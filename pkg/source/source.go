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

// Package source is the one shape of every input the operator watches or polls: a cache of
// Nodes, Pods, claims, slices, records, inventories or the ConfigMap, Kueue's quota objects,
// Prometheus' utilisation. Each is a Source, exported by the package that reads it, and the
// operator's wiring lists them in one table (cmd/gpu-inventory-operator/app/sources.go).
// What a controller reads of a source beyond this shape, it reads through a small interface
// of its own (pkg/controller's roles); see docs/design/sources.md.
package source

import (
	"context"
	"sync"

	"k8s.io/client-go/tools/cache"
)

// Changes tells of what changed in a source.
type Changes interface {
	// OnChange registers f, called with the name of the node whose facts changed, or with ""
	// for a change that is not one node's (quota, usage, what waiting pods ask for). Register
	// before the source runs.
	OnChange(f func(key string))
	// HasSynced reports whether the source has read everything once.
	HasSynced() bool
}

// Source is one input of the operator.
type Source interface {
	Changes
	// Name names the source in logs and in the table of what the operator reads.
	Name() string
	// Run reads until ctx is done and returns once everything it started has stopped.
	Run(ctx context.Context)
}

// InformerSource is a shared informer as a Source: it runs the informer, and its changes are the
// names of the objects added, updated or deleted (the node's name, for objects named after
// their node).
type InformerSource struct {
	name     string
	informer cache.SharedIndexInformer

	once      sync.Once
	mu        sync.RWMutex
	listeners []func(string)
	err       error
}

// FromInformer is the Source of informer, named name.
func FromInformer(name string, informer cache.SharedIndexInformer) *InformerSource {
	return &InformerSource{name: name, informer: informer}
}

// Name names the source.
func (i *InformerSource) Name() string { return i.name }

// Run runs the informer until ctx is done.
func (i *InformerSource) Run(ctx context.Context) { i.informer.RunWithContext(ctx) }

// HasSynced reports whether the informer has listed once.
func (i *InformerSource) HasSynced() bool { return i.informer.HasSynced() }

// Informer is the informer, for the controller that owns its objects.
func (i *InformerSource) Informer() cache.SharedIndexInformer { return i.informer }

// OnChange registers f for the names of changed objects. It adds one handler to the informer,
// however many listeners register.
func (i *InformerSource) OnChange(f func(key string)) {
	i.once.Do(func() {
		_, i.err = i.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    i.changed,
			UpdateFunc: func(_, cur any) { i.changed(cur) },
			DeleteFunc: i.changed,
		})
	})
	i.mu.Lock()
	defer i.mu.Unlock()
	i.listeners = append(i.listeners, f)
}

// Err is why the informer took no handler (it had stopped), or nil.
func (i *InformerSource) Err() error { return i.err }

func (i *InformerSource) changed(obj any) {
	name, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		return
	}
	i.mu.RLock()
	defer i.mu.RUnlock()
	for _, f := range i.listeners {
		f(name.Name)
	}
}
