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

package capacity

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// allocatedState is what the scheduler counts as allocated: every device of every allocation
// result except those given with admin access, and with consumable capacity the shares and
// the capacity they consume (the scheduler's foreachAllocatedDevice).
func allocatedState(claims []*resourcev1.ResourceClaim) structured.AllocatedState {
	st := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, c := range claims {
		addAllocation(&st, c.Status.Allocation)
	}
	return st
}

func addAllocation(st *structured.AllocatedState, a *resourcev1.AllocationResult) {
	if a == nil {
		return
	}
	for _, r := range a.Devices.Results {
		if ptr.Deref(r.AdminAccess, false) {
			continue
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if Features.ConsumableCapacity && r.ShareID != nil {
			st.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
			if r.ConsumedCapacity != nil {
				st.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			}
			continue
		}
		st.AllocatedDevices.Insert(id)
	}
}

// classLister serves the DeviceClasses to the allocator.
type classLister map[string]*resourcev1.DeviceClass

func newClassLister(classes []*resourcev1.DeviceClass) classLister {
	l := make(classLister, len(classes))
	for _, c := range classes {
		l[c.Name] = c
	}
	return l
}

func (l classLister) List() ([]*resourcev1.DeviceClass, error) {
	out := make([]*resourcev1.DeviceClass, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourcev1.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourcev1.Resource("deviceclasses"), name)
}

// errInput is an allocation error caused by the claims or classes (a CEL selector that does
// not compile, a class that does not exist), not by the node.
var errInput = errors.New("invalid claim or class")

// allocate runs the scheduler's allocator for claims on node. It returns the results when all
// claims can be allocated there, nil when they cannot, and an error wrapping errInput when
// the claims or their classes are invalid.
func (s *Snapshot) allocate(node *corev1.Node, claims []*resourcev1.ResourceClaim) ([]resourcev1.AllocationResult, error) {
	if len(claims) == 0 {
		return []resourcev1.AllocationResult{}, nil
	}
	for _, c := range claims {
		for _, r := range c.Spec.Devices.Requests {
			if err := s.checkClass(r); err != nil {
				return nil, err
			}
		}
	}
	a, err := structured.NewAllocator(background, Features, s.state, s.classes, s.slices, s.celCache)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errInput, err)
	}
	results, err := a.Allocate(background, node, claims)
	switch {
	case errors.Is(err, structured.ErrFailedAllocationOnNode):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("%w: %w", errInput, err)
	}
	if len(results) != len(claims) {
		return nil, nil
	}
	return results, nil
}

// checkClass reports a request naming a class that does not exist, as the scheduler's
// PreFilter does.
func (s *Snapshot) checkClass(r resourcev1.DeviceRequest) error {
	names := []string{}
	if r.Exactly != nil {
		names = append(names, r.Exactly.DeviceClassName)
	}
	for _, sub := range r.FirstAvailable {
		names = append(names, sub.DeviceClassName)
	}
	for _, n := range names {
		if _, ok := s.classes[n]; !ok {
			return fmt.Errorf("%w: request %s: device class %s does not exist", errInput, r.Name, n)
		}
	}
	return nil
}

// commit counts allocation results as allocated, as the scheduler's assume cache does once
// it reserved them for a pod.
func (s *Snapshot) commit(results []resourcev1.AllocationResult) {
	for i := range results {
		addAllocation(&s.state, &results[i])
	}
}

// withTaintRules returns the slices with the rules' taints added to the devices they select,
// as the scheduler's slice tracker patches them (a rule without a selector selects nothing);
// slices no rule selects are returned as they are.
func withTaintRules(slices []*resourcev1.ResourceSlice, rules []*resourcev1.DeviceTaintRule) []*resourcev1.ResourceSlice {
	if len(rules) == 0 {
		return slices
	}
	out := make([]*resourcev1.ResourceSlice, len(slices))
	for i, s := range slices {
		out[i] = s
		for _, r := range rules {
			sel := r.Spec.DeviceSelector
			if sel == nil || sel.Driver != nil && *sel.Driver != s.Spec.Driver || sel.Pool != nil && *sel.Pool != s.Spec.Pool.Name {
				continue
			}
			for d := range s.Spec.Devices {
				if sel.Device != nil && *sel.Device != s.Spec.Devices[d].Name {
					continue
				}
				if out[i] == s {
					out[i] = s.DeepCopy()
				}
				out[i].Spec.Devices[d].Taints = append(out[i].Spec.Devices[d].Taints, r.Spec.Taint)
			}
		}
	}
	return out
}
