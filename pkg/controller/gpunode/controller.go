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

// Package gpunode is the records controller: it keeps one GpuNode record per GPU node, holding
// the node's GPU identity as GPU Feature Discovery last stated it, so that a node whose labels
// vanish is still counted as what it was, however large the fleet. A record is written only
// when the identity changes, vanishes or comes back: a Ready flip or a heartbeat costs nothing.
package gpunode

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	listersv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/listers/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
)

// Name names the controller and its workqueue.
const Name = "gpunode"

// A node whose labels keep changing (a kubelet may write its own) gets at most RelabelBurst
// record writes at once, then one per RelabelInterval: a GFD restart (labels gone, then back)
// is written at once, a node rewriting its labels ten times a second is not.
const (
	RelabelInterval = 10 * time.Second
	RelabelBurst    = 2
)

// Options are what the records controller has of its own beside the controller.Context.
type Options struct {
	// Client writes the records (server-side apply with homelabv1.FieldManager): a client of
	// the records' own rate limit.
	Client RecordClient
	// Reader reads a whole record where the cache keeps its summary, before marking it
	// missing; nil: Client. A client of its own keeps those reads from halving the write rate.
	Reader RecordGetter
	// Records watches the records: NewRecordInformer, which keeps them without managedFields.
	Records RecordInformer
	// Seed returns the last-known entry of a node from before records existed (an inventory's
	// stored status.nodes or the ConfigMap); nil: none.
	Seed func(name string) (homelabv1.GpuNodeEntry, bool)
	// Workers write records in parallel (0: 1).
	Workers int
}

// Controller keeps the GpuNode records equal to the GPU identity of the nodes.
type Controller struct {
	client        RecordClient
	reader        RecordGetter
	nodeIndex     cache.Indexer // every node: a *corev1.Node for GPU nodes, metadata for the rest
	nodes         nodecache.NodeLister
	nodesSynced   cache.InformerSynced
	records       listersv1.GpuNodeLister
	recordKeys    func() []string // the cached records' names, without expanding summaries
	recordsSynced cache.InformerSynced
	facts         source.Changes // DRA devices
	queue         workqueue.TypedRateLimitingInterface[cache.ObjectName]
	limiter       *controller.WriteLimiter[cache.ObjectName] // spaces a relabelled node's writes
	metrics       *metrics.Metrics
	entries       *inventory.EntryCache
	clock         clock.PassiveClock
	seed          func(string) (homelabv1.GpuNodeEntry, bool)

	mu sync.Mutex
	// lastSeen: when the labels of a node were last seen, for the nodes whose labels vanished
	// since this controller started and whose record does not say so yet.
	lastSeen map[string]time.Time
	// deleted: the last state of records someone deleted while their node remains, so that a
	// node without labels gets its memory back (its summary's part only when the cache kept
	// a summary: the node's sources were there then, and vanished as the record went).
	deleted map[string]*homelabv1.GpuNode
	// pruned: the identity hash of records the server could not hold whole (an older CRD).
	pruned map[string]string
	// pending: the nodes and records seen at start that have not been synced yet; backlog:
	// those of them not queued yet (feed).
	pending     map[string]bool
	backlog     []string
	listed      atomic.Bool // the initial pass has listed the caches (enqueue)
	started     sync.Once
	initialDone atomic.Bool
}

