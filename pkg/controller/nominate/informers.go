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

package nominate

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// KueueObjectsName is the name of the source of Kueue's objects the dispatcher reads.
const KueueObjectsName = "kueue-workloads"

// Informers gives the controller an informer per Kueue resource it reads on the manager.
type Informers interface {
	Informer(gvr schema.GroupVersionResource) cache.SharedIndexInformer
}

// KueueObjects is the dispatcher's informers of Kueue's objects on the manager, as a source:
// the controller takes its informers from it when it is made, and the source runs them.
// Objects are kept without their managedFields.
type KueueObjects struct {
	client dynamic.Interface

	mu        sync.Mutex
	informers map[schema.GroupVersionResource]cache.SharedIndexInformer
}

// NewKueueObjects makes the informers' source on client (the manager's).
func NewKueueObjects(client dynamic.Interface) *KueueObjects {
	return &KueueObjects{client: client, informers: map[schema.GroupVersionResource]cache.SharedIndexInformer{}}
}

// Name is the source's name.
func (k *KueueObjects) Name() string { return KueueObjectsName }

// OnChange does nothing: the controller handles the informers' events itself.
func (k *KueueObjects) OnChange(func(string)) {}

// HasSynced reports whether every informer taken has listed once.
func (k *KueueObjects) HasSynced() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, i := range k.informers {
		if !i.HasSynced() {
			return false
		}
	}
	return true
}

// Run runs the informers taken until ctx ends, and returns once they have stopped.
func (k *KueueObjects) Run(ctx context.Context) {
	k.mu.Lock()
	var wg sync.WaitGroup
	for _, i := range k.informers {
		wg.Go(func() { i.RunWithContext(ctx) })
	}
	k.mu.Unlock()
	wg.Wait()
}

// Informer is the informer of gvr, made on first use; take every one before Run.
func (k *KueueObjects) Informer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	k.mu.Lock()
	defer k.mu.Unlock()
	if i, ok := k.informers[gvr]; ok {
		return i
	}
	client := k.client.Resource(gvr)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return client.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return client.Watch(ctx, opts)
		},
	}
	// The client, not the resource, says whether it serves watch lists (a fake does not).
	i := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, k.client), &unstructured.Unstructured{},
		cache.SharedIndexInformerOptions{Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, ObjectDescription: gvr.String()})
	_ = i.SetTransform(func(obj any) (any, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			u.SetManagedFields(nil)
		}
		return obj, nil
	})
	k.informers[gvr] = i
	return i
}
