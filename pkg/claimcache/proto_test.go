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

package claimcache

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
)

const (
	h100        = "NVIDIA H100 80GB HBM3"
	productExpr = `device.attributes["gpu.nvidia.com"].productName == "` + h100 + `"`
)

// claim is a ResourceClaim as the API server stores it, with what the decoder skips besides
// (labels, annotations, owner references, managed fields, finalizers, device configuration).
func claim(namespace, name string) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "417",
			Generation:        1,
			CreationTimestamp: metav1.NewTime(time.Unix(1800000000, 0)),
			Labels:            map[string]string{"app": "trainer"},
			Annotations:       map[string]string{"note": "skipped"},
			Finalizers:        []string{"resource.kubernetes.io/delete-protection"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: name + "-pod",
				UID: types.UID("uid-" + name + "-pod")}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "resource.k8s.io/v1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)}},
		},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Config: []resourcev1.DeviceClaimConfiguration{{DeviceConfiguration: resourcev1.DeviceConfiguration{
				Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: allocation.DRADriver,
					Parameters: runtime.RawExtension{Raw: []byte(`{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}}`)}},
			}}},
		}},
	}
}

func exact(name, class string, mode resourcev1.DeviceAllocationMode, count int64, cel ...string) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: class, AllocationMode: mode, Count: count, Selectors: celSelectors(cel...),
	}}
}

func celSelectors(cel ...string) []resourcev1.DeviceSelector {
	var out []resourcev1.DeviceSelector
	for _, e := range cel {
		out = append(out, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: e}})
	}
	return out
}

func requesting(c *resourcev1.ResourceClaim, requests ...resourcev1.DeviceRequest) *resourcev1.ResourceClaim {
	c.Spec.Devices.Requests = requests
	return c
}

// allocated gives c an allocation of the devices (driver, pool, device triples), as the
// scheduler writes it, reserved for the pods.
func allocated(c *resourcev1.ResourceClaim, devices [][3]string, pods ...string) *resourcev1.ResourceClaim {
	alloc := &resourcev1.AllocationResult{AllocationTimestamp: ptr(metav1.NewTime(time.Unix(1800000100, 0)))}
	for _, d := range devices {
		alloc.Devices.Results = append(alloc.Devices.Results, resourcev1.DeviceRequestAllocationResult{
			Request: "gpu", Driver: d[0], Pool: d[1], Device: d[2],
			Tolerations: []resourcev1.DeviceToleration{{Key: "maintenance", Operator: resourcev1.DeviceTolerationOpExists}},
		})
		c.Status.Devices = append(c.Status.Devices, resourcev1.AllocatedDeviceStatus{Driver: d[0], Pool: d[1], Device: d[2],
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Prepared"}}})
	}
	c.Status.Allocation = alloc
	for _, p := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{
			Resource: "pods", Name: p, UID: types.UID("uid-" + p)})
	}
	return c
}

func ptr[T any](v T) *T { return &v }