// NewController wires the controller to its informers. It follows the context's device
// facts: the records are its own.
func NewController(ctx context.Context, cc *controller.Context, opts Options) (*Controller, controller.Runner, error) {
	d := cc.Defaulted()
	if opts.Client == nil {
		return nil, controller.Runner{}, fmt.Errorf("the records controller needs a GpuNode client")
	}
	if opts.Reader == nil {
		opts.Reader = opts.Client
	}
	c := &Controller{
		client:     opts.Client,
		reader:     opts.Reader,
		nodeIndex:  d.Nodes.GetIndexer(),
		nodes:      nodecache.NewNodeLister(d.Nodes),
		records:    opts.Records.Lister(),
		recordKeys: opts.Records.Informer().GetIndexer().ListKeys,
		facts:      source.Merge(d.Facts.Changes(controller.Devices)),
		queue:      controller.NewQueue[cache.ObjectName](Name, d.Metrics),
		limiter:    controller.NewWriteLimiter[cache.ObjectName](RelabelInterval, RelabelBurst, d.Clock),
		metrics:    d.Metrics,
		entries:    d.Entries,
		clock:      d.Clock,
		seed:       opts.Seed,
		lastSeen:   map[string]time.Time{},
		deleted:    map[string]*homelabv1.GpuNode{},
		pruned:     map[string]string{},
	}
	// The initial pass waits until the handlers have been handed the initial lists, not only
	// until the caches hold them: an event that comes after the pass started queues its name
	// itself, and thousands of them at once would leave the queue's room behind.
	nodeEvents, err := d.NodeEvents.AddEventHandler(nodecache.NodeHandler(c.entries.Forget, c.handleNode))
	if err != nil {
		return nil, controller.Runner{}, fmt.Errorf("add Node event handler: %w", err)
	}
	c.nodesSynced = nodeEvents.HasSynced
	c.facts.OnChange(func(name string) { c.enqueue(cache.ObjectName{Name: name}, true) })
	recordEvents, err := opts.Records.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueRecord,
		UpdateFunc: c.recordUpdated,
		DeleteFunc: c.recordDeleted,
	})
	if err != nil {
		return nil, controller.Runner{}, fmt.Errorf("add GpuNode event handler: %w", err)
	}
	c.recordsSynced = recordEvents.HasSynced
	klog.FromContext(ctx).V(4).Info("Records controller wired", "controller", Name)
	workers := max(opts.Workers, 1)
	return c, controller.Runner{Run: func(ctx context.Context) error { return c.Run(ctx, workers) },
		WaitsFor: []cache.InformerSynced{c.nodesSynced, c.recordsSynced, c.facts.HasSynced}, Started: c.Synced}, nil
}

// Run syncs records with the given number of workers until ctx is cancelled.
func (c *Controller) Run(ctx context.Context, workers int) error {
	loop := controller.Loop[cache.ObjectName]{Name: Name, Queue: c.queue, Sync: c.syncHandler, Metrics: c.metrics}
	return loop.Run(ctx, workers, c.cachesSynced)
}

// cachesSynced reports whether both caches have synced; the first time they have, before any
// worker starts, it queues every GPU node and every record for the initial pass.
func (c *Controller) cachesSynced() bool {
	if !c.nodesSynced() || !c.recordsSynced() || !c.facts.HasSynced() {
		return false
	}
	c.started.Do(c.startInitialPass)
	return true
}

func (c *Controller) startInitialPass() {
	c.listed.Store(true) // before the lists: an event from now on queues its name itself
	pending := map[string]bool{}
	nodes, _ := c.nodes.List(labels.Everything()) // an indexer's List does not fail
	for _, n := range nodes {
		pending[n.Name] = true
	}
	for _, name := range c.recordKeys() { // cluster-scoped: the key is the name
		pending[name] = true
	}
	backlog := make([]string, 0, len(pending))
	for name := range pending {
		backlog = append(backlog, name)
	}
	c.mu.Lock()
	c.pending, c.backlog = pending, backlog
	c.mu.Unlock()
	c.initialDone.Store(len(pending) == 0)
	c.feed()
}

// initialBatch is how many names of the initial pass the queue holds at most: its sets and
// metrics keep the room of their largest size, so the pass is fed to it, not poured.
const initialBatch = 256

// feed tops the queue up from the initial pass's backlog, skipping the names an event has
// had synced meanwhile. Each sync calls it, so the pass goes on as long as names are
// synced, failed or not.
func (c *Controller) feed() {
	c.mu.Lock()
	room := initialBatch - c.queue.Len()
	var batch []string
	for room > 0 && len(c.backlog) > 0 {
		name := c.backlog[len(c.backlog)-1]
		c.backlog = c.backlog[:len(c.backlog)-1]
		if c.pending[name] {
			batch = append(batch, name)
			room--
		}
	}
	if len(c.backlog) == 0 {
		c.backlog = nil
	}
	c.mu.Unlock()
	for _, name := range batch {
		c.queue.Add(cache.ObjectName{Name: name})
	}
}

