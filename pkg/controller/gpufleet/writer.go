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

package gpufleet

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/statuswriter"
)

// Writer applies a GpuFleet's status and returns the object's resourceVersion afterwards
// ("" when the answer did not say).
type Writer interface {
	ApplyStatus(ctx context.Context, name string, status homelabv1.GpuFleetStatus) (resourceVersion string, err error)
}

// REST is the Writer that talks to the API server: one server-side apply of the status
// subresource under homelabv1.FleetFieldManager, answered with metadata only.
type REST struct{ client rest.Interface }

// NewWriter returns the Writer on client, a homelab.youngju.dev/v1 REST client (kubeclient.New).
func NewWriter(client rest.Interface) *REST { return &REST{client: client} }

// ApplyStatus server-side applies status.
func (w *REST) ApplyStatus(ctx context.Context, name string, status homelabv1.GpuFleetStatus) (string, error) {
	type metadata struct {
		Name string `json:"name"`
	}
	body, err := json.Marshal(struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metadata                 `json:"metadata"`
		Status          homelabv1.GpuFleetStatus `json:"status"`
	}{TypeMeta: metav1.TypeMeta{APIVersion: homelabv1.SchemeGroupVersion.String(), Kind: "GpuFleet"}, Metadata: metadata{name}, Status: status})
	if err != nil {
		return "", fmt.Errorf("encode status of GpuFleet %s: %w", name, err)
	}
	opts := metav1.PatchOptions{FieldManager: homelabv1.FleetFieldManager, Force: new(true), FieldValidation: metav1.FieldValidationIgnore}
	result := w.client.Patch(types.ApplyPatchType).Resource("gpufleets").Name(name).SubResource("status").
		VersionedParams(&opts, kubeclient.ParameterCodec).SetHeader("Accept", statuswriter.MetadataOnly).Body(body).Do(ctx)
	rv, err := statuswriter.WrittenVersion(ctx, result, "GpuFleet", klog.KRef("", name))
	if err != nil {
		return "", fmt.Errorf("apply the status of GpuFleet %s: %w", name, err)
	}
	return rv, nil
}

// FleetListWatcher lists and watches GpuFleets: kubeclient.GpuFleets, or a fake clientset's.
type FleetListWatcher interface {
	List(ctx context.Context, opts metav1.ListOptions) (*homelabv1.GpuFleetList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// InformerName is the GpuFleet cache's name as a source.
const InformerName = "gpufleets"

// Fleets is the hub's cache of GpuFleets, as a source.
type Fleets struct{ *source.InformerSource }

// NewInformer returns the cache of the GpuFleets client lists and watches, resynced every
// resync (0: never).
func NewInformer(client FleetListWatcher, resync time.Duration) *Fleets {
	informer := cache.NewSharedIndexInformer(kubeclient.ListWatch[*homelabv1.GpuFleetList](client, nil), &homelabv1.GpuFleet{}, resync, cache.Indexers{})
	_ = informer.SetTransform(func(obj any) (any, error) {
		if gf, ok := obj.(*homelabv1.GpuFleet); ok {
			gf.ManagedFields = nil
		}
		return obj, nil
	})
	return &Fleets{source.FromInformer(InformerName, informer)}
}
