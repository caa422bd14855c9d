// Package inventory is the controller that keeps each GpuInventory's status equal to the
// inventory of the nodes its selector covers. A status write happens only when the content
// (its hash) or the spec generation changed, so a quiet cluster costs no writes at all.
package inventory

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	applymetav1 "k8s.io/client-go/applyconfigurations/meta/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	applyv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/applyconfiguration/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
	informersv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/informers/externalversions/homelab/v1"
	listersv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/listers/homelab/v1"
	inv "github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// Name names the controller and its workqueue.
const Name = "gpuinventory"

// Controller reconciles GpuInventory status from the Node cache.
type Controller struct {
	client            versioned.Interface
	nodes             corelisters.NodeLister
	nodesSynced       cache.InformerSynced
	inventories       listersv1.GpuInventoryLister
	inventoriesSynced cache.InformerSynced
	queue             workqueue.TypedRateLimitingInterface[cache.ObjectName]
	clock             clock.PassiveClock

	statusWrites  atomic.Int64
	statusSkipped atomic.Int64

	warnedMu sync.Mutex
	warned   map[inv.Warning]struct{}
}

// NewController wires the controller to its informers. Every inventory is re-examined each
// resyncPeriod; that costs no API call when nothing changed.
func NewController(ctx context.Context, client versioned.Interface, nodeInformer coreinformers.NodeInformer,
	inventoryInformer informersv1.GpuInventoryInformer, resyncPeriod time.Duration) (*Controller, error) {
	c := &Controller{
		client:            client,
		nodes:             nodeInformer.Lister(),
		nodesSynced:       nodeInformer.Informer().HasSynced,
		inventories:       inventoryInformer.Lister(),
		inventoriesSynced: inventoryInformer.Informer().HasSynced,
		queue:             controller.NewQueue[cache.ObjectName](Name),
		clock:             clock.RealClock{},
		warned:            map[inv.Warning]struct{}{},
	}
	logger := klog.FromContext(ctx)
	if _, err := inventoryInformer.Informer().AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueInventory,
		UpdateFunc: func(_, cur any) { c.enqueueInventory(cur) },
	}, resyncPeriod); err != nil {
		return nil, fmt.Errorf("add GpuInventory event handler: %w", err)
	}
	if _, err := nodeInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.handleNode(logger, nil, obj) },
		UpdateFunc: func(old, cur any) {
			oldNode, ok1 := controller.NodeFromObj(old)
			curNode, ok2 := controller.NodeFromObj(cur)
			if ok1 && ok2 && !controller.NodeChanged(oldNode, curNode) {
				return
			}
			c.handleNode(logger, old, cur)
		},
		DeleteFunc: func(obj any) { c.handleNode(logger, nil, obj) },
	}); err != nil {
		return nil, fmt.Errorf("add Node event handler: %w", err)
	}
	return c, nil
}

// Run processes inventories with the given number of workers until ctx is cancelled.
func (c *Controller) Run(ctx context.Context, workers int) error {
	return controller.Run(ctx, Name, c.queue, workers, c.syncHandler, c.nodesSynced, c.inventoriesSynced)
}

// StatusWrites counts the status writes this controller made; StatusSkipped counts the syncs
// that found the stored status already current.
func (c *Controller) StatusWrites() int64  { return c.statusWrites.Load() }
func (c *Controller) StatusSkipped() int64 { return c.statusSkipped.Load() }

func (c *Controller) enqueueInventory(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	key, err := cache.ObjectToName(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

// handleNode enqueues the inventories whose selector matches the node before or after the
// event (a relabelled node can leave one inventory and join another).
func (c *Controller) handleNode(logger klog.Logger, old, cur any) {
	var labelSets []labels.Set
	for _, obj := range []any{old, cur} {
		if node, ok := controller.NodeFromObj(obj); ok {
			labelSets = append(labelSets, labels.Set(node.Labels))
		}
	}
	inventories, err := c.inventories.List(labels.Everything())
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("list GpuInventories from cache: %w", err))
		return
	}
	for _, gi := range inventories {
		sel, err := inv.Selector(gi.Spec.NodeSelector)
		if err != nil {
			continue // reported by the inventory's own sync
		}
		for _, set := range labelSets {
			if sel.Matches(set) {
				logger.V(5).Info("Node event affects inventory", "inventory", klog.KObj(gi))
				c.queue.Add(cache.MetaObjectToName(gi))
				break
			}
		}
	}
}

