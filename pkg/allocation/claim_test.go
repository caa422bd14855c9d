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

package allocation

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const h100Product = "NVIDIA H100 80GB HBM3"

func baseClaim() *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ml", Name: "train-gpu", UID: "c1", ResourceVersion: "9",
		CreationTimestamp: metav1.NewTime(time.Unix(1700000100, 0)),
	}}
}

func result(driver, pool, device string) resourcev1.DeviceRequestAllocationResult {
	return resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: driver, Pool: pool, Device: device}
}

func exactly(class string, mode resourcev1.DeviceAllocationMode, count int64, cel ...string) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: class, AllocationMode: mode, Count: count, Selectors: selectors(cel...),
	}}
}

func selectors(cel ...string) []resourcev1.DeviceSelector {
	var out []resourcev1.DeviceSelector
	for _, e := range cel {
		out = append(out, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: e}})
	}
	return out
}

func TestFromClaim(t *testing.T) {
	productSel := `device.attributes["gpu.nvidia.com"].productName == "` + h100Product + `"`
	tests := []struct {
		name   string
		modify func(*resourcev1.ResourceClaim)
		want   func(*Claim) // nil: FromClaim returns nil
	}{
		{
			name: "allocated: several devices sorted and deduplicated, other drivers ignored",
			modify: func(c *resourcev1.ResourceClaim) {
				c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
					result(DRADriver, "n2", "gpu-1"),
					result("compute-domain.nvidia.com", "n2", "channel-0"),
					result(DRADriver, "n1", "gpu-3"),
					result(DRADriver, "n2", "gpu-0"),
					result(DRADriver, "n2", "gpu-1"),
					result("nic.example.com", "n1", "eth0"),
				}}}
			},
			want: func(c *Claim) {
				c.Devices = []Device{{"n1", "gpu-3"}, {"n2", "gpu-0"}, {"n2", "gpu-1"}}
			},
		},
		{
			name: "allocated with admin access: holds nothing, as the scheduler counts it",
			modify: func(c *resourcev1.ResourceClaim) {
				admin := result(DRADriver, "n1", "gpu-0")
				admin.AdminAccess = new(true)
				c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{admin}}}
			},
		},
		{
			name: "allocated: admin-access results skipped, the others kept",
			modify: func(c *resourcev1.ResourceClaim) {
				admin := result(DRADriver, "n1", "gpu-0")
				admin.AdminAccess = new(true)
				plain := result(DRADriver, "n1", "gpu-1")
				plain.AdminAccess = new(false)
				c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{admin, plain}}}
			},
			want: func(c *Claim) { c.Devices = []Device{{"n1", "gpu-1"}} },
		},
		{
			name: "allocated: pod holders sorted by name, other consumers ignored",
			modify: func(c *resourcev1.ResourceClaim) {
				c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
					result(DRADriver, "n1", "gpu-0-mig-1g5gb-19-0"),
				}}}
				c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{
					{Resource: "pods", Name: "worker-b", UID: "pb"},
					{APIGroup: "batch", Resource: "jobs", Name: "job", UID: "j"},
					{Resource: "pods", Name: "worker-a", UID: "pa"},
				}
				// Requests of an allocated claim are not kept.
				c.Spec.Devices.Requests = []resourcev1.DeviceRequest{exactly("mig.nvidia.com", "", 0)}
			},
			want: func(c *Claim) {
				c.Devices = []Device{{"n1", "gpu-0-mig-1g5gb-19-0"}}
				c.Holders = []Holder{{"worker-a", UIDOf("pa")}, {"worker-b", UIDOf("pb")}}
			},
		},
		{
			name: "allocated from another driver only",
			modify: func(c *resourcev1.ResourceClaim) {
				c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
					result("nic.example.com", "n1", "eth0"),
				}}}
				c.Spec.Devices.Requests = []resourcev1.DeviceRequest{exactly("gpu.nvidia.com", "", 0)}
			},
		},
		{
			name: "unallocated: product and counts",
			modify: func(c *resourcev1.ResourceClaim) {
				c.Spec.Devices.Requests = []resourcev1.DeviceRequest{
					exactly("gpu.nvidia.com", resourcev1.DeviceAllocationModeExactCount, 4, productSel),
					exactly("mig.nvidia.com", "", 0),
					exactly("gpu.nvidia.com", resourcev1.DeviceAllocationModeAll, 0),
					exactly("nic.example.com", "", 2),
				}
			},
			want: func(c *Claim) {
				c.Requests = []DeviceRequest{
					{Class: "gpu.nvidia.com", Count: 4, Product: h100Product},
					{Class: "mig.nvidia.com", Count: 1},
					{Class: "gpu.nvidia.com", Count: 1},
				}
			},
		},
		{
			name: "unallocated: the first of firstAvailable",
			modify: func(c *resourcev1.ResourceClaim) {
				c.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpu", FirstAvailable: []resourcev1.DeviceSubRequest{
					{Name: "big", DeviceClassName: "gpu.nvidia.com", Count: 2, Selectors: selectors(
						`device.attributes["gpu.nvidia.com"].architecture == "Hopper"`,
						`'`+h100Product+`' == device.attributes['gpu.nvidia.com'].productName`)},
					{Name: "small", DeviceClassName: "mig.nvidia.com"},
				}}}
			},
			want: func(c *Claim) {
				c.Requests = []DeviceRequest{{Class: "gpu.nvidia.com", Count: 2, Product: h100Product}}
			},
		},
		{
			name: "unallocated: selectors that disagree pin no product",
			modify: func(c *resourcev1.ResourceClaim) {
				c.Spec.Devices.Requests = []resourcev1.DeviceRequest{exactly("gpu.nvidia.com", "", 1,
					productSel, `device.attributes["gpu.nvidia.com"].productName == "NVIDIA B200"`)}
			},
			want: func(c *Claim) { c.Requests = []DeviceRequest{{Class: "gpu.nvidia.com", Count: 1}} },
		},
		{
			name: "unallocated, no NVIDIA class",
			modify: func(c *resourcev1.ResourceClaim) {
				c.Spec.Devices.Requests = []resourcev1.DeviceRequest{
					exactly("nic.example.com", "", 1),
					exactly("compute-domain-default-channel.nvidia.com", "", 1),
					{Name: "empty"},
				}
			},
		},
		{name: "empty", modify: func(*resourcev1.ResourceClaim) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claim := baseClaim()
			tt.modify(claim)
			got := FromClaim(claim)
			if tt.want == nil {
				if got != nil {
					t.Fatalf("FromClaim = %+v, want nil", got)
				}
				return
			}
			want := &Claim{Namespace: "ml", Name: "train-gpu", UID: "c1", ResourceVersion: "9", Created: 1700000100}
			tt.want(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("FromClaim (-want +got):\n%s", diff)
			}
		})
	}
	if FromClaim(nil) != nil {
		t.Error("FromClaim(nil) is not nil")
	}
}