// Synced reports whether the caches have synced and every GPU node and record seen at start
// has been synced once: the records are then as complete as this controller can make them.
func (c *Controller) Synced() bool {
	return c.nodesSynced() && c.recordsSynced() && c.facts.HasSynced() && c.initialDone.Load()
}

// Record returns the cached record of a node, nil when there is none. The record may be
// shared with the cache: read it, never modify it. Of a record the cache keeps as a summary
// (Summarized), the spec holds product, count, memory, family, compute capability and source.
func (c *Controller) Record(name string) *homelabv1.GpuNode {
	r, err := c.records.Get(name)
	if err != nil {
		return nil
	}
	return r
}

func (c *Controller) syncHandler(ctx context.Context, key cache.ObjectName) error {
	defer c.feed()
	if err := c.sync(ctx, key.Name); err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.deleted, key.Name)
	if c.pending != nil && c.pending[key.Name] {
		delete(c.pending, key.Name)
		if len(c.pending) == 0 {
			c.pending = nil // a map keeps the room of its largest size
			c.initialDone.Store(true)
		}
	}
	c.mu.Unlock()
	return nil
}

// handleNode queues a node whose GPU identity may have changed: it was added or deleted,
// became or stopped being a GPU node, or changed its NVIDIA labels or capacity. Readiness,
// taints and cordoning are no identity and queue nothing.
func (c *Controller) handleNode(old, cur any) {
	name, err := cache.DeletionHandlingObjectToName(cur)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("node event: %w", err))
		return
	}
	if old == nil {
		// Added or deleted. An added node that is no GPU node has nothing to write; a deleted
		// one may have a record from when it was.
		if _, isGPU := nodecache.NodeFromObj(cur); isGPU || c.isDeleted(name.Name) {
			c.enqueue(name, false)
		}
		return
	}
	oldNode, wasGPU := nodecache.NodeFromObj(old)
	curNode, isGPU := nodecache.NodeFromObj(cur)
	if wasGPU && isGPU && !identityInputsChanged(oldNode, curNode) {
		return
	}
	if wasGPU && inventory.HasGFDLabels(oldNode) && (!isGPU || !inventory.HasGFDLabels(curNode)) {
		c.mu.Lock()
		c.lastSeen[name.Name] = c.now().Time // the labels were there until this event
		c.mu.Unlock()
	}
	c.enqueue(name, true)
}

// isDeleted reports whether a node is absent from the cache (NodeHandler passes deletes as
// adds without an old object).
func (c *Controller) isDeleted(name string) bool {
	_, exists, err := c.nodeIndex.GetByKey(name)
	return err == nil && !exists
}

// identityInputsChanged reports whether anything Identity reads differs between two cached
// versions of a GPU node: the labels the inventory reads, the health monitors' conditions, or
// the capacity.
func identityInputsChanged(old, cur *corev1.Node) bool {
	return !sameReadLabels(old.Labels, cur.Labels) ||
		!slices.Equal(inventory.ReadHealth(old).Conditions, inventory.ReadHealth(cur).Conditions) ||
		!maps.EqualFunc(old.Status.Capacity, cur.Status.Capacity, func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })
}

// sameReadLabels compares the labels the inventory reads (the cache may keep selector keys
// too) without copying them: it runs for every readiness change.
func sameReadLabels(a, b map[string]string) bool {
	n := 0
	for k, v := range a {
		if inventory.ReadsLabel(k) {
			if w, ok := b[k]; !ok || w != v {
				return false
			}
			n++
		}
	}
	for k := range b {
		if inventory.ReadsLabel(k) {
			n--
		}
	}
	return n == 0
}

func (c *Controller) enqueueRecord(obj any) {
	name, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("GpuNode event: %w", err))
		return
	}
	c.enqueue(name, false)
}

