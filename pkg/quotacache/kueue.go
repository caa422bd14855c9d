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

package quotacache

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
)

// Kueue's API, as the cache looks for it.
const (
	// Group is Kueue's API group.
	Group = "kueue.x-k8s.io"
	// CRDName is the CustomResourceDefinition whose presence the cache watches (by name, so
	// that the RBAC can name it): Kueue is read while it exists.
	CRDName = "clusterqueues." + Group
)

// versions are the versions the cache reads, in order of preference.
var versions = []string{"v1beta2", "v1beta1"}

// kueueResource is one Kueue resource the cache reads: its plural, scope, and its reader.
type kueueResource struct {
	name       string
	namespaced bool
	read       func(u *unstructured.Unstructured, version string) any
}

// kueueResources are what the cache reads of Kueue; clusterqueues must be served, the others
// are read where served.
var kueueResources = []kueueResource{
	{"resourceflavors", false, func(u *unstructured.Unstructured, _ string) any { return keptOf(u, flavorOf(u)) }},
	{"clusterqueues", false, func(u *unstructured.Unstructured, v string) any { return keptOf(u, clusterQueueOf(u, v)) }},
	{"cohorts", false, func(u *unstructured.Unstructured, v string) any { return keptOf(u, cohortOf(u, v)) }},
	{"localqueues", true, func(u *unstructured.Unstructured, _ string) any { return keptOf(u, localQueueOf(u)) }},
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// clientsFor makes the cache's clients, each with config's User-Agent or client-go's default.
func clientsFor(config *rest.Config) (clients, error) {
	cfg := rest.CopyConfig(config)
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	quotaLW, err := quotaListWatch(cfg)
	if err != nil {
		return clients{}, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return clients{}, fmt.Errorf("create dynamic client: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return clients{}, fmt.Errorf("create metadata client: %w", err)
	}
	disc, err := kubeclient.New(cfg, schema.GroupVersion{Group: Group, Version: versions[0]}, nil)
	if err != nil {
		return clients{}, fmt.Errorf("create discovery client: %w", err)
	}
	return clients{quotaLW: quotaLW, dynamic: dyn, metadata: meta, discover: func(ctx context.Context, gv string) ([]string, error) {
		parsed, err := schema.ParseGroupVersion(gv)
		if err != nil {
			return nil, err
		}
		resources, err := kubeclient.Resources(ctx, disc, parsed)
		var names []string
		for _, r := range resources {
			names = append(names, r.Name)
		}
		return names, err
	}}, nil
}

// newCRDInformer watches the one CRD, metadata only, by name; any change of it is a kick.
func (c *Cache) newCRDInformer() cache.SharedIndexInformer {
	byName := fields.OneTermEqualSelector("metadata.name", CRDName).String()
	crds := c.metadata.Resource(crdResource)
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = byName
			return crds.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = byName
			return crds.Watch(ctx, opts)
		},
	}, c.metadata)
	// Keep the name and deletion mark only: a CRD applied by kubectl carries itself whole in
	// an annotation.
	trim := func(obj any) (any, error) {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
				Name: m.Name, ResourceVersion: m.ResourceVersion, DeletionTimestamp: m.DeletionTimestamp}}, nil
		}
		return obj, nil
	}
	return c.newInformer(crdKey, lw, &metav1.PartialObjectMetadata{}, trim, false, func(old, cur any) {
		if o, ok := old.(*metav1.PartialObjectMetadata); ok && cur != nil && o.ResourceVersion == cur.(*metav1.PartialObjectMetadata).ResourceVersion {
			return // a relist
		}
		select {
		case c.kick <- struct{}{}:
		default:
		}
	})
}

// crdPresent reports whether the CRD exists and is not being deleted.
func (c *Cache) crdPresent() bool {
	for _, obj := range c.crds.GetStore().List() {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok && m.Name == CRDName && m.DeletionTimestamp == nil {
			return true
		}
	}
	return false
}

// Backoff of the look for Kueue's served version while its CRD exists and discovery does
// not show it yet (the CRD is not yet Established) or fails.
const (
	firstRetry = time.Second
	maxRetry   = 10 * time.Second
)

// followKueue starts and stops Kueue's informers as the CRD comes and goes, until ctx is
// done: once the CRD watch has listed, then at every change of the CRD.
func (c *Cache) followKueue(ctx context.Context) {
	if wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return c.listed(c.crds, crdKey), nil
	}) != nil {
		return
	}
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	delay := time.Duration(0)
	for {
		if c.reconcileKueue(ctx) {
			delay = 0
			retry.Stop()
		} else {
			delay = min(max(2*delay, firstRetry), maxRetry)
			retry.Reset(delay)
		}
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		case <-retry.C:
		}
	}
}

