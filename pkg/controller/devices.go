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

package controller

import (
	"k8s.io/client-go/tools/cache"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
)

// DeviceSource tells the controllers of nodes whose DRA devices changed (pkg/slicecache).
type DeviceSource interface {
	// OnChange registers f, called with a node's name whenever what its slices say changed.
	OnChange(f func(node string))
	// HasSynced reports whether the slices have been listed once.
	HasSynced() bool
}

// DevicesSynced is a source's HasSynced, or always true without one.
func DevicesSynced(s DeviceSource) cache.InformerSynced { return synced(s) }

// AllocationSynced is a source's HasSynced, or always true without one.
func AllocationSynced(s AllocationSource) cache.InformerSynced { return synced(s) }

func synced(s interface{ HasSynced() bool }) cache.InformerSynced {
	if s == nil {
		return func() bool { return true }
	}
	return s.HasSynced
}

// AllocationSource tells the controllers what pods hold and wait for (pkg/allocation's
// Tracker, fed by the pod and claim caches).
type AllocationSource interface {
	// OnChange registers f, called with a node's name when what pods hold there changed,
	// and with "" when what waiting pods ask for changed.
	OnChange(f func(node string))
	// Pending is what waiting pods ask for.
	Pending() []allocation.Demand
	// HasSynced reports whether pods (and claims) have been listed once.
	HasSynced() bool
}
