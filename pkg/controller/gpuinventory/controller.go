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
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
	informersv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/informers/externalversions/homelab/v1"
	listersv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/listers/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/statuswriter"
)

// Name names the controller and its workqueue.
const Name = "gpuinventory"

// WriteBurst is how many status writes an inventory may make at once after a quiet spell;
// under churn it writes once per MinSyncInterval.
const WriteBurst = 2

// Config holds the controller's dependencies and settings.
type Config struct {
	// Client reads a whole inventory when the cached one lacks its node list.
	Client versioned.Interface
	// Writer writes the status.
	Writer       statuswriter.Writer
	NodeInformer cache.SharedIndexInformer // from nodecache.NewNodeInformer
	// NodeEvents is where the node event handler goes; nil: NodeInformer.
	NodeEvents        nodecache.EventSource
	InventoryInformer informersv1.GpuInventoryInformer
	Metrics           *metrics.Metrics
	// Recorder receives the events about GPU nodes (joined, left, NotReady, ...); nil discards.
	Recorder record.EventRecorder
	// Entries caches parsed node entries, shared with other controllers that read the same
	// node cache; nil: the controller makes its own.
	Entries *inventory.EntryCache
	// ResyncPeriod: every inventory is re-examined this often, at no API cost when nothing changed.
	ResyncPeriod time.Duration
	// MinSyncInterval spaces an inventory's writes under churn (see controller.WriteLimiter); 0: no limit.
	MinSyncInterval time.Duration
	// MaxStatusNodes bounds status.nodes (0: inventory.DefaultMaxStatusNodes).
	MaxStatusNodes int
	// PerNodeMetrics adds a gpu_inventory_node_not_ready series per not-ready node.
	PerNodeMetrics bool
	// KeepsLabel reports whether the node cache holds a label key; OnUnknownSelectorKey is
	// called with a key that a node selector names but the cache drops (the caller then
	// re-lists nodes with that key kept). Both nil: every label is kept.
	KeepsLabel           func(key string) bool
	OnUnknownSelectorKey func(key string)
	// Records returns a node's GpuNode record, the memory of a GPU identity whose labels
	// vanished; nil: the stored node list is the only memory.
	Records inventory.Records
	// RecordEvents delivers changes of GpuNode records: the inventories that select the
	// record's node are synced again. Nil: none.
	RecordEvents nodecache.EventSource
	// RecordsSynced reports whether the records' cache has synced; nil: no records.
	RecordsSynced cache.InformerSynced
	// Devices tells of nodes whose DRA slices changed (the Entries cache reads the slices
	// themselves); nil: no DRA.
	Devices controller.DeviceSource
	// Allocation tells what pods hold and wait for (the Entries cache reads what they hold
	// itself); nil: pods are not read.
	Allocation controller.AllocationSource
	// Clock is the time source; nil: the real clock.
	Clock clock.PassiveClock
	// BeforeSync, for tests, runs at the start of every sync (inside the worker's recovery).
	BeforeSync func(name string)
}

// Controller reconciles GpuInventory status from the node cache.
type Controller struct {
	client            versioned.Interface
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
	keeps             func(string) bool
	unknown           func(string)
	records           inventory.Records
	recordsSynced     cache.InformerSynced
	devicesSynced     cache.InformerSynced
	allocation        controller.AllocationSource
	allocationSynced  cache.InformerSynced

	beforeSync func(string)

	memory    *memory    // what this controller wrote, per inventory
	warnings  *warnings  // malformed label values already logged
	selectors *selectors // parsed node selectors
}

