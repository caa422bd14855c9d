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
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fleet"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/memberwatch"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
)

// WorkersName is the Workers source's name, and the consumer it asks the registry as.
const WorkersName = "dispatch-workers"

// Registry is what Workers asks for members (pkg/memberwatch's Registry).
type Registry interface {
	Members(ctx context.Context, consumer string, sources []memberwatch.Source, inventory string) []fleet.Member
	OnChange(f func(consumer string))
}

// ClusterList is the hub's cache of MultiKueueClusters.
type ClusterList interface {
	source.Changes
	List() []*unstructured.Unstructured
}

// Workers is the dispatcher's view of MultiKueue's workers: every MultiKueueCluster's member,
// read by the hub's registry (one reflector per worker, shared with the GpuFleets that name
// it). It is a source: its changes are the names of the workers whose state or inventory
// changed.
type Workers struct {
	registry       Registry
	clusters       ClusterList
	kueueNamespace string
	inventory      string

	kick      chan struct{}
	synced    atomic.Bool
	mu        sync.RWMutex
	members   map[string]Member
	versions  map[string]string // what a member was, to tell a change
	listeners []func(string)
}

// NewWorkers is the view of clusters' workers through registry, each read on its GpuInventory
// inventory; the kubeconfig Secrets MultiKueueClusters name are in kueueNamespace.
func NewWorkers(registry Registry, clusters ClusterList, kueueNamespace, inventory string) *Workers {
	w := &Workers{registry: registry, clusters: clusters, kueueNamespace: kueueNamespace, inventory: inventory,
		kick: make(chan struct{}, 1), members: map[string]Member{}, versions: map[string]string{}}
	registry.OnChange(func(consumer string) {
		if consumer == WorkersName {
			w.poke()
		}
	})
	clusters.OnChange(func(string) { w.poke() })
	return w
}

// Name is the source's name.
func (w *Workers) Name() string { return WorkersName }

// HasSynced reports whether every MultiKueueCluster has been asked for once.
func (w *Workers) HasSynced() bool { return w.synced.Load() }

// OnChange registers f, called with a worker's name when it changes.
func (w *Workers) OnChange(f func(string)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.listeners = append(w.listeners, f)
}

// Member is the worker named by a MultiKueueCluster, as last read.
func (w *Workers) Member(name string) (Member, bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	m, ok := w.members[name]
	return m, ok
}

func (w *Workers) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Run asks the registry for the workers whenever a MultiKueueCluster or a worker changes,
// until ctx ends.
func (w *Workers) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), w.clusters.HasSynced) {
		return
	}
	w.poke()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		}
		w.refresh(ctx)
		w.synced.Store(true)
	}
}

// refresh reads every worker once and tells the listeners of those that changed.
func (w *Workers) refresh(ctx context.Context) {
	var sources []memberwatch.Source
	for _, mkc := range w.clusters.List() {
		sources = append(sources, memberwatch.FromMultiKueueCluster(mkc, w.kueueNamespace))
	}
	read := w.registry.Members(ctx, WorkersName, sources, w.inventory)
	members := make(map[string]Member, len(read))
	versions := make(map[string]string, len(read))
	for _, m := range read {
		name := m.MultiKueueCluster
		member := Member{State: m.State, Reason: m.Reason, Message: m.Message, Since: m.Since}
		version := m.State + "\x00" + m.Reason + "\x00" + m.Message
		if m.Inventory != nil {
			member.Status = &m.Inventory.Status
			version += "\x00" + m.Inventory.ResourceVersion
		}
		members[name], versions[name] = member, version
	}
	w.mu.Lock()
	var changed []string
	for name, v := range versions {
		if w.versions[name] != v {
			changed = append(changed, name)
		}
	}
	for name := range w.versions {
		if _, ok := versions[name]; !ok {
			changed = append(changed, name)
		}
	}
	w.members, w.versions = members, versions
	listeners := w.listeners
	w.mu.Unlock()
	for _, name := range changed {
		for _, f := range listeners {
			f(name)
		}
	}
}
