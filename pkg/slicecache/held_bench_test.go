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

package slicecache

import (
	"fmt"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
)

// fleetHeldSlices is how many DRA nodes the fleet of BenchmarkFleetHeld has, one 8-GPU
// slice each: those of the 20,000-node scale run.
const fleetHeldSlices = 5000

// BenchmarkFleetHeld measures what the operator's cache holds per device of a fleet: each
// node's slice (fixtures.FleetSlice with the API server's metadata) decoded by decodeSlice
// as the operator's client does, added to the informer's store and handled as the informer
// hands it over, so that every node's facts are computed. device-B is the heap in use (live
// objects and the room between them) per device once the garbage is collected;
// device-live-B is the live objects per device.
func BenchmarkFleetHeld(b *testing.B) {
	data := make([][]byte, fleetHeldSlices)
	devices := 0
	for i := range data {
		s := decodeBenchServerMeta(fixtures.FleetSlice(2*i, types.UID(fmt.Sprintf("node-uid-%d", i))), i)
		devices += len(s.Spec.Devices)
		var err error
		if data[i], err = s.Marshal(); err != nil {
			b.Fatal(err)
		}
	}
	var inuse, live float64
	for b.Loop() {
		inuse, live = fleetHeld(b, data)
	}
	b.ReportMetric(inuse/float64(devices), "device-B")
	b.ReportMetric(live/float64(devices), "device-live-B")
}

// fleetHeld builds a cache of the slices of data and returns the heap it holds: in use and
// live.
func fleetHeld(tb testing.TB, data [][]byte) (inuse, live float64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	t := &trimmer{}
	c := newCache(&cache.ListWatch{}, &compactSlice{}, t)
	for _, d := range data {
		s, err := t.decodeSlice(d)
		if err != nil {
			tb.Fatal(err)
		}
		if err := c.informer.GetIndexer().Add(s); err != nil {
			tb.Fatal(err)
		}
		c.sliceSeen(s)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if c.Facts(fixtures.FleetNodeName(0)) == nil {
		tb.Fatal("no facts for the first node")
	}
	runtime.KeepAlive(c)
	return float64(int64(after.HeapInuse) - int64(before.HeapInuse)), float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
}
