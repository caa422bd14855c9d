// Package inventory is the controller that keeps each GpuInventory's status equal to the
// inventory of the nodes its selector covers. A status write happens only when the content
// (its hash) or the spec generation changed, so a quiet cluster costs no writes at all.
package gpuinventory

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/prometheus/client_golang/prometheus"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	applyv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/applyconfiguration/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned/scheme"
	informersv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/informers/externalversions/homelab/v1"
	listersv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/listers/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventorycache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
)

// Name names the controller and its workqueue.
const Name = "gpuinventory"

// MetadataOnly, as the Accept header, asks the API server to answer a write with the
// object's metadata only (hack/scale's dry-run applies send it too).
const MetadataOnly = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

// Controller reconciles GpuInventory status from the Node cache.
type Controller struct {
	client            versioned.Interface
	nodes             nodecache.NodeLister
	nodesSynced       cache.InformerSynced
	inventories       listersv1.GpuInventoryLister
	inventoriesSynced cache.InformerSynced
	queue             workqueue.TypedRateLimitingInterface[cache.ObjectName]
	clock             clock.PassiveClock
	recorder          record.EventRecorder
	maxStatusNodes    int

	perNodeMetrics bool
	entries        *inventory.EntryCache
	keeps          func(string) bool
	unknown        func(string)
	coalescer      *controller.Coalescer[cache.ObjectName]
	// written remembers the hash of the last status this controller wrote per inventory, so
	// that the update event of its own write is not taken for news.
	writtenMu sync.Mutex
	written   map[cache.ObjectName]string
	// lastNodes remembers the node list of each inventory's status at a resourceVersion: the
	// informer's objects come without it (see NewInformerClient).
	lastNodes map[cache.ObjectName]storedNodes
	// synced holds the inventories that had a successful sync (for readiness).
	synced map[cache.ObjectName]bool

	statusWrites  atomic.Int64
	statusSkipped atomic.Int64
	statusReads   atomic.Int64

	warnedMu sync.Mutex
	warned   map[inventory.Warning]struct{}
}

// Config holds the controller's settings.
type Config struct {
	// ResyncPeriod: every inventory is re-examined this often; that costs no API call when
	// nothing changed.
	ResyncPeriod time.Duration
	// MaxStatusNodes bounds status.nodes (default inventory.DefaultMaxStatusNodes).
	MaxStatusNodes int
	// Recorder receives the events about GPU nodes (joined, left, NotReady, ...).
	Recorder record.EventRecorder
	// KeepsLabel reports whether the node cache holds a label key; OnUnknownSelectorKey is
	// called with a key that a node selector names but the cache dropped (the caller then
	// re-lists nodes with that key kept). Both nil: every label is kept.
	KeepsLabel           func(key string) bool
	OnUnknownSelectorKey func(key string)
	// Entries caches parsed node entries; it may be shared with other controllers that read
	// the same node cache. Nil: the controller makes its own.
	Entries *inventory.EntryCache
	// PerNodeMetrics adds a gpu_inventory_node_not_ready series per not-ready node.
	PerNodeMetrics bool
	// MinSyncInterval holds each inventory to at most one sync (and so one status write) per
	// interval under churn; a change in a quiet cluster is synced at once. 0 disables it.
	MinSyncInterval time.Duration
}

