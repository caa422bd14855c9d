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

package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/claimcache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/gpuinventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/gpunode"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/nodestatus"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventorycache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/podcache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/quota"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/quotacache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/reconnect"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/slicecache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/statuswriter"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/usage"
)

// configMapSyncFactor: under churn the ConfigMap (a secondary mirror of up to 256 KiB) is
// written at most once per this many sync intervals, and it follows the status by one
// interval, so the operator's two largest writes do not reach the API server together.
const configMapSyncFactor = 4

// newClients makes the API clients: built-in types (Nodes, the ConfigMap, Events, the Lease)
// travel as protobuf; custom resources as JSON, the only encoding they have.
func (o *Operator) newClients(config *rest.Config) error {
	config = rest.CopyConfig(config)
	// Gzip costs CPU on both sides for no gain on a cluster network; watches are never compressed.
	config.DisableCompression = !o.opts.Compression
	// Reads wait for an API server that is away, so informers resume as soon as it is back.
	config.Wrap(func(rt http.RoundTripper) http.RoundTripper { return reconnect.Transport(rt, reconnect.DefaultPolicy) })
	o.config = config
	protobuf := rest.CopyConfig(config)
	protobuf.ContentType = "application/vnd.kubernetes.protobuf"
	protobuf.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	o.protobufConfig = protobuf
	records := rest.CopyConfig(config)
	records.QPS, records.Burst = float32(o.opts.RecordQPS), o.opts.RecordBurst
	var err error
	for _, c := range []struct {
		client *rest.Interface
		config *rest.Config
		gv     schema.GroupVersion
	}{
		{&o.core, protobuf, corev1.SchemeGroupVersion},
		{&o.coordination, protobuf, coordinationv1.SchemeGroupVersion},
		{&o.homelab, config, homelabv1.SchemeGroupVersion},
		{&o.recordClient, records, homelabv1.SchemeGroupVersion},
		{&o.recordReader, records, homelabv1.SchemeGroupVersion}, // a rate limit of its own
		{&o.apiext, config, apiextensionsv1.SchemeGroupVersion},
	} {
		if *c.client, err = kubeclient.New(c.config, c.gv, nil); err != nil {
			return err // names the group version
		}
	}
	return nil
}

// nodeClient reads Nodes through a decoder that makes each one the trimmer's compact form
// straight away (docs/design/node-cache.md), so the Node informer holds trimmed Nodes only.
func (o *Operator) nodeClient(trimmer *nodecache.NodeTrimmer) (nodecache.NodesClient, error) {
	rc, err := kubeproto.NewClient(o.protobufConfig, trimmer.Codec())
	if err != nil {
		return nil, err // names the Node client
	}
	return kubeclient.Nodes(rc), nil
}

// runRelisting runs the informers and controllers with a node cache that keeps only the
// labels the inventory and the current node selectors read. When a selector names another
// label, everything is started again with that label kept (a re-list); the same happens when
// the API server starts or stops serving ResourceSlices. With noInventories
// (the GpuInventory CRD is new) the first run lists nodes while the CRDs become served.
func (o *Operator) runRelisting(ctx context.Context, crds crdsServed, noInventories bool) error {
	logger := klog.FromContext(ctx)
	relists := rate.NewLimiter(rate.Every(relistEvery), relistBurst)
	for {
		var keys []string
		var err error
		if !noInventories {
			if keys, err = o.selectorKeys(ctx); err != nil {
				return err
			}
		}
		keys = append(keys, o.flavorKeys(ctx)...)
		noInventories = false
		relist := make(chan string, 1)
		runCtx, cancel := context.WithCancel(ctx)
		err = o.runInformers(runCtx, crds, nodecache.NewNodeTrimmer(keys), func(reason string) {
			select {
			case relist <- reason:
			default:
			}
			cancel()
		})
		cancel()
		select {
		case reason := <-relist:
			if ctx.Err() != nil {
				return err
			}
			// Anyone who may edit an inventory could cycle selector keys: re-lists are spaced.
			wait := relists.Reserve().Delay()
			logger.Info("Re-listing", "reason", reason, "after", wait)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
			continue
		default:
		}
		return err
	}
}

