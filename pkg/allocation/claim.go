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
	"bytes"
	"math"
	"sort"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// FromClaim is what allocation keeps of a ResourceClaim that holds gpu.nvidia.com devices
// (allocated) or asks for devices of an NVIDIA DeviceClass (unallocated); nil for any other.
//
// It reads only these fields, so a decoder may fill just them:
//   - metadata: name, namespace, uid, resourceVersion, creationTimestamp;
//   - spec.devices.requests[]: exactly and firstAvailable[0] (deviceClassName, allocationMode,
//     count, selectors[].cel.expression);
//   - status.allocation.devices.results[] (driver, pool, device, adminAccess);
//   - status.reservedFor[] (apiGroup, resource, name, uid).
func FromClaim(claim *resourcev1.ResourceClaim) *Claim {
	if claim == nil {
		return nil
	}
	c := &Claim{
		Namespace:       claim.Namespace,
		Name:            claim.Name,
		UID:             string(claim.UID),
		ResourceVersion: claim.ResourceVersion,
		Created:         claim.CreationTimestamp.Unix(),
	}
	if alloc := claim.Status.Allocation; alloc != nil {
		c.Devices = claimDevices(alloc.Devices.Results)
		c.Shares = claimShares(alloc.Devices.Results)
		if len(c.Devices) == 0 {
			return nil
		}
		c.Holders = claimHolders(claim.Status.ReservedFor)
		return c
	}
	for i := range claim.Spec.Devices.Requests {
		if r, ok := deviceRequest(&claim.Spec.Devices.Requests[i]); ok {
			c.Requests = append(c.Requests, r)
		}
	}
	if len(c.Requests) == 0 {
		return nil
	}
	return c
}

func claimDevices(results []resourcev1.DeviceRequestAllocationResult) []Device {
	var out []Device
	for _, r := range results {
		// Admin access holds nothing: the scheduler does not count such a device as allocated.
		if r.Driver == DRADriver && (r.AdminAccess == nil || !*r.AdminAccess) {
			out = append(out, Device{Pool: r.Pool, Device: r.Device})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Pool != out[j].Pool {
			return out[i].Pool < out[j].Pool
		}
		return out[i].Device < out[j].Device
	})
	out = compactDevices(out)
	return out
}

// claimShares are the results of DRADriver that consumed capacity of a device (admin access
// aside), sorted by pool then device, in the order of the results otherwise.
func claimShares(results []resourcev1.DeviceRequestAllocationResult) []Share {
	var out []Share
	for _, r := range results {
		if r.Driver != DRADriver || r.AdminAccess != nil && *r.AdminAccess || len(r.ConsumedCapacity) == 0 {
			continue
		}
		s := Share{Pool: r.Pool, Device: r.Device, Consumed: make([]ResourceCount, 0, len(r.ConsumedCapacity))}
		for name, q := range r.ConsumedCapacity {
			s.Consumed = append(s.Consumed, ResourceCount{Name: string(name), Count: CapacityMilli(q)})
		}
		sort.Slice(s.Consumed, func(i, j int) bool { return s.Consumed[i].Name < s.Consumed[j].Name })
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Pool != out[j].Pool {
			return out[i].Pool < out[j].Pool
		}
		return out[i].Device < out[j].Device
	})
	return out
}

// CapacityMilli is a capacity or counter as the project holds it: in thousandths, a negative
// value as 0 and one too large for thousandths in an int64 as math.MaxInt64.
func CapacityMilli(q resource.Quantity) int64 {
	switch {
	case q.Sign() <= 0:
		return 0
	case q.CmpInt64(math.MaxInt64/1000) >= 0:
		return math.MaxInt64
	}
	return q.MilliValue()
}

func compactDevices(ds []Device) []Device {
	if len(ds) < 2 {
		return ds
	}
	out := ds[:1]
	for _, d := range ds[1:] {
		if d != out[len(out)-1] {
			out = append(out, d)
		}
	}
	return out
}

func claimHolders(refs []resourcev1.ResourceClaimConsumerReference) []Holder {
	var out []Holder
	for _, r := range refs {
		if r.APIGroup == "" && r.Resource == "pods" {
			out = append(out, Holder{Name: r.Name, UID: UIDOf(string(r.UID))})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return bytes.Compare(out[i].UID[:], out[j].UID[:]) < 0
	})
	return out
}

// isNVIDIAClass reports whether a DeviceClass name is one of NVIDIA's GPU classes
// (gpu.nvidia.com, mig.nvidia.com, ...). The driver's compute-domain classes hand out
// IMEX channels, not GPUs.
func isNVIDIAClass(class string) bool {
	return strings.HasSuffix(class, ".nvidia.com") && !strings.HasPrefix(class, "compute-domain")
}

// deviceRequest is what one request of an unallocated claim asks for: its exact request or
// the first of its alternatives (the scheduler tries them in order).
func deviceRequest(r *resourcev1.DeviceRequest) (DeviceRequest, bool) {
	var (
		class     string
		mode      resourcev1.DeviceAllocationMode
		count     int64
		selectors []resourcev1.DeviceSelector
	)
	switch {
	case r.Exactly != nil:
		class, mode, count, selectors = r.Exactly.DeviceClassName, r.Exactly.AllocationMode, r.Exactly.Count, r.Exactly.Selectors
	case len(r.FirstAvailable) > 0:
		s := &r.FirstAvailable[0]
		class, mode, count, selectors = s.DeviceClassName, s.AllocationMode, s.Count, s.Selectors
	default:
		return DeviceRequest{}, false
	}
	if !isNVIDIAClass(class) {
		return DeviceRequest{}, false
	}
	if mode == resourcev1.DeviceAllocationModeAll || count < 1 {
		count = 1
	}
	return DeviceRequest{Class: class, Count: count, Product: selectorsProduct(selectors)}, true
}

// selectorsProduct is the productName the selectors require together (they are ANDed); ""
// when none requires one or they disagree.
func selectorsProduct(selectors []resourcev1.DeviceSelector) string {
	product := ""
	for _, s := range selectors {
		if s.CEL == nil {
			continue
		}
		p := CELProduct(s.CEL.Expression)
		if p == "" {
			continue
		}
		if product != "" && p != product {
			return ""
		}
		product = p
	}
	return product
}
