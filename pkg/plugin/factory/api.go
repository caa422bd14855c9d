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

package factory

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
)

// The plugin's API calls go through these small interfaces, which client-go's typed clients
// satisfy: the binary reaches them through kubeclient (no typed clientset is linked,
// docs/design/clients.md) and unit tests through fake clientsets.

type Lister[L any] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
}

type Getter[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
}

type PodClient interface {
	Getter[*corev1.Pod]
	Lister[*corev1.PodList]
}

type ClaimClient interface {
	Getter[*resourcev1.ResourceClaim]
	Lister[*resourcev1.ResourceClaimList]
}

// KubeAPI is what the plugin reads of the built-in API groups.
type KubeAPI interface {
	Nodes() Lister[*corev1.NodeList]
	Pods(namespace string) PodClient
	Events(namespace string) Lister[*corev1.EventList]
	ResourceSlices() Lister[*resourcev1.ResourceSliceList]
	ResourceClaims(namespace string) ClaimClient
	ResourceClaimTemplates(namespace string) Getter[*resourcev1.ResourceClaimTemplate]
	DeviceClasses() Lister[*resourcev1.DeviceClassList]
	PriorityClasses() Lister[*schedulingv1.PriorityClassList]
}

// InventoryClient reads GpuInventories.
type InventoryClient interface {
	Getter[*homelabv1.GpuInventory]
	Lister[*homelabv1.GpuInventoryList]
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// FleetClient reads GpuFleets (the fleet hub's).
type FleetClient interface {
	Getter[*homelabv1.GpuFleet]
	Lister[*homelabv1.GpuFleetList]
}

// GPUAPI is what the plugin reads of the homelab.youngju.dev group.
type GPUAPI interface {
	GpuInventories() InventoryClient
	GpuNodes() Lister[*homelabv1.GpuNodeList]
	GpuFleets() FleetClient
}

// Discoverer tells which resources the API server serves in a group version.
type Discoverer interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// restAPI is KubeAPI over REST clients of the core, resource.k8s.io/v1 and
// scheduling.k8s.io/v1 groups.
type restAPI struct{ core, resource, scheduling rest.Interface }

func (a restAPI) Nodes() Lister[*corev1.NodeList] { return kubeclient.Nodes(a.core) }
func (a restAPI) Pods(ns string) PodClient        { return kubeclient.Pods(a.core, ns) }
func (a restAPI) Events(ns string) Lister[*corev1.EventList] {
	return kubeclient.Events(a.core, ns)
}
func (a restAPI) ResourceSlices() Lister[*resourcev1.ResourceSliceList] {
	return kubeclient.ResourceSlices(a.resource)
}
func (a restAPI) ResourceClaims(ns string) ClaimClient {
	return kubeclient.ResourceClaims(a.resource, ns)
}
func (a restAPI) ResourceClaimTemplates(ns string) Getter[*resourcev1.ResourceClaimTemplate] {
	return kubeclient.ResourceClaimTemplates(a.resource, ns)
}
func (a restAPI) DeviceClasses() Lister[*resourcev1.DeviceClassList] {
	return kubeclient.DeviceClasses(a.resource)
}
func (a restAPI) PriorityClasses() Lister[*schedulingv1.PriorityClassList] {
	return kubeclient.PriorityClasses(a.scheduling)
}

// restGPU is GPUAPI over a REST client of homelab.youngju.dev/v1.
type restGPU struct{ client rest.Interface }

func (g restGPU) GpuInventories() InventoryClient { return kubeclient.GpuInventories(g.client) }
func (g restGPU) GpuNodes() Lister[*homelabv1.GpuNodeList] {
	return kubeclient.GpuNodes(g.client)
}
func (g restGPU) GpuFleets() FleetClient { return kubeclient.GpuFleets(g.client) }

// restDiscoverer is Discoverer over a REST client: one GET of the group version.
type restDiscoverer struct{ client rest.Interface }

func (d restDiscoverer) ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error) {
	gv, err := schema.ParseGroupVersion(groupVersion)
	if err != nil {
		return nil, err
	}
	resources, err := kubeclient.Resources(context.Background(), d.client, gv)
	if err != nil {
		return nil, err
	}
	return &metav1.APIResourceList{GroupVersion: groupVersion, APIResources: resources}, nil
}
