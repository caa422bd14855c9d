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

// Package quotacache reads what quota promises of the GPUs, for pkg/quota: Kueue's
// ResourceFlavors, ClusterQueues, Cohorts and LocalQueues where the API server serves
// kueue.x-k8s.io (followed live: Kueue installed or removed while the operator runs is picked
// up), and the ResourceQuotas of all namespaces that limit a GPU resource. It keeps only
// their compact quota form, and hands it over as one Snapshot. A read the operator is not
// allowed (RBAC) is a Problem of the snapshot, not an error. See docs/design/quota-cache.md.
package quotacache

import (
	"cmp"
	"context"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/quota"
)

// Snapshot is what the cache holds at one moment. It is shared: never modify it.
type Snapshot struct {
	// Kueue is what Kueue's objects say; nil when the API server does not serve Kueue, and
	// until the cache has listed every one of its resources (while one is forbidden, say).
	Kueue *quota.Kueue
	// ResourceQuotas are the ResourceQuotas that limit a GPU resource, with only those keys,
	// by namespace and name.
	ResourceQuotas []quota.NamespaceQuota
	// Problem is one line saying what the cache cannot read and why (RBAC, or a failing
	// API server); empty when it reads everything it should.
	Problem string
}

// Cache holds the quota objects and tells of their changes. Make it with New, register with
// OnChange, then Run it.
type Cache struct {
	quotas cache.SharedIndexInformer // ResourceQuotas, as *keptQuota
	crds   cache.SharedIndexInformer // the ClusterQueue CRD, metadata only
	clients
	kick chan struct{} // the CRD changed: see whether Kueue is served

	listeners []func(node string)

	// settled: the first look for Kueue has been made and what it found is listed. synced
	// keeps HasSynced true once it has been.
	settled, synced atomic.Bool

	mu       sync.Mutex
	kueue    *kueueRun          // nil: Kueue's informers are not running
	problems map[string]problem // by what cannot be read
	dirty    bool
	snapshot Snapshot

	section *Section
}

// Options are the cache's settings.
type Options struct {
	// DRAResources are the resource names in which Kueue counts DRA GPUs (its
	// deviceClassMappings): quota given in them is compared with the nodes' DRA GPUs.
	DRAResources []corev1.ResourceName
}

// Name names the source.
func (*Cache) Name() string { return "quota" }

// clients are what the cache reads with; tests give fakes.
type clients struct {
	quotaLW  cache.ListerWatcher // of ResourceQuotas, decoded as *keptQuota
	dynamic  dynamic.Interface
	metadata metadata.Interface
	// discover lists the resources the API server serves in a group version (none, and no
	// error, when it serves no such group version).
	discover func(ctx context.Context, groupVersion string) ([]string, error)
}

// New makes the cache's clients from config: the project's protobuf client for
// ResourceQuotas, a metadata client for the CRD, a dynamic client (JSON) for Kueue's objects
// and a discovery client for Kueue's served version. Nothing is read until Run.
func New(config *rest.Config, opts Options) (*Cache, error) {
	c, err := clientsFor(config)
	if err != nil {
		return nil, err
	}
	cc := newCache(c)
	cc.section = NewSection(cc.Snapshot, cc, opts.DRAResources)
	return cc, nil
}

func newCache(c clients) *Cache {
	cc := &Cache{clients: c, kick: make(chan struct{}, 1), problems: map[string]problem{}, dirty: true}
	cc.quotas = cc.newInformer(quotaKey, cc.quotaLW, &keptQuota{}, nil, false, func(old, cur any) {
		if !sameQuota(old, cur) {
			cc.changed()
		}
	})
	cc.crds = cc.newCRDInformer()
	return cc
}

// sameQuota reports whether a change of a ResourceQuota leaves the snapshot as it is: the
// same GPU keys, or none before and after.
func sameQuota(old, cur any) bool {
	a, _ := old.(*keptQuota)
	b, _ := cur.(*keptQuota)
	return a != nil && b != nil && reflect.DeepEqual(a.Value, b.Value) ||
		(a == nil || !hasGPUKeys(a)) && (b == nil || !hasGPUKeys(b))
}

func hasGPUKeys(q *keptQuota) bool { return len(q.Value.Hard)+len(q.Value.Used) > 0 }

