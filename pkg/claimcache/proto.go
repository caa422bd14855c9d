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

	"google.golang.org/protobuf/encoding/protowire"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// Field numbers of the messages the decoder reads (k8s.io/api resource/v1 and
// k8s.io/apimachinery meta/v1 generated.proto): part of the API's compatibility guarantee.
const (
	claimMetadata = 1
	claimSpec     = 2
	claimStatus   = 3

	metaName              = 1
	metaNamespace         = 3
	metaUID               = 5
	metaResourceVersion   = 6
	metaCreationTimestamp = 8
	metaAnnotations       = 12

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
	var specs [][]byte
	err := kubeproto.Fields(raw, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case claimMetadata:
			return decodeMeta(v, &claim.ObjectMeta)
		case claimSpec:
			specs = append(specs, v)
		case claimStatus:
			return decodeStatus(v, &claim.Status)
		}
		return nil
	})
	if err != nil || claim.Status.Allocation != nil {
		return claim, err
	}
	for _, spec := range specs {
		if err := decodeSpec(spec, &claim.Spec); err != nil {
			return claim, err
		}
	}
	return claim, nil
}

// tooMany is the error for a list longer than the API server accepts: such a claim comes
// from no conforming server, and decoding it could take memory many times its size.
func tooMany(list string, limit int) error {
	return fmt.Errorf("%s has more than the %d entries the API allows", list, limit)
}

func decodeMeta(b []byte, meta *metav1.ObjectMeta) error {
	return kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case metaName:
			meta.Name = string(v)
		case metaNamespace:
			meta.Namespace = string(v)
		case metaUID:
			meta.UID = types.UID(v)
		case metaResourceVersion:
			meta.ResourceVersion = string(v)
		case metaCreationTimestamp:
			return meta.CreationTimestamp.Unmarshal(v)
		case metaAnnotations:
			if value, ok := initialEventsEnd(v); ok {
				meta.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: value}
			}
		}
		return nil
	})
}

// initialEventsEnd returns the value of an annotation's map entry if it is the watch-list
// bookmark's marker (the reflector waits for it). A malformed entry is no marker.
func initialEventsEnd(entry []byte) (string, bool) {
	key, value, err := kubeproto.MapEntry(entry)
	if err != nil || string(key) != metav1.InitialEventsAnnotationKey {
		return "", false
	}
	return string(value), true
}

func decodeSpec(b []byte, spec *resourcev1.ResourceClaimSpec) error {
	return kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != specDevices || typ != protowire.BytesType {
			return nil
		}
		return kubeproto.Fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			if num != deviceClaimRequests || typ != protowire.BytesType {
				return nil
			}
			if len(spec.Devices.Requests) == resourcev1.DeviceRequestsMaxSize {
				return tooMany("spec.devices.requests", resourcev1.DeviceRequestsMaxSize)
			}
			spec.Devices.Requests = append(spec.Devices.Requests, resourcev1.DeviceRequest{})
			return decodeRequest(v, &spec.Devices.Requests[len(spec.Devices.Requests)-1])
		})
	})
}

func decodeRequest(b []byte, r *resourcev1.DeviceRequest) error {
	return kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case requestExactly:
			if r.Exactly == nil {
				r.Exactly = &resourcev1.ExactDeviceRequest{}
			}
			e := r.Exactly
			return decodeDeviceRequest(v, exactClass, exactSelectors, exactAllocationMode, exactCount,
				&e.DeviceClassName, &e.Selectors, &e.AllocationMode, &e.Count)
		case requestFirstAvailable:
			if len(r.FirstAvailable) == resourcev1.FirstAvailableDeviceRequestMaxSize {
				return tooMany("firstAvailable", resourcev1.FirstAvailableDeviceRequestMaxSize)
			}
			r.FirstAvailable = append(r.FirstAvailable, resourcev1.DeviceSubRequest{})
			s := &r.FirstAvailable[len(r.FirstAvailable)-1]
			return decodeDeviceRequest(v, subClass, subSelectors, subAllocationMode, subCount,
				&s.DeviceClassName, &s.Selectors, &s.AllocationMode, &s.Count)
		}
		return nil
	})
}