// NewController wires the controller to its informers.
func NewController(ctx context.Context, client versioned.Interface, nodeInformer cache.SharedIndexInformer,
	inventoryInformer informersv1.GpuInventoryInformer, cfg Config) (*Controller, error) {
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{} // discards
	}
	if cfg.Entries == nil {
		cfg.Entries = inventory.NewEntryCache()
	}
	c := &Controller{
		client:            client,
		nodes:             nodecache.NewNodeLister(nodeInformer),
		nodesSynced:       nodeInformer.HasSynced,
		inventories:       inventoryInformer.Lister(),
		inventoriesSynced: inventoryInformer.Informer().HasSynced,
		queue:             controller.NewQueue[cache.ObjectName](Name),
		clock:             clock.RealClock{},
		recorder:          cfg.Recorder,
		maxStatusNodes:    cfg.MaxStatusNodes,
		entries:           cfg.Entries,
		perNodeMetrics:    cfg.PerNodeMetrics,
		keeps:             cfg.KeepsLabel,
		unknown:           cfg.OnUnknownSelectorKey,
		written:           map[cache.ObjectName]string{},
		lastNodes:         map[cache.ObjectName]storedNodes{},
		synced:            map[cache.ObjectName]bool{},
		warned:            map[inventory.Warning]struct{}{},
	}
	c.coalescer = controller.NewCoalescer[cache.ObjectName](cfg.MinSyncInterval, c.clock)
	logger := klog.FromContext(ctx)
	if _, err := inventoryInformer.Informer().AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueInventory,
		UpdateFunc: c.inventoryUpdated,
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingObjectToName(obj); err == nil {
				forgetMetrics(key.Name)
				c.coalescer.Forget(key)
				c.writtenMu.Lock()
				delete(c.written, key)
				delete(c.lastNodes, key)
				delete(c.synced, key)
				c.writtenMu.Unlock()
			}
		},
	}, cfg.ResyncPeriod); err != nil {
		return nil, fmt.Errorf("add GpuInventory event handler: %w", err)
	}
	if _, err := nodeInformer.AddEventHandler(nodecache.NodeHandler(c.entries, func(old, cur any) {
		c.handleNode(logger, old, cur)
	})); err != nil {
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

// StatusReads counts the GETs of a whole inventory that its cached copy (without node list)
// made necessary.
func (c *Controller) StatusReads() int64 { return c.statusReads.Load() }

// Synced reports whether the caches have synced and every known inventory has had a
// successful sync.
func (c *Controller) Synced() bool {
	if !c.nodesSynced() || !c.inventoriesSynced() {
		return false
	}
	inventories, err := c.inventories.List(labels.Everything())
	if err != nil {
		return false
	}
	c.writtenMu.Lock()
	defer c.writtenMu.Unlock()
	for _, gi := range inventories {
		if !c.synced[cache.MetaObjectToName(gi)] {
			return false
		}
	}
	return true
}

// checkSelectorKeys tells the owner of the node cache about selector keys it drops.
func (c *Controller) checkSelectorKeys(obj any) {
	gi, ok := obj.(*homelabv1.GpuInventory)
	if !ok || c.keeps == nil || c.unknown == nil {
		return
	}
	sel, err := inventory.Selector(gi.Spec.NodeSelector)
	if err != nil {
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
	c.checkSelectorKeys(obj)
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
		c.checkSelectorKeys(curInv)
	}
	if oldInv.ResourceVersion != curInv.ResourceVersion && oldInv.Generation == curInv.Generation {
		c.writtenMu.Lock()
		own := c.written[key] == curInv.Status.InventoryHash && curInv.Status.ObservedGeneration == curInv.Generation
		c.writtenMu.Unlock()
		if own {
			return
		}
	}
	c.coalescer.Enqueue(c.queue, key)
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
	inventories, err := c.inventories.List(labels.Everything())
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("list GpuInventories from cache: %w", err))
		return
	}
	for _, gi := range inventories {
		sel, err := inventory.Selector(gi.Spec.NodeSelector)
		if err != nil {
			continue // reported by the inventory's own sync
		}
		for _, set := range labelSets {
			if sel.Matches(set) {
				logger.V(5).Info("Node event affects inventory", "inventory", klog.KObj(gi))
				c.coalescer.Enqueue(c.queue, cache.MetaObjectToName(gi))
				break
			}
		}
	}
}

