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

// Package nodestatus is the controller that mirrors every GPU node's inventory entry into the
// ConfigMap gpu-node-status, one data key per node, for tools that read ConfigMaps rather than
// custom resources.
package nodestatus

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/statuswriter"
)

// Name names the controller and its workqueue.
const Name = "gpu-node-status"

const managedByLabel = "app.kubernetes.io/managed-by"

// OmittedAnnotation on the ConfigMap says how many GPU nodes were left out of its data to
// keep it small (the same bound as the GpuInventory status).
const OmittedAnnotation = "homelab.youngju.dev/omitted-nodes"

// maxDataBytes bounds the ConfigMap's data, as inventory.MaxNodeListBytes bounds a status.
const maxDataBytes = 256 << 10

// maxEntryBytes bounds one entry read back from the ConfigMap: the operator writes far less.
const maxEntryBytes = 16 << 10

// Entries returns the entries of a ConfigMap this controller wrote, read as decode reads them.
func Entries(cm *corev1.ConfigMap) []homelabv1.GpuNodeEntry {
	entries, _ := decode(cm.Data)
	return entries
}

// decode reads the entries stored in the ConfigMap as last-known memory. Anyone who may edit
// the ConfigMap can write there, so only entries as the operator writes them are kept; the
// others are returned as dropped (and disappear with the next write).
func decode(data map[string]string) (entries []homelabv1.GpuNodeEntry, dropped []string) {
	entries = make([]homelabv1.GpuNodeEntry, 0, len(data))
	for name, value := range data {
		if e, ok := readEntry(name, value); ok {
			entries = append(entries, e)
		} else {
			dropped = append(dropped, name)
		}
	}
	slices.Sort(dropped)
	return entries, dropped
}

// readEntry decodes one entry strictly: known fields only, named after its key, plausible.
func readEntry(name, value string) (homelabv1.GpuNodeEntry, bool) {
	var e homelabv1.GpuNodeEntry
	if len(value) > maxEntryBytes {
		return e, false
	}
	dec := json.NewDecoder(strings.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || dec.More() || e.Name != name || e.GpuCount < 0 || e.GpuMemoryMiB < 0 {
		return e, false
	}
	return e, true
}

// Controller keeps the ConfigMap equal to the GPU nodes' entries.
type Controller struct {
	client           ConfigMapClient
	rest             rest.Interface // nil: updates through client
	nodes            nodecache.NodeLister
	nodesSynced      cache.InformerSynced
	configMaps       corelisters.ConfigMapLister
	configMapsSynced cache.InformerSynced
	key              cache.ObjectName
	maxNodes         int
	clock            clock.PassiveClock
	entries          *inventory.EntryCache
	limiter          *controller.WriteLimiter[cache.ObjectName]
	queue            workqueue.TypedRateLimitingInterface[cache.ObjectName]
	metrics          *metrics.Metrics

	recorder   record.EventRecorder
	records    inventory.Records
	facts      source.Changes // DRA devices and GpuNode records
	progressed atomic.Bool    // a sync succeeded

	// last is what this controller wrote last: while the ConfigMap is at that
	// resourceVersion, its entries need not be decoded again.
	last *written
}

type written struct {
	resourceVersion string
	entries         []homelabv1.GpuNodeEntry
}

// ConfigMapClient writes the ConfigMaps of one namespace: kubeclient.ConfigMaps, or a
// clientset's CoreV1().ConfigMaps(namespace).
type ConfigMapClient interface {
	Create(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (*corev1.ConfigMap, error)
	Update(ctx context.Context, cm *corev1.ConfigMap, opts metav1.UpdateOptions) (*corev1.ConfigMap, error)
}

// Options are what the ConfigMap controller has of its own beside the controller.Context.
type Options struct {
	Namespace string // of the ConfigMap
	// Client writes the ConfigMap: the ConfigMaps of Namespace.
	Client ConfigMapClient
	// REST, the core/v1 REST client, sends the updates asking for an answer of metadata only
	// (see update); nil: Client sends them and the answer is the whole object.
	REST rest.Interface
	// ConfigMaps watches the namespace (it may be limited to the one ConfigMap by a field
	// selector): NewConfigMapInformer.
	ConfigMaps cache.SharedIndexInformer
	// MinInterval allows at most one write per interval under churn (0: no limit).
	MinInterval time.Duration
	// Delay is how long every change waits, so that the ConfigMap follows the GpuInventory
	// status instead of reaching the API server with it.
	Delay time.Duration
}

// NewController wires the controller. It follows the context's device facts and records.
func NewController(ctx context.Context, cc *controller.Context, opts Options) (*Controller, controller.Runner, error) {
	d := cc.Defaulted()
	if opts.Client == nil {
		return nil, controller.Runner{}, fmt.Errorf("the ConfigMap controller needs a ConfigMap client")
	}
	c := &Controller{
		recorder:         d.Recorder,
		client:           opts.Client,
		rest:             opts.REST,
		nodes:            nodecache.NewNodeLister(d.Nodes),
		nodesSynced:      d.Nodes.HasSynced,
		configMaps:       corelisters.NewConfigMapLister(opts.ConfigMaps.GetIndexer()),
		configMapsSynced: opts.ConfigMaps.HasSynced,
		key:              cache.ObjectName{Namespace: opts.Namespace, Name: homelabv1.NodeStatusConfigMapName},
		queue:            controller.NewQueue[cache.ObjectName](Name, d.Metrics),
		maxNodes:         d.MaxStatusNodes,
		clock:            d.Clock,
		entries:          d.Entries,
		metrics:          d.Metrics,
		records:          d.Facts.Record,
		facts:            source.Merge(d.Facts.Changes(controller.Devices | controller.Records)),
	}
	c.limiter = controller.NewWriteLimiter[cache.ObjectName](opts.MinInterval, 1, c.clock).WithDelay(opts.Delay)
	enqueue := func(any) { c.limiter.Enqueue(c.queue, c.key) }
	if _, err := d.NodeEvents.AddEventHandler(nodecache.NodeHandler(c.entries.Forget, func(_, cur any) { enqueue(cur) })); err != nil {
		return nil, controller.Runner{}, fmt.Errorf("add Node event handler: %w", err)
	}
	isOurs := func(obj any) bool {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		name, err := cache.ObjectToName(obj)
		return err == nil && name == c.key
	}
	if _, err := opts.ConfigMaps.AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: isOurs,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, cur any) { enqueue(cur) },
			DeleteFunc: enqueue, // recreate it
		},
	}); err != nil {
		return nil, controller.Runner{}, fmt.Errorf("add ConfigMap event handler: %w", err)
	}
	c.facts.OnChange(func(string) { enqueue(nil) })
	klog.FromContext(ctx).V(4).Info("ConfigMap controller wired", "controller", Name)
	return c, controller.Runner{Run: c.Run, WaitsFor: c.waitsFor(), Started: c.Synced}, nil
}