func TestCELProduct(t *testing.T) {
	tests := []struct{ expr, want string }{
		{`device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"`, h100Product},
		{`device.attributes['gpu.nvidia.com'].productName=='NVIDIA H100 80GB HBM3'`, h100Product},
		{`"NVIDIA H100 80GB HBM3" == device.attributes["gpu.nvidia.com"].productName`, h100Product},
		{`device.attributes["gpu.nvidia.com"]["productName"] == "NVIDIA H100 80GB HBM3"`, h100Product},
		{"device.attributes[\"gpu.nvidia.com\"].productName == r'NVIDIA H100 80GB HBM3'", h100Product},
		{`device.attributes["gpu.nvidia.com"].productName == """NVIDIA H100 80GB HBM3"""`, h100Product},
		{`device.attributes["gpu.nvidia.com"].productName == "say \"hi\""`, `say "hi"`},
		{"device.driver == 'gpu.nvidia.com' &&\n  device.attributes[\"gpu.nvidia.com\"].productName == \"NVIDIA H100 80GB HBM3\" && // the model\n  device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0", h100Product},
		{`(device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3") && true`, h100Product},
		{`device.attributes["gpu.nvidia.com"].productName == "A" && device.attributes["gpu.nvidia.com"].productName == "A"`, "A"},
		// Not a required single product.
		{`device.attributes["gpu.nvidia.com"].productName == "A" && device.attributes["gpu.nvidia.com"].productName == "B"`, ""},
		{`device.attributes["gpu.nvidia.com"].productName == "A" || device.attributes["gpu.nvidia.com"].productName == "B"`, ""},
		{`!(device.attributes["gpu.nvidia.com"].productName == "A")`, ""},
		{`device.attributes["gpu.nvidia.com"].productName != "A"`, ""},
		{`device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA")`, ""},
		{`device.attributes["gpu.nvidia.com"].productName.lowerAscii() == "a"`, ""},
		{`device.attributes["gpu.nvidia.com"].productName == "A" + "B"`, ""},
		{`"x" + "A" == device.attributes["gpu.nvidia.com"].productName`, ""},
		{`device.attributes["other.com"].productName == "A"`, ""},
		{`device.attributes["gpu.nvidia.com"].productName in ["A"]`, ""},
		{`device.attributes["gpu.nvidia.com"].productName == "unterminated`, ""},
		{`device.attributes["gpu.nvidia.com"].productName == "\x41"`, ""},
		{`device.attributes["gpu.nvidia.com"].productName == ` + strings.Repeat("(", 100000), ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := CELProduct(tt.expr); got != tt.want {
			t.Errorf("CELProduct(%.120q) = %q, want %q", tt.expr, got, tt.want)
		}
	}
}

func FuzzCELProduct(f *testing.F) {
	f.Add(`device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"`)
	f.Add(`'A' == device.attributes['gpu.nvidia.com']["productName"] && x`)
	f.Add(`rb'''x''' == device.attributes["gpu.nvidia.com"].productName`)
	f.Add(`"\`)
	f.Fuzz(func(t *testing.T, expr string) {
		p := CELProduct(expr)
		if p != "" && !strings.Contains(expr, "productName") {
			t.Errorf("CELProduct(%q) = %q without a productName in the expression", expr, p)
		}
	})
}

// What shares of a device allowing several allocations consume is summed per device on its
// node, over claims; admin-access results and other drivers' consume nothing.
func TestSharesSumPerDevice(t *testing.T) {
	share := func(device, memory string) resourcev1.DeviceRequestAllocationResult {
		r := result(DRADriver, "node-a", device)
		r.ConsumedCapacity = map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse(memory)}
		return r
	}
	first, second := baseClaim(), baseClaim()
	second.Name = "infer"
	admin := share("gpu-1", "80Gi")
	admin.AdminAccess = ptr.To(true)
	other := share("gpu-1", "80Gi")
	other.Driver = "nic.example.com"
	first.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		share("gpu-0", "30Gi"), share("gpu-1", "10Gi")}}}
	second.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		share("gpu-0", "20Gi"), admin, other}}}
	h := buildHeld("node-a", nil, []*Claim{FromClaim(first), FromClaim(second)})
	gib := func(n int64) int64 { return n << 30 * 1000 }
	want := []Share{
		{Pool: "node-a", Device: "gpu-0", Consumed: []ResourceCount{{Name: "memory", Count: gib(50)}}},
		{Pool: "node-a", Device: "gpu-1", Consumed: []ResourceCount{{Name: "memory", Count: gib(10)}}},
	}
	if diff := cmp.Diff(want, h.Shares); diff != "" {
		t.Errorf("shares (-want +got):\n%s", diff)
	}
}