// syncHandler computes the inventory for key from the caches and applies the status when it
// differs from what is stored.
func (c *Controller) syncHandler(ctx context.Context, key cache.ObjectName) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "inventory", key.Name)
	c.coalescer.Synced(key)
	gi, err := c.inventories.Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil // deleted; nothing to keep up to date
	}
	if err != nil {
		return fmt.Errorf("get GpuInventory %s from cache: %w", key.Name, err)
	}

	var content inventory.Inventory
	var stored, listed []homelabv1.GpuNode
	var conditions []metav1.Condition
	sel, selErr := inventory.Selector(gi.Spec.NodeSelector)
	if selErr != nil {
		content = inventory.FromEntries(nil)
		content.Hash = "invalid-selector:" + selErr.Error()
		conditions = []metav1.Condition{inventory.InvalidSelectorCondition(selErr, gi.Generation)}
	} else {
		nodes, err := c.nodes.List(sel)
		if err != nil {
			return fmt.Errorf("list nodes from cache: %w", err)
		}
		if stored, err = c.storedNodes(ctx, gi); err != nil {
			return err
		}
		var warnings []inventory.Warning
		// The stored status is the memory of last-known labels: it survives restarts and
		// leader changes.
		content, warnings = c.entries.Compute(nodes, stored, c.clock.Now())
		c.warnOnce(logger, warnings)
		var omitted int
		listed, omitted = content.Listed(c.maxStatusNodes, inventory.MaxNodeListBytes)
		conditions = inventory.Conditions(content, omitted, gi.Generation)
	}

	c.observe(gi.Name, content)
	if gi.Status.InventoryHash == content.Hash && gi.Status.ObservedGeneration == gi.Generation {
		c.coalescer.Skipped(key)
		c.statusSkipped.Add(1)
		c.writtenMu.Lock()
		c.synced[key] = true
		c.writtenMu.Unlock()
		metrics.StatusWrites.WithLabelValues(gi.Name, "skipped").Inc()
		metrics.LastSuccessfulSync.WithLabelValues(gi.Name).SetToCurrentTime()
		return nil
	}

	now := metav1.NewTime(c.clock.Now())
	observedAt := now
	if gi.Status.InventoryHash == content.Hash && gi.Status.ObservedAt != nil {
		observedAt = *gi.Status.ObservedAt // only the generation moved; the content did not
	}
	storedConditions := make([]metav1.Condition, len(gi.Status.Conditions))
	copy(storedConditions, gi.Status.Conditions) // never mutate what the lister returns
	for _, cond := range conditions {
		cond.LastTransitionTime = now // kept from the stored condition unless its status flips
		meta.SetStatusCondition(&storedConditions, cond)
	}

	status := content.Status(listed, storedConditions, gi.Generation, observedAt)
	resourceVersion, err := c.applyStatus(ctx, gi.Name, status)
	if err != nil {
		return fmt.Errorf("apply status of GpuInventory %s: %w", gi.Name, err)
	}
	c.statusWrites.Add(1)
	metrics.StatusWrites.WithLabelValues(gi.Name, "written").Inc()
	metrics.LastSuccessfulSync.WithLabelValues(gi.Name).SetToCurrentTime()
	c.writtenMu.Lock()
	c.written[key] = content.Hash
	c.lastNodes[key] = storedNodes{resourceVersion: resourceVersion, nodes: status.Nodes}
	c.synced[key] = true
	c.writtenMu.Unlock()
	degraded := meta.FindStatusCondition(storedConditions, homelabv1.ConditionDegraded)
	logger.Info("Inventory changed", "gpuNodes", content.TotalGpuNodes, "readyGpuNodes", content.ReadyGpuNodes,
		"gpus", content.TotalGpus, "readyGpus", content.ReadyGpus, "unhealthyGpus", content.UnhealthyGpus,
		"labelsMissingNodes", content.LabelsMissingNodes, "degraded", degraded.Status, "reason", degraded.Reason)

	// Events only after the first status: a new operator must not announce every node.
	if gi.Status.InventoryHash != "" && selErr == nil {
		complete := len(stored) == int(gi.Status.TotalGpuNodes)
		for _, ev := range inventory.Diff(stored, content.Nodes, complete) {
			c.recorder.Event(gi, ev.Type, ev.Reason, ev.Message)
		}
	}
	return nil
}