func (c *Controller) waitsFor() []cache.InformerSynced {
	return []cache.InformerSynced{c.nodesSynced, c.configMapsSynced, c.facts.HasSynced}
}

// Run keeps the ConfigMap up to date until ctx is cancelled. One worker is enough: there is
// one key.
func (c *Controller) Run(ctx context.Context) error {
	c.queue.Add(c.key) // nodes may be none at all, and the ConfigMap should exist anyway
	loop := controller.Loop[cache.ObjectName]{Name: Name, Queue: c.queue, Sync: c.syncHandler, Metrics: c.metrics}
	return loop.Run(ctx, 1, c.waitsFor()...)
}

// Data returns the ConfigMap data for the given entries: each GPU node's entry as compact JSON,
// without what pods hold (the mirror is per-node GPU state, and pods come and go far more often).
func Data(entries []homelabv1.GpuNodeEntry) (map[string]string, error) {
	data := make(map[string]string, len(entries))
	for _, n := range entries {
		n.AllocatedGpus, n.FreeGpus, n.GpuPods = 0, 0, 0
		b, err := json.Marshal(n)
		if err != nil {
			return nil, fmt.Errorf("encode entry of node %s: %w", n.Name, err)
		}
		data[n.Name] = string(b)
	}
	return data, nil
}

// Synced reports whether the caches have synced and a sync succeeded (the ConfigMap is
// current): without rights on ConfigMaps the operator is not ready.
func (c *Controller) Synced() bool {
	return c.nodesSynced() && c.configMapsSynced() && c.progressed.Load()
}

func (c *Controller) syncHandler(ctx context.Context, key cache.ObjectName) error {
	err := c.sync(ctx, key)
	if err == nil {
		c.progressed.Store(true)
	}
	return err
}