// enqueue queues name (through the write limiter when limited) once the initial pass has
// listed the caches. Until then an event queues nothing: the pass queues every node and
// record the caches hold, and a cache holds what an event is about before the event comes.
func (c *Controller) enqueue(name cache.ObjectName, limited bool) {
	switch {
	case !c.listed.Load():
	case limited:
		c.limiter.Enqueue(c.queue, name)
	default:
		c.queue.Add(name)
	}
}

// recordUpdated queues a record someone else changed; the echo of the controller's own write
// (a record as this controller writes it: its annotation names its own spec's hash, and the
// node owns it) is dropped.
func (c *Controller) recordUpdated(_, cur any) {
	if r := recordOf(cur); r != nil && c.consistent(r) {
		return
	}
	c.enqueueRecord(cur)
}

// recordDeleted queues a deleted record's node, so that the record is put back if the node
// remains, and keeps the record's last state: for a node without labels it is the only memory.
func (c *Controller) recordDeleted(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if r := recordOf(obj); r != nil && inventory.KnowsGPUs(&r.Spec) {
		c.mu.Lock()
		c.deleted[r.Name] = r
		c.mu.Unlock()
	}
	c.enqueueRecord(obj)
}

// consistent reports whether a record looks as this controller writes it: the annotation is
// its spec's hash (or the hash of an identity the server cannot hold whole) and a Node owns it.
func (c *Controller) consistent(r *homelabv1.GpuNode) bool {
	return c.holds(r, r.Annotations[homelabv1.IdentityHashAnnotation]) && ownerUID(r) != ""
}

