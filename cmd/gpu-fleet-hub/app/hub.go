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
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/nominate"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/crd"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/daemon"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/reconnect"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
)

// Hub is one instance of the fleet hub. New sets its fields and nothing changes them after;
// what a run changes (leadership, its controllers, the bound addresses) is in state.
type Hub struct {
	opts      *Options
	namespace string
	providers *access.Config
	metrics   *metrics.Fleet // one per hub: counters live across runs
	dispatch  *nominate.Metrics
	clients   *clients
	// instance is its identity, leadership and endpoints.
	instance *daemon.Instance
	state    *state
}

// state is what the hub's runs change, read by its endpoints.
type state struct {
	controllers atomic.Pointer[[]builtController] // of the current run; nil before the first
}

// New builds a hub from options, resolving the kubeconfig.
func New(opts *Options) (*Hub, error) {
	config, namespace, err := opts.ClientConfig()
	if err != nil {
		return nil, err
	}
	return NewForConfig(opts, config, namespace)
}

// NewForConfig builds a hub that talks to the hub cluster's API server of config.
func NewForConfig(opts *Options, config *rest.Config, namespace string) (*Hub, error) {
	providers, err := opts.Providers()
	if err != nil {
		return nil, err
	}
	c, err := newClients(config)
	if err != nil {
		return nil, err
	}
	m := metrics.NewFleet()
	h := &Hub{opts: opts, namespace: namespace, providers: providers, metrics: m, dispatch: nominate.NewMetrics(),
		clients: c, instance: daemon.NewInstance(&opts.Options, m.Leader), state: &state{}}
	if opts.Dispatch {
		h.metrics.Registry.MustRegister(h.dispatch.Collectors()...)
	}
	return h, nil
}