// NewController wires the controller to its informers.
func NewController(ctx context.Context, cfg Config) (*Controller, error) {
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{} // discards
	}
	if cfg.Entries == nil {
		cfg.Entries = inventory.NewEntryCache()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.NodeEvents == nil {
		cfg.NodeEvents = cfg.NodeInformer
	}
	if cfg.MaxStatusNodes == 0 {
		cfg.MaxStatusNodes = inventory.DefaultMaxStatusNodes
	}
	c := &Controller{
		client:            cfg.Client,
		writer:            cfg.Writer,
		nodes:             nodecache.NewNodeLister(cfg.NodeInformer),
		nodesSynced:       cfg.NodeInformer.HasSynced,
		inventories:       cfg.InventoryInformer.Lister(),
		inventoriesSynced: cfg.InventoryInformer.Informer().HasSynced,
		queue:             controller.NewQueue[cache.ObjectName](Name, cfg.Metrics),
		limiter:           controller.NewWriteLimiter[cache.ObjectName](cfg.MinSyncInterval, WriteBurst, cfg.Clock),
		metrics:           cfg.Metrics,
		recorder:          cfg.Recorder,
		clock:             cfg.Clock,
		entries:           cfg.Entries,
		maxStatusNodes:    cfg.MaxStatusNodes,
		perNodeMetrics:    cfg.PerNodeMetrics,
		keeps:             cfg.KeepsLabel,
		unknown:           cfg.OnUnknownSelectorKey,
		memory:            newMemory(),
		warnings:          newWarnings(),
		selectors:         newSelectors(),
		beforeSync:        cfg.BeforeSync,
		records:           cfg.Records,
		recordsSynced:     cfg.RecordsSynced,
		devicesSynced:     controller.DevicesSynced(cfg.Devices),
		allocation:        cfg.Allocation,
		allocationSynced:  controller.AllocationSynced(cfg.Allocation),
	}
	if c.recordsSynced == nil {
		c.recordsSynced = func() bool { return true }
	}
	if _, err := cfg.InventoryInformer.Informer().AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueInventory,
		UpdateFunc: c.inventoryUpdated,
		DeleteFunc: c.inventoryDeleted,
	}, cfg.ResyncPeriod); err != nil {
		return nil, fmt.Errorf("add GpuInventory event handler: %w", err)
	}
	logger := klog.FromContext(ctx)
	forget := func(name string) {
		c.entries.Forget(name)
		c.warnings.forgetNode(name)
		c.memory.forgetNode(name)
	}
	if _, err := cfg.NodeEvents.AddEventHandler(nodecache.NodeHandler(forget, func(old, cur any) {
		c.handleNode(logger, old, cur)
	})); err != nil {
		return nil, fmt.Errorf("add Node event handler: %w", err)
	}
	if cfg.Devices != nil {
		cfg.Devices.OnChange(c.devicesChanged)
	}
	if cfg.Allocation != nil {
		cfg.Allocation.OnChange(c.allocationChanged)
	}
	if cfg.RecordEvents != nil {
		if _, err := cfg.RecordEvents.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    c.recordChanged,
			UpdateFunc: func(_, cur any) { c.recordChanged(cur) },
			DeleteFunc: c.recordChanged,
		}); err != nil {
			return nil, fmt.Errorf("add GpuNode event handler: %w", err)
		}
	}
	return c, nil
}

// Run processes inventories with the given number of workers until ctx is cancelled.
func (c *Controller) Run(ctx context.Context, workers int) error {
	loop := controller.Loop[cache.ObjectName]{Name: Name, Queue: c.queue, Sync: c.syncHandler, Metrics: c.metrics}
	return loop.Run(ctx, workers, c.nodesSynced, c.inventoriesSynced, c.recordsSynced, c.devicesSynced, c.allocationSynced)
}

// Synced reports whether the caches have synced and the controller has made progress: an
// inventory had a successful sync, or there is none. One inventory that cannot be written
// shows in its own metrics, not here.
func (c *Controller) Synced() bool {
	if !c.nodesSynced() || !c.inventoriesSynced() || !c.recordsSynced() || !c.devicesSynced() || !c.allocationSynced() {
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
// node cache about a selector key the cache drops.
func (c *Controller) indexSelector(obj any) {
	gi, ok := obj.(*homelabv1.GpuInventory)
	if !ok {
		return
	}
	sel, err := c.selectors.get(gi)
	if err != nil || c.keeps == nil || c.unknown == nil {
		return
	}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		if !c.keeps(r.Key()) {
			c.unknown(r.Key())
			return
		}
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

// recordChanged enqueues the inventories that select a GpuNode record's node: what is
// remembered of a node without labels changed.
func (c *Controller) recordChanged(obj any) {
	key, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		return
	}
	node, ok := c.nodes.Get(key.Name)
	if !ok || inventory.HasGFDLabels(node) {
		return // no GPU node of that name, or one whose labels say it all: the record changes nothing
	}
	for _, inv := range c.selectors.matching([]labels.Set{node.Labels}) {
		c.limiter.Enqueue(c.queue, inv)
	}
}

// devicesChanged enqueues the inventories that select a node whose DRA slices (or what pods
// hold there) changed.
func (c *Controller) devicesChanged(name string) {
	node, ok := c.nodes.Get(name)
	if !ok {
		return // no GPU node of that name: its slices count when it becomes one
	}
	for _, inv := range c.selectors.matching([]labels.Set{node.Labels}) {
		c.limiter.Enqueue(c.queue, inv)
	}
}

// allocationChanged enqueues the inventories that select a node where what pods hold changed,
// and every inventory when what waiting pods ask for changed (name "").
func (c *Controller) allocationChanged(name string) {
	if name != "" {
		c.devicesChanged(name)
		return
	}
	inventories, err := c.inventories.List(labels.Everything())
	if err != nil {
		return
	}
	for _, gi := range inventories {
		c.limiter.Enqueue(c.queue, cache.MetaObjectToName(gi))
	}
}