// OnChange registers f, called with "" whenever the snapshot changed (what it holds, or its
// Problem), from the caches' goroutines, possibly at once from two. Register before Run.
func (c *Cache) OnChange(f func(node string)) { c.listeners = append(c.listeners, f) }

// HasSynced reports whether everything the cache reads has been listed once, or cannot be
// (a Problem): the ResourceQuotas, the CRD and, where Kueue is served, Kueue's objects.
func (c *Cache) HasSynced() bool {
	if c.synced.Load() {
		return true
	}
	ok := c.listed(c.quotas, quotaKey) && c.listed(c.crds, crdKey) && c.settled.Load()
	if ok {
		c.synced.Store(true)
	}
	return ok
}

// listed: the informer has listed once, or cannot list.
func (c *Cache) listed(informer cache.SharedIndexInformer, key string) bool {
	if informer.HasSynced() {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, failed := c.problems[key]
	return failed
}

// Run reads until ctx is done, and returns once everything it started has stopped.
func (c *Cache) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { c.quotas.RunWithContext(ctx) })
	wg.Go(func() { c.crds.RunWithContext(ctx) })
	defer c.stopKueue(ctx)
	c.followKueue(ctx)
}

// Snapshot is what the cache holds now: built again only after a change.
func (c *Cache) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirty {
		c.dirty = false
		c.snapshot = c.build()
	}
	return c.snapshot
}

// build makes the snapshot; the caller holds mu.
func (c *Cache) build() Snapshot {
	s := Snapshot{Problem: problemLine(c.problems)}
	for _, obj := range c.quotas.GetStore().List() {
		if q, ok := obj.(*keptQuota); ok && hasGPUKeys(q) {
			s.ResourceQuotas = append(s.ResourceQuotas, q.Value)
		}
	}
	slices.SortFunc(s.ResourceQuotas, func(a, b quota.NamespaceQuota) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	if c.kueue != nil && c.kueue.ready.Load() {
		s.Kueue = c.kueue.snapshot()
	}
	return s
}

// changed marks the snapshot stale and tells the listeners.
func (c *Cache) changed() {
	c.mu.Lock()
	c.dirty = true
	c.mu.Unlock()
	for _, f := range c.listeners {
		f("")
	}
}

// newInformer makes an informer of lw that keeps transform's objects (nil: as decoded),
// reports its read failures as Problems under key (ignoring NotFound if told: a Kueue
// resource going away with its CRD) and calls update on every add, update and delete, with
// nil for the side that is missing.
func (c *Cache) newInformer(key string, lw cache.ListerWatcher, example runtime.Object, transform cache.TransformFunc, ignoreNotFound bool, update func(old, cur any)) cache.SharedIndexInformer {
	informer := cache.NewSharedIndexInformerWithOptions(c.checked(key, lw), example, cache.SharedIndexInformerOptions{
		ObjectDescription: key, // in the reflector's log lines
	})
	// These fail only on an informer that has started.
	if transform != nil {
		_ = informer.SetTransform(transform)
	}
	_ = informer.SetWatchErrorHandlerWithContext(c.watchError(key, informer.HasSynced, ignoreNotFound))
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { update(nil, obj) },
		UpdateFunc: update,
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			update(obj, nil)
		},
	})
	return informer
}

// snapshot is the Kueue part of a snapshot, sorted by name; its informers' stores hold
// kept objects only.
func (r *kueueRun) snapshot() *quota.Kueue {
	k := &quota.Kueue{Version: r.version}
	for _, s := range r.sources {
		for _, obj := range s.informer.GetStore().List() {
			switch o := obj.(type) {
			case *kept[quota.Flavor]:
				k.Flavors = append(k.Flavors, o.Value)
			case *kept[quota.ClusterQueue]:
				k.ClusterQueues = append(k.ClusterQueues, o.Value)
			case *kept[quota.Cohort]:
				k.Cohorts = append(k.Cohorts, o.Value)
			case *kept[quota.LocalQueue]:
				k.LocalQueues = append(k.LocalQueues, o.Value)
			}
		}
	}
	slices.SortFunc(k.Flavors, func(a, b quota.Flavor) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(k.ClusterQueues, func(a, b quota.ClusterQueue) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(k.Cohorts, func(a, b quota.Cohort) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(k.LocalQueues, func(a, b quota.LocalQueue) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return k
}

// logger is the cache's logger.
func logger(ctx context.Context) klog.Logger { return klog.FromContext(ctx).WithName("quotacache") }
