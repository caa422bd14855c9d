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
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/gpuinventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/gpunode"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/nodestatus"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/crd"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/leaderelection"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
)

// Operator is one running instance of the operator.
type Operator struct {
	opts      *Options
	config    *rest.Config
	namespace string
	metrics   *metrics.Metrics // one per operator: counters live across re-lists
	identity  string

	// The API clients (pkg/kubeclient, docs/design/clients.md): REST clients of one group
	// version each, built-in kinds as protobuf, custom resources as JSON.
	core           rest.Interface // core/v1: the ConfigMap, Events
	protobufConfig *rest.Config   // makes the Node informer's client (see nodeClient)
	homelab        rest.Interface // homelab.youngju.dev/v1: GpuInventories
	recordClient   rest.Interface // GpuNode records, at --gpunode-qps
	recordReader   rest.Interface // whole GpuNode records the cache summarizes, at --gpunode-qps
	apiext         rest.Interface // apiextensions.k8s.io/v1: the CRDs
	coordination   rest.Interface // coordination.k8s.io/v1, for the Lease

	leaderHealth *leaderelection.HealthzAdaptor
	leading      atomic.Bool

	// setProcs, when set, is told when each run of the informers starts (false) and when it
	// has settled (true): caches synced, every controller's first pass made.
	setProcs func(settled bool)

	mu          sync.Mutex
	metricsAddr string
	healthAddr  string
	inventory   *gpuinventory.Controller // of the current run of the informers; nil before
	nodeStatus  *nodestatus.Controller
	records     *gpunode.Controller
	withRecords bool     // the GpuNode CRD is served (or installed by this operator)
	askedKeys   []string // label keys runs asked the node cache to keep (ResourceFlavors')
}

// New builds an operator from options, resolving the kubeconfig.
func New(opts *Options) (*Operator, error) {
	config, namespace, err := opts.ClientConfig()
	if err != nil {
		return nil, err
	}
	return NewForConfig(opts, config, namespace)
}

// NewForConfig builds an operator that talks to the API server of config.
func NewForConfig(opts *Options, config *rest.Config, namespace string) (*Operator, error) {
	o := &Operator{opts: opts, namespace: namespace, metrics: metrics.New()}
	if err := o.newClients(config); err != nil {
		return nil, err
	}
	hostname, _ := os.Hostname()
	o.identity = hostname + "_" + string(uuid.NewUUID())
	return o, nil
}

// MetricsAddress and HealthAddress are the bound addresses ("" when off or not started).
func (o *Operator) MetricsAddress() string { o.mu.Lock(); defer o.mu.Unlock(); return o.metricsAddr }
func (o *Operator) HealthAddress() string  { o.mu.Lock(); defer o.mu.Unlock(); return o.healthAddr }

// Identity is this instance's leader-election identity.
func (o *Operator) Identity() string { return o.identity }

// Metrics are the operator's metrics, as served on /metrics.
func (o *Operator) Metrics() *metrics.Metrics { return o.metrics }

// Run runs the operator until ctx is cancelled. With leader election, nothing is written
// before the lease is held, and losing the lease is an error (the process should exit).
func (o *Operator) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	logger.Info("Starting gpu-inventory-operator", "namespace", o.namespace, "host", o.config.Host, "leaderElect", o.opts.LeaderElect)
	o.metrics.ServeClientMetrics()
	go returnFreeMemory(ctx, freeMemoryEvery, freeMemoryThreshold)
	if o.opts.LeaderElect {
		o.leaderHealth = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	}
	metricsAddr, healthAddr, err := o.serveEndpoints(ctx)
	if err != nil {
		return err
	}
	o.mu.Lock()
	o.metricsAddr, o.healthAddr = metricsAddr, healthAddr
	o.mu.Unlock()
	if !o.opts.LeaderElect {
		o.metrics.Leader.Set(1)
		defer o.metrics.Leader.Set(0)
		return o.runControllers(ctx)
	}
	return o.runWithLeaderElection(ctx)
}

// runControllers installs the CRDs, makes sure the default inventory exists and runs the
// controllers until ctx is cancelled.
func (o *Operator) runControllers(ctx context.Context) error {
	fresh := false
	if o.opts.InstallCRD {
		outcomes, err := crd.Ensure(ctx, kubeclient.CRDs(o.apiext))
		if err != nil {
			return err
		}
		for _, outcome := range outcomes {
			klog.FromContext(ctx).Info("CRD "+string(outcome.Result), "crd", outcome.Name,
				"schemaRevision", outcome.Installed, "operatorSchemaRevision", outcome.Embedded)
			fresh = fresh || outcome.Name == homelabv1.CustomResourceDefinitionName && outcome.Result == crd.Created
		}
	}
	prepare := func() error {
		if o.opts.InstallCRD {
			if err := crd.WaitAllEstablished(ctx, kubeclient.CRDs(o.apiext), 30*time.Second); err != nil {
				return err
			}
		}
		return o.ensureDefaultInventory(ctx, false)
	}
	if !fresh {
		if err := prepare(); err != nil {
			return err
		}
		o.setWithRecords(o.opts.InstallCRD || o.gpuNodesServed(ctx))
		return o.runRelisting(ctx, served(nil), false)
	}
	o.setWithRecords(true)
	// A GpuInventory CRD created just now: no inventory names a selector key yet, and the API
	// server takes a while to serve the new kinds, so the node list does not wait for them,
	// and the custom resources' informers do not wait for the default inventory's create.
	established := make(chan error, 1)
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		err := crd.WaitAllEstablished(ctx, kubeclient.CRDs(o.apiext), 30*time.Second)
		established <- err
		if err == nil {
			err = o.ensureDefaultInventory(ctx, true)
		}
		if err != nil {
			cancel(err)
		}
	}()
	err := o.runRelisting(runCtx, waitOnce(established), true)
	if cause := context.Cause(runCtx); ctx.Err() == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