// holds reports whether a record holds the identity with hash, as well as the server lets it:
// a GpuNode CRD older than this operator prunes the fields it lacks.
func (c *Controller) holds(r *homelabv1.GpuNode, hash string) bool {
	if Summarized(r) {
		return r.Annotations[homelabv1.IdentityHashAnnotation] == hash // checked when cached
	}
	if inventory.IdentityHash(r.Spec) == hash {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pruned[r.Name] == hash && r.Annotations[homelabv1.IdentityHashAnnotation] == hash
}

// ownerUID returns the UID of the Node named in a record's owner references ("" if none).
func ownerUID(r *homelabv1.GpuNode) string {
	for _, ref := range r.OwnerReferences {
		if ref.APIVersion == "v1" && ref.Kind == "Node" && ref.Name == r.Name {
			return string(ref.UID)
		}
	}
	return ""
}

func (c *Controller) now() metav1.Time {
	return metav1.NewTime(c.clock.Now().UTC().Truncate(time.Second))
}

// sync makes a node's record follow the node: GFD's facts when the node has them, the
// last-known facts marked missing when they vanished, nothing when the node is gone.
func (c *Controller) sync(ctx context.Context, name string) error {
	record, err := c.records.Get(name)
	if apierrors.IsNotFound(err) {
		record = nil
	} else if err != nil {
		return fmt.Errorf("get GpuNode %s from cache: %w", name, err)
	}
	obj, exists, err := c.nodeIndex.GetByKey(name)
	if err != nil {
		return fmt.Errorf("get node %s from cache: %w", name, err)
	}
	if !exists {
		return c.deleteRecord(ctx, name, record)
	}
	node, ok := obj.(*corev1.Node)
	if !ok || !inventory.IsGPUNode(node) {
		// No GPU node any more: GFD's DaemonSet going away can take even its last labels, so
		// the record stays as it is, and goes with the node.
		c.mu.Lock()
		delete(c.lastSeen, name)
		c.mu.Unlock()
		return nil
	}
	if desired, ok := c.entries.NodeIdentity(node); ok && !c.remembersMore(name, record, desired) {
		return c.syncLabelled(ctx, node, record, desired)
	}
	return c.syncUnlabelled(ctx, node, record)
}

// remembersMore reports whether what is remembered of a node (its record, or an older
// version's memory) says more than the nvidia.com/gpu capacity that is all the node shows
// now: the discovery source vanished, and the record is kept, marked missing.
func (c *Controller) remembersMore(name string, record *homelabv1.GpuNode, desired homelabv1.GpuNodeSpec) bool {
	if desired.Source != homelabv1.SourceDevicePlugin {
		return false
	}
	if record != nil {
		return inventory.KnowsGPUs(&record.Spec) && record.Spec.Source != homelabv1.SourceDevicePlugin
	}
	c.mu.Lock()
	deleted := c.deleted[name]
	c.mu.Unlock()
	if deleted != nil {
		return deleted.Spec.Source != homelabv1.SourceDevicePlugin
	}
	_, seeded := c.seeded(name)
	return seeded
}

// syncLabelled writes the identity GFD states, unless the record already holds it.
func (c *Controller) syncLabelled(ctx context.Context, node *corev1.Node, record *homelabv1.GpuNode, desired homelabv1.GpuNodeSpec) error {
	c.mu.Lock()
	delete(c.lastSeen, node.Name)
	c.mu.Unlock()
	hash := inventory.IdentityHash(desired)
	if record != nil && record.Annotations[homelabv1.IdentityHashAnnotation] == hash &&
		c.holds(record, hash) && ownerUID(record) == string(node.UID) {
		c.metrics.GpuNodeWrites.WithLabelValues(metrics.GpuNodeSkipped).Inc()
		return nil
	}
	now := c.now()
	desired.LastSeen = &now
	outcome := metrics.GpuNodeCreated
	if record != nil {
		outcome = metrics.GpuNodeUpdated
	}
	return c.apply(ctx, node, desired, outcome)
}

// syncUnlabelled marks a record missing when GFD's labels vanished, puts back a record
// someone deleted, or creates one from what an older version remembered. A node that was
// never labelled is unknown, not missing: it gets no record.
func (c *Controller) syncUnlabelled(ctx context.Context, node *corev1.Node, record *homelabv1.GpuNode) error {
	recreate := false
	if record == nil || !inventory.KnowsGPUs(&record.Spec) {
		c.mu.Lock()
		deleted := c.deleted[node.Name]
		c.mu.Unlock()
		if deleted == nil {
			if spec, ok := c.seeded(node.Name); ok {
				return c.apply(ctx, node, spec, metrics.GpuNodeSeeded)
			}
			return nil
		}
		record, recreate = deleted, true
	}
	if Summarized(record) && !recreate {
		full, err := c.reader.Get(ctx, node.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil // deleted meanwhile: its delete event queues the node again
		}
		if err != nil {
			return fmt.Errorf("get GpuNode %s to mark it missing: %w", node.Name, err)
		}
		record = full
	}
	spec := *record.Spec.DeepCopy()
	if spec.MissingSince != nil {
		switch {
		case recreate:
			return c.apply(ctx, node, spec, metrics.GpuNodeCreated)
		case !c.consistent(record) || ownerUID(record) != string(node.UID):
			return c.apply(ctx, node, spec, metrics.GpuNodeUpdated) // put the metadata back
		}
		c.metrics.GpuNodeWrites.WithLabelValues(metrics.GpuNodeSkipped).Inc()
		return nil
	}
	now := c.now()
	spec.MissingSince = &now
	c.mu.Lock()
	if seen, ok := c.lastSeen[node.Name]; ok && (spec.LastSeen == nil || seen.After(spec.LastSeen.Time)) {
		spec.LastSeen = &metav1.Time{Time: seen}
	}
	c.mu.Unlock()
	if err := c.apply(ctx, node, spec, metrics.GpuNodeMissing); err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.lastSeen, node.Name)
	c.mu.Unlock()
	return nil
}

