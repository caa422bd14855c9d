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
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
)

// FreeDevices estimates how many units of driver's devices on the node no allocation holds:
// the devices of the node's slices (the pool's newest generation) that are neither allocated
// nor tainted NoSchedule or NoExecute. Partitionable devices count by their counter set (a
// physical GPU, whatever partitions it offers), as one unit that is free only when nothing
// consuming it is allocated. It is an estimate for ordering nodes: whether a pod fits is
// Fit's answer.
func (s *Snapshot) FreeDevices(node, driver string) int64 {
	newest := map[string]int64{}
	for _, sl := range s.slices {
		if sl.Spec.Driver == driver {
			newest[sl.Spec.Pool.Name] = max(newest[sl.Spec.Pool.Name], sl.Spec.Pool.Generation)
		}
	}
	free := map[string]bool{} // a unit's key: its pool and device or counter set
	for _, sl := range s.slices {
		pool := sl.Spec.Pool.Name
		if sl.Spec.Driver != driver || sl.Spec.Pool.Generation < newest[pool] {
			continue
		}
		for i := range sl.Spec.Devices {
			d := &sl.Spec.Devices[i]
			if !deviceOnNode(sl, d, node) {
				continue
			}
			held := s.state.AllocatedDevices.Has(structured.MakeDeviceID(driver, pool, d.Name)) || untolerable(d)
			keys := []string{pool + "/device/" + d.Name}
			if len(d.ConsumesCounters) > 0 {
				keys = keys[:0]
				for _, c := range d.ConsumesCounters {
					keys = append(keys, pool+"/counters/"+c.CounterSet)
				}
			}
			for _, k := range keys {
				if was, seen := free[k]; !seen || was {
					free[k] = !held
				}
			}
		}
	}
	var n int64
	for _, f := range free {
		if f {
			n++
		}
	}
	return n
}

// deviceOnNode reports whether the device belongs to the named node alone: its slice's or, with
// per-device node selection, its own spec.nodeName.
func deviceOnNode(sl *resourcev1.ResourceSlice, d *resourcev1.Device, node string) bool {
	if sl.Spec.NodeName != nil {
		return *sl.Spec.NodeName == node
	}
	return d.NodeName != nil && *d.NodeName == node
}

// untolerable reports a taint that keeps the device from claims that do not tolerate it.
func untolerable(d *resourcev1.Device) bool {
	for _, t := range d.Taints {
		if t.Effect == resourcev1.DeviceTaintEffectNoSchedule || t.Effect == resourcev1.DeviceTaintEffectNoExecute {
			return true
		}
	}
	return false
}
