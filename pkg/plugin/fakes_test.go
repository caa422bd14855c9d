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

package plugin

import (
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/client-go/kubernetes/fake"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	gpufake "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned/fake"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
)

// fakeKube is kubeAPI over a fake clientset's typed clients.
type fakeKube struct{ *fake.Clientset }

func (f fakeKube) Nodes() factory.Lister[*corev1.NodeList] { return f.CoreV1().Nodes() }
func (f fakeKube) Pods(ns string) factory.PodClient        { return f.CoreV1().Pods(ns) }
func (f fakeKube) Events(ns string) factory.Lister[*corev1.EventList] {
	return f.CoreV1().Events(ns)
}
func (f fakeKube) ResourceSlices() factory.Lister[*resourcev1.ResourceSliceList] {
	return f.ResourceV1().ResourceSlices()
}
func (f fakeKube) ResourceClaims(ns string) factory.ClaimClient {
	return f.ResourceV1().ResourceClaims(ns)
}
func (f fakeKube) ResourceClaimTemplates(ns string) factory.Getter[*resourcev1.ResourceClaimTemplate] {
	return f.ResourceV1().ResourceClaimTemplates(ns)
}
func (f fakeKube) DeviceClasses() factory.Lister[*resourcev1.DeviceClassList] {
	return f.ResourceV1().DeviceClasses()
}
func (f fakeKube) PriorityClasses() factory.Lister[*schedulingv1.PriorityClassList] {
	return f.SchedulingV1().PriorityClasses()
}

// fakeGPU is factory.GPUAPI over the generated fake clientset.
type fakeGPU struct{ *gpufake.Clientset }

func (f fakeGPU) GpuInventories() factory.InventoryClient { return f.HomelabV1().GpuInventories() }
func (f fakeGPU) GpuNodes() factory.Lister[*homelabv1.GpuNodeList] {
	return f.HomelabV1().GpuNodes()
}
func (f fakeGPU) GpuFleets() factory.FleetClient { return f.HomelabV1().GpuFleets() }