// sync writes the ConfigMap when the entries of the GPU nodes differ from its data.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list nodes from cache: %w", err)
	}
	current, err := c.configMaps.ConfigMaps(key.Namespace).Get(key.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get ConfigMap %s from cache: %w", key, err)
	}
	// Malformed labels are logged by the inventory controller.
	content, _ := c.entries.ComputeWithRecords(nodes, c.previous(ctx, current), c.records, c.clock.Now())
	listed, omitted := content.Listed(c.maxNodes, maxDataBytes) // a copy
	content.Release()
	data, err := Data(listed)
	if err != nil {
		return err
	}
	omittedValue := strconv.Itoa(omitted)
	if current != nil && maps.Equal(current.Data, data) && len(current.BinaryData) == 0 && current.Annotations[OmittedAnnotation] == omittedValue {
		return nil
	}
	resourceVersion, err := c.write(ctx, key, current, data, omittedValue)
	if err != nil {
		return err
	}
	c.last = &written{resourceVersion: resourceVersion, entries: listed}
	c.limiter.Wrote(key)
	c.metrics.ConfigMapWrites.Inc()
	klog.FromContext(ctx).Info("Updated GPU node status ConfigMap", "configMap", klog.KRef(key.Namespace, key.Name), "gpuNodes", len(data))
	return nil
}

// previous returns the entries the ConfigMap holds: the memory of last-known labels. What
// the operator cannot have written is dropped, and an event says so.
func (c *Controller) previous(ctx context.Context, current *corev1.ConfigMap) []homelabv1.GpuNodeEntry {
	switch {
	case current == nil:
		return nil
	case c.last != nil && c.last.resourceVersion == current.ResourceVersion:
		return c.last.entries
	}
	// First sync, or someone else changed it.
	entries, dropped := decode(current.Data)
	if len(dropped) > 0 || len(current.BinaryData) > 0 {
		msg := fmt.Sprintf("Dropping content the operator did not write: %d data keys that are no entry of a GPU node (%s), %d binaryData keys",
			len(dropped), nameList(dropped, 5), len(current.BinaryData))
		klog.FromContext(ctx).Info(msg, "configMap", klog.KObj(current))
		c.recorder.Event(current, corev1.EventTypeWarning, "ForeignContentDropped", msg)
	}
	return entries
}

// nameList joins the first max names and says how many more there are.
func nameList(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
}

// write creates the ConfigMap (first run, or someone deleted it) or replaces its data, so
// that keys of nodes that are gone disappear whoever wrote them; a concurrent change fails
// with a conflict and the sync is retried. It returns the new resourceVersion.
func (c *Controller) write(ctx context.Context, key cache.ObjectName, current *corev1.ConfigMap, data map[string]string, omitted string) (string, error) {
	if current == nil {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace,
				Labels:      map[string]string{managedByLabel: homelabv1.FieldManager},
				Annotations: map[string]string{OmittedAnnotation: omitted}},
			Data: data,
		}
		created, err := c.client.Create(ctx, cm, metav1.CreateOptions{FieldManager: homelabv1.FieldManager})
		if err != nil {
			return "", fmt.Errorf("create ConfigMap %s: %w", key, err)
		}
		return created.ResourceVersion, nil
	}
	cm := current.DeepCopy()
	cm.Data, cm.BinaryData = data, nil
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[OmittedAnnotation] = omitted
	resourceVersion, err := c.update(ctx, cm)
	if err != nil {
		return "", fmt.Errorf("update ConfigMap %s: %w", key, err)
	}
	return resourceVersion, nil
}

// update writes cm and returns its new resourceVersion ("" when the answer does not say).
// Against an API server it asks for an answer of metadata only: the ConfigMap holds an entry
// per listed GPU node, and reading it back after every write would cost as much as sending it.
func (c *Controller) update(ctx context.Context, cm *corev1.ConfigMap) (string, error) {
	opts := metav1.UpdateOptions{FieldManager: homelabv1.FieldManager}
	if c.rest == nil {
		updated, err := c.client.Update(ctx, cm, opts)
		if err != nil {
			return "", err
		}
		return updated.ResourceVersion, nil
	}
	result := c.rest.Put().Namespace(cm.Namespace).Resource("configmaps").Name(cm.Name).
		VersionedParams(&opts, kubeclient.ParameterCodec).SetHeader("Accept", statuswriter.MetadataOnly).Body(cm).Do(ctx)
	// Without the version in the answer, the next sync decodes the cached ConfigMap.
	return statuswriter.WrittenVersion(ctx, result, "ConfigMap", klog.KObj(cm))
}
