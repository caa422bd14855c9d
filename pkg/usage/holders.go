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

package usage

import (
	"slices"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Known are the holders the operator's caches know: the allocation tracker's pods and, on
// DRA nodes, the devices of the node's ResourceSlices (by UUID) its namespaces hold.
type Known struct {
	// Tracker is the allocation tracker; Devices lists a node's DRA devices (nil: no DRA).
	Tracker *allocation.Tracker
	Devices func(node string) []homelabv1.GpuDevice
	// byNode keeps each node's devices for one refresh.
	byNode map[string][]homelabv1.GpuDevice
}

// NewKnown is the Holders of one refresh.
func NewKnown(tracker *allocation.Tracker, devices func(node string) []homelabv1.GpuDevice) Holders {
	return &Known{Tracker: tracker, Devices: devices, byNode: map[string][]homelabv1.GpuDevice{}}
}

// Holds implements Holders. A pod the tracker keeps holds on the node it is bound to; a DRA
// holder is known by its namespace only (a claim may be shared by its pods), so a series of
// a pod of that namespace on a device the namespace holds counts. A MIG device is known by
// its parent's UUID and profile (DCGM exporter's GPU_I_ID is no attribute of the slice).
func (k *Known) Holds(namespace, pod, node, uuid, profile string) (string, bool) {
	if p := k.Tracker.Pod(namespace, pod); p != nil && p.Node == node && !p.Finished {
		return p.Name, true
	}
	if k.Devices == nil || uuid == "" {
		return "", false
	}
	held := k.Tracker.Held(node)
	if held == nil {
		return "", false
	}
	i, ok := slices.BinarySearchFunc(held.Namespaces, namespace, func(n allocation.NamespaceHeld, ns string) int {
		switch {
		case n.Namespace < ns:
			return -1
		case n.Namespace > ns:
			return 1
		}
		return 0
	})
	if !ok || len(held.Namespaces[i].Devices) == 0 {
		return "", false
	}
	devices, seen := k.byNode[node]
	if !seen {
		devices = k.Devices(node)
		k.byNode[node] = devices
	}
	for _, d := range devices {
		whole := profile == "" && d.UUID == uuid
		mig := profile != "" && d.ParentUUID == uuid && d.Profile == profile
		if (whole || mig) && slices.Contains(held.Namespaces[i].Devices, d.Name) {
			return pod, true
		}
	}
	return "", false
}