// claimTable is a ResourceClaim of each shape the decoder meets; kept says whether
// FromClaim keeps anything of it.
func claimTable() []struct {
	name  string
	claim *resourcev1.ResourceClaim
	kept  bool
} {
	gpu := func(pool, device string) [3]string { return [3]string{allocation.DRADriver, pool, device} }
	oneGPU := exact("gpu", "gpu.nvidia.com", resourcev1.DeviceAllocationModeExactCount, 1)
	extended := allocated(requesting(claim("ml", "train-0-extended-resources-x7k2p"),
		exact("container-0-request-0", "gpu.nvidia.com", resourcev1.DeviceAllocationModeExactCount, 2)),
		[][3]string{gpu("node-a", "gpu-0"), gpu("node-a", "gpu-1")}, "train-0")
	extended.Annotations[allocation.ExtendedResourceClaimAnnotation] = "true"
	firstAvailable := requesting(claim("ml", "either"), resourcev1.DeviceRequest{Name: "gpu", FirstAvailable: []resourcev1.DeviceSubRequest{
		{Name: "h100", DeviceClassName: "gpu.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 2,
			Selectors: celSelectors(productExpr)},
		{Name: "mig", DeviceClassName: "mig.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 4},
	}})
	reservedForOthers := allocated(requesting(claim("ml", "shared"), oneGPU), [][3]string{gpu("node-b", "gpu-3")}, "w-2", "w-0", "w-1")
	reservedForOthers.Status.ReservedFor = append(reservedForOthers.Status.ReservedFor,
		resourcev1.ResourceClaimConsumerReference{APIGroup: "example.com", Resource: "jobs", Name: "j", UID: "uid-j"})
	monitor := allocated(requesting(claim("monitoring", "dcgm"), exact("all", "gpu.nvidia.com", resourcev1.DeviceAllocationModeAll, 0)),
		[][3]string{gpu("node-a", "gpu-0"), gpu("node-a", "gpu-1")}, "dcgm")
	partlyAdmin := allocated(requesting(claim("ml", "partly-admin"), oneGPU), [][3]string{gpu("node-a", "gpu-0"), gpu("node-a", "gpu-1")}, "p")
	for i := range monitor.Status.Allocation.Devices.Results {
		monitor.Status.Allocation.Devices.Results[i].AdminAccess = ptr(true)
	}
	partlyAdmin.Status.Allocation.Devices.Results[0].AdminAccess = ptr(true)
	partlyAdmin.Status.Allocation.Devices.Results[1].AdminAccess = ptr(false)
	shares := allocated(requesting(claim("ml", "shares"), oneGPU), [][3]string{gpu("node-e", "gpu-1"), gpu("node-e", "gpu-0"), gpu("node-e", "gpu-1")}, "s")
	for i, q := range []string{"30Gi", "50Gi", "1.5"} {
		shares.Status.Allocation.Devices.Results[i].ShareID = ptr(types.UID(fmt.Sprintf("share-%d", i)))
		shares.Status.Allocation.Devices.Results[i].ConsumedCapacity = map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse(q), "cores": resource.MustParse("2")}
	}
	return []struct {
		name  string
		claim *resourcev1.ResourceClaim
		kept  bool
	}{
		{"admin access only: holds nothing", monitor, false},
		{"admin access on one result", partlyAdmin, true},
		{"shares of devices allowing several allocations", shares, true},
		{"a full GPU", allocated(requesting(claim("ml", "one"), oneGPU), [][3]string{gpu("node-a", "gpu-0")}, "p"), true},
		{"several devices over two requests", allocated(requesting(claim("ml", "eight"),
			exact("a", "gpu.nvidia.com", resourcev1.DeviceAllocationModeExactCount, 4),
			exact("b", "gpu.nvidia.com", resourcev1.DeviceAllocationModeExactCount, 4)),
			[][3]string{gpu("node-c", "gpu-7"), gpu("node-c", "gpu-1"), gpu("node-c", "gpu-0"), gpu("node-c", "gpu-2"),
				gpu("node-c", "gpu-3"), gpu("node-c", "gpu-4"), gpu("node-c", "gpu-5"), gpu("node-c", "gpu-6")}, "big"), true},
		{"MIG devices", allocated(requesting(claim("ml", "mig"), exact("mig", "mig.nvidia.com", resourcev1.DeviceAllocationModeExactCount, 2,
			`device.attributes["gpu.nvidia.com"].profile == "1g.10gb"`)),
			[][3]string{gpu("node-d", "gpu-0-mig-1g10gb-0-0"), gpu("node-d", "gpu-0-mig-1g10gb-1-0")}, "m"), true},
		{"with other drivers' results", allocated(requesting(claim("ml", "mixed"), oneGPU,
			exact("nic", "nic.example.com", resourcev1.DeviceAllocationModeExactCount, 1),
			exact("imex", "compute-domain-default-channel.nvidia.com", resourcev1.DeviceAllocationModeExactCount, 1)),
			[][3]string{{"nic.example.com", "node-a", "eth1"}, gpu("node-a", "gpu-5"), {"compute-domain.nvidia.com", "node-a", "channel-0"}}, "p"), true},
		{"only other drivers' results", allocated(requesting(claim("net", "nic"), oneGPU),
			[][3]string{{"nic.example.com", "node-a", "eth1"}}, "p"), false},
		{"reserved for several pods and a non-pod", reservedForOthers, true},
		{"allocated, not yet reserved", allocated(requesting(claim("ml", "unreserved"), oneGPU), [][3]string{gpu("node-a", "gpu-2")}), true},
		{"unallocated: a product selector and a count", requesting(claim("ml", "waiting"),
			exact("gpu", "gpu.nvidia.com", resourcev1.DeviceAllocationModeExactCount, 4, `device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0`, productExpr)), true},
		{"unallocated: all devices and the default count", requesting(claim("ml", "all"),
			exact("all", "gpu.nvidia.com", resourcev1.DeviceAllocationModeAll, 0),
			exact("default", "mig.nvidia.com", "", 0)), true},
		{"unallocated: firstAvailable", firstAvailable, true},
		{"unallocated: no NVIDIA class", requesting(claim("net", "nic-waiting"),
			exact("nic", "nic.example.com", resourcev1.DeviceAllocationModeExactCount, 2, `device.driver == "nic.example.com"`)), false},
		{"unallocated: the compute-domain class only", requesting(claim("ml", "imex"),
			exact("channel", "compute-domain-default-channel.nvidia.com", resourcev1.DeviceAllocationModeExactCount, 1)), false},
		{"the scheduler's extended-resource claim", extended, true},
		{"no requests", claim("ml", "empty"), false},
	}
}

