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
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
)

// notifier is a NodeFacts source the test drives.
type notifier struct{ listeners []func(string) }

func (n *notifier) facts() controller.NodeFacts {
	return controller.FactsOf(func(f func(string)) { n.listeners = append(n.listeners, f) })
}

func (n *notifier) notify(node string) {
	for _, f := range n.listeners {
		f(node)
	}
}

// A device change enqueues the inventories that select its node; a record change only those
// that select a GPU node without GFD's labels (of a labelled one the record says nothing new);
// neither reaches an inventory for a node the cache does not hold as a GPU node.
func TestFactsEnqueueTheInventoriesOfTheirNode(t *testing.T) {
	devices, records := &notifier{}, &notifier{}
	all := gpuInventory("all", 1, homelabv1.GpuInventoryStatus{})
	pool := gpuInventory("pool-b", 1, homelabv1.GpuInventoryStatus{})
	pool.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "b"}}
	bare := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bare", ResourceVersion: "1",
		Labels: map[string]string{"pool": "b", "nvidia.com/gpu.present": "true"}}}
	f := newFixtureWith(t, func(cc *controller.Context) {
		cc.Facts.Devices, cc.Facts.Records = devices.facts(), records.facts()
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