// newClients makes the clients of the hub's own API server; reads wait for it while it is
// away, as the operator's.
func newClients(config *rest.Config) (*clients, error) {
	config = rest.CopyConfig(config)
	config.Wrap(func(rt http.RoundTripper) http.RoundTripper { return reconnect.Transport(rt, reconnect.DefaultPolicy) })
	protobuf := rest.CopyConfig(config)
	protobuf.ContentType = "application/vnd.kubernetes.protobuf"
	protobuf.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	c := &clients{config: config}
	for _, r := range []struct {
		client *rest.Interface
		config *rest.Config
		gv     schema.GroupVersion
	}{
		{&c.core, protobuf, corev1.SchemeGroupVersion},
		{&c.coordination, protobuf, coordinationv1.SchemeGroupVersion},
		{&c.homelab, config, homelabv1.SchemeGroupVersion},
		{&c.apiext, config, apiextensionsv1.SchemeGroupVersion},
	} {
		var err error
		if *r.client, err = kubeclient.New(r.config, r.gv, nil); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// MetricsAddress and HealthAddress are the bound addresses ("" when off or not started).
func (h *Hub) MetricsAddress() string { return h.instance.MetricsAddress() }
func (h *Hub) HealthAddress() string  { return h.instance.HealthAddress() }

// Identity is this instance's leader-election identity.
func (h *Hub) Identity() string { return h.instance.Identity() }

// Metrics are the hub's metrics, as served on /metrics.
func (h *Hub) Metrics() *metrics.Fleet { return h.metrics }

// Run runs the hub until ctx is cancelled. With leader election nothing is read or written
// before the lease is held, and losing it is an error (the process should exit).
func (h *Hub) Run(ctx context.Context) error {
	klog.FromContext(ctx).Info("Starting gpu-fleet-hub", "namespace", h.namespace, "host", h.clients.config.Host,
		"leaderElect", h.opts.LeaderElect, "accessProviders", providerNames(h.providers))
	h.metrics.ServeClientMetrics()
	if err := h.instance.Serve(ctx, h.metrics.Registry, h.notReady); err != nil {
		return err
	}
	return h.instance.Lead(ctx, kubeclient.Leases(h.clients.coordination, h.namespace), h.namespace, h.runControllers)
}

func providerNames(p *access.Config) []string {
	if p == nil {
		return nil
	}
	var names []string
	for _, provider := range p.Providers {
		names = append(names, provider.Name)
	}
	return names
}

// runControllers does the hub's work once it may: the CRD, then runs of the sources and
// controllers, each until ctx ends or what the API server serves changes.
func (h *Hub) runControllers(ctx context.Context) error {
	if h.opts.InstallCRD {
		outcome, err := crd.EnsureFleet(ctx, kubeclient.CRDs(h.clients.apiext))
		if err != nil {
			return err
		}
		klog.FromContext(ctx).Info("CRD "+string(outcome.Result), "crd", outcome.Name, "schemaRevision", outcome.Installed, "hubSchemaRevision", outcome.Embedded)
		if err := crd.WaitEstablished(ctx, kubeclient.CRDs(h.clients.apiext), homelabv1.GpuFleetCRDName, 30*time.Second); err != nil {
			return err
		}
	}
	for {
		again, err := h.runOnce(ctx)
		if !again || ctx.Err() != nil {
			return err
		}
	}
}

// servedCheckInterval is how often the hub asks whether its API server still serves what
// this run reads (ClusterProfiles, MultiKueueClusters), and nothing more.
const servedCheckInterval = 5 * time.Minute

// runOnce is one run: sources from the table, controllers from their list, start, run, until
// ctx ends (false), a controller fails (its error) or what the API server serves changes
// (true: run again). It returns once everything it started has stopped.
func (h *Hub) runOnce(ctx context.Context) (bool, error) {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(kubeclient.EventSink{Client: h.clients.core})
	defer broadcaster.Shutdown()
	var running sync.WaitGroup
	defer running.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Sources, then controllers, in their tables' order.
	e := &env{opts: h.opts, clients: h.clients, providers: h.providers, namespace: h.namespace, metrics: h.metrics,
		dispatch: h.dispatch, recorder: broadcaster.NewRecorder(kubeclient.Scheme, corev1.EventSource{Component: homelabv1.FleetFieldManager})}
	built, err := buildSources(ctx, e, sources)
	if err != nil {
		return false, err
	}
	cs, err := buildControllers(ctx, e, controllers)
	if err != nil {
		return false, err
	}
	h.state.controllers.Store(&cs)

	// Start and run.
	for _, s := range built {
		running.Go(func() { s.Run(ctx) })
	}
	done := make(chan error, len(cs))
	for _, c := range cs {
		running.Go(func() { done <- c.runner.Run(ctx) })
	}
	served := time.NewTicker(servedCheckInterval)
	defer served.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case err := <-done:
			if err == nil {
				err = errors.New("a controller stopped")
			}
			return false, err
		case <-served.C:
			if change := servedChange(ctx, e); change != "" {
				klog.FromContext(ctx).Info("Starting again", "reason", change)
				return true, nil
			}
		}
	}
}

// servedChange says which rows' on-ness differs from the run's, or "" when none does.
func servedChange(ctx context.Context, e *env) string {
	for _, row := range sources {
		on, err := isOn(ctx, e, row)
		if err != nil {
			continue // cannot tell: no change
		}
		if _, read := builtNamed[source.Source](e, row.name); on != read {
			return fmt.Sprintf("what the API server serves changed: %s read: %t", row.name, on)
		}
	}
	return ""
}

// notReady says why the hub is not ready, or "" when it is: once every controller has made
// its first pass (a standby is ready: daemon.Instance.Serve).
func (h *Hub) notReady() string {
	cs := h.state.controllers.Load()
	if cs == nil {
		return "controllers not started (CRD install pending)"
	}
	for _, c := range *cs {
		if !c.runner.Started() {
			return c.row.waiting
		}
	}
	return ""
}