func marshal(t testing.TB, c *resourcev1.ResourceClaim) []byte {
	t.Helper()
	data, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// DecodeClaim gives what FromClaim makes of the fully decoded claim, for every shape.
func TestDecodeClaimEqualsFromClaim(t *testing.T) {
	for _, tc := range claimTable() {
		t.Run(tc.name, func(t *testing.T) {
			want := allocation.FromClaim(tc.claim)
			if (want != nil) != tc.kept {
				t.Fatalf("FromClaim = %+v; the table says kept = %v", want, tc.kept)
			}
			got, err := DecodeClaim(marshal(t, tc.claim))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("DecodeClaim differs from FromClaim (-FromClaim +DecodeClaim):\n%s", diff)
			}
		})
	}
}

// Malformed bytes give an error, never a claim made of part of them.
func TestDecodeClaimRejectsMalformedBytes(t *testing.T) {
	full := marshal(t, allocated(requesting(claim("ml", "one"), exact("gpu", "gpu.nvidia.com", "", 1)),
		[][3]string{{allocation.DRADriver, "node-a", "gpu-0"}}, "p"))
	for name, data := range map[string][]byte{
		"truncated":                   full[:len(full)-3],
		"a length beyond the end":     {0x0a, 0x20, 0x0a, 0x01},
		"an unterminated varint":      {0x10, 0xff, 0xff},
		"field number zero":           {0x02, 0x00},
		"an end group without start":  {0x0c},
		"an invalid wire type":        {0x0f},
		"a bad creation timestamp":    {0x0a, 0x04, 0x42, 0x02, 0x08, 0xff},
		"a varint of eleven bytes":    {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"a negative length":           {0x1a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"a malformed allocation":      {0x1a, 0x03, 0x0a, 0x01, 0x0a},
		"a malformed reservedFor":     {0x1a, 0x03, 0x12, 0x01, 0x22},
		"a malformed unallocated req": {0x12, 0x04, 0x0a, 0x02, 0x0a, 0x05},
	} {
		if got, err := DecodeClaim(data); err == nil {
			t.Errorf("%s: DecodeClaim = %+v, nil; want an error", name, got)
		}
	}
}

// Lists up to the API's bounds are decoded; a claim with a longer one (which no conforming
// API server holds) is an error, not memory many times its size.
func TestDecodeClaimBoundsLists(t *testing.T) {
	gpu := exact("gpu", "gpu.nvidia.com", "", 1)
	pods := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("p-%d", i))
		}
		return out
	}
	devices := func(n int) [][3]string {
		var out [][3]string
		for i := range n {
			out = append(out, [3]string{allocation.DRADriver, "node-a", fmt.Sprintf("gpu-%d", i)})
		}
		return out
	}
	requests := func(n int) []resourcev1.DeviceRequest {
		var out []resourcev1.DeviceRequest
		for i := range n {
			out = append(out, exact(fmt.Sprintf("r-%d", i), "gpu.nvidia.com", "", 1, productExpr))
		}
		return out
	}
	withSelectors := func(n int) *resourcev1.ResourceClaim {
		var cel []string
		for range n {
			cel = append(cel, productExpr)
		}
		return requesting(claim("ml", "selectors"), exact("gpu", "gpu.nvidia.com", "", 1, cel...))
	}
	withAlternatives := func(n int) *resourcev1.ResourceClaim {
		r := resourcev1.DeviceRequest{Name: "gpu"}
		for i := range n {
			r.FirstAvailable = append(r.FirstAvailable, resourcev1.DeviceSubRequest{Name: fmt.Sprint(i), DeviceClassName: "gpu.nvidia.com"})
		}
		return requesting(claim("ml", "alternatives"), r)
	}
	for _, tc := range []struct {
		name          string
		atMost, above *resourcev1.ResourceClaim
	}{
		{"reservedFor",
			allocated(requesting(claim("ml", "r"), gpu), devices(1), pods(resourcev1.ResourceClaimReservedForMaxSize)...),
			allocated(requesting(claim("ml", "r"), gpu), devices(1), pods(resourcev1.ResourceClaimReservedForMaxSize+1)...)},
		{"results", allocated(requesting(claim("ml", "d"), gpu), devices(resourcev1.AllocationResultsMaxSize), "p"),
			allocated(requesting(claim("ml", "d"), gpu), devices(resourcev1.AllocationResultsMaxSize+1), "p")},
		{"requests", requesting(claim("ml", "q"), requests(resourcev1.DeviceRequestsMaxSize)...),
			requesting(claim("ml", "q"), requests(resourcev1.DeviceRequestsMaxSize+1)...)},
		{"selectors", withSelectors(resourcev1.DeviceSelectorsMaxSize), withSelectors(resourcev1.DeviceSelectorsMaxSize + 1)},
		{"firstAvailable", withAlternatives(resourcev1.FirstAvailableDeviceRequestMaxSize),
			withAlternatives(resourcev1.FirstAvailableDeviceRequestMaxSize + 1)},
	} {
		got, err := DecodeClaim(marshal(t, tc.atMost))
		if want := allocation.FromClaim(tc.atMost); err != nil || want == nil || !cmp.Equal(want, got) {
			t.Errorf("%s at the bound: %v; want FromClaim's %+v, got %+v", tc.name, err, want, got)
		}
		if got, err := DecodeClaim(marshal(t, tc.above)); err == nil {
			t.Errorf("%s above the bound: %+v, no error", tc.name, got)
		}
	}
}

