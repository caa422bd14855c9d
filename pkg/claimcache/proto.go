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
	"errors"
	"fmt"
	"math"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// Field numbers of the messages the decoder reads (k8s.io/api resource/v1 generated.proto):
// part of the API's compatibility guarantee.
const (
	claimMetadata = 1
	claimSpec     = 2
	claimStatus   = 3

	specDevices         = 1 // ResourceClaimSpec.devices: DeviceClaim
	deviceClaimRequests = 1 // DeviceClaim.requests: DeviceRequest

	requestExactly        = 2 // ExactDeviceRequest
	requestFirstAvailable = 3 // DeviceSubRequest

	exactClass          = 1
	exactSelectors      = 2
	exactAllocationMode = 3
	exactCount          = 4

	subClass          = 2
	subSelectors      = 3
	subAllocationMode = 4
	subCount          = 5

	selectorCEL   = 1 // DeviceSelector.cel
	celExpression = 1

	statusAllocation  = 1 // AllocationResult
	statusReservedFor = 2 // ResourceClaimConsumerReference

	allocationDevices = 1 // AllocationResult.devices: DeviceAllocationResult
	devicesResults    = 1 // DeviceAllocationResult.results: DeviceRequestAllocationResult

	resultDriver = 2
	resultPool   = 3
	resultDevice = 4
	resultAdmin  = 5  // adminAccess
	resultShares = 10 // consumedCapacity

	consumerAPIGroup = 1
	consumerResource = 3
	consumerName     = 4
	consumerUID      = 5
)

// DecodeClaim decodes a protobuf ResourceClaim (the message, without the envelope) into
// what the allocation keeps of it: allocation.FromClaim of the claim, nil (and no error) for
// a claim it keeps nothing of. Only the fields FromClaim reads are decoded (of the results,
// only the NVIDIA driver's); managed fields, labels, device configuration and statuses are
// skipped unread. A list longer than the API allows (reservedFor, results, requests,
// firstAvailable, selectors) is an error. TestDecodeClaimEqualsFromClaim and FuzzDecodeClaim
// keep the result equal to FromClaim of the fully decoded claim.
func DecodeClaim(raw []byte) (*allocation.Claim, error) {
	claim, err := decodeMinimal(raw)
	if err != nil {
		return nil, err
	}
	return allocation.FromClaim(claim), nil
}

// decodeMinimal decodes what FromClaim reads of a claim, and of its annotations only the
// watch-list bookmark's marker.
func decodeMinimal(raw []byte) (*resourcev1.ResourceClaim, error) {
	claim := &resourcev1.ResourceClaim{}
	// FromClaim reads the requests only of an unallocated claim, and the spec comes before
	// the status: it is decoded at the end, if at all.
	var one [1][]byte
	specs := one[:0]
	var meta kubeproto.ObjectMeta
	m := kubeproto.NewMessage(raw)
	for m.Next() {
		var err error
		switch m.Tag() {
		case kubeproto.Bytes(claimMetadata):
			err = kubeproto.ReadObjectMeta(m.Value(), nil, &meta)
		case kubeproto.Bytes(claimSpec):
			specs = append(specs, m.Value())
		case kubeproto.Bytes(claimStatus):
			err = decodeStatus(m.Value(), &claim.Status)
		}
		if err != nil {
			return claim, err
		}
	}
	if err := m.Err(); err != nil {
		return claim, err
	}
	if err := kubeproto.SetObjectMeta(&claim.ObjectMeta, &meta, claimMeta); err != nil || claim.Status.Allocation != nil {
		return claim, err
	}
	for _, spec := range specs {
		if err := decodeSpec(spec, &claim.Spec); err != nil {
			return claim, err
		}
	}
	return claim, nil
}

// claimMeta is what FromClaim and the reflector read of a claim's metadata.
const claimMeta = kubeproto.MetaName | kubeproto.MetaNamespace | kubeproto.MetaUID | kubeproto.MetaResourceVersion |
	kubeproto.MetaCreationTimestamp | kubeproto.MetaInitialEventsEnd

// tooMany is the error for a list longer than the API server accepts: such a claim comes
// from no conforming server, and decoding it could take memory many times its size.
func tooMany(list string, limit int) error {
	return fmt.Errorf("%s has more than the %d entries the API allows", list, limit)
}

