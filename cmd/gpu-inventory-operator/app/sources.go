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
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/claimcache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/gpuinventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/gpunode"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/nodestatus"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/podcache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/quotacache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/slicecache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/topology"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/topologycache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/usage"
)

// A sourceRow is one input of the operator: what it reads, when it is read, how it is built.
// docs/design/sources.md is the recipe for a new one.
type sourceRow struct {
	// name is the built source's Name().
	name string
	// reads is what the operator's RBAC grants for it; TestSourcesReadWhatTheRBACGrants and
	// the docs' list of what is read are checked against it.
	reads []access
	// custom: a kind of this project's, read once its CRD is served.
	custom bool
	// on reports whether it is read in this run (flags, what the API server serves); nil:
	// always. An error is logged and reads as off until the next run.
	on func(ctx context.Context, e *env) (bool, error)
	// build makes it; the sources of the rows above it are in e.
	build func(ctx context.Context, e *env) (source.Source, error)
	// nodeLabels are the node label keys it selects or groups nodes by, asked before the
	// node cache lists so that it keeps them from its first list (nil: none).
	nodeLabels func(ctx context.Context, e *env) labelKeys
}

// labelKeys are node label keys the node cache keeps beyond its own rules: those selectors
// name, and those of topology levels, which a GPU node holds apart from its other labels
// (nodecache.NodeTrimmer.KeepLevels).
type labelKeys struct {
	selected, levels []string
}

// access is one rule of the RBAC a source needs: get, list and watch on resources of group.
type access struct {
	group     string
	resources []string
	names     []string // resourceNames; none: all
	// component is where the grant lives: "" the operator's ClusterRole, "role" its Role in
	// its namespace, else the optional component of manifests/ of that name.
	component string
	verbs     []string // nil: get, list, watch
}

// sources are the operator's inputs, in the order they are built and started: the pods
// first, whose list is the longest; the custom resources last, started once their CRDs are
// served. A row reads the sources above it (the usage reader reads the pods and the slices).
var sources = []sourceRow{
	{name: "pods", reads: []access{{resources: []string{"pods"}},
		{resources: []string{"namespaces"}, component: "list-pods-by-namespace", verbs: []string{"list"}}},
		on: func(_ context.Context, e *env) (bool, error) { return e.opts.Allocation, nil },
		build: func(_ context.Context, e *env) (source.Source, error) {
			return podcache.NewSource(e.clients.config, e.tracker(), podcache.Options{ByNamespace: e.opts.ListPodsByNamespace})
		}},
	{name: "nodes", reads: []access{{resources: []string{"nodes"}}},
		build: func(_ context.Context, e *env) (source.Source, error) {
			trimmer := nodecache.NewNodeTrimmer(e.labelKeys.selected).KeepLevels(e.labelKeys.levels)
			rc, err := kubeproto.NewClient(e.clients.protobuf, trimmer.Codec())
			if err != nil {
				return nil, err // names the Node client
			}
			return nodecache.NewSource(kubeclient.Nodes(rc), trimmer), nil
		}},
	{name: "configmap", reads: []access{{resources: []string{"configmaps"}, names: []string{homelabv1.NodeStatusConfigMapName}, component: "role"}},
		build: func(_ context.Context, e *env) (source.Source, error) {
			return nodestatus.NewConfigMapSource(kubeclient.ConfigMaps(e.clients.core, e.namespace), homelabv1.NodeStatusConfigMapName), nil
		}},
	{name: "resourceslices", reads: []access{{group: resourcev1.GroupName, resources: []string{"resourceslices"}}},
		on: func(ctx context.Context, e *env) (bool, error) { return slicecache.Served(ctx, e.clients.core) },
		build: func(_ context.Context, e *env) (source.Source, error) {
			return slicecache.NewForConfig(e.clients.config)
		}},
	{name: "resourceclaims", reads: []access{{group: resourcev1.GroupName, resources: []string{"resourceclaims"}}},
		on: func(ctx context.Context, e *env) (bool, error) {
			if !e.opts.Allocation {
				return false, nil
			}
			return claimcache.Served(ctx, e.clients.core)
		},
		build: func(_ context.Context, e *env) (source.Source, error) {
			return claimcache.New(e.clients.config, e.tracker())
		}},
	{name: "quota", reads: quotaReads,
		on: func(_ context.Context, e *env) (bool, error) { return e.opts.Quota, nil },
		build: func(_ context.Context, e *env) (source.Source, error) {
			dra := make([]corev1.ResourceName, len(e.opts.QuotaDRAResources))
			for i, name := range e.opts.QuotaDRAResources {
				dra[i] = corev1.ResourceName(name)
			}
			return quotacache.New(e.clients.config, quotacache.Options{DRAResources: dra})
		},
		nodeLabels: func(ctx context.Context, e *env) labelKeys {
			keys, err := quotacache.FlavorLabelKeys(ctx, e.clients.config)
			if err != nil { // a flavor's key then costs a re-list
				klog.FromContext(ctx).V(2).Info("Cannot list Kueue's ResourceFlavors for their node labels", "err", err)
			}
			return labelKeys{selected: keys}
		}},
	{name: "topology", reads: []access{{group: "kueue.x-k8s.io", resources: []string{"topologies"}}},
		on: func(_ context.Context, e *env) (bool, error) { return e.opts.Topology, nil },
		build: func(_ context.Context, e *env) (source.Source, error) {
			return topologycache.New(e.clients.config, topologycache.Options{})
		},
		nodeLabels: func(ctx context.Context, e *env) labelKeys {
			keys, err := topologycache.LevelKeys(ctx, e.clients.config)
			if err != nil { // a Topology's key then costs a re-list
				klog.FromContext(ctx).V(2).Info("Cannot list Kueue's Topologies for their node labels", "err", err)
			}
			return labelKeys{levels: append(keys, topology.DefaultLevels...)}
		}},
	{name: "prometheus",
		on: func(_ context.Context, e *env) (bool, error) {
			return e.opts.PrometheusURL != "" && e.opts.Allocation, nil
		},
		build: newUsageSource},
	{name: "gpunodes", custom: true, reads: []access{{group: homelabv1.GroupName, resources: []string{"gpunodes"}}},
		on: func(_ context.Context, e *env) (bool, error) { return e.records, nil },
		build: func(_ context.Context, e *env) (source.Source, error) {
			return gpunode.NewRecordInformer(kubeclient.GpuNodes(e.clients.light), 0), nil
		}},
	{name: "gpuinventories", custom: true, reads: []access{{group: homelabv1.GroupName, resources: []string{"gpuinventories"}}},
		build: func(_ context.Context, e *env) (source.Source, error) {
			// The informer needs the resync period too: one made without it ignores the
			// per-handler period the inventory controller asks for.
			return gpuinventory.NewInformer(kubeclient.GpuInventories(e.clients.light), e.opts.ResyncPeriod), nil
		},
		nodeLabels: selectorKeys},
}

