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

package nodecache

import (
	"fmt"
	"maps"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// BenchmarkFleetHeld measures what the operator's steady heap holds per node of a fleet as
// the scale run makes it (every other node a GPU node, half of those DRA nodes): each node
// decoded by DecodeNode as a watch-list event, transformed by cacheForm into an informer's
// store, then one EntryCache compute over the listed GPU nodes. node-B is the heap in use
// (live objects and the room between them) per node once the garbage is collected;
// entries-B is what the entry cache adds per GPU node.
func BenchmarkFleetHeld(b *testing.B) {
	for _, n := range []int{5000, 20000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			data := fleetHeldInput(b, n)
			var held fleetHeldBytes
			for b.Loop() {
				held = fleetHeld(b, data)
			}
			b.ReportMetric(held.node, "node-B")
			b.ReportMetric(held.nodeLive, "node-live-B")
			b.ReportMetric(held.entries, "entries-B")
		})
	}
}

// fleetHeldInput is the fleet's n nodes as protobuf messages.
func fleetHeldInput(tb testing.TB, n int) [][]byte {
	data := make([][]byte, n)
	for i := range n {
		node, labels := fixtures.FleetNode(i)
		if fixtures.IsFleetDRANode(i, 0.5) {
			node, labels = fixtures.FleetDRANode(i)
		}
		maps.Copy(node.Labels, labels)
		node.UID = types.UID(fmt.Sprintf("6a1f0c2e-4b3d-4e8f-9a7b-%012d", i))
		node.ResourceVersion = fmt.Sprint(5000000 + i)
		node.CreationTimestamp = metav1.NewTime(time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC))
		node.ManagedFields = decodeBenchManagedFields(node)
		b, err := node.Marshal()
		if err != nil {
			tb.Fatal(err)
		}
		data[i] = b
	}
	return data
}

// fleetHeldBytes is what fleetHeld measured.
type fleetHeldBytes struct {
	node     float64 // heap in use per node: live objects and the room between them
	nodeLive float64 // live objects per node
	entries  float64 // heap in use the entry cache adds per GPU node
}

// fleetHeld builds the cache of data and measures what it holds.
func fleetHeld(tb testing.TB, data [][]byte) fleetHeldBytes {
	var base, cached, computed runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)
	trimmer := NewNodeTrimmer(nil)
	store := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{})
	for _, d := range data {
		node, err := trimmer.DecodeNode(d)
		if err != nil {
			tb.Fatal(err)
		}
		obj, err := cacheForm(node)
		if err != nil {
			tb.Fatal(err)
		}
		if err := store.Add(obj); err != nil {
			tb.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&cached)
	lister := NodeLister{indexer: store}
	nodes, err := lister.List(labels.Everything())
	if err != nil {
		tb.Fatal(err)
	}
	entries := inventory.NewEntryCache().Notified()
	inv, _ := entries.Compute(nodes, nil, time.Now())
	inv.Release()
	nodes = nil
	runtime.GC()
	runtime.GC() // the released node list leaves the pool's victim cache, as in the operator's settle
	runtime.ReadMemStats(&computed)
	runtime.KeepAlive(store)
	runtime.KeepAlive(trimmer)
	runtime.KeepAlive(entries)
	gpu := 0
	for _, obj := range store.List() {
		if _, ok := obj.(*corev1.Node); ok {
			gpu++
		}
	}
	perNode := func(after, before uint64, n int) float64 { return float64(int64(after)-int64(before)) / float64(n) }
	return fleetHeldBytes{
		node:     perNode(cached.HeapInuse, base.HeapInuse, len(data)),
		nodeLive: perNode(cached.HeapAlloc, base.HeapAlloc, len(data)),
		entries:  perNode(computed.HeapInuse, cached.HeapInuse, gpu),
	}
}