func decodeSpec(b []byte, spec *resourcev1.ResourceClaimSpec) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		if m.Tag() == kubeproto.Bytes(specDevices) {
			if err := decodeDeviceClaim(m.Value(), &spec.Devices); err != nil {
				return err
			}
		}
	}
	return m.Err()
}

func decodeDeviceClaim(b []byte, d *resourcev1.DeviceClaim) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		if m.Tag() != kubeproto.Bytes(deviceClaimRequests) {
			continue
		}
		if len(d.Requests) == resourcev1.DeviceRequestsMaxSize {
			return tooMany("spec.devices.requests", resourcev1.DeviceRequestsMaxSize)
		}
		d.Requests = append(d.Requests, resourcev1.DeviceRequest{})
		if err := decodeRequest(m.Value(), &d.Requests[len(d.Requests)-1]); err != nil {
			return err
		}
	}
	return m.Err()
}

func decodeRequest(b []byte, r *resourcev1.DeviceRequest) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		var err error
		switch m.Tag() {
		case kubeproto.Bytes(requestExactly):
			if r.Exactly == nil {
				r.Exactly = &resourcev1.ExactDeviceRequest{}
			}
			err = decodeExact(m.Value(), r.Exactly)
		case kubeproto.Bytes(requestFirstAvailable):
			if len(r.FirstAvailable) == resourcev1.FirstAvailableDeviceRequestMaxSize {
				return tooMany("firstAvailable", resourcev1.FirstAvailableDeviceRequestMaxSize)
			}
			r.FirstAvailable = append(r.FirstAvailable, resourcev1.DeviceSubRequest{})
			err = decodeSubRequest(m.Value(), &r.FirstAvailable[len(r.FirstAvailable)-1])
		}
		if err != nil {
			return err
		}
	}
	return m.Err()
}

func decodeExact(b []byte, e *resourcev1.ExactDeviceRequest) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case kubeproto.Bytes(exactClass):
			e.DeviceClassName = string(m.Value())
		case kubeproto.Bytes(exactAllocationMode):
			e.AllocationMode = resourcev1.DeviceAllocationMode(m.Value())
		case kubeproto.Varint(exactCount):
			e.Count = int64(m.Varint())
		case kubeproto.Bytes(exactSelectors):
			if err := appendSelector(&e.Selectors, m.Value()); err != nil {
				return err
			}
		}
	}
	return m.Err()
}

func decodeSubRequest(b []byte, s *resourcev1.DeviceSubRequest) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case kubeproto.Bytes(subClass):
			s.DeviceClassName = string(m.Value())
		case kubeproto.Bytes(subAllocationMode):
			s.AllocationMode = resourcev1.DeviceAllocationMode(m.Value())
		case kubeproto.Varint(subCount):
			s.Count = int64(m.Varint())
		case kubeproto.Bytes(subSelectors):
			if err := appendSelector(&s.Selectors, m.Value()); err != nil {
				return err
			}
		}
	}
	return m.Err()
}

// appendSelector decodes a DeviceSelector onto selectors, of an ExactDeviceRequest or a
// DeviceSubRequest.
func appendSelector(selectors *[]resourcev1.DeviceSelector, b []byte) error {
	if len(*selectors) == resourcev1.DeviceSelectorsMaxSize {
		return tooMany("selectors", resourcev1.DeviceSelectorsMaxSize)
	}
	*selectors = append(*selectors, resourcev1.DeviceSelector{})
	return decodeSelector(b, &(*selectors)[len(*selectors)-1])
}

func decodeSelector(b []byte, s *resourcev1.DeviceSelector) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		if m.Tag() != kubeproto.Bytes(selectorCEL) {
			continue
		}
		if s.CEL == nil {
			s.CEL = &resourcev1.CELDeviceSelector{}
		}
		if err := decodeCEL(m.Value(), s.CEL); err != nil {
			return err
		}
	}
	return m.Err()
}

func decodeCEL(b []byte, c *resourcev1.CELDeviceSelector) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		if m.Tag() == kubeproto.Bytes(celExpression) {
			c.Expression = string(m.Value())
		}
	}
	return m.Err()
}

