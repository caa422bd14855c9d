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
)

// fakeKube is kubeAPI over a fake clientset's typed clients.
type fakeKube struct{ *fake.Clientset }

func (f fakeKube) Nodes() lister[*corev1.NodeList] { return f.CoreV1().Nodes() }
func (f fakeKube) Pods(ns string) podClient        { return f.CoreV1().Pods(ns) }
func (f fakeKube) Events(ns string) lister[*corev1.EventList] {
	return f.CoreV1().Events(ns)
}
func (f fakeKube) ResourceSlices() lister[*resourcev1.ResourceSliceList] {
	return f.ResourceV1().ResourceSlices()
}
func (f fakeKube) ResourceClaims(ns string) claimClient { return f.ResourceV1().ResourceClaims(ns) }
func (f fakeKube) ResourceClaimTemplates(ns string) getter[*resourcev1.ResourceClaimTemplate] {
	return f.ResourceV1().ResourceClaimTemplates(ns)
}
func (f fakeKube) DeviceClasses() lister[*resourcev1.DeviceClassList] {
	return f.ResourceV1().DeviceClasses()
}
func (f fakeKube) PriorityClasses() lister[*schedulingv1.PriorityClassList] {
	return f.SchedulingV1().PriorityClasses()
}

// fakeGPU is gpuAPI over the generated fake clientset.
type fakeGPU struct{ *gpufake.Clientset }

func (f fakeGPU) GpuInventories() inventoryClient { return f.HomelabV1().GpuInventories() }
func (f fakeGPU) GpuNodes() lister[*homelabv1.GpuNodeList] {
	return f.HomelabV1().GpuNodes()
}
