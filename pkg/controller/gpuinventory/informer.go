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

package gpuinventory

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	listersv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/listers/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
)

// InventoryGetter reads a GpuInventory: kubeclient.GpuInventories, or a clientset's
// HomelabV1().GpuInventories().
type InventoryGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*homelabv1.GpuInventory, error)
}

// InventoryListWatcher lists and watches the GpuInventories, as InventoryGetter reads them.
type InventoryListWatcher interface {
	List(ctx context.Context, opts metav1.ListOptions) (*homelabv1.GpuInventoryList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Informer is a cache of GpuInventories and its lister.
type Informer interface {
	Informer() cache.SharedIndexInformer
	Lister() listersv1.GpuInventoryLister
}

// NewInformer returns the informer of the GpuInventories client lists and watches (over
// inventorycache.NewInformerClient: without their node lists), resynced every resync,
// indexed by namespace. Run it as a source (Run).
func NewInformer(client InventoryListWatcher, resync time.Duration) *Inventories {
	return &Inventories{source.FromInformer("gpuinventories", cache.NewSharedIndexInformerWithOptions(kubeclient.ListWatch[*homelabv1.GpuInventoryList](client, nil),
		&homelabv1.GpuInventory{}, cache.SharedIndexInformerOptions{
			ResyncPeriod: resync,
			Indexers:     cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		}))}
}

// Inventories is the inventories' cache as a source.
type Inventories struct{ *source.InformerSource }

// Lister lists the cached inventories.
func (i *Inventories) Lister() listersv1.GpuInventoryLister {
	return listersv1.NewGpuInventoryLister(i.Informer().GetIndexer())
}