// seeded returns the identity an older version remembered for a node, marked missing since
// it says or since now.
func (c *Controller) seeded(name string) (homelabv1.GpuNodeSpec, bool) {
	// Only nodes present at start, in their first sync: the seed is the memory from before
	// records existed, not that of a node deleted since (its record went with it).
	c.mu.Lock()
	initial := c.pending[name]
	c.mu.Unlock()
	if c.seed == nil || !initial {
		return homelabv1.GpuNodeSpec{}, false
	}
	entry, ok := c.seed(name)
	if !ok || entry.Source == homelabv1.SourceDevicePlugin {
		return homelabv1.GpuNodeSpec{}, false
	}
	spec := inventory.SeededIdentity(&entry)
	if !inventory.KnowsGPUs(&spec) {
		return spec, false
	}
	since := c.now()
	if entry.LabelsMissingSince != nil {
		since = metav1.NewTime(entry.LabelsMissingSince.UTC().Truncate(time.Second))
	}
	spec.MissingSince = &since
	return spec, true
}

// deleteRecord deletes the record of a node that is gone. The owner reference lets the
// garbage collector do the same while the operator is down.
func (c *Controller) deleteRecord(ctx context.Context, name string, record *homelabv1.GpuNode) error {
	c.mu.Lock()
	delete(c.lastSeen, name)
	delete(c.pruned, name)
	c.mu.Unlock()
	if record == nil {
		return nil
	}
	err := c.client.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &record.UID}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete GpuNode %s of a deleted node: %w", name, err)
	}
	c.limiter.Forget(cache.ObjectName{Name: name})
	c.metrics.GpuNodeWrites.WithLabelValues(metrics.GpuNodeDeleted).Inc()
	klog.FromContext(ctx).V(2).Info("Deleted GpuNode record of a deleted node", "gpuNode", klog.KRef("", name))
	return nil
}

// apply writes the whole record: the spec, the hash annotation and the node as its owner.
// Fields another manager set and this controller leaves empty survive an apply; a record
// that still differs afterwards is deleted and written anew.
func (c *Controller) apply(ctx context.Context, node *corev1.Node, spec homelabv1.GpuNodeSpec, outcome string) error {
	hash := inventory.IdentityHash(spec)
	written, err := c.applyOnce(ctx, node, spec, hash)
	if err != nil {
		return err
	}
	if inventory.IdentityHash(written.Spec) != hash {
		klog.FromContext(ctx).Info("GpuNode record kept fields another manager wrote: writing it anew", "gpuNode", klog.KObj(written))
		err := c.client.Delete(ctx, node.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &written.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete GpuNode %s to rewrite it: %w", node.Name, err)
		}
		if written, err = c.applyOnce(ctx, node, spec, hash); err != nil {
			return err
		}
		if inventory.IdentityHash(written.Spec) != hash {
			// The server dropped fields: writing again would loop. Keep what it holds.
			c.mu.Lock()
			c.pruned[node.Name] = hash
			c.mu.Unlock()
			klog.FromContext(ctx).Error(nil, "The API server dropped fields of a GpuNode record; is the GpuNode CRD older than this operator? Apply manifests/crd of this release, or run with --install-crd",
				"gpuNode", klog.KObj(written))
		}
	}
	c.limiter.Wrote(cache.ObjectName{Name: node.Name})
	c.metrics.GpuNodeWrites.WithLabelValues(outcome).Inc()
	klog.FromContext(ctx).V(2).Info("Wrote GpuNode record", "gpuNode", klog.KObj(written), "outcome", outcome,
		"product", spec.Product, "gpus", spec.GpuCount, "missing", spec.MissingSince != nil)
	return nil
}

func (c *Controller) applyOnce(ctx context.Context, node *corev1.Node, spec homelabv1.GpuNodeSpec, hash string) (*homelabv1.GpuNode, error) {
	if node.UID == "" {
		return nil, fmt.Errorf("apply GpuNode %s: the cached node has no UID for the owner reference", node.Name)
	}
	body, err := applyBody(node, spec, hash)
	if err != nil {
		return nil, err
	}
	written, err := c.client.Patch(ctx, node.Name, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: homelabv1.FieldManager, Force: new(true)})
	if err != nil {
		return nil, fmt.Errorf("apply GpuNode %s (%s, %d GPUs): %w", node.Name, spec.Product, spec.GpuCount, err)
	}
	return written, nil
}
