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

// Package statuswriter is where a GpuInventory's status is written: one server-side apply of
// the status subresource with the operator's field manager. docs/design/status-write.md says
// why the request looks the way it does.
package statuswriter

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
)

// Writer applies an inventory's status and returns the object's resourceVersion afterwards
// ("" when the answer did not say).
type Writer interface {
	ApplyStatus(ctx context.Context, name string, status homelabv1.GpuInventoryStatus) (resourceVersion string, err error)
}

// MetadataOnly, as the Accept header, asks the API server to answer a write with the
// object's metadata only.
const MetadataOnly = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

// REST is the Writer that talks to the API server.
type REST struct {
	client rest.Interface
	dryRun bool
}

// New returns a Writer that sends its requests through client, a homelab.youngju.dev/v1
// REST client (kubeclient.New).
func New(client rest.Interface) *REST { return &REST{client: client} }

// DryRun returns a copy of w whose writes the API server checks but does not persist.
func (w *REST) DryRun() *REST { return &REST{client: w.client, dryRun: true} }

// ApplyStatus server-side applies status, always with apiVersion and kind, asking for an
// answer of metadata only and skipping the strict field validation (fields the CRD lacks
// are refused by the apply itself).
func (w *REST) ApplyStatus(ctx context.Context, name string, status homelabv1.GpuInventoryStatus) (string, error) {
	body, err := Body(name, status)
	if err != nil {
		return "", err
	}
	opts := metav1.PatchOptions{FieldManager: homelabv1.FieldManager, Force: new(true), FieldValidation: metav1.FieldValidationIgnore}
	if w.dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	result := w.client.Patch(types.ApplyPatchType).Resource("gpuinventories").Name(name).SubResource("status").
		VersionedParams(&opts, kubeclient.ParameterCodec).SetHeader("Accept", MetadataOnly).Body(body).Do(ctx)
	resourceVersion, err := WrittenVersion(ctx, result, "GpuInventory", klog.KRef("", name))
	if err != nil {
		return "", explain(err)
	}
	return resourceVersion, nil
}

// WrittenVersion returns the resourceVersion in the answer to a write sent with the
// MetadataOnly Accept header, or the write's error. A write whose answer does not say is
// logged and gives "" (the caller reads the object back).
func WrittenVersion(ctx context.Context, result rest.Result, kind string, object klog.ObjectRef) (string, error) {
	// Error, not Raw: only Error reads the API server's reason out of a failure's answer.
	if err := result.Error(); err != nil {
		return "", err
	}
	answer, _ := result.Raw()
	var meta metav1.PartialObjectMetadata
	if err := json.Unmarshal(answer, &meta); err != nil || meta.ResourceVersion == "" {
		klog.FromContext(ctx).Error(err, "Cannot read the resourceVersion in the answer to a write", "kind", kind, "object", object)
		return "", nil
	}
	return meta.ResourceVersion, nil
}

// explain says what to do about a status write that a CRD older than the operator refused.
func explain(err error) error {
	if strings.Contains(err.Error(), "field not declared in schema") {
		return fmt.Errorf("the installed GpuInventory CRD is older than this operator: let the operator install it (--install-crd, the default) or apply manifests/crd of this release: %w", err)
	}
	return err
}

// Body is the apply request for an inventory's status.
func Body(name string, status homelabv1.GpuInventoryStatus) ([]byte, error) {
	type metadata struct {
		Name string `json:"name"`
	}
	body, err := json.Marshal(struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metadata                     `json:"metadata"`
		Status          homelabv1.GpuInventoryStatus `json:"status"`
	}{
		TypeMeta: metav1.TypeMeta{APIVersion: homelabv1.SchemeGroupVersion.String(), Kind: "GpuInventory"},
		Metadata: metadata{name},
		Status:   status,
	})
	if err != nil {
		return nil, fmt.Errorf("encode status of GpuInventory %s: %w", name, err)
	}
	return body, nil
}