func (o *Operator) setWithRecords(on bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.withRecords = on
}

// gpuNodesServed reports whether the API server serves GpuNode records. Without them (the
// CRDs are applied by hand and this release's are not yet), the operator runs as before
// records existed: the stored node lists are the memory, bounded as they are.
func (o *Operator) gpuNodesServed(ctx context.Context) bool {
	served, err := kubeclient.Serves(ctx, o.homelab, homelabv1.SchemeGroupVersion, "gpunodes")
	if served {
		return true
	}
	if err == nil {
		err = fmt.Errorf("%s serves no gpunodes", homelabv1.SchemeGroupVersion)
	}
	klog.FromContext(ctx).Error(err, "GpuNode records are not served: running without them, so a GPU node that loses its labels is remembered only while status.nodes lists it; apply manifests/crd of this release (or run with --install-crd)",
		"crd", homelabv1.GpuNodeCRDName)
	return false
}

// crdsServed waits until the CRDs are served (on a cluster where they existed already, also
// until the default inventory exists).
type crdsServed func(ctx context.Context) error

// served is a crdsServed that is done, with err.
func served(err error) crdsServed { return func(context.Context) error { return err } }

// waitOnce is a crdsServed that waits for ready's one result and keeps it.
func waitOnce(ready <-chan error) crdsServed {
	var once sync.Once
	var result error
	done := make(chan struct{})
	return func(ctx context.Context) error {
		go once.Do(func() { result = <-ready; close(done) })
		select {
		case <-done:
			return result
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// defaultInventoryNote is the note of the GpuInventory the operator creates.
const defaultInventoryNote = "Created by gpu-inventory-operator: every GPU node in the cluster."

// ensureDefaultInventory creates the GpuInventory that covers every node, if it is missing.
// With fresh (its CRD created just now, so there is nothing to overwrite) it is created by a
// server-side apply: the API server holds every create of a kind for 2 s after the kind
// becomes Established (so that its HA peers know the kind first), not an apply.
func (o *Operator) ensureDefaultInventory(ctx context.Context, fresh bool) error {
	return createDefaultInventory(ctx, kubeclient.GpuInventories(o.homelab), o.opts.DefaultInventory, fresh)
}

// inventoryWriter creates and applies GpuInventories: kubeclient.GpuInventories, or a fake
// clientset's in tests.
type inventoryWriter interface {
	Create(ctx context.Context, gi *homelabv1.GpuInventory, opts metav1.CreateOptions) (*homelabv1.GpuInventory, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*homelabv1.GpuInventory, error)
}

// createDefaultInventory is ensureDefaultInventory on client, for the inventory name ("":
// none).
func createDefaultInventory(ctx context.Context, client inventoryWriter, name string, fresh bool) error {
	if name == "" {
		return nil
	}
	var err error
	if fresh {
		_, err = client.Patch(ctx, name, types.ApplyPatchType, defaultInventoryApply(name),
			metav1.PatchOptions{FieldManager: homelabv1.FieldManager})
		if apierrors.IsConflict(err) {
			return nil // someone else's inventory of that name after all: left as it is
		}
	} else {
		_, err = client.Create(ctx, &homelabv1.GpuInventory{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       homelabv1.GpuInventorySpec{Note: defaultInventoryNote},
		}, metav1.CreateOptions{FieldManager: homelabv1.FieldManager})
	}
	switch {
	case err == nil:
		klog.FromContext(ctx).Info("Created default GpuInventory", "inventory", name)
		return nil
	case apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("create default GpuInventory %s: the GpuInventory CRD is not installed "+
			"(run with --install-crd=true, or `kubectl apply -f manifests/crd/`): %w", name, err)
	case apierrors.IsForbidden(err):
		verb := "create"
		if fresh {
			verb = "patch (server-side apply)"
		}
		return fmt.Errorf("create default GpuInventory %s: the operator may not %s gpuinventories.homelab.youngju.dev "+
			"(apply the RBAC in manifests/, or run with --default-inventory=\"\"): %w", name, verb, err)
	default:
		return fmt.Errorf("create default GpuInventory %s: %w", name, err)
	}
}

// defaultInventoryApply is the server-side apply of the default inventory: its name and note.
func defaultInventoryApply(name string) []byte {
	body, _ := json.Marshal(map[string]any{ // cannot fail: strings only
		"apiVersion": homelabv1.SchemeGroupVersion.String(), "kind": "GpuInventory",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"note": defaultInventoryNote},
	})
	return body
}
