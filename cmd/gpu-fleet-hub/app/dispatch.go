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

package app

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/nominate"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/memberwatch"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
)

// kueueObjectsName is the source of Kueue's objects the dispatcher reads on the manager.
const kueueObjectsName = "kueue-workloads"

// kueueObjects is the dispatcher's informers of Kueue's objects on the hub (the MultiKueue
// manager), as a source: the controller takes its informers from it when it is made, and the
// run starts them with the other sources. Each is made as dynamicinformer makes it, whose
// package the hub must not link (nominate.Informers).
type kueueObjects struct {
	client dynamic.Interface

	mu        sync.Mutex
	informers map[schema.GroupVersionResource]cache.SharedIndexInformer
}

var _ nominate.Informers = (*kueueObjects)(nil)

func newKueueObjects(client dynamic.Interface) *kueueObjects {
	return &kueueObjects{client: client, informers: map[schema.GroupVersionResource]cache.SharedIndexInformer{}}
}

func (k *kueueObjects) Name() string { return kueueObjectsName }

// OnChange does nothing: the dispatcher handles the informers' events itself.
func (k *kueueObjects) OnChange(func(string)) {}

// HasSynced reports whether every informer taken has listed once.
func (k *kueueObjects) HasSynced() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, i := range k.informers {
		if !i.HasSynced() {
			return false
		}
	}
	return true
}

// Run runs the informers taken (before it) until ctx ends, and returns once they have
// stopped.
func (k *kueueObjects) Run(ctx context.Context) {
	k.mu.Lock()
	informers := slices.Collect(maps.Values(k.informers))
	k.mu.Unlock()
	var wg sync.WaitGroup
	for _, i := range informers {
		wg.Go(func() { i.RunWithContext(ctx) })
	}
	wg.Wait()
}

// Informer is the informer of gvr's objects in every namespace, made on its first call.
func (k *kueueObjects) Informer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	k.mu.Lock()
	defer k.mu.Unlock()
	if i, ok := k.informers[gvr]; ok {
		return i
	}
	resource := k.client.Resource(gvr)
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return resource.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return resource.Watch(ctx, opts)
		},
	}, k.client)
	i := cache.NewSharedIndexInformerWithOptions(lw, &unstructured.Unstructured{}, cache.SharedIndexInformerOptions{
		Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, ObjectDescription: gvr.String()})
	k.informers[gvr] = i
	return i
}

// dispatching reports whether the hub dispatches in this run: --dispatch, and MultiKueue
// served by the hub's API server.
func dispatching(ctx context.Context, e *env) (bool, error) {
	if !e.opts.Dispatch {
		return false, nil
	}
	return memberwatch.MultiKueueClustersServed(ctx, e.clients.core)
}

func newKueueObjectsSource(_ context.Context, e *env) (source.Source, error) {
	client, err := dynamic.NewForConfig(e.clients.config)
	if err != nil {
		return nil, fmt.Errorf("create the Kueue client: %w", err)
	}
	return newKueueObjects(client), nil
}

func newWorkersSource(_ context.Context, e *env) (source.Source, error) {
	registry, ok := builtNamed[*memberwatch.Registry](e, memberwatch.Name)
	if !ok {
		return nil, fmt.Errorf("no member registry among the sources")
	}
	clusters, ok := builtNamed[*memberwatch.MultiKueueClusters](e, memberwatch.MultiKueueClustersName)
	if !ok {
		return nil, fmt.Errorf("no MultiKueueCluster cache among the sources")
	}
	return nominate.NewWorkers(registry, clusters, e.opts.KueueNamespace, e.opts.DispatchInventory), nil
}

// newDispatchController is the dispatcher, on this run's Kueue informers and workers; nil
// when the hub does not dispatch in this run.
func newDispatchController(ctx context.Context, e *env) (*controller.Runner, error) {
	objects, ok := builtNamed[*kueueObjects](e, kueueObjectsName)
	if !ok {
		return nil, nil
	}
	workers, ok := builtNamed[*nominate.Workers](e, nominate.WorkersName)
	if !ok {
		return nil, fmt.Errorf("no dispatch workers among the sources")
	}
	client, err := dynamic.NewForConfig(e.clients.config)
	if err != nil {
		return nil, fmt.Errorf("create the Kueue client: %w", err)
	}
	_, run, err := nominate.NewController(ctx, nominate.Options{Client: client, Informers: objects, Members: workers, MemberChanges: workers,
		Recorder: e.recorder, Metrics: &e.metrics.Loops, Dispatch: e.dispatch, Nominations: e.opts.Nominations,
		Hold: e.opts.NominationHold, Timeout: e.opts.NominationTimeout, Workers: e.opts.Workers})
	return &run, err
}
