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

package inventorycache

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// BenchmarkDecodeWithoutNodes is what the operator spends on each of its own status writes
// coming back through its watch: a 5,000-node fleet's status as the API server sends it.
func BenchmarkDecodeWithoutNodes(b *testing.B) {
	nodes := make([]*corev1.Node, 5000)
	for i := range nodes {
		nodes[i], _ = fixtures.FleetNode(i)
	}
	at := time.Date(2026, 7, 10, 15, 50, 0, 0, time.UTC)
	content, _ := inventory.Compute(nodes, nil, at)
	listed, omitted := content.Listed(inventory.DefaultMaxStatusNodes, inventory.MaxNodeListBytes)
	status := content.Status(listed, inventory.Conditions(content, omitted, 1), 1, metav1.NewTime(at))
	gi := &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: "cluster", Generation: 1, ResourceVersion: "42"}, Status: status}
	gi.TypeMeta = metav1.TypeMeta{APIVersion: homelabv1.SchemeGroupVersion.String(), Kind: "GpuInventory"}
	data, err := json.Marshal(gi)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := decodeWithoutNodes(data); !ok {
			b.Fatal("not decoded")
		}
	}
}
