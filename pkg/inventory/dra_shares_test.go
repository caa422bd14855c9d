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

package inventory

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
)

// shareableSlices publishes n H100s that allow several allocations, each share taking 80Gi
// of memory unless it asks less, at least 10Gi.
func shareableSlices(n int) []*resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "share-0"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: DRADriver, NodeName: ptr.To("share"), Pool: resourcev1.ResourcePool{Name: "share", Generation: 1, ResourceSliceCount: 1}}}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type": {StringValue: ptr.To("gpu")}, "productName": {StringValue: ptr.To("NVIDIA H100 80GB HBM3")},
				"uuid": {StringValue: ptr.To(fmt.Sprintf("GPU-%d", i))},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi"),
				RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: ptr.To(resource.MustParse("80Gi")),
					ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("10Gi")), Step: ptr.To(resource.MustParse("10Gi"))}}}},
			AllowMultipleAllocations: ptr.To(true),
		})
	}
	return []*resourcev1.ResourceSlice{s}
}

func gib(n int64) int64 { return n << 30 * 1000 }

// A device that allows several allocations is a free shared GPU while a share of the
// smallest size is left on it; it is a free whole GPU only while no share is taken.
func TestSharedGPUsFree(t *testing.T) {
	facts := DeviceFactsOf(shareableSlices(3))
	share := func(device string, memory int64) allocation.Share {
		return allocation.Share{Pool: "share", Device: device, Consumed: []allocation.ResourceCount{{Name: "memory", Count: memory}}}
	}
	cases := []struct {
		name          string
		devices       []string
		shares        []allocation.Share
		whole, shared int32
	}{
		{"nothing held", nil, nil, 3, 3},
		{"a share of 50Gi", []string{"gpu-0"}, []allocation.Share{share("gpu-0", gib(50))}, 2, 3},
		{"gpu-0 full", []string{"gpu-0"}, []allocation.Share{share("gpu-0", gib(80))}, 2, 2},
		{"less than the smallest share left", []string{"gpu-0", "gpu-1"}, []allocation.Share{share("gpu-0", gib(75)), share("gpu-1", gib(70))}, 1, 2},
		{"held without a share recorded: held whole", []string{"gpu-2"}, nil, 2, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := &homelabv1.GpuNodeEntry{Ready: true, GpuCount: facts.GpuCount, Product: facts.Product}
			held := &allocation.Held{Pods: 1, Namespaces: []allocation.NamespaceHeld{{Namespace: "ml", Pods: 1, Devices: tc.devices}}, Shares: tc.shares}
			applyHeld(e, held, &corev1.Node{}, facts)
			want := []homelabv1.ResourceFree{{Resource: DRASharedResource, Free: tc.shared}}
			if e.FreeGpus != tc.whole || !reflect.DeepEqual(e.Free, want) {
				t.Errorf("free GPUs %d, units %v; want %d, %v", e.FreeGpus, e.Free, tc.whole, want)
			}
		})
	}
}

// A tainted shareable device offers no share; a node without shareable devices shows no
// shared unit at all.
func TestSharedGPUsNotOffered(t *testing.T) {
	slices := shareableSlices(2)
	slices[0].Spec.Devices[1].Taints = []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/xid", Effect: resourcev1.DeviceTaintEffectNoExecute}}
	if _, free := draFree(slices); !reflect.DeepEqual(free, []homelabv1.ResourceFree{{Resource: DRASharedResource, Free: 1}}) {
		t.Errorf("units %v, want 1 shared GPU (gpu-1 is tainted)", free)
	}
	if _, free := draFree(draSlices(t, dra.H100)); free != nil {
		t.Errorf("units %v on a node of whole GPUs only, want none", free)
	}
}