// decodeDeviceRequest reads the fields an ExactDeviceRequest and a DeviceSubRequest share,
// under their numbers in either message.
func decodeDeviceRequest(b []byte, classNum, selectorsNum, modeNum, countNum protowire.Number,
	class *string, selectors *[]resourcev1.DeviceSelector, mode *resourcev1.DeviceAllocationMode, count *int64) error {
	return kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, varint uint64) error {
		switch {
		case num == classNum && typ == protowire.BytesType:
			*class = string(v)
		case num == modeNum && typ == protowire.BytesType:
			*mode = resourcev1.DeviceAllocationMode(v)
		case num == countNum && typ == protowire.VarintType:
			*count = int64(varint)
		case num == selectorsNum && typ == protowire.BytesType:
			if len(*selectors) == resourcev1.DeviceSelectorsMaxSize {
				return tooMany("selectors", resourcev1.DeviceSelectorsMaxSize)
			}
			*selectors = append(*selectors, resourcev1.DeviceSelector{})
			return decodeSelector(v, &(*selectors)[len(*selectors)-1])
		}
		return nil
	})
}

func decodeSelector(b []byte, s *resourcev1.DeviceSelector) error {
	return kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != selectorCEL || typ != protowire.BytesType {
			return nil
		}
		if s.CEL == nil {
			s.CEL = &resourcev1.CELDeviceSelector{}
		}
		return kubeproto.Fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			if num == celExpression && typ == protowire.BytesType {
				s.CEL.Expression = string(v)
			}
			return nil
		})
	})
}

func decodeStatus(b []byte, status *resourcev1.ResourceClaimStatus) error {
	return kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case statusAllocation:
			if status.Allocation == nil {
				status.Allocation = &resourcev1.AllocationResult{}
			}
			return decodeAllocation(v, status.Allocation)
		case statusReservedFor:
			if len(status.ReservedFor) == resourcev1.ResourceClaimReservedForMaxSize {
				return tooMany("status.reservedFor", resourcev1.ResourceClaimReservedForMaxSize)
			}
			status.ReservedFor = append(status.ReservedFor, resourcev1.ResourceClaimConsumerReference{})
			return decodeConsumer(v, &status.ReservedFor[len(status.ReservedFor)-1])
		}
		return nil
	})
}

func decodeAllocation(b []byte, a *resourcev1.AllocationResult) error {
	return kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != allocationDevices || typ != protowire.BytesType {
			return nil
		}
		return kubeproto.Fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			if num != devicesResults || typ != protowire.BytesType {
				return nil
			}
			// Only the NVIDIA driver's results count: others are not copied.
			var driver, pool, device []byte
			err := kubeproto.Fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if typ != protowire.BytesType {
					return nil
				}
				switch num {
				case resultDriver:
					driver = v
				case resultPool:
					pool = v
				case resultDevice:
					device = v
				}
				return nil
			})
			if err == nil && string(driver) == allocation.DRADriver {
				if len(a.Devices.Results) == resourcev1.AllocationResultsMaxSize {
					return tooMany("gpu.nvidia.com results", resourcev1.AllocationResultsMaxSize)
				}
				a.Devices.Results = append(a.Devices.Results, resourcev1.DeviceRequestAllocationResult{
					Driver: allocation.DRADriver, Pool: string(pool), Device: string(device),
				})
			}
			return err
		})
	})
}

func decodeConsumer(b []byte, c *resourcev1.ResourceClaimConsumerReference) error {
	return kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case consumerAPIGroup:
			c.APIGroup = string(v)
		case consumerResource:
			c.Resource = string(v)
		case consumerName:
			c.Name = string(v)
		case consumerUID:
			c.UID = types.UID(v)
		}
		return nil
	})
}