// quotaReads: Kueue's quota objects while kueue.x-k8s.io is served, the ResourceQuotas, and
// Kueue's ClusterQueue CRD by name (metadata only), so that Kueue installed or removed while
// the operator runs is picked up.
var quotaReads = []access{
	{group: "kueue.x-k8s.io", resources: []string{"resourceflavors", "clusterqueues", "cohorts", "localqueues"}},
	{resources: []string{"resourcequotas"}},
	{group: "apiextensions.k8s.io", resources: []string{"customresourcedefinitions"}, names: []string{"clusterqueues.kueue.x-k8s.io"}},
}

// env is what the rows of one run are built with.
type env struct {
	opts      *Options
	clients   *clients
	namespace string
	observe   func(took float64, result string) // the usage readings' metric
	// labelKeys are the node label keys the node cache keeps beyond its own rules.
	labelKeys labelKeys
	// fresh: the GpuInventory CRD was created just now, so no inventory exists yet.
	fresh   bool
	records bool // GpuNode records are served (or installed by this operator)

	allocation *allocation.Tracker
	built      []source.Source
}

// tracker is the run's allocation tracker, which the pod and claim caches feed.
func (e *env) tracker() *allocation.Tracker {
	if e.allocation == nil {
		e.allocation = allocation.NewTracker()
	}
	return e.allocation
}

// buildSources builds the rows that are on, in order, and says which are off.
func buildSources(ctx context.Context, e *env, rows []sourceRow) ([]source.Source, error) {
	logger := klog.FromContext(ctx)
	for _, row := range rows {
		if row.on != nil {
			on, err := row.on(ctx, e)
			if err != nil {
				logger.Error(err, "Cannot tell whether to read a source; not reading it until the next re-list", "source", row.name)
			}
			if !on {
				logger.V(2).Info("Not reading", "source", row.name)
				continue
			}
		}
		s, err := row.build(ctx, e)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", row.name, err)
		}
		if s.Name() != row.name {
			return nil, fmt.Errorf("source %s is built as %s", row.name, s.Name())
		}
		e.built = append(e.built, s)
	}
	return e.built, nil
}

