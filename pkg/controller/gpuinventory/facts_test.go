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

package gpuinventory

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
)

// notifier is a source the test drives; synced.
type notifier struct {
	name      string
	listeners []func(string)
}

func (n *notifier) Name() string            { return n.name }
func (n *notifier) Run(context.Context)     {}
func (n *notifier) HasSynced() bool         { return true }
func (n *notifier) OnChange(f func(string)) { n.listeners = append(n.listeners, f) }

func (n *notifier) notify(node string) {
	for _, f := range n.listeners {
		f(node)
	}
}

// devicesOf and recordsOf play the roles of the slice cache and the records (telling only).
type devicesOf struct{ *notifier }

func (devicesOf) Facts(string) *inventory.DeviceFacts  { return nil }
func (devicesOf) Devices(string) []homelabv1.GpuDevice { return nil }

type recordsOf struct{ *notifier }

func (recordsOf) Record(string) *homelabv1.GpuNodeSpec { return nil }

// holdingsOf plays the role of the pod cache feeding tracker.
type holdingsOf struct {
	*notifier
	tracker *allocation.Tracker
}

func (h holdingsOf) OnChange(f func(string))      { h.tracker.OnChange(f) }
func (h holdingsOf) Tracker() *allocation.Tracker { return h.tracker }

// withHoldings gives the controller the facts of pods tracker follows, and entries that count them.
func withHoldings(tracker *allocation.Tracker) func(*controller.Context, *Options) {
	return func(cc *controller.Context, _ *Options) {
		cc.Entries = inventory.NewEntryCache().WithAllocation(tracker.Held)
		cc.Facts = controller.NewFacts([]source.Source{holdingsOf{&notifier{name: "pods"}, tracker}})
	}
}

// A device change enqueues the inventories that select its node; a record change only those
// that select a GPU node without GFD's labels (of a labelled one the record says nothing new);
// neither reaches an inventory for a node the cache does not hold as a GPU node.
func TestFactsEnqueueTheInventoriesOfTheirNode(t *testing.T) {
	devices, records := &notifier{name: "resourceslices"}, &notifier{name: "gpunodes"}
	all := gpuInventory("all", 1, homelabv1.GpuInventoryStatus{})
	pool := gpuInventory("pool-b", 1, homelabv1.GpuInventoryStatus{})
	pool.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "b"}}
	bare := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bare", ResourceVersion: "1",
		Labels: map[string]string{"pool": "b", "nvidia.com/gpu.present": "true"}}}
	f := newFixtureWith(t, func(cc *controller.Context, _ *Options) {
		cc.Facts = controller.NewFacts([]source.Source{devicesOf{devices}, recordsOf{records}})
	}, []*corev1.Node{h100("gpu-a", "a"), h100("gpu-b", "b"), bare}, all, pool)
	drain(f.controller)

	cases := []struct {
		name   string
		source *notifier
		node   string
		want   []string
	}{
		{"devices of gpu-a", devices, "gpu-a", []string{"all"}},
		{"devices of gpu-b", devices, "gpu-b", []string{"all", "pool-b"}},
		{"devices of a node not cached", devices, "gone", nil},
		{"record of a labelled node", records, "gpu-b", nil},
		{"record of a node without labels", records, "bare", []string{"all", "pool-b"}},
		{"record of a node not cached", records, "gone", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.source.notify(tc.node)
			got := drain(f.controller)
			if len(got) != len(tc.want) {
				t.Fatalf("enqueued %v, want %v", got, tc.want)
			}
			for _, name := range tc.want {
				if !got[name] {
					t.Errorf("enqueued %v, want %v", got, tc.want)
				}
			}
		})
	}
}