// reconcileKueue makes Kueue's informers run, in the version served, while the CRD exists,
// and stops them when it goes. It returns false when it should look again later.
func (c *Cache) reconcileKueue(ctx context.Context) bool {
	defer func() {
		if c.currentRun() == nil {
			c.settled.Store(true)
		}
	}()
	if !c.crdPresent() {
		c.stopKueue(ctx)
		return true
	}
	version, resources, err := c.discoverKueue(ctx)
	if err != nil {
		logger(ctx).V(1).Info("Cannot discover Kueue's version; will retry", "err", err)
		return false
	}
	// Kueue's CRDs become served one by one: until all are, look again (a flavor read later
	// restarts the run with it).
	complete := len(resources) == len(kueueResources)
	run := c.currentRun()
	if run != nil && run.version == version && slices.Equal(run.resources, resources) {
		return complete
	}
	c.stopKueue(ctx)
	if version == "" || !slices.Contains(resources, "resourceflavors") {
		logger(ctx).V(1).Info("Kueue's CRDs exist but are not all served yet; will retry", "crd", CRDName, "served", resources)
		return false
	}
	c.startKueue(ctx, version, resources)
	return complete
}

// discoverKueue finds the first of versions that serves clusterqueues, and which of
// kueueResources it serves; "" when none does.
func (c *Cache) discoverKueue(ctx context.Context) (string, []string, error) {
	for _, version := range versions {
		served, err := c.discover(ctx, Group+"/"+version)
		if err != nil {
			return "", nil, err
		}
		if !slices.Contains(served, "clusterqueues") {
			continue
		}
		var resources []string
		for _, r := range kueueResources {
			if slices.Contains(served, r.name) {
				resources = append(resources, r.name)
			}
		}
		return version, resources, nil
	}
	return "", nil, nil
}

// kueueRun is one run of Kueue's informers, in one version.
type kueueRun struct {
	version   string
	resources []string
	sources   []kueueSource
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	// ready: every informer has listed once; until then the snapshot has no Kueue (a partial
	// read would look like quota missing) and changes are not told.
	ready atomic.Bool
}

type kueueSource struct {
	key      string
	informer cache.SharedIndexInformer
}

func (c *Cache) currentRun() *kueueRun {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kueue
}

// startKueue starts the informers of resources in version; the snapshot shows Kueue once
// they have listed.
func (c *Cache) startKueue(ctx context.Context, version string, resources []string) {
	runCtx, cancel := context.WithCancel(ctx)
	run := &kueueRun{version: version, resources: resources, cancel: cancel}
	for _, r := range kueueResources {
		if slices.Contains(resources, r.name) {
			run.sources = append(run.sources, c.newKueueInformer(run, r))
		}
	}
	c.mu.Lock()
	c.kueue = run
	c.mu.Unlock()
	logger(ctx).Info("Reading Kueue", "version", version, "resources", resources)
	for _, s := range run.sources {
		run.wg.Go(func() { s.informer.RunWithContext(runCtx) })
	}
	run.wg.Go(func() { c.awaitKueue(runCtx, run) })
}

// awaitKueue waits until every informer of the run has listed, or cannot (then the cache has
// synced), and then until every one has listed (then the snapshot shows Kueue).
func (c *Cache) awaitKueue(ctx context.Context, run *kueueRun) {
	every := func(ok func(kueueSource) bool) wait.ConditionWithContextFunc {
		return func(context.Context) (bool, error) {
			for _, s := range run.sources {
				if !ok(s) {
					return false, nil
				}
			}
			return true, nil
		}
	}
	if wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, every(func(s kueueSource) bool { return c.listed(s.informer, s.key) })) != nil {
		return
	}
	c.settled.Store(true)
	if wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, every(func(s kueueSource) bool { return s.informer.HasSynced() })) != nil {
		return
	}
	run.ready.Store(true)
	c.changed()
}

// newKueueInformer makes the informer of one Kueue resource in the run's version, telling of
// changes of what it keeps once the run is ready.
func (c *Cache) newKueueInformer(run *kueueRun, r kueueResource) kueueSource {
	gvr := schema.GroupVersionResource{Group: Group, Version: run.version, Resource: r.name}
	key := Group + "/" + run.version + " " + r.name
	client := c.dynamic.Resource(gvr)
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return client.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return client.Watch(ctx, opts)
		},
	}, c.dynamic)
	transform := func(obj any) (any, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			return r.read(u, run.version), nil
		}
		return obj, nil
	}
	informer := c.newInformer(key, lw, &unstructured.Unstructured{}, transform, true, func(old, cur any) {
		if old != nil && cur != nil && sameValue(old, cur) {
			return // a relist, or status churn the cache does not keep
		}
		if run.ready.Load() {
			c.changed()
		}
	})
	return kueueSource{key: key, informer: informer}
}

// stopKueue stops the running informers, if any, and forgets what they read.
func (c *Cache) stopKueue(ctx context.Context) {
	run := c.currentRun()
	if run == nil {
		return
	}
	run.cancel()
	run.wg.Wait()
	c.mu.Lock()
	c.kueue = nil
	for _, s := range run.sources {
		delete(c.problems, s.key)
	}
	c.mu.Unlock()
	if ctx.Err() == nil {
		logger(ctx).Info("Kueue is no longer read", "version", run.version)
		c.changed()
	}
}

// sameValue reports whether two kept objects keep the same.
func sameValue(a, b any) bool {
	k, ok := a.(interface{ same(other any) bool })
	return ok && k.same(b)
}