// nodeLabelKeys asks every row that is on for the node label keys it selects or groups by;
// asked are keys an earlier run was asked for, kept as selected unless a row names them as
// levels.
func nodeLabelKeys(ctx context.Context, e *env, rows []sourceRow, asked []string) labelKeys {
	var keys labelKeys
	for _, row := range rows {
		if row.nodeLabels == nil {
			continue
		}
		if row.on != nil {
			if on, _ := row.on(ctx, e); !on {
				continue
			}
		}
		k := row.nodeLabels(ctx, e)
		keys.selected, keys.levels = append(keys.selected, k.selected...), append(keys.levels, k.levels...)
	}
	for _, key := range asked {
		if !slices.Contains(keys.levels, key) {
			keys.selected = append(keys.selected, key)
		}
	}
	slices.Sort(keys.selected)
	slices.Sort(keys.levels)
	return labelKeys{selected: slices.Compact(keys.selected), levels: slices.Compact(keys.levels)}
}

// builtNamed is the built source of that name, if it is a T.
func builtNamed[T source.Source](e *env, name string) (T, bool) {
	for _, s := range e.built {
		if t, ok := s.(T); ok && s.Name() == name {
			return t, true
		}
	}
	var zero T
	return zero, false
}

// selectorKeys lists the label keys that the node selectors and topology levels of all
// GpuInventories name, reading the inventories without their node lists.
func selectorKeys(ctx context.Context, e *env) labelKeys {
	var keys labelKeys
	if e.fresh {
		return keys // no inventory yet, and the API server may not serve the kind yet
	}
	list, err := kubeclient.GpuInventories(e.clients.light).List(ctx, metav1.ListOptions{})
	if err != nil { // a selector's key then costs a re-list
		klog.FromContext(ctx).Error(err, "Cannot list GpuInventories for their node selectors' label keys")
		return keys
	}
	for _, gi := range list.Items {
		if gi.Spec.Topology != nil {
			keys.levels = append(keys.levels, gi.Spec.Topology.Levels...)
		}
		sel, err := inventory.Selector(gi.Spec.NodeSelector)
		if err != nil {
			continue
		}
		reqs, _ := sel.Requirements()
		for _, r := range reqs {
			keys.selected = append(keys.selected, r.Key())
		}
	}
	return keys
}

// newUsageSource makes the usage reader of a run: it reads the holders from the allocation
// tracker and, on DRA nodes, the slices' device UUIDs.
func newUsageSource(_ context.Context, e *env) (source.Source, error) {
	u := e.opts.UsageOptions
	settings := usage.Settings{Window: u.IdleWindow, IdleBelow: u.IdleBelow, IdleAfter: u.IdleAfter}
	reader, err := usage.NewReader(usage.ReaderConfig{URL: u.PrometheusURL, BearerTokenFile: u.PrometheusBearerTokenFile,
		CAFile: u.PrometheusCAFile, Timeout: u.PrometheusTimeout}, settings)
	if err != nil {
		return nil, err
	}
	var devices func(string) []homelabv1.GpuDevice
	var synced []cache.InformerSynced
	for _, s := range e.built {
		if d, ok := s.(controller.DeviceSource); ok {
			devices = d.Devices
		}
		switch s.(type) {
		case controller.DeviceSource, controller.HoldingSource:
			synced = append(synced, s.HasSynced)
		}
	}
	tracker := e.tracker()
	return usage.NewCache(usage.CacheConfig{Source: reader, Settings: settings, Interval: u.Interval, Synced: synced,
		Holders: func() usage.Holders { return usage.NewKnown(tracker, devices) },
		Observe: func(took time.Duration, result string) { e.observe(took.Seconds(), result) },
		Done:    afterBurst(afterBurstThreshold)}), nil
}

// clients are the operator's API clients (pkg/kubeclient, docs/design/clients.md): REST
// clients of one group version each, built-in kinds as protobuf, custom resources as JSON.
type clients struct {
	config       *rest.Config   // JSON, with the operator's transport
	protobuf     *rest.Config   // the same, asking for protobuf
	core         rest.Interface // core/v1: the ConfigMap, Events
	coordination rest.Interface // coordination.k8s.io/v1, for the Lease
	homelab      rest.Interface // homelab.youngju.dev/v1: GpuInventories
	light        rest.Interface // homelab.youngju.dev/v1 without status.nodes: the informers'
	recordWriter rest.Interface // GpuNode records, at --gpunode-qps
	recordReader rest.Interface // whole GpuNode records the cache summarizes, at --gpunode-qps
	apiext       rest.Interface // apiextensions.k8s.io/v1: the CRDs
}
