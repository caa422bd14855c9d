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
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/gpuinventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/daemon"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventorycache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/reconnect"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
)

// Operator is one instance of the operator. New sets its fields and nothing changes them
// after; what a run changes (leadership, its controllers, the bound addresses) is in state.
type Operator struct {
	opts      *Options
	namespace string
	metrics   *metrics.Metrics // one per operator: counters live across re-lists
	clients   *clients
	// instance is its identity, leadership and endpoints.
	instance *daemon.Instance
	// setProcs, when set, is told when each run starts (false) and when it has settled
	// (true): caches synced, every controller's first pass made.
	setProcs func(settled bool)
	state    *state
}

// state is what the operator's runs change, read by its endpoints.
type state struct {
	controllers atomic.Pointer[[]builtController] // of the current run; nil before the first
}

// New builds an operator from options, resolving the kubeconfig; it runs Go code on
// --steady-gomaxprocs CPUs once settled.
func New(opts *Options) (*Operator, error) {
	config, namespace, err := opts.ClientConfig()
	if err != nil {
		return nil, err
	}
	return newOperator(opts, config, namespace, procsSetter(opts.SteadyProcs))
}

// NewForConfig builds an operator that talks to the API server of config.
func NewForConfig(opts *Options, config *rest.Config, namespace string) (*Operator, error) {
	return newOperator(opts, config, namespace, nil)
}

func newOperator(opts *Options, config *rest.Config, namespace string, setProcs func(bool)) (*Operator, error) {
	c, err := newClients(opts, config)
	if err != nil {
		return nil, err
	}
	m := metrics.New()
	return &Operator{opts: opts, namespace: namespace, metrics: m, clients: c,
		instance: daemon.NewInstance(&opts.Options, m.Leader), setProcs: setProcs, state: &state{}}, nil
}

// newClients makes the API clients: built-in types (Nodes, the ConfigMap, Events, the Lease)
// travel as protobuf; custom resources as JSON, the only encoding they have.
func newClients(opts *Options, config *rest.Config) (*clients, error) {
	config = rest.CopyConfig(config)
	// Gzip costs CPU on both sides for no gain on a cluster network; watches are never compressed.
	config.DisableCompression = !opts.Compression
	// Reads wait for an API server that is away, so informers resume as soon as it is back.
	config.Wrap(func(rt http.RoundTripper) http.RoundTripper { return reconnect.Transport(rt, reconnect.DefaultPolicy) })
	protobuf := rest.CopyConfig(config)
	protobuf.ContentType = "application/vnd.kubernetes.protobuf"
	protobuf.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	records := rest.CopyConfig(config)
	records.QPS, records.Burst = float32(opts.RecordQPS), opts.RecordBurst
	c := &clients{config: config, protobuf: protobuf}
	var err error
	// The custom resources' informers read JSON watch events in place, and the inventory
	// informer's GpuInventories come without status.nodes: the controller's own writes come
	// back without it.
	if c.light, err = inventorycache.NewInformerClient(config); err != nil {
		return nil, err
	}
	for _, r := range []struct {
		client *rest.Interface
		config *rest.Config
		gv     schema.GroupVersion
	}{
		{&c.core, protobuf, corev1.SchemeGroupVersion},
		{&c.coordination, protobuf, coordinationv1.SchemeGroupVersion},
		{&c.homelab, config, homelabv1.SchemeGroupVersion},
		{&c.recordWriter, records, homelabv1.SchemeGroupVersion},
		{&c.recordReader, records, homelabv1.SchemeGroupVersion}, // a rate limit of its own
		{&c.apiext, config, apiextensionsv1.SchemeGroupVersion},
	} {
		if *r.client, err = kubeclient.New(r.config, r.gv, nil); err != nil {
			return nil, err // names the group version
		}
	}
	return c, nil
}

// MetricsAddress and HealthAddress are the bound addresses ("" when off or not started).
func (o *Operator) MetricsAddress() string { return o.instance.MetricsAddress() }
func (o *Operator) HealthAddress() string  { return o.instance.HealthAddress() }

