package controller

import "k8s.io/client-go/tools/cache"

// DeviceSource tells the controllers of nodes whose DRA devices changed (pkg/slicecache).
type DeviceSource interface {
	// OnChange registers f, called with a node's name whenever what its slices say changed.
	OnChange(f func(node string))
	// HasSynced reports whether the slices have been listed once.
	HasSynced() bool
}

// DevicesSynced is a source's HasSynced, or always true without one.
func DevicesSynced(s DeviceSource) cache.InformerSynced {
	if s == nil {
		return func() bool { return true }
	}
	return s.HasSynced
}
