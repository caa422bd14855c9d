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

// Package gpuinventory is the controller that keeps each GpuInventory's status equal to the
// inventory of the nodes its selector covers. A status write happens only when the content
// (its hash) or the spec generation changed, so a quiet cluster costs no writes at all.
package gpuinventory

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	listersv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/listers/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/section"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/statuswriter"
)

// Name names the controller and its workqueue.
const Name = "gpuinventory"

// WriteBurst is how many status writes an inventory may make at once after a quiet spell;
// under churn it writes once per MinSyncInterval.
const WriteBurst = 2

// Options are what the inventory controller has of its own beside the controller.Context.
type Options struct {
	// Writer writes the status.
	Writer statuswriter.Writer
	// Client reads a whole GpuInventory when the cache holds it without its node list.
	Client InventoryGetter
	// Inventories caches the GpuInventories: NewInformer.
	Inventories Informer
	// ResyncPeriod: every inventory is re-examined this often, at no API cost when nothing changed.
	ResyncPeriod time.Duration
	// PerNodeMetrics adds a gpu_inventory_node_not_ready series per not-ready node.
	PerNodeMetrics bool
	// Sections are the features' parts of the status (quota, usage, ...), in the order
	// their hashes join the inventory's.
	Sections []section.Section
	// Workers sync inventories in parallel (0: 1).
	Workers int
	// BeforeSync, for tests, runs at the start of every sync (inside the worker's recovery).
	BeforeSync func(name string)
}

// Controller reconciles GpuInventory status from the node cache.
type Controller struct {
	client            InventoryGetter
	writer            statuswriter.Writer
	nodes             nodecache.NodeLister
	nodesSynced       cache.InformerSynced
	inventories       listersv1.GpuInventoryLister
	inventoriesSynced cache.InformerSynced
	queue             workqueue.TypedRateLimitingInterface[cache.ObjectName]
	limiter           *controller.WriteLimiter[cache.ObjectName]
	metrics           *metrics.Metrics
	recorder          record.EventRecorder
	clock             clock.PassiveClock
	entries           *inventory.EntryCache
	maxStatusNodes    int
	perNodeMetrics    bool
	keeps             func(string) bool // where selectors see it; nil: every label is kept
	keepsLevel        func(string) bool // at all (nodecache.Levels); nil: every label is kept
	unhandled         chan controller.Unhandled
	facts             controller.Facts
	readsPods         bool           // pods are read: inventories count demand
	changes           source.Changes // devices, holdings, records and the sections'
	sections          []section.Section

	beforeSync func(string)

	memory    *memory    // what this controller wrote, per inventory
	warnings  *warnings  // malformed label values already logged
	selectors *selectors // parsed node selectors
}

// NewController wires the controller to its informers. It follows every GPU fact of the
// context: devices, what pods hold and wait for, and the records of nodes without labels.
func NewController(ctx context.Context, cc *controller.Context, opts Options) (*Controller, controller.Runner, error) {
	d := cc.Defaulted()
	if opts.Client == nil {
		return nil, controller.Runner{}, fmt.Errorf("the inventory controller needs a GpuInventory client")
	}
	c := &Controller{
		client:            opts.Client,
		writer:            opts.Writer,
		nodes:             nodecache.NewNodeLister(d.Nodes),
		nodesSynced:       d.Nodes.HasSynced,
		inventories:       opts.Inventories.Lister(),
		inventoriesSynced: opts.Inventories.Informer().HasSynced,
		queue:             controller.NewQueue[cache.ObjectName](Name, d.Metrics),
		limiter:           controller.NewWriteLimiter[cache.ObjectName](d.MinSyncInterval, WriteBurst, d.Clock),
		metrics:           d.Metrics,
		recorder:          d.Recorder,
		clock:             d.Clock,
		entries:           d.Entries,
		maxStatusNodes:    d.MaxStatusNodes,
		perNodeMetrics:    opts.PerNodeMetrics,
		keeps:             d.KeepsLabel,
		keepsLevel:        d.KeepsLevel,
		unhandled:         make(chan controller.Unhandled, unhandledBuffer),
		facts:             d.Facts,
		readsPods:         d.Facts.Changes(controller.Holdings) != nil,
		sections:          opts.Sections,
		memory:            newMemory(),
		warnings:          newWarnings(),
		selectors:         newSelectors(),
		beforeSync:        opts.BeforeSync,
	}
	// A record is the memory of a node whose labels vanished: of a labelled one it changes nothing.
	changes := []source.Changes{d.Facts.Changes(controller.Devices | controller.Holdings),
		source.Only(d.Facts.Changes(controller.Records), c.unlabelled)}
	for _, s := range opts.Sections {
		changes = append(changes, s.Changes())
	}
	c.changes = source.Merge(changes...)
	if err := c.addHandlers(ctx, d.NodeEvents, opts); err != nil {
		return nil, controller.Runner{}, err
	}
	workers := max(opts.Workers, 1)
	return c, controller.Runner{Run: func(ctx context.Context) error { return c.Run(ctx, workers) },
		WaitsFor: c.waitsFor(), Started: c.Synced, Unhandled: c.unhandled}, nil
}

func (c *Controller) addHandlers(ctx context.Context, nodeEvents nodecache.EventSource, opts Options) error {
	if _, err := opts.Inventories.Informer().AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueInventory,
		UpdateFunc: c.inventoryUpdated,
		DeleteFunc: c.inventoryDeleted,
	}, opts.ResyncPeriod); err != nil {
		return fmt.Errorf("add GpuInventory event handler: %w", err)
	}
	logger := klog.FromContext(ctx)
	forget := func(name string) {
		c.entries.Forget(name)
		c.warnings.forgetNode(name)
		c.memory.forgetNode(name)
	}
	if _, err := nodeEvents.AddEventHandler(nodecache.NodeHandler(forget, func(old, cur any) {
		c.handleNode(logger, old, cur)
	})); err != nil {
		return fmt.Errorf("add Node event handler: %w", err)
	}
	c.changes.OnChange(c.factsChanged)
	return nil
}

