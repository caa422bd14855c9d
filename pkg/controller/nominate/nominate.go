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

// Package nominate is the fleet hub's MultiKueue dispatcher (docs/design/hub.md, "GPU-aware
// dispatch for MultiKueue"): for every pending MultiKueue Workload on the manager it asks
// pkg/dispatch which workers all of it fits on now, from the members' GpuInventories, and
// writes the best into status.nominatedClusterNames the way Kueue's own dispatchers do; a
// Workload that fits nowhere gets an event and a condition saying, per worker, why.
package nominate

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/dispatch"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
)

// Name is the controller's name (its queue's, in logs and metrics).
const Name = "nominate"

// Kueue's resources the dispatcher reads on the manager (kueue.x-k8s.io/v1beta2).
var (
	WorkloadsResource          = kueueResource("workloads")
	AdmissionChecksResource    = kueueResource("admissionchecks")
	MultiKueueConfigsResource  = kueueResource("multikueueconfigs")
	MultiKueueClustersResource = kueueResource("multikueueclusters")
)

func kueueResource(plural string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: plural}
}

// Names the dispatcher writes and reads.
const (
	// KueueFieldManager is Kueue's own field manager, which nominatedClusterNames must be
	// applied under for Kueue to clear it when a worker admits (docs/design/hub.md).
	KueueFieldManager = "kueue-admission"
	// MultiKueueControllerName is the controllerName of MultiKueue's AdmissionChecks.
	MultiKueueControllerName = "kueue.x-k8s.io/multikueue"
	// ConditionGpuFit is the hub's condition on a Workload: False (FitsNowhere, or
	// InvalidWorkload) while no worker takes it, Unknown (NotJudged) for GPUs the hub does
	// not judge, True (Nominated) once a Workload that had it is nominated.
	ConditionGpuFit       = homelabv1.GroupName + "/GpuFit"
	ReasonFitsNowhere     = "FitsNowhere"
	ReasonInvalidWorkload = "InvalidWorkload"
	ReasonNotJudged       = "NotJudged"
	ReasonNominated       = "Nominated"
	// assumeAfterAdmission is how long a Workload admitted on a worker still counts there
	// as an assumed placement: until the worker's inventory shows its pods.
	assumeAfterAdmission = 60 * time.Second
)

// Member is what the hub knows of one member cluster.
type Member struct {
	// State is homelabv1.MemberReachable, MemberConnecting, MemberUnreachable, MemberStale
	// or MemberDuplicate.
	State string
	// Reason and Message say why it is not Reachable; Since is when it entered its state.
	Reason, Message string
	Since           time.Time
	// Status is its GpuInventory status as last read; nil before the first read.
	Status *homelabv1.GpuInventoryStatus
}

// Members is the hub's view of its members by MultiKueueCluster name.
type Members interface {
	Member(multiKueueCluster string) (Member, bool)
}

// InformerFunc is Informers of a function.
type InformerFunc func(gvr schema.GroupVersionResource) cache.SharedIndexInformer

// Informer is f(gvr).
func (f InformerFunc) Informer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	return f(gvr)
}

// Options configure the controller.
type Options struct {
	// Client reaches the manager: Workloads' status is applied through it.
	Client dynamic.Interface
	// Informers are the hub's on the manager (KueueObjects); the controller takes its
	// Workloads, AdmissionChecks, MultiKueueConfigs and MultiKueueClusters informers from
	// them, and the hub runs them after making the controller.
	Informers Informers
	// Members is the view of the workers; MemberChanges says, by MultiKueueCluster name,
	// when one changed (its state or its inventory).
	Members       Members
	MemberChanges source.Changes
	Recorder      record.EventRecorder
	// Metrics are the worker loop's; Dispatch the dispatcher's own.
	Metrics  controller.LoopMetrics
	Dispatch *Metrics
	Clock    clock.Clock
	// Nominations is how many workers to nominate (default 1, at most 20); Hold how long a
	// nomination stands before it may be replaced (default 30s); Timeout how long one may
	// wait for admission before the next best worker is added (default 5m).
	Nominations   int
	Hold, Timeout time.Duration
	Workers       int
}