// Identity is this instance's leader-election identity.
func (o *Operator) Identity() string { return o.instance.Identity() }

// Metrics are the operator's metrics, as served on /metrics.
func (o *Operator) Metrics() *metrics.Metrics { return o.metrics }

// Run runs the operator until ctx is cancelled. With leader election, nothing is written
// before the lease is held, and losing the lease is an error (the process should exit). A
// stop asked for while it starts (a request cancelled by ctx) is no error.
func (o *Operator) Run(ctx context.Context) error {
	klog.FromContext(ctx).Info("Starting gpu-inventory-operator", "namespace", o.namespace, "host", o.clients.config.Host, "leaderElect", o.opts.LeaderElect)
	o.metrics.ServeClientMetrics()
	go returnFreeMemory(ctx, freeMemoryEvery, freeMemoryThreshold)
	if err := o.instance.Serve(ctx, o.metrics.Registry, o.notReady); err != nil {
		return err
	}
	return o.instance.Lead(ctx, kubeclient.Leases(o.clients.coordination, o.namespace), o.namespace, o.runControllers)
}

// runControllers does the operator's work once it may write: the CRDs, then runs of the
// sources and controllers, each until ctx ends or the next run must list again (a node
// label the node cache drops is needed, or what the API server serves changed).
func (o *Operator) runControllers(ctx context.Context) error {
	crds, err := o.prepareCRDs(ctx)
	if err != nil {
		return err
	}
	var asked []string // label keys earlier runs were asked for
	relists := rate.NewLimiter(rate.Every(relistEvery), relistBurst)
	for {
		next, err := o.runOnce(ctx, crds, asked)
		if next == nil || ctx.Err() != nil {
			return err
		}
		asked = append(asked, next.labelKeys...)
		crds.fresh = false
		// Anyone who may edit an inventory could cycle selector keys: re-lists are spaced.
		wait := relists.Reserve().Delay()
		klog.FromContext(ctx).Info("Re-listing", "reason", next.reason, "after", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// relistEvery and relistBurst space the re-lists.
const (
	relistEvery = 30 * time.Second
	relistBurst = 3
)

// relist says why a run ended for another.
type relist struct {
	reason    string
	labelKeys []string // label keys the next node cache must keep
}

// runOnce is one run of the sources and the controllers, until ctx is cancelled or the next
// run must list again: sources from the table, controllers from their list on one Context of
// those sources, start, wait for sync, run, shut down. It returns once every source and
// controller it started has stopped, so a re-list never holds two node caches.
func (o *Operator) runOnce(ctx context.Context, crds crdState, asked []string) (*relist, error) {
	// Events about GPU nodes go to the GpuInventory, events about the ConfigMap to it; the
	// broadcaster aggregates repeats. It stops after everything that records events.
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(kubeclient.EventSink{Client: o.clients.core})
	defer broadcaster.Shutdown()
	var running sync.WaitGroup
	defer running.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Sources: the node cache keeps the labels the others select nodes by.
	e := &env{opts: o.opts, clients: o.clients, namespace: o.namespace, fresh: crds.fresh, records: crds.records,
		observe: func(took float64, result string) { o.metrics.UsageReadings.WithLabelValues(result).Observe(took) }}
	e.labelKeys = nodeLabelKeys(ctx, e, sources, asked)
	built, err := buildSources(ctx, e, sources)
	if err != nil {
		return nil, err
	}

	// Controllers, in order, on one Context.
	cc, err := controller.NewContext(built, controller.Context{Metrics: o.metrics,
		Recorder:        broadcaster.NewRecorder(kubeclient.Scheme, corev1.EventSource{Component: homelabv1.FieldManager}),
		MinSyncInterval: o.opts.MinSyncInterval, MaxStatusNodes: o.opts.MaxStatusNodes})
	if err != nil {
		return nil, err
	}
	cs, err := buildControllers(ctx, e, cc, controllers)
	if err != nil {
		return nil, err
	}
	o.state.controllers.Store(&cs)

	// Start: the sources of built-in kinds at once, the custom resources' once they are served.
	for _, s := range built {
		if !isCustom(s) {
			running.Go(func() { s.Run(ctx) })
		}
	}
	if err := crds.served(ctx); err != nil {
		return nil, err
	}
	for _, s := range built {
		if isCustom(s) {
			running.Go(func() { s.Run(ctx) })
		}
	}
	if o.setProcs != nil {
		o.setProcs(false)
	}
	go o.settle(ctx, cs)

	// Run the controllers until ctx ends, one fails, or the next run must list again.
	done := make(chan error, len(cs))
	for _, c := range cs {
		running.Go(func() { done <- c.runner.Run(ctx) })
	}
	next, err := o.watchRun(ctx, e, cs, done)
	cancel()
	return next, err
}

// isCustom reports whether a source reads a kind of this project's.
func isCustom(s source.Source) bool {
	for _, row := range sources {
		if row.name == s.Name() {
			return row.custom
		}
	}
	return false
}

// watchRun waits until ctx ends, a controller returns (its error), a controller meets what
// the run cannot handle, or the sources the API server serves change; the last two end the
// run for another.
func (o *Operator) watchRun(ctx context.Context, e *env, cs []builtController, done <-chan error) (*relist, error) {
	unhandled := make(chan controller.Unhandled, 1)
	for _, c := range cs {
		if c.runner.Unhandled != nil {
			go forward(ctx, c.runner.Unhandled, unhandled)
		}
	}
	served := time.NewTicker(servedCheckInterval)
	defer served.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, nil
		case err := <-done:
			if err == nil {
				err = errors.New("a controller stopped")
			}
			return nil, err
		case u := <-unhandled:
			return &relist{reason: fmt.Sprintf("%s names label %q, which the node cache drops", u.Reason, u.LabelKeys),
				labelKeys: u.LabelKeys}, nil
		case <-served.C:
			if change := servedChange(ctx, e, sources); change != "" {
				return &relist{reason: change}, nil
			}
		}
	}
}

// forward passes what from says on to to, until ctx ends.
func forward(ctx context.Context, from <-chan controller.Unhandled, to chan<- controller.Unhandled) {
	for {
		select {
		case <-ctx.Done():
			return
		case u := <-from:
			select {
			case to <- u:
			case <-ctx.Done():
				return
			}
		}
	}
}

// servedCheckInterval is how often the operator asks whether the API server still serves
// what this run reads, and nothing more (ResourceSlices, say).
const servedCheckInterval = 5 * time.Minute

// servedChange says which rows' on-ness differs from the run's, or "" when none does.
func servedChange(ctx context.Context, e *env, rows []sourceRow) string {
	var changed []string
	for _, row := range rows {
		if row.on == nil {
			continue
		}
		on, err := row.on(ctx, e)
		if err != nil {
			continue // cannot tell: no change
		}
		read := slices.ContainsFunc(e.built, func(s source.Source) bool { return s.Name() == row.name })
		if on != read {
			changed = append(changed, fmt.Sprintf("%s read: %t", row.name, on))
		}
	}
	if len(changed) == 0 {
		return ""
	}
	return "what the API server serves changed: " + fmt.Sprint(changed)
}

// settle hands the initial lists' buffers back to the OS once the first status is written
// (not as the caches sync, where a collection would slow that first status), and what the
// first syncs left once every controller has made its first pass; then the operator runs on
// --steady-gomaxprocs.
func (o *Operator) settle(ctx context.Context, cs []builtController) {
	var firstStatus cache.InformerSynced = func() bool { return true }
	started := make([]cache.InformerSynced, len(cs))
	for i, c := range cs {
		started[i] = c.runner.Started
		if c.row.name == gpuinventory.Name {
			firstStatus = c.runner.Started
		}
	}
	settleAfter(ctx, firstStatus, started, o.setProcs)
}