// Run processes inventories with the given number of workers until ctx is cancelled.
func (c *Controller) Run(ctx context.Context, workers int) error {
	loop := controller.Loop[cache.ObjectName]{Name: Name, Queue: c.queue, Sync: c.syncHandler, Metrics: c.metrics}
	return loop.Run(ctx, workers, c.waitsFor()...)
}

func (c *Controller) waitsFor() []cache.InformerSynced {
	return []cache.InformerSynced{c.nodesSynced, c.inventoriesSynced, c.changes.HasSynced}
}

// Synced reports whether the caches have synced and the controller has made progress: an
// inventory had a successful sync, or there is none. One inventory that cannot be written
// shows in its own metrics, not here.
func (c *Controller) Synced() bool {
	if !c.nodesSynced() || !c.inventoriesSynced() || !c.changes.HasSynced() {
		return false
	}
	inventories, err := c.inventories.List(labels.Everything())
	if err != nil {
		return false
	}
	for _, gi := range inventories {
		if c.memory.synced(cache.MetaObjectToName(gi)) {
			return true
		}
	}
	return len(inventories) == 0
}

// indexSelector parses and indexes an inventory's node selector, and tells the owner of the
// run about the selector's keys the node cache drops.
func (c *Controller) indexSelector(obj any) {
	gi, ok := obj.(*homelabv1.GpuInventory)
	if !ok {
		return
	}
	sel, err := c.selectors.get(gi)
	if err != nil || c.keeps == nil {
		return
	}
	reqs, _ := sel.Requirements()
	var missing []string
	for _, r := range reqs {
		if !c.keeps(r.Key()) {
			missing = append(missing, r.Key())
		}
	}
	c.cannotHandle(missing, "the node selector of GpuInventory "+gi.Name)
}

// unhandledBuffer is how many reports of missing label keys wait for the owner of the run,
// which ends the run at the first; later ones are dropped, the next run finds them again.
const unhandledBuffer = 8

// cannotHandle reports label keys the node cache drops, if any, without blocking.
func (c *Controller) cannotHandle(keys []string, reason string) {
	if len(keys) == 0 {
		return
	}
	select {
	case c.unhandled <- controller.Unhandled{LabelKeys: keys, Reason: reason}:
	default:
	}
}

func (c *Controller) enqueueInventory(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	c.indexSelector(obj)
	key, err := cache.ObjectToName(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

// inventoryUpdated enqueues an inventory whose spec changed, whose status someone else
// changed, or that is due for its periodic resync; the echo of the controller's own status
// write is dropped.
func (c *Controller) inventoryUpdated(old, cur any) {
	oldInv, ok1 := old.(*homelabv1.GpuInventory)
	curInv, ok2 := cur.(*homelabv1.GpuInventory)
	if !ok1 || !ok2 {
		c.enqueueInventory(cur)
		return
	}
	key := cache.MetaObjectToName(curInv)
	if oldInv.Generation != curInv.Generation {
		c.indexSelector(curInv)
	}
	if oldInv.ResourceVersion != curInv.ResourceVersion && oldInv.Generation == curInv.Generation &&
		curInv.Status.ObservedGeneration == curInv.Generation && c.memory.wroteHash(key, curInv.Status.InventoryHash) {
		return
	}
	c.limiter.Enqueue(c.queue, key)
}

func (c *Controller) inventoryDeleted(obj any) {
	key, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		return
	}
	c.metrics.ForgetInventory(key.Name)
	c.limiter.Forget(key)
	c.memory.forget(key)
	c.selectors.forget(key)
	for _, s := range c.sections {
		s.Forget(key.Name)
	}
}

// handleNode enqueues the inventories whose selector matches the node before or after the
// event (a relabelled node can leave one inventory and join another).
func (c *Controller) handleNode(logger klog.Logger, old, cur any) {
	var labelSets []labels.Set
	for _, obj := range []any{old, cur} {
		if node, ok := nodecache.NodeFromObj(obj); ok {
			labelSets = append(labelSets, labels.Set(node.Labels))
		}
	}
	for _, key := range c.selectors.matching(labelSets) {
		logger.V(5).Info("Node event affects inventory", "inventory", key.Name)
		c.limiter.Enqueue(c.queue, key)
	}
}

// unlabelled reports whether a GPU node of that name exists without GFD's labels: only then
// does its record say something the labels do not.
func (c *Controller) unlabelled(name string) bool {
	node, ok := c.nodes.Get(name)
	return ok && !inventory.HasGFDLabels(node)
}

// factsChanged enqueues the inventories that select a node whose GPU facts (DRA slices, what
// pods hold there, its record) changed, and every inventory when what waiting pods ask for
// changed (name "").
func (c *Controller) factsChanged(name string) {
	if name == "" {
		inventories, err := c.inventories.List(labels.Everything())
		if err != nil {
			return
		}
		for _, gi := range inventories {
			c.limiter.Enqueue(c.queue, cache.MetaObjectToName(gi))
		}
		return
	}
	node, ok := c.nodes.Get(name)
	if !ok {
		return // no GPU node of that name: its facts count when it becomes one
	}
	for _, inv := range c.selectors.matching([]labels.Set{node.Labels}) {
		c.limiter.Enqueue(c.queue, inv)
	}
}
