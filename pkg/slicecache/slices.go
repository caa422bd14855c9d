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

package slicecache

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"reflect"
	"slices"
	"sync"
	"time"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// GroupVersion is the API the cache reads ResourceSlices from.
const GroupVersion = "resource.k8s.io/v1"

// Served reports whether the API server serves resourceslices in resource.k8s.io/v1, asking
// on c (a REST client of any group version). A server without the group version (before
// Kubernetes 1.34, or with it turned off) answers NotFound: false, with no error. Other
// errors are returned.
func Served(ctx context.Context, c rest.Interface) (bool, error) {
	return kubeclient.Serves(ctx, c, resourcev1.SchemeGroupVersion, "resourceslices")
}

func nodeOf(obj any) string {
	if s, ok := obj.(*compactSlice); ok {
		return s.node
	}
	return ""
}

// Cache holds the gpu.nvidia.com ResourceSlices, each as a compactSlice, and each node's
// DeviceFacts.
type Cache struct {
	informer     cache.SharedIndexInformer
	registration cache.ResourceEventHandlerRegistration
	listeners    []func(node string)

	// Written only by the event handler, under mu. slices maps a slice's key to the node it
	// was last seen on, so that a deletion (even one known only from a tombstone) and a move
	// update the right nodes; nodes maps a node to the keys of the slices last seen on it,
	// the index its facts are computed from (an informer index costs a set per node); facts
	// maps a node to its facts, read by every inventory computation (once per node).
	mu     sync.RWMutex
	slices map[string]string
	nodes  map[string][]string
	facts  map[string]*held
}

// held is a node's facts as the cache keeps them: without the device list, which only a
// record's write reads (Devices lists it again), and with a digest of it, so that a change
// of the devices alone is still a change.
type held struct {
	facts   *inventory.DeviceFacts
	devices [sha256.Size]byte
}

// factsOf computes a node's facts from all its slices.
var factsOf = inventory.DeviceFactsOf

// NewForConfig builds the cache on a client of its own (kubeproto.NewClient), as the operator runs it:
// protobuf over HTTP/1.1 on a connection of its own, watch events read in place, and each
// ResourceSlice decoded straight into its compact form (decodeSlice), so that the informer's
// events are compactSlices already.
func NewForConfig(config *rest.Config) (*Cache, error) {
	t := &trimmer{}
	client, err := kubeproto.NewClient(config, t.codec())
	if err != nil {
		return nil, err
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = driverSelector
			return client.Get().Resource("resourceslices").VersionedParams(&opts, kubeclient.ParameterCodec).Do(ctx).Get()
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = driverSelector
			opts.Watch = true
			req := client.Get().Resource("resourceslices").VersionedParams(&opts, kubeclient.ParameterCodec)
			if opts.TimeoutSeconds != nil {
				req = req.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
			}
			return req.Watch(ctx)
		},
	}
	return newCache(lw, &compactSlice{}, t), nil
}

// driverSelector keeps the slices of the NVIDIA driver.
var driverSelector = fields.OneTermEqualSelector("spec.driver", inventory.DRADriver).String()

// newCache builds the cache on lw, whose events carry objects of example's type.
func newCache(lw cache.ListerWatcher, example runtime.Object, t *trimmer) *Cache {
	informer := cache.NewSharedIndexInformerWithOptions(lw, example, cache.SharedIndexInformerOptions{
		ResyncPeriod:      0,                   // facts change only with slices
		ObjectDescription: "*v1.ResourceSlice", // in the reflector's log lines
	})
	_ = informer.SetTransform(t.Trim) // fails only once the informer has started
	c := &Cache{informer: informer, slices: map[string]string{}, nodes: map[string][]string{}, facts: map[string]*held{}}
	// Registering fails only on a stopped informer; this one has not started.
	c.registration, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.sliceSeen(obj) },
		UpdateFunc: func(old, cur any) {
			if !c.unchanged(old, cur) {
				c.sliceSeen(cur)
			}
		},
		DeleteFunc: c.sliceDeleted,
	})
	return c
}

// Informer is the cache's informer, started by the caller (Run).
func (c *Cache) Informer() cache.SharedIndexInformer { return c.informer }

// HasSynced reports whether the initial list is cached and every node's facts computed.
func (c *Cache) HasSynced() bool {
	return c.informer.HasSynced() && c.registration != nil && c.registration.HasSynced()
}

// Facts returns a node's facts, without the device list (see Devices): nil when it has no
// gpu.nvidia.com slices. The facts are never modified: a change yields new ones.
func (c *Cache) Facts(node string) *inventory.DeviceFacts {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if h := c.facts[node]; h != nil {
		return h.facts
	}
	return nil
}