func decodeStatus(b []byte, status *resourcev1.ResourceClaimStatus) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		var err error
		switch m.Tag() {
		case kubeproto.Bytes(statusAllocation):
			if status.Allocation == nil {
				status.Allocation = &resourcev1.AllocationResult{}
			}
			err = decodeAllocation(m.Value(), status.Allocation)
		case kubeproto.Bytes(statusReservedFor):
			if len(status.ReservedFor) == resourcev1.ResourceClaimReservedForMaxSize {
				return tooMany("status.reservedFor", resourcev1.ResourceClaimReservedForMaxSize)
			}
			status.ReservedFor = append(status.ReservedFor, resourcev1.ResourceClaimConsumerReference{})
			err = decodeConsumer(m.Value(), &status.ReservedFor[len(status.ReservedFor)-1])
		}
		if err != nil {
			return err
		}
	}
	return m.Err()
}

func decodeAllocation(b []byte, a *resourcev1.AllocationResult) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		if m.Tag() == kubeproto.Bytes(allocationDevices) {
			if err := decodeDeviceAllocation(m.Value(), &a.Devices); err != nil {
				return err
			}
		}
	}
	return m.Err()
}

// decodeDeviceAllocation keeps only the NVIDIA driver's results: others are not copied.
func decodeDeviceAllocation(b []byte, d *resourcev1.DeviceAllocationResult) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		if m.Tag() != kubeproto.Bytes(devicesResults) {
			continue
		}
		driver, pool, device, admin, consumed, err := decodeResult(m.Value())
		if err != nil {
			return err
		}
		if string(driver) != allocation.DRADriver {
			continue
		}
		if len(d.Results) == resourcev1.AllocationResultsMaxSize {
			return tooMany("gpu.nvidia.com results", resourcev1.AllocationResultsMaxSize)
		}
		r := resourcev1.DeviceRequestAllocationResult{Driver: allocation.DRADriver, Pool: string(pool), Device: string(device)}
		if admin {
			r.AdminAccess = &admin
		}
		if r.ConsumedCapacity, err = decodeConsumed(consumed); err != nil {
			return err
		}
		d.Results = append(d.Results, r)
	}
	return m.Err()
}

// decodeResult reads a DeviceRequestAllocationResult's driver, pool and device, uncopied,
// and whether it was given with admin access.
func decodeResult(b []byte) (driver, pool, device []byte, admin bool, consumed [][]byte, err error) {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case kubeproto.Bytes(resultShares):
			if len(consumed) == maxConsumed {
				return nil, nil, nil, false, nil, tooMany("consumedCapacity", maxConsumed)
			}
			consumed = append(consumed, m.Value())
		case kubeproto.Bytes(resultDriver):
			driver = m.Value()
		case kubeproto.Bytes(resultPool):
			pool = m.Value()
		case kubeproto.Bytes(resultDevice):
			device = m.Value()
		case kubeproto.Varint(resultAdmin):
			admin = m.Varint() != 0
		}
	}
	return driver, pool, device, admin, consumed, m.Err()
}

// maxConsumed bounds the consumedCapacity entries of one result (the API allows 32
// capacities per device).
const maxConsumed = 1024

// decodeConsumed decodes a result's consumedCapacity entries, the last of a name winning as
// in the generated decoder; nil when none. A quantity too long to parse safely is taken as
// too large to fit (math.MaxInt64 units).
func decodeConsumed(entries [][]byte) (map[resourcev1.QualifiedName]resource.Quantity, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	out := make(map[resourcev1.QualifiedName]resource.Quantity, len(entries))
	for _, e := range entries {
		key, value, err := kubeproto.MapEntry(e)
		if err != nil {
			return nil, err
		}
		var q resource.Quantity
		if err := kubeproto.Quantity(value, &q); errors.Is(err, kubeproto.ErrAbsurdQuantity) {
			q = *resource.NewQuantity(math.MaxInt64, resource.DecimalSI)
		} else if err != nil {
			return nil, err
		}
		out[resourcev1.QualifiedName(key)] = q
	}
	return out, nil
}

func decodeConsumer(b []byte, c *resourcev1.ResourceClaimConsumerReference) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case kubeproto.Bytes(consumerAPIGroup):
			c.APIGroup = string(m.Value())
		case kubeproto.Bytes(consumerResource):
			c.Resource = string(m.Value())
		case kubeproto.Bytes(consumerName):
			c.Name = string(m.Value())
		case kubeproto.Bytes(consumerUID):
			c.UID = types.UID(m.Value())
		}
	}
	return m.Err()
}