// storedNodes is the node list of an inventory's stored status, read back when the cached
// object comes without it: from memory when the controller wrote that very resourceVersion,
// otherwise (at start, after a spec change or someone else's status write) from the server.
type storedNodes struct {
	resourceVersion string
	nodes           []homelabv1.GpuNode
}

func (c *Controller) storedNodes(ctx context.Context, gi *homelabv1.GpuInventory) ([]homelabv1.GpuNode, error) {
	if !inventorycache.NodesOmitted(gi) {
		return gi.Status.Nodes, nil
	}
	key := cache.MetaObjectToName(gi)
	c.writtenMu.Lock()
	last, ok := c.lastNodes[key]
	c.writtenMu.Unlock()
	if ok && last.resourceVersion == gi.ResourceVersion {
		return last.nodes, nil
	}
	full, err := c.client.HomelabV1().GpuInventories().Get(ctx, gi.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read the node list of GpuInventory %s: %w", gi.Name, err)
	}
	c.statusReads.Add(1)
	c.writtenMu.Lock()
	c.lastNodes[key] = storedNodes{resourceVersion: full.ResourceVersion, nodes: full.Status.Nodes}
	c.writtenMu.Unlock()
	return full.Status.Nodes, nil
}

// observe publishes an inventory's content as gauges. Label cardinality stays bounded: per
// inventory and per model, and per node only with PerNodeMetrics.
func (c *Controller) observe(name string, content inventory.Inventory) {
	notReadyNodes := content.TotalGpuNodes - content.ReadyGpuNodes
	metrics.GPUNodes.WithLabelValues(name, "true").Set(float64(content.ReadyGpuNodes))
	metrics.GPUNodes.WithLabelValues(name, "false").Set(float64(notReadyNodes))
	metrics.GPUs.WithLabelValues(name, "true").Set(float64(content.ReadyGpus))
	metrics.GPUs.WithLabelValues(name, "false").Set(float64(content.TotalGpus - content.ReadyGpus))
	metrics.UnhealthyGPUs.WithLabelValues(name).Set(float64(content.UnhealthyGpus))
	metrics.LabelsMissingNodes.WithLabelValues(name).Set(float64(content.LabelsMissingNodes))
	metrics.ModelGPUs.DeletePartialMatch(prometheus.Labels{"inventory": name})
	for _, m := range content.Models {
		metrics.ModelGPUs.WithLabelValues(name, m.Product, "true").Set(float64(m.ReadyGpus))
		metrics.ModelGPUs.WithLabelValues(name, m.Product, "false").Set(float64(m.Gpus - m.ReadyGpus))
	}
	if c.perNodeMetrics {
		metrics.NotReadyNodes.DeletePartialMatch(prometheus.Labels{"inventory": name})
		for _, n := range content.Nodes {
			if !n.Ready {
				metrics.NotReadyNodes.WithLabelValues(name, n.Name).Set(1)
			}
		}
	}
}

// forgetMetrics drops a deleted inventory's series.
func forgetMetrics(name string) {
	for _, vec := range []*prometheus.GaugeVec{metrics.GPUNodes, metrics.GPUs, metrics.ModelGPUs, metrics.UnhealthyGPUs,
		metrics.LabelsMissingNodes, metrics.NotReadyNodes, metrics.LastSuccessfulSync} {
		vec.DeletePartialMatch(prometheus.Labels{"inventory": name})
	}
	metrics.StatusWrites.DeletePartialMatch(prometheus.Labels{"inventory": name})
}