// relistEvery and relistBurst space the node re-lists that selector changes cause.
const (
	relistEvery = 30 * time.Second
	relistBurst = 3
)

// selectorKeys lists the label keys that the node selectors of all GpuInventories name,
// reading the inventories without their node lists.
func (o *Operator) selectorKeys(ctx context.Context) ([]string, error) {
	light, err := inventorycache.NewInformerClient(o.config)
	if err != nil {
		return nil, err
	}
	list, err := kubeclient.GpuInventories(light).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list GpuInventories: %w", err)
	}
	var keys []string
	for _, gi := range list.Items {
		sel, err := inventory.Selector(gi.Spec.NodeSelector)
		if err != nil {
			continue
		}
		reqs, _ := sel.Requirements()
		for _, r := range reqs {
			keys = append(keys, r.Key())
		}
	}
	return keys, nil
}

// flavorKeys lists the label keys Kueue's ResourceFlavors select nodes by, and those runs
// asked for, so that the node cache keeps them from its first list.
func (o *Operator) flavorKeys(ctx context.Context) []string {
	var keys []string
	if o.opts.Quota {
		var err error
		if keys, err = quotacache.FlavorLabelKeys(ctx, o.config); err != nil { // a flavor's key then costs a re-list
			klog.FromContext(ctx).V(2).Info("Cannot list Kueue's ResourceFlavors for their node labels", "err", err)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return append(keys, o.askedKeys...)
}

// caches are what one run of the controllers reads.
type caches struct {
	nodes       cache.SharedIndexInformer // GPU nodes as Nodes, the others as metadata
	configMaps  cache.SharedIndexInformer // the one ConfigMap
	inventories gpuinventory.Informer
	records     gpunode.RecordInformer // nil: no GpuNode records
	slices      *slicecache.Cache      // nil: the API server serves no resource.k8s.io/v1
	tracker     *allocation.Tracker
	pods        *podcache.Cache   // nil: --allocation=false
	claims      *claimcache.Cache // nil: no pods read, or no resource.k8s.io/v1
	quota       *quotacache.Cache // nil: --quota=false
	usage       *usage.Cache      // nil: no --prometheus-url
}

func (o *Operator) newCaches(ctx context.Context, trimmer *nodecache.NodeTrimmer) (*caches, error) {
	nodes, err := o.nodeClient(trimmer)
	if err != nil {
		return nil, err
	}
	// The custom resources' informers read JSON watch events in place, and the inventory
	// informer's GpuInventories come without status.nodes: the controller's own writes come
	// back without it.
	inventories, err := inventorycache.NewInformerClient(o.config)
	if err != nil {
		return nil, err
	}
	c := &caches{
		nodes:      nodecache.NewNodeInformer(nodes, 0),
		configMaps: nodestatus.NewConfigMapInformer(kubeclient.ConfigMaps(o.core, o.namespace), homelabv1.NodeStatusConfigMapName),
		// The informer needs the resync period too: one made without it ignores the
		// per-handler period the inventory controller asks for.
		inventories: gpuinventory.NewInformer(kubeclient.GpuInventories(inventories), o.opts.ResyncPeriod),
	}
	o.mu.Lock()
	withRecords := o.withRecords
	o.mu.Unlock()
	if withRecords {
		c.records = gpunode.NewRecordInformer(kubeclient.GpuNodes(inventories), 0)
	}
	if o.servesSlices(ctx) {
		if c.slices, err = slicecache.NewForConfig(o.config); err != nil {
			return nil, err
		}
	}
	if o.opts.Allocation {
		if err := o.newAllocationCaches(ctx, c); err != nil {
			return nil, err
		}
	}
	if o.opts.Quota {
		if c.quota, err = quotacache.New(o.config); err != nil {
			return nil, fmt.Errorf("create quota cache: %w", err)
		}
	}
	if c.usage, err = o.newUsageCache(c); err != nil {
		return nil, fmt.Errorf("create usage cache: %w", err)
	}
	return c, nil
}

// newAllocationCaches makes the tracker of what pods hold and wait for, fed by the pod cache
// and, where DRA is served, the claim cache.
func (o *Operator) newAllocationCaches(ctx context.Context, c *caches) error {
	c.tracker = allocation.NewTracker()
	var err error
	if c.pods, err = podcache.New(o.config, c.tracker, podcache.Options{ByNamespace: o.opts.ListPodsByNamespace}); err != nil {
		return fmt.Errorf("create pod cache: %w", err)
	}
	served, err := claimcache.Served(ctx, o.core)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot tell whether resource.k8s.io/v1 serves ResourceClaims; counting device-plugin GPUs only until the next re-list")
	}
	if served {
		if c.claims, err = claimcache.New(o.config, c.tracker); err != nil {
			return fmt.Errorf("create ResourceClaim cache: %w", err)
		}
	}
	return nil
}

// runningCache is a cache as the start-up runs it: until ctx is cancelled.
type runningCache interface{ Run(ctx context.Context) }

// informerCache runs an informer as a runningCache.
type informerCache struct{ informer cache.SharedIndexInformer }

func (i informerCache) Run(ctx context.Context) { i.informer.RunWithContext(ctx) }

// builtIn are the caches of built-in kinds, pods first: theirs is the longest list.
func (c *caches) builtIn() []runningCache {
	var running []runningCache
	if c.pods != nil {
		running = append(running, c.pods)
	}
	running = append(running, informerCache{c.nodes}, informerCache{c.configMaps})
	if c.slices != nil {
		running = append(running, informerCache{c.slices.Informer()})
	}
	if c.claims != nil {
		running = append(running, c.claims)
	}
	if c.quota != nil {
		running = append(running, c.quota)
	}
	if c.usage != nil {
		running = append(running, c.usage)
	}
	return running
}

// custom are the caches of the custom resources, which start once their CRDs are served.
func (c *caches) custom() []runningCache {
	var running []runningCache
	if c.records != nil {
		running = append(running, informerCache{c.records.Informer()})
	}
	return append(running, informerCache{c.inventories.Informer()})
}

// servesSlices reports whether the API server serves DRA's ResourceSlices; a cluster before
// Kubernetes 1.34, or with resource.k8s.io turned off, runs without them.
func (o *Operator) servesSlices(ctx context.Context) bool {
	served, err := slicecache.Served(ctx, o.core)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot tell whether resource.k8s.io/v1 is served; running without DRA ResourceSlices until the next re-list")
		return false
	}
	return served
}