// beyondBounds reports whether a claim has a list longer than the API allows, of those
// DecodeClaim reads.
func beyondBounds(c *resourcev1.ResourceClaim) bool {
	if c.Status.Allocation != nil {
		n := 0
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver == allocation.DRADriver {
				n++
			}
		}
		if n > resourcev1.AllocationResultsMaxSize {
			return true
		}
	}
	if len(c.Status.ReservedFor) > resourcev1.ResourceClaimReservedForMaxSize {
		return true
	}
	if c.Status.Allocation != nil {
		return false // the requests are not read
	}
	requests := c.Spec.Devices.Requests
	if len(requests) > resourcev1.DeviceRequestsMaxSize {
		return true
	}
	for _, r := range requests {
		if r.Exactly != nil && len(r.Exactly.Selectors) > resourcev1.DeviceSelectorsMaxSize ||
			len(r.FirstAvailable) > resourcev1.FirstAvailableDeviceRequestMaxSize {
			return true
		}
		for _, s := range r.FirstAvailable {
			if len(s.Selectors) > resourcev1.DeviceSelectorsMaxSize {
				return true
			}
		}
	}
	return false
}

// Whatever the bytes, DecodeClaim returns a claim, nil or an error and never panics; and
// whenever the generated decoder accepts the bytes, DecodeClaim gives what FromClaim makes of
// its claim, or an error for a list beyond the API's bounds.
func FuzzDecodeClaim(f *testing.F) {
	for _, tc := range claimTable() {
		data := marshal(f, tc.claim)
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	f.Add([]byte{})
	// A second metadata field holding only a name: the generated decoder merges it.
	f.Add(append(marshal(f, claimTable()[0].claim), 0x0a, 0x09, 0x0a, 0x07, 'r', 'e', 'n', 'a', 'm', 'e', 'd'))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeClaim(data)
		var full resourcev1.ResourceClaim
		if full.Unmarshal(data) != nil {
			return
		}
		if beyondBounds(&full) {
			if err == nil {
				t.Fatalf("no error for a claim with a list beyond the API's bounds")
			}
			return
		}
		if err != nil {
			t.Fatalf("DecodeClaim fails (%v) where the generated decoder does not", err)
		}
		if diff := cmp.Diff(allocation.FromClaim(&full), got); diff != "" {
			t.Fatalf("DecodeClaim differs from FromClaim (-FromClaim +DecodeClaim):\n%s", diff)
		}
	})
}

// BenchmarkDecodeClaim decodes an allocated claim as the API server sends it (managed
// fields, configuration, device statuses), against the generated decoder and FromClaim.
func BenchmarkDecodeClaim(b *testing.B) {
	c := allocated(requesting(claim("ml", "eight"), exact("gpu", "gpu.nvidia.com", resourcev1.DeviceAllocationModeExactCount, 8, productExpr)),
		[][3]string{{allocation.DRADriver, "node-c", "gpu-0"}, {allocation.DRADriver, "node-c", "gpu-1"},
			{allocation.DRADriver, "node-c", "gpu-2"}, {allocation.DRADriver, "node-c", "gpu-3"}}, "trainer-0", "trainer-1")
	data := marshal(b, c)
	b.Run("DecodeClaim", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := DecodeClaim(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Unmarshal+FromClaim", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var full resourcev1.ResourceClaim
			if err := full.Unmarshal(data); err != nil {
				b.Fatal(err)
			}
			allocation.FromClaim(&full)
		}
	})
}