// applyStatus server-side applies status with the operator's field manager, always with
// apiVersion and kind (the first version's HTTP 400), and returns the resourceVersion the
// object has afterwards. Against an API server the request goes through the REST client and
// asks for an answer of metadata only (the informer brings the new object anyway, and the
// whole one is up to 256 KiB), with fieldValidation=Ignore: the API server's strict parse of
// the body (a third one, besides those for the audit log and the apply), which only looks
// for unknown or duplicate fields to warn about, is skipped. The body is encoded from the
// types the CRD's schema is generated from, and server-side apply refuses a field the
// schema lacks whatever the validation (see explainApplyError), so nothing is lost. Both
// save the API server work proportional to the status's size on every write. The
// generated fake clientset has no REST client; there the typed ApplyStatus is used.
// TestApplyBodiesAgree keeps the two request bodies identical.
func (c *Controller) applyStatus(ctx context.Context, name string, status homelabv1.GpuInventoryStatus) (string, error) {
	opts := metav1.ApplyOptions{FieldManager: homelabv1.FieldManager, Force: true}
	if rc, ok := c.client.HomelabV1().RESTClient().(*rest.RESTClient); ok && rc != nil {
		body, err := statusApplyBody(name, status)
		if err != nil {
			return "", err
		}
		patchOpts := opts.ToPatchOptions()
		patchOpts.FieldValidation = metav1.FieldValidationIgnore
		result := rc.Patch(types.ApplyPatchType).Resource("gpuinventories").Name(name).SubResource("status").
			VersionedParams(&patchOpts, scheme.ParameterCodec).SetHeader("Accept", MetadataOnly).Body(body).Do(ctx)
		// Error, not Raw: only Error reads the API server's reason out of a failure's answer.
		if err := result.Error(); err != nil {
			return "", explainApplyError(err)
		}
		answer, _ := result.Raw()
		resourceVersion, err := inventorycache.ResourceVersionOf(answer)
		if err != nil {
			// The write succeeded; without its version the next sync reads the node list back.
			klog.FromContext(ctx).Error(err, "Cannot read the answer to a status write", "inventory", name)
		}
		return resourceVersion, nil
	}
	applyStatus, err := statusApplyConfiguration(status)
	if err != nil {
		return "", err
	}
	applied, err := c.client.HomelabV1().GpuInventories().ApplyStatus(ctx, applyv1.GpuInventory(name).WithStatus(applyStatus), opts)
	if err != nil {
		return "", err
	}
	return applied.ResourceVersion, nil
}

// explainApplyError says what to do about a status write that a CRD older than the operator
// refused: server-side apply rejects a field the CRD's schema does not declare, whatever the
// field validation asked for.
func explainApplyError(err error) error {
	if strings.Contains(err.Error(), "field not declared in schema") {
		return fmt.Errorf("the installed GpuInventory CRD is older than this operator: let the operator install it (--install-crd, the default) or apply manifests/crd of this release: %w", err)
	}
	return err
}

// statusApplyBody is the apply request for an inventory's status, encoded in one pass.
func statusApplyBody(name string, status homelabv1.GpuInventoryStatus) ([]byte, error) {
	body, err := json.Marshal(struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Status homelabv1.GpuInventoryStatus `json:"status"`
	}{
		TypeMeta: metav1.TypeMeta{APIVersion: homelabv1.SchemeGroupVersion.String(), Kind: "GpuInventory"},
		Metadata: struct {
			Name string `json:"name"`
		}{name},
		Status: status,
	})
	if err != nil {
		return nil, fmt.Errorf("encode status: %w", err)
	}
	return body, nil
}

// statusApplyConfiguration converts a status into its apply configuration. Both share the
// JSON field names, and fields left at their omitempty zero value are simply not applied
// (which removes any value this manager applied before).
func statusApplyConfiguration(status homelabv1.GpuInventoryStatus) (*applyv1.GpuInventoryStatusApplyConfiguration, error) {
	data, err := json.Marshal(status)
	if err != nil {
		return nil, fmt.Errorf("encode status: %w", err)
	}
	out := &applyv1.GpuInventoryStatusApplyConfiguration{}
	if err := json.Unmarshal(data, out); err != nil {
		return nil, fmt.Errorf("decode status into its apply configuration: %w", err)
	}
	return out, nil
}

// warnOnce logs each malformed label value the first time it is seen, not on every resync.
func (c *Controller) warnOnce(logger klog.Logger, warnings []inventory.Warning) {
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
