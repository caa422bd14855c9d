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
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/crd"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
)

// crdState is what the start knows of the project's CRDs.
type crdState struct {
	// fresh: the GpuInventory CRD was created by this start, so no inventory exists yet, and
	// the API server takes a while to serve the new kinds.
	fresh bool
	// records: GpuNode records are served (or installed by this operator).
	records bool
	// served waits until the custom resources are served (and the default inventory exists).
	served func(ctx context.Context) error
}

// prepareCRDs installs the CRDs (with --install-crd) and makes sure the default inventory
// exists. On a CRD created just now, the node list does not wait for the new kinds to be
// served, nor the custom resources' caches for the default inventory's create: served waits.
func (o *Operator) prepareCRDs(ctx context.Context) (crdState, error) {
	fresh := false
	if o.opts.InstallCRD {
		outcomes, err := crd.Ensure(ctx, kubeclient.CRDs(o.clients.apiext))
		if err != nil {
			return crdState{}, err
		}
		for _, outcome := range outcomes {
			klog.FromContext(ctx).Info("CRD "+string(outcome.Result), "crd", outcome.Name,
				"schemaRevision", outcome.Installed, "operatorSchemaRevision", outcome.Embedded)
			fresh = fresh || outcome.Name == homelabv1.CustomResourceDefinitionName && outcome.Result == crd.Created
		}
	}
	if !fresh {
		if o.opts.InstallCRD {
			if err := crd.WaitAllEstablished(ctx, kubeclient.CRDs(o.clients.apiext), 30*time.Second); err != nil {
				return crdState{}, err
			}
		}
		if err := o.ensureDefaultInventory(ctx, false); err != nil {
			return crdState{}, err
		}
		return crdState{records: o.opts.InstallCRD || o.gpuNodesServed(ctx), served: func(context.Context) error { return nil }}, nil
	}
	established := make(chan error, 1)
	go func() {
		err := crd.WaitAllEstablished(ctx, kubeclient.CRDs(o.clients.apiext), 30*time.Second)
		if err == nil {
			err = o.ensureDefaultInventory(ctx, true)
		}
		established <- err
	}()
	return crdState{fresh: true, records: true, served: waitOnce(established)}, nil
}

// gpuNodesServed reports whether the API server serves GpuNode records. Without them (the
// CRDs are applied by hand and this release's are not yet), the operator runs as before
// records existed: the stored node lists are the memory, bounded as they are.
func (o *Operator) gpuNodesServed(ctx context.Context) bool {
	served, err := kubeclient.Serves(ctx, o.clients.homelab, homelabv1.SchemeGroupVersion, "gpunodes")
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

// waitOnce waits for ready's one result and keeps it.
func waitOnce(ready <-chan error) func(ctx context.Context) error {
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
	return createDefaultInventory(ctx, kubeclient.GpuInventories(o.clients.homelab), o.opts.DefaultInventory, fresh)
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