// Devices lists the devices of a node's slices, built anew from the cached slices: the
// records controller asks for them only when it writes a node's record.
func (c *Cache) Devices(node string) []homelabv1.GpuDevice {
	if facts := c.build(node); facts != nil {
		return facts.Devices
	}
	return nil
}

// build computes a node's facts, device list included, from its cached slices expanded back
// into ResourceSlices for DeviceFactsOf; nil when it has none.
func (c *Cache) build(node string) *inventory.DeviceFacts {
	var cached []*compactSlice
	c.mu.RLock()
	for _, key := range c.nodes[node] {
		// The store may be ahead of the handler: a slice gone or moved is left out until
		// its event comes.
		obj, ok, _ := c.informer.GetIndexer().GetByKey(key)
		if s, isSlice := obj.(*compactSlice); ok && isSlice && s.node == node {
			cached = append(cached, s)
		}
	}
	c.mu.RUnlock()
	if len(cached) == 0 {
		return nil
	}
	slices := make([]*resourcev1.ResourceSlice, len(cached))
	for i, s := range cached {
		slices[i] = s.expand()
	}
	return factsOf(slices)
}

// OnChange registers f, called with a node's name from the informer's goroutine whenever
// that node's Facts changed (new facts, or nil). Register before the informer starts.
func (c *Cache) OnChange(f func(node string)) {
	c.listeners = append(c.listeners, f)
}

// sliceSeen handles an added or updated slice: its node's facts, and those of the node it
// was on before if it moved, are computed again.
func (c *Cache) sliceSeen(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return // not an object: nothing to index
	}
	node := nodeOf(obj)
	before := c.place(key, node)
	if before != "" && before != node {
		c.recompute(before)
	}
	if node != "" {
		c.recompute(node)
	}
}

// unchanged reports whether an update leaves its node's facts as they are: the node's only
// slice, a pool of one slice, republished with the same devices (a driver bumps the
// generation whenever it publishes again).
func (c *Cache) unchanged(old, cur any) bool {
	a, ok := old.(*compactSlice)
	b, ok2 := cur.(*compactSlice)
	if !ok || !ok2 || a.node == "" || a.node != b.node || a.driver != b.driver || a.pool.name != b.pool.name ||
		a.pool.resourceSliceCount != 1 || b.pool.resourceSliceCount != 1 || !slices.EqualFunc(a.devices, b.devices, sameDevice) ||
		!reflect.DeepEqual(a.counterSets, b.counterSets) {
		return false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.nodes[b.node]) == 1
}

func sameDevice(a, b device) bool {
	return a.name == b.name && a.uuid == b.uuid && a.parentUUID == b.parentUUID && a.pciBusID == b.pciBusID &&
		(a.model == b.model || a.model != nil && b.model != nil && *a.model == *b.model) &&
		(a.more == b.more || a.more != nil && b.more != nil && a.more.uuid == b.more.uuid &&
			a.more.parentUUID == b.more.parentUUID && a.more.pciBusID == b.more.pciBusID && slices.Equal(a.more.taints, b.more.taints))
}

func (c *Cache) sliceDeleted(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	if node := c.place(key, ""); node != "" {
		c.recompute(node)
	}
}

// place records that the slice of key is on node ("": on none, or deleted) and returns
// the node it was on before.
func (c *Cache) place(key, node string) (before string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	before = c.slices[key]
	if before == node {
		return before
	}
	if before != "" {
		delete(c.slices, key)
		if keys := slices.DeleteFunc(c.nodes[before], func(k string) bool { return k == key }); len(keys) > 0 {
			c.nodes[before] = keys
		} else {
			delete(c.nodes, before)
		}
	}
	if node != "" {
		c.slices[key] = node
		c.nodes[node] = append(c.nodes[node], key)
	}
	return before
}

// recompute builds a node's facts from its cached slices and tells the listeners if they
// differ from the last ones; equal facts keep the old pointer.
func (c *Cache) recompute(node string) {
	now := &held{}
	if facts := c.build(node); facts != nil {
		devices, _ := json.Marshal(facts.Devices) // strings and integers: cannot fail
		now.devices = sha256.Sum256(devices)
		facts.Devices = nil
		now.facts = facts
	}
	c.mu.RLock()
	old := c.facts[node]
	c.mu.RUnlock()
	if old == nil {
		old = &held{}
	}
	changed := old.devices != now.devices || !reflect.DeepEqual(old.facts, now.facts)
	if changed {
		c.mu.Lock()
		if now.facts == nil {
			delete(c.facts, node)
		} else {
			c.facts[node] = now
		}
		c.mu.Unlock()
		for _, f := range c.listeners {
			f(node)
		}
	}
}