// watchSliceServing re-lists (calls relist) when the API server starts or stops serving
// ResourceSlices, checking every sliceDiscoveryInterval until ctx is cancelled.
func (o *Operator) watchSliceServing(ctx context.Context, serving bool, relist func(string)) {
	_ = wait.PollUntilContextCancel(ctx, sliceDiscoveryInterval, false, func(ctx context.Context) (bool, error) {
		served, err := slicecache.Served(ctx, o.core)
		if err != nil || served == serving {
			return false, nil
		}
		relist(fmt.Sprintf("resource.k8s.io/v1 served: %t", served))
		return true, nil
	})
}

// sliceDiscoveryInterval is how often the operator asks whether ResourceSlices are served.
const sliceDiscoveryInterval = 5 * time.Minute

// runInformers is one run of the caches and the controllers, until ctx is cancelled; relist
// ends it for a run on new caches, saying why. The caches are made, the controllers on
// them, the caches started; each controller runs once the caches it waits for have synced.
func (o *Operator) runInformers(ctx context.Context, crds crdsServed, trimmer *nodecache.NodeTrimmer, relist func(reason string)) error {
	var running sync.WaitGroup
	defer running.Wait() // the old caches are gone before a re-list makes new ones
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	c, err := o.newCaches(ctx, trimmer)
	if err != nil {
		return err
	}
	// Events about GPU nodes go to the GpuInventory, events about the ConfigMap to it; the
	// broadcaster aggregates repeats.
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(kubeclient.EventSink{Client: o.core})
	defer broadcaster.Shutdown()
	nodeEvents := &nodecache.Events{}
	cc, err := o.newContext(c, nodeEvents, broadcaster.NewRecorder(kubeclient.Scheme, corev1.EventSource{Component: homelabv1.FieldManager}))
	if err != nil {
		return err
	}
	cs, runners, err := o.newControllers(ctx, cc, c, trimmer.Keeps, func(key string) {
		o.mu.Lock()
		if !slices.Contains(o.askedKeys, key) {
			o.askedKeys = append(o.askedKeys, key)
		}
		o.mu.Unlock()
		relist(fmt.Sprintf("a node selector or a ResourceFlavor names label %q, which the node cache drops", key))
	})
	if err != nil {
		return err
	}
	// Every controller has its node handler in nodeEvents, one listener of the informer.
	if _, err := c.nodes.AddEventHandler(nodeEvents); err != nil {
		return fmt.Errorf("add Node event handler: %w", err)
	}
	o.mu.Lock()
	o.inventory, o.nodeStatus, o.records = cs.inventory, cs.nodeStatus, cs.records
	o.mu.Unlock()

	for _, r := range c.builtIn() {
		running.Go(func() { r.Run(ctx) })
	}
	if err := crds(ctx); err != nil {
		return err
	}
	for _, r := range c.custom() {
		running.Go(func() { r.Run(ctx) })
	}
	go o.watchSliceServing(ctx, c.slices != nil, relist)

	var started []cache.InformerSynced
	for _, r := range runners {
		started = append(started, r.Started)
	}
	if o.setProcs != nil {
		o.setProcs(false)
	}
	go o.settle(ctx, cs.inventory.Synced, started)

	errs := make(chan error, len(runners))
	for _, r := range runners {
		go func() { errs <- r.Run(ctx) }()
	}
	var all []error
	for range runners {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// newContext makes what the controllers of a run share. The entry cache hears of changed
// devices and holdings before any controller does.
func (o *Operator) newContext(c *caches, nodeEvents *nodecache.Events, recorder record.EventRecorder) (*controller.Context, error) {
	entries := inventory.NewEntryCache()
	var facts controller.Facts
	if c.slices != nil {
		entries = inventory.NewEntryCacheWithDevices(c.slices.Facts).WithDeviceList(c.slices.Devices)
		facts.Devices = c.slices
	}
	if c.pods != nil {
		entries = entries.WithAllocation(c.tracker.Held)
		synced := []cache.InformerSynced{c.pods.HasSynced}
		if c.claims != nil {
			synced = append(synced, c.claims.HasSynced)
		}
		facts.Holdings, facts.Pending = controller.FactsOf(c.tracker.OnChange, synced...), c.tracker.Pending
	}
	if c.quota != nil {
		facts.Quota, facts.QuotaNow = c.quota, o.quotaNow(c.quota)
	}
	if c.usage != nil {
		facts.Usage, facts.UsageNow = c.usage, c.usage.Snapshot
	}
	controller.Merge(facts.Devices, facts.Holdings).OnChange(entries.Changed)
	entries.Notified()
	if c.records != nil {
		records, err := controller.ObjectFacts(c.records.Informer(), c.records.Informer().HasSynced)
		if err != nil {
			return nil, fmt.Errorf("GpuNode records: %w", err)
		}
		facts.Records, facts.Record = records, gpunode.RecordsOf(c.records)
	}
	return &controller.Context{Nodes: c.nodes, NodeEvents: nodeEvents,
		Entries: entries, Facts: facts, Metrics: o.metrics, Recorder: recorder,
		MinSyncInterval: o.opts.MinSyncInterval, MaxStatusNodes: o.opts.MaxStatusNodes}, nil
}

// quotaNow reads the cluster's quota from the quota cache.
func (o *Operator) quotaNow(q *quotacache.Cache) func() (quota.Cluster, string) {
	dra := make([]corev1.ResourceName, len(o.opts.QuotaDRAResources))
	for i, name := range o.opts.QuotaDRAResources {
		dra[i] = corev1.ResourceName(name)
	}
	return func() (quota.Cluster, string) {
		s := q.Snapshot()
		return quota.Cluster{Kueue: s.Kueue, ResourceQuotas: s.ResourceQuotas, DRAResources: dra}, s.Problem
	}
}

// recordWorkers write GpuNode records in parallel: the first start on a large cluster
// creates one per GPU node, at --gpunode-qps.
const recordWorkers = 4

// controllers are the controllers of one run of the informers.
type controllers struct {
	inventory  *gpuinventory.Controller
	nodeStatus *nodestatus.Controller
	records    *gpunode.Controller
}

// newControllers makes the controllers on cc, records first: they hear of node events in
// that order.
func (o *Operator) newControllers(ctx context.Context, cc *controller.Context, c *caches,
	keepsLabel func(string) bool, onUnknownKey func(string)) (*controllers, []controller.Runner, error) {
	cs := &controllers{}
	var runners []controller.Runner
	if c.records != nil {
		seed := &seeder{homelab: o.homelab, core: o.core, namespace: o.namespace, ctx: ctx}
		records, run, err := gpunode.NewController(ctx, cc, gpunode.Options{Client: kubeclient.GpuNodes(o.recordClient), Reader: kubeclient.GpuNodes(o.recordReader),
			Records: c.records, Seed: seed.lookup, Workers: recordWorkers})
		if err != nil {
			return nil, nil, err
		}
		cs.records, runners = records, append(runners, run)
	}
	inv, run, err := gpuinventory.NewController(ctx, cc, gpuinventory.Options{
		Writer:               statuswriter.New(o.homelab),
		Client:               kubeclient.GpuInventories(o.homelab),
		Inventories:          c.inventories,
		ResyncPeriod:         o.opts.ResyncPeriod,
		PerNodeMetrics:       o.opts.PerNodeMetrics,
		KeepsLabel:           keepsLabel,
		OnUnknownSelectorKey: onUnknownKey,
		Workers:              o.opts.Workers,
		BeforeSync:           o.opts.BeforeInventorySync,
	})
	if err != nil {
		return nil, nil, err
	}
	cs.inventory, runners = inv, append(runners, run)
	status, run, err := nodestatus.NewController(ctx, cc, nodestatus.Options{Namespace: o.namespace,
		Client: kubeclient.ConfigMaps(o.core, o.namespace), REST: o.core, ConfigMaps: c.configMaps,
		MinInterval: configMapSyncFactor * o.opts.MinSyncInterval, Delay: o.opts.MinSyncInterval})
	if err != nil {
		return nil, nil, err
	}
	cs.nodeStatus, runners = status, append(runners, run)
	return cs, runners, nil
}

// settle hands the initial lists' buffers back to the OS once the first status is written
// (not as the caches sync, where a collection would slow that first status), and what the
// first syncs left once every controller has made its first pass; then the operator runs on
// --steady-gomaxprocs.
func (o *Operator) settle(ctx context.Context, firstStatus cache.InformerSynced, started []cache.InformerSynced) {
	if wait.PollUntilContextCancel(ctx, settlePoll, false, func(context.Context) (bool, error) { return firstStatus(), nil }) != nil {
		return
	}
	runtime.GC()
	debug.FreeOSMemory()
	all := func(context.Context) (bool, error) {
		for _, ok := range started {
			if !ok() {
				return false, nil
			}
		}
		return true, nil
	}
	if wait.PollUntilContextCancel(ctx, time.Second, false, all) != nil {
		return
	}
	runtime.GC()
	debug.FreeOSMemory()
	if o.setProcs != nil {
		o.setProcs(true)
		klog.FromContext(ctx).V(2).Info("Settled", "gomaxprocs", runtime.GOMAXPROCS(0))
	}
}

// settlePoll is how often settle asks whether the first status is written.
const settlePoll = 100 * time.Millisecond