// syncHandler computes the inventory for key from the caches and applies the status when it
// differs from what is stored.
func (c *Controller) syncHandler(ctx context.Context, key cache.ObjectName) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "inventory", key.Name)
	gi, err := c.inventories.Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil // deleted; nothing to keep up to date
	}
	if err != nil {
		return fmt.Errorf("get GpuInventory %s from cache: %w", key.Name, err)
	}

	var content inv.Inventory
	var degraded metav1.Condition
	sel, selErr := inv.Selector(gi.Spec.NodeSelector)
	if selErr != nil {
		content = inv.FromEntries(nil)
		content.Hash = "invalid-selector:" + selErr.Error()
		degraded = inv.InvalidSelectorCondition(selErr, gi.Generation)
	} else {
		nodes, err := c.nodes.List(sel)
		if err != nil {
			return fmt.Errorf("list nodes from cache: %w", err)
		}
		var warnings []inv.Warning
		content, warnings = inv.Compute(nodes)
		c.warnOnce(logger, warnings)
		degraded = inv.DegradedCondition(content, gi.Generation)
	}

	if gi.Status.InventoryHash == content.Hash && gi.Status.ObservedGeneration == gi.Generation {
		c.statusSkipped.Add(1)
		return nil
	}

	now := metav1.NewTime(c.clock.Now())
	observedAt := now
	if gi.Status.InventoryHash == content.Hash && gi.Status.ObservedAt != nil {
		observedAt = *gi.Status.ObservedAt // only the generation moved; the content did not
	}
	conditions := make([]metav1.Condition, len(gi.Status.Conditions))
	copy(conditions, gi.Status.Conditions) // never mutate what the lister returns
	degraded.LastTransitionTime = now      // kept from the stored condition unless the status flips
	meta.SetStatusCondition(&conditions, degraded)

	status := applyv1.GpuInventoryStatus().
		WithObservedGeneration(gi.Generation).
		WithObservedAt(observedAt).
		WithInventoryHash(content.Hash).
		WithTotalGpuNodes(content.TotalGpuNodes).
		WithReadyGpuNodes(content.ReadyGpuNodes).
		WithTotalGpus(content.TotalGpus).
		WithReadyGpus(content.ReadyGpus)
	for _, n := range content.Nodes {
		status.WithNodes(applyv1.GpuNode().
			WithName(n.Name).WithReady(n.Ready).WithProduct(n.Product).WithGpuCount(n.GpuCount).
			WithGpuMemoryMiB(n.GpuMemoryMiB).WithWorkloadConfig(n.WorkloadConfig))
	}
	for _, cond := range conditions {
		status.WithConditions(applymetav1.Condition().
			WithType(cond.Type).WithStatus(cond.Status).WithReason(cond.Reason).WithMessage(cond.Message).
			WithObservedGeneration(cond.ObservedGeneration).WithLastTransitionTime(cond.LastTransitionTime))
	}
	_, err = c.client.HomelabV1().GpuInventories().ApplyStatus(ctx,
		applyv1.GpuInventory(gi.Name).WithStatus(status),
		metav1.ApplyOptions{FieldManager: homelabv1.FieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("apply status of GpuInventory %s: %w", gi.Name, err)
	}
	c.statusWrites.Add(1)
	logger.Info("Inventory changed", "gpuNodes", content.TotalGpuNodes, "readyGpuNodes", content.ReadyGpuNodes,
		"gpus", content.TotalGpus, "readyGpus", content.ReadyGpus, "degraded", degraded.Status, "reason", degraded.Reason)
	return nil
}

// warnOnce logs each malformed label value the first time it is seen, not on every resync.
func (c *Controller) warnOnce(logger klog.Logger, warnings []inv.Warning) {
	if len(warnings) == 0 {
		return
	}
	c.warnedMu.Lock()
	defer c.warnedMu.Unlock()
	for _, w := range warnings {
		if _, seen := c.warned[w]; seen {
			continue
		}
		c.warned[w] = struct{}{}
		logger.Info("Warning: ignoring malformed GPU label", "node", klog.KRef("", w.Node), "label", w.Label, "value", w.Value, "reason", w.Reason)
	}
}
