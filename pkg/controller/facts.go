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
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
)

// Kind is a kind of node fact beyond the Node object; kinds combine as bits.
type Kind uint8

const (
	// Devices are the nodes' DRA devices (pkg/slicecache).
	Devices Kind = 1 << iota
	// Holdings are what pods hold on the nodes, and (as key "") what waiting pods ask for:
	// pkg/allocation's Tracker, fed by the pod and claim caches.
	Holdings
	// Records are the GpuNode records, the memory of a node whose labels vanished.
	Records
)

// Facts is what the controllers read of the nodes beyond their Node objects, from whichever
// sources tell it; NewFacts finds them by the roles below.
type Facts interface {
	// Changes tells of changes to facts of the given kinds; nil when none of them is read.
	Changes(kinds Kind) source.Changes
	// Record is the spec of a node's GpuNode record; nil without records or without one.
	Record(node string) *homelabv1.GpuNodeSpec
	// Pending is what waiting pods ask for; nil when pods are not read.
	Pending() []allocation.Demand
}

// The roles a source plays for the controllers. A source may play several, or none (its
// changes then reach the controllers through a section, see pkg/section).
type (
	// DeviceSource tells of the nodes' DRA devices.
	DeviceSource interface {
		source.Source
		Facts(node string) *inventory.DeviceFacts
		Devices(node string) []homelabv1.GpuDevice
	}
	// HoldingSource feeds the allocation tracker: what pods hold and wait for. The tracker
	// has synced when every holding source has.
	HoldingSource interface {
		source.Source
		Tracker() *allocation.Tracker
	}
	// RecordSource holds the GpuNode records; its changes are their nodes' names.
	RecordSource interface {
		source.Source
		Record(node string) *homelabv1.GpuNodeSpec
	}
)

// NewFacts is the Facts of sources, found by their roles.
func NewFacts(sources []source.Source) Facts {
	f := &facts{}
	var holdings []source.Changes
	for _, s := range sources {
		if d, ok := s.(DeviceSource); ok && f.devices == nil {
			f.devices = d
		}
		if h, ok := s.(HoldingSource); ok {
			f.tracker = h.Tracker()
			holdings = append(holdings, h)
		}
		if r, ok := s.(RecordSource); ok && f.records == nil {
			f.records = r
		}
	}
	if f.tracker != nil {
		synced := make([]cache.InformerSynced, len(holdings))
		for i, h := range holdings {
			synced[i] = h.HasSynced
		}
		f.holdings = source.Of(f.tracker.OnChange, synced...)
	}
	return f
}

type facts struct {
	devices  DeviceSource
	tracker  *allocation.Tracker
	holdings source.Changes
	records  RecordSource
}

func (f *facts) Changes(kinds Kind) source.Changes {
	var parts []source.Changes
	if kinds&Devices != 0 && f.devices != nil {
		parts = append(parts, f.devices)
	}
	if kinds&Holdings != 0 && f.holdings != nil {
		parts = append(parts, f.holdings)
	}
	if kinds&Records != 0 && f.records != nil {
		parts = append(parts, f.records)
	}
	if len(parts) == 0 {
		return nil
	}
	return source.Merge(parts...)
}

func (f *facts) Record(node string) *homelabv1.GpuNodeSpec {
	if f.records == nil {
		return nil
	}
	return f.records.Record(node)
}

func (f *facts) Pending() []allocation.Demand {
	if f.tracker == nil {
		return nil
	}
	return f.tracker.Pending()
}

// entriesOn makes the entry cache of facts: entries carry the nodes' DRA devices and what
// pods hold there, and are marked stale by their changes before any controller hears of them.
func entriesOn(f *facts) *inventory.EntryCache {
	entries := inventory.NewEntryCache()
	if f.devices != nil {
		entries = inventory.NewEntryCacheWithDevices(f.devices.Facts).WithDeviceList(f.devices.Devices)
	}
	if f.tracker != nil {
		entries = entries.WithAllocation(f.tracker.Held)
	}
	if c := f.Changes(Devices | Holdings); c != nil {
		c.OnChange(entries.Changed)
	}
	return entries.Notified()
}
