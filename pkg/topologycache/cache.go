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

// Package topologycache is the topology the inventory groups its GPU nodes by: Kueue's
// Topology objects, read while the API server serves them (Kueue installed or removed while
// the operator runs is picked up), and the section of the status it feeds (status.topology,
// the TopologyFragmented condition). Without Kueue, or with spec.topology.levels, the
// section groups the nodes by node labels alone. See docs/design/sources.md.
package topologycache

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/section"
)

// Resource is Kueue's Topology resource, in the version read.
var Resource = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "topologies"}

// lookEvery is how often the cache asks whether Kueue's Topologies are served.
const lookEvery = 5 * time.Minute

// Cache holds Kueue's Topologies while they are served and tells of their changes (as "").
type Cache struct {
	dynamic  dynamic.Interface
	discover func(ctx context.Context) (bool, error)
	every    time.Duration

	looked    atomic.Bool // the first look at what is served has been made
	mu        sync.Mutex
	informer  cache.SharedIndexInformer // nil while not served
	problem   string                    // why the Topologies cannot be read
	listeners []func(string)

	section *Section
}

// Options are the section's settings.
type Options struct {
	// Keys are the label keys that name domains when neither spec.topology.levels nor a
	// Kueue Topology does (topology.DefaultLevels when empty).
	Keys []string
	// GangSizes are the gang sizes counted when spec.topology.gangSizes is unset
	// (topology.DefaultGangSizes when empty).
	GangSizes []int64
}

// New makes the cache's clients from config; nothing is read until Run.
func New(config *rest.Config, opts Options) (*Cache, error) {
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("create dynamic client: %w", err)
	}
	disc, err := kubeclient.New(config, Resource.GroupVersion(), nil)
	if err != nil {
		return nil, err
	}
	return newCache(dyn, func(ctx context.Context) (bool, error) {
		return kubeclient.Serves(ctx, disc, Resource.GroupVersion(), Resource.Resource)
	}, opts), nil
}

func newCache(dyn dynamic.Interface, discover func(context.Context) (bool, error), opts Options) *Cache {
	c := &Cache{dynamic: dyn, discover: discover, every: lookEvery}
	c.section = newSection(c.Topologies, c, opts)
	return c
}

// Name names the source.
func (*Cache) Name() string { return "topology" }

// Sections is the cache's one section: status.topology and TopologyFragmented.
func (c *Cache) Sections() []section.Section { return []section.Section{c.section} }

// OnChange registers f, called with "" when the Topologies or the problem change. Register
// before Run.
func (c *Cache) OnChange(f func(key string)) { c.listeners = append(c.listeners, f) }

// HasSynced reports whether the first look has been made and, where the Topologies are
// served, they are listed or cannot be.
func (c *Cache) HasSynced() bool {
	if !c.looked.Load() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.informer == nil || c.informer.HasSynced() || c.problem != ""
}

// Run reads until ctx is done: the Topologies while they are served, looking again every
// few minutes whether they are.
func (c *Cache) Run(ctx context.Context) {
	var stop context.CancelFunc
	var running sync.WaitGroup
	defer running.Wait()
	ticker := time.NewTicker(c.every)
	defer ticker.Stop()
	for {
		served, err := c.discover(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			klog.FromContext(ctx).V(2).Info("Cannot tell whether Kueue's Topologies are served", "err", err)
		case served && stop == nil:
			var runCtx context.Context
			runCtx, stop = context.WithCancel(ctx)
			informer := c.start()
			running.Go(func() { informer.RunWithContext(runCtx) })
		case !served && stop != nil:
			stop()
			stop = nil
			c.stopped()
		}
		c.looked.Store(true)
		select {
		case <-ctx.Done():
			if stop != nil {
				stop()
			}
			return
		case <-ticker.C:
		}
	}
}

// start makes the informer of the Topologies.
func (c *Cache) start() cache.SharedIndexInformer {
	res := c.dynamic.Resource(Resource)
	// The dynamic client says whether it streams lists as watch events (a fake does not).
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return res.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return res.Watch(ctx, opts)
		},
	}, c.dynamic)
	informer := cache.NewSharedIndexInformerWithOptions(lw, &unstructured.Unstructured{},
		cache.SharedIndexInformerOptions{ObjectDescription: "kueue.x-k8s.io/v1beta2 topologies"})
	_ = informer.SetTransform(keep) // fails only on an informer that has started
	_ = informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err)
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			c.setProblem(fmt.Sprintf("cannot read Kueue's Topologies: %v; grant get/list/watch on topologies.kueue.x-k8s.io", err))
		}
	})
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.setProblem(""); c.changed() },
		UpdateFunc: func(old, cur any) { c.changedUnlessSame(old, cur) },
		DeleteFunc: func(any) { c.changed() },
	})
	c.mu.Lock()
	c.informer, c.problem = informer, ""
	c.mu.Unlock()
	return informer
}

// stopped forgets the Topologies once Kueue no longer serves them.
func (c *Cache) stopped() {
	c.mu.Lock()
	c.informer, c.problem = nil, ""
	c.mu.Unlock()
	c.changed()
}

func (c *Cache) setProblem(p string) {
	c.mu.Lock()
	same := c.problem == p
	c.problem = p
	c.mu.Unlock()
	if !same {
		c.changed()
	}
}

func (c *Cache) changedUnlessSame(old, cur any) {
	o, ok1 := old.(*Topology)
	n, ok2 := cur.(*Topology)
	if ok1 && ok2 && o.Name == n.Name && slices.Equal(o.Levels, n.Levels) && o.Problem == n.Problem {
		return
	}
	c.changed()
}

func (c *Cache) changed() {
	for _, f := range c.listeners {
		f("")
	}
}

// Topologies are Kueue's Topologies now, sorted by name, and why they cannot be read ("" when
// they can, or are not served).
func (c *Cache) Topologies() ([]Topology, string) {
	c.mu.Lock()
	informer, problem := c.informer, c.problem
	c.mu.Unlock()
	if informer == nil {
		return nil, problem
	}
	var out []Topology
	for _, obj := range informer.GetStore().List() {
		if t, ok := obj.(*Topology); ok {
			out = append(out, *t)
		}
	}
	slices.SortFunc(out, func(a, b Topology) int { return compare(a.Name, b.Name) })
	return out, problem
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// LevelKeys lists the label keys of every Kueue Topology now, for the node cache's first
// list; none where Kueue does not serve them or they cannot be read.
func LevelKeys(ctx context.Context, config *rest.Config) ([]string, error) {
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	list, err := dyn.Resource(Resource).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var keys []string
	for i := range list.Items {
		t, _ := keep(&list.Items[i])
		if t, ok := t.(*Topology); ok {
			keys = append(keys, t.Levels...)
		}
	}
	return keys, nil
}
