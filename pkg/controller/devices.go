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