func (o *Options) defaults() error {
	if o.Client == nil || o.Informers == nil || o.Members == nil {
		return fmt.Errorf("nominate: a client, informers and a member view are required")
	}
	if o.Nominations <= 0 {
		o.Nominations = 1
	}
	o.Nominations = min(o.Nominations, 20)
	if o.Hold <= 0 {
		o.Hold = 30 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Workers <= 0 {
		o.Workers = 1
	}
	if o.Recorder == nil {
		o.Recorder = &record.FakeRecorder{}
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Dispatch == nil {
		o.Dispatch = NewMetrics()
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	return nil
}

// Controller nominates workers for pending MultiKueue Workloads.
type Controller struct {
	opts      Options
	queue     workqueue.TypedRateLimitingInterface[cache.ObjectName]
	workloads cache.SharedIndexInformer
	checks    cache.SharedIndexInformer
	configs   cache.SharedIndexInformer
	clusters  cache.SharedIndexInformer

	mu      sync.Mutex
	tracked map[cache.ObjectName]*tracked
}

// tracked is what the controller remembers of a Workload it dispatches.
type tracked struct {
	workers     []string // the candidate workers of its MultiKueueConfig
	request     dispatch.Request
	nominated   []string
	nominatedAt time.Time // when the nomination last changed
	seenAt      time.Time // when first seen pending
	result      string    // its dispatch_workloads result
	admittedOn  string    // the worker that admitted it, while its placement is assumed
	admittedAt  time.Time
}

// NewController registers the controller's handlers on the informers and the member
// changes. Run the informers after it; the Runner waits for the informers.
func NewController(_ context.Context, opts Options) (*Controller, controller.Runner, error) {
	if err := opts.defaults(); err != nil {
		return nil, controller.Runner{}, err
	}
	c := &Controller{opts: opts, tracked: map[cache.ObjectName]*tracked{},
		queue:     controller.NewQueue[cache.ObjectName](Name, opts.Metrics),
		workloads: opts.Informers.Informer(WorkloadsResource),
		checks:    opts.Informers.Informer(AdmissionChecksResource),
		configs:   opts.Informers.Informer(MultiKueueConfigsResource),
		clusters:  opts.Informers.Informer(MultiKueueClustersResource),
	}
	handlers := []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{c.workloads, cache.ResourceEventHandlerFuncs{AddFunc: c.workloadChanged, UpdateFunc: c.workloadUpdated, DeleteFunc: c.workloadChanged}},
		{c.checks, c.everything()},
		{c.configs, c.everything()},
		{c.clusters, cache.ResourceEventHandlerFuncs{AddFunc: c.clusterChanged, UpdateFunc: func(_, cur any) { c.clusterChanged(cur) }, DeleteFunc: c.clusterChanged}},
	}
	for _, h := range handlers {
		if _, err := h.informer.AddEventHandler(h.handler); err != nil {
			return nil, controller.Runner{}, err
		}
	}
	if opts.MemberChanges != nil {
		opts.MemberChanges.OnChange(c.memberChanged)
	}
	synced := []cache.InformerSynced{c.workloads.HasSynced, c.checks.HasSynced, c.configs.HasSynced, c.clusters.HasSynced}
	if opts.MemberChanges != nil {
		synced = append(synced, opts.MemberChanges.HasSynced)
	}
	loop := controller.Loop[cache.ObjectName]{Name: Name, Queue: c.queue, Sync: c.sync, Metrics: opts.Metrics}
	run := func(ctx context.Context) error { return loop.Run(ctx, opts.Workers, synced...) }
	return c, controller.Runner{Run: run, WaitsFor: synced}, nil
}

func (c *Controller) workloadChanged(obj any) {
	if name, err := cache.DeletionHandlingObjectToName(obj); err == nil {
		c.queue.Add(name)
	}
}

// workloadUpdated drops updates that change nothing (a resync).
func (c *Controller) workloadUpdated(old, cur any) {
	o, ok1 := old.(*unstructured.Unstructured)
	n, ok2 := cur.(*unstructured.Unstructured)
	if ok1 && ok2 && o.GetResourceVersion() == n.GetResourceVersion() {
		return
	}
	c.workloadChanged(cur)
}

// everything re-runs every Workload: an AdmissionCheck or MultiKueueConfig changed which
// Workloads are the dispatcher's and their workers.
func (c *Controller) everything() cache.ResourceEventHandler {
	all := func(any) {
		for _, key := range c.workloads.GetStore().ListKeys() {
			if name, err := cache.ParseObjectName(key); err == nil {
				c.queue.Add(name)
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: all, UpdateFunc: func(_, cur any) { all(cur) }, DeleteFunc: all}
}

func (c *Controller) clusterChanged(obj any) {
	if name, err := cache.DeletionHandlingObjectToName(obj); err == nil {
		c.memberChanged(name.Name)
	}
}

// memberChanged re-runs the Workloads that name the worker among theirs.
func (c *Controller) memberChanged(worker string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, t := range c.tracked {
		if worker == "" || contains(t.workers, worker) {
			c.queue.Add(key)
		}
	}
}
