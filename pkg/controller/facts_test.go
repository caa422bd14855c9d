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
	"context"
	"slices"
	"testing"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
)

// fakeSource is a source the test drives: notify calls its listeners, synced is HasSynced.
type fakeSource struct {
	name      string
	listeners []func(string)
	synced    bool
}

func (s *fakeSource) Name() string            { return s.name }
func (s *fakeSource) Run(context.Context)     {}
func (s *fakeSource) OnChange(f func(string)) { s.listeners = append(s.listeners, f) }
func (s *fakeSource) HasSynced() bool         { return s.synced }

func (s *fakeSource) notify(key string) {
	for _, f := range s.listeners {
		f(key)
	}
}

type fakeDevices struct{ fakeSource }

func (*fakeDevices) Facts(string) *inventory.DeviceFacts  { return nil }
func (*fakeDevices) Devices(string) []homelabv1.GpuDevice { return nil }
func (*fakeRecords) Record(node string) *homelabv1.GpuNodeSpec {
	return &homelabv1.GpuNodeSpec{Product: node}
}

type fakeRecords struct{ fakeSource }

type fakeHoldings struct {
	fakeSource
	tracker *allocation.Tracker
}

func (h *fakeHoldings) Tracker() *allocation.Tracker { return h.tracker }

// NewFacts finds each role among the sources: the changes of the kinds asked for, the
// records, what waiting pods ask for, and the holdings synced only once every source that
// feeds the tracker has.
func TestNewFactsFindsTheRoles(t *testing.T) {
	tracker := allocation.NewTracker()
	devices, records := &fakeDevices{fakeSource{name: "slices", synced: true}}, &fakeRecords{fakeSource{name: "records", synced: true}}
	pods := &fakeHoldings{fakeSource{name: "pods", synced: true}, tracker}
	claims := &fakeHoldings{fakeSource{name: "claims"}, tracker}
	quota := &fakeSource{name: "quota"} // no role: nothing of it is a node fact
	f := NewFacts([]source.Source{quota, devices, pods, claims, records})

	var heard []string
	f.Changes(Devices | Records).OnChange(func(node string) { heard = append(heard, node) })
	devices.notify("dgx-1")
	records.notify("nuc1")
	quota.notify("")
	if want := []string{"dgx-1", "nuc1"}; !slices.Equal(heard, want) {
		t.Errorf("devices and records told of %q, want %q", heard, want)
	}
	holdings := f.Changes(Holdings)
	if holdings.HasSynced() {
		t.Error("holdings synced before the claims")
	}
	claims.synced = true
	if !holdings.HasSynced() {
		t.Error("holdings not synced once pods and claims are")
	}
	if got := f.Record("nuc1"); got == nil || got.Product != "nuc1" {
		t.Errorf("Record(nuc1) = %v", got)
	}

	none := NewFacts(nil)
	if none.Changes(Devices|Holdings|Records) != nil || none.Record("x") != nil || none.Pending() != nil {
		t.Error("facts of no sources tell of something")
	}
}
