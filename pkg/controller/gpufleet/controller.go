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

// Package gpufleet is the fleet hub's GpuFleet status controller: for each GpuFleet it asks
// the member registry (pkg/memberwatch) for the members its spec selects, computes the
// status (pkg/fleet), and writes it by server-side apply only when its hash changed, at most
// once per interval under churn; it announces members that change state as Events, and
// enqueues a fleet again when its next member turns stale (docs/design/hub.md).
package gpufleet

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/memberwatch"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
)

// Name is the controller's name: its queue's, in logs and metrics.
const Name = "gpufleet"

// Options are what the controller is made with.
type Options struct {
	// Fleets is the GpuFleet cache (NewInformer).
	Fleets *Fleets
	// Profiles and MultiKueueClusters are the hub's caches of what names members; nil when
	// the hub's API server does not serve them.
	Profiles           *memberwatch.Profiles
	MultiKueueClusters *memberwatch.MultiKueueClusters
	// Members reads the members.
	Members *memberwatch.Registry
	Writer  Writer
	Metrics *metrics.Fleet
	// Recorder receives the Events about members; nil discards them.
	Recorder record.EventRecorder
	// Clock is the time source; nil: the real clock.
	Clock clock.Clock
	// MinWriteInterval spaces each fleet's writes under churn (0: no limit).
	MinWriteInterval time.Duration
	// Workers sync fleets in parallel (0: 1).
	Workers int
}

// Controller keeps the GpuFleets' status.
type Controller struct {
	fleets   *Fleets
	profiles *memberwatch.Profiles
	mkcs     *memberwatch.MultiKueueClusters
	members  *memberwatch.Registry
	writer   Writer
	metrics  *metrics.Fleet
	recorder record.EventRecorder
	clock    clock.Clock
	queue    workqueue.TypedRateLimitingInterface[cache.ObjectName]
	limiter  *controller.WriteLimiter[cache.ObjectName]
	workers  int

	mu sync.Mutex
	// written is, per fleet, the hash written last and the resourceVersion it was written
	// over: until the cache shows the write, the fleet must not be written again.
	written map[string]written
	// changedAt is, per fleet, when a member first changed since the last sync that wrote
	// or skipped (for the change-to-write metric).
	changedAt map[string]time.Time
	// syncedOnce are the fleets synced at least once.
	syncedOnce map[string]bool
}

type written struct{ hash, over string }

// consumerPrefix marks the registry's consumers that are GpuFleets.
const consumerPrefix = "GpuFleet/"

func consumer(fleet string) string { return consumerPrefix + fleet }

// NewController makes the controller and what the start-up runs of it.
func NewController(ctx context.Context, opts Options) (*Controller, controller.Runner, error) {
	if opts.Recorder == nil {
		opts.Recorder = &record.FakeRecorder{}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	c := &Controller{fleets: opts.Fleets, profiles: opts.Profiles, mkcs: opts.MultiKueueClusters, members: opts.Members,
		writer: opts.Writer, metrics: opts.Metrics, recorder: opts.Recorder, clock: opts.Clock,
		queue:   controller.NewQueue[cache.ObjectName](Name, opts.Metrics),
		limiter: controller.NewWriteLimiter[cache.ObjectName](opts.MinWriteInterval, 1, opts.Clock),
		workers: max(opts.Workers, 1), written: map[string]written{}, changedAt: map[string]time.Time{}, syncedOnce: map[string]bool{}}
	if err := c.addHandlers(); err != nil {
		return nil, controller.Runner{}, err
	}
	return c, controller.Runner{Run: c.Run, WaitsFor: c.synced(), Started: c.Started}, nil
}

// synced are the caches a sync reads.
func (c *Controller) synced() []cache.InformerSynced {
	synced := []cache.InformerSynced{c.fleets.HasSynced, c.members.HasSynced}
	if c.profiles != nil {
		synced = append(synced, c.profiles.HasSynced)
	}
	if c.mkcs != nil {
		synced = append(synced, c.mkcs.HasSynced)
	}
	return synced
}

// addHandlers enqueues a fleet when it changes, when what names members changes (every
// fleet: they are few), and when a member it reads changes.
func (c *Controller) addHandlers() error {
	_, err := c.fleets.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		UpdateFunc: func(old, cur any) {
			o, n := old.(*homelabv1.GpuFleet), cur.(*homelabv1.GpuFleet)
			if o.Generation != n.Generation || o.Status.FleetHash != n.Status.FleetHash || o.Status.ObservedGeneration != n.Status.ObservedGeneration {
				c.enqueue(cur)
			}
		},
		DeleteFunc: c.enqueue,
	})
	if err != nil {
		return fmt.Errorf("watch GpuFleets: %w", err)
	}
	if c.profiles != nil {
		c.profiles.OnChange(func(string) { c.enqueueAll() })
	}
	if c.mkcs != nil {
		c.mkcs.OnChange(func(string) { c.enqueueAll() })
	}
	c.members.OnChange(func(who string) {
		name, ok := strings.CutPrefix(who, consumerPrefix)
		if !ok {
			return
		}
		c.mu.Lock()
		if _, pending := c.changedAt[name]; !pending {
			c.changedAt[name] = c.clock.Now()
		}
		c.mu.Unlock()
		c.limiter.Enqueue(c.queue, cache.ObjectName{Name: name})
	})
	return nil
}

func (c *Controller) enqueue(obj any) {
	key, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		return
	}
	c.limiter.Enqueue(c.queue, key)
}

func (c *Controller) enqueueAll() {
	for _, key := range c.fleets.Informer().GetStore().ListKeys() {
		c.limiter.Enqueue(c.queue, cache.ObjectName{Name: key})
	}
}

// Run waits for the caches and syncs fleets until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	loop := controller.Loop[cache.ObjectName]{Name: Name, Queue: c.queue, Sync: c.syncHandler, Metrics: c.metrics}
	return loop.Run(ctx, c.workers, c.synced()...)
}

// Started reports whether the caches have synced and every fleet in them has been synced once.
func (c *Controller) Started() bool {
	for _, synced := range c.synced() {
		if !synced() {
			return false
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, key := range c.fleets.Informer().GetStore().ListKeys() {
		if !c.syncedOnce[key] {
			return false
		}
	}
	return true
}
