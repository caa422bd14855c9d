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

package app

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// After a burst of work (a churn, an attack, many inventories at once) the heap holds
// garbage until the next GC, which a quiet operator may not run for minutes, and free pages
// the Go scavenger hands back only slowly; the operator's resident set would stay at the
// burst's height. Every few seconds, when more than freeMemoryThreshold is reclaimable (free
// but held, or garbage: what a forced GC and a scavenge hand back) and the burst is over
// (the operator allocated less than half of it since the last look, so it will not need it
// soon), it is handed back: one forced GC of a heap of a few tens of MiB. Under a steady
// churn that would reuse the memory, it is handed back only once a minute.
const (
	freeMemoryEvery     = 5 * time.Second
	freeMemoryAnyway    = 12 // looks: once a minute
	freeMemoryThreshold = 4 << 20
	// afterBurstThreshold: after a known burst, less is worth a forced GC.
	afterBurstThreshold = 2 << 20
)

// heapSample reads what a forced GC and a scavenge would hand back (free pages and garbage,
// at most: some of it may be live by now) and the bytes allocated so far.
type heapSample []metrics.Sample

func newHeapSample() heapSample {
	return heapSample{
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"}, // live objects and garbage not yet swept
		{Name: "/gc/heap/live:bytes"},                // marked live by the last GC
	}
}

func (h heapSample) read() (reclaimable, allocs uint64, ok bool) {
	metrics.Read(h)
	for _, s := range h {
		if s.Value.Kind() != metrics.KindUint64 {
			return 0, 0, false
		}
	}
	reclaimable = h[0].Value.Uint64()
	if objects, live := h[2].Value.Uint64(), h[3].Value.Uint64(); objects > live {
		reclaimable += objects - live
	}
	return reclaimable, h[1].Value.Uint64(), true
}

// returnFreeMemory looks every period until ctx is done.
func returnFreeMemory(ctx context.Context, every time.Duration, threshold uint64) {
	sample := newHeapSample()
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	_, lastAllocs, _ := sample.read()
	for look := 1; ; look++ {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		reclaimable, allocs, ok := sample.read()
		if !ok {
			continue
		}
		if shouldReturn(reclaimable, allocs-lastAllocs, threshold, look%freeMemoryAnyway == 0) {
			debug.FreeOSMemory()
		}
		lastAllocs = allocs
	}
}

// afterBurst hands reclaimable heap back at once when a known burst has ended (a round of
// usage readings) and it is more than threshold: the next burst is a minute away, so the
// memory is not kept as headroom until then.
func afterBurst(threshold uint64) func() {
	sample := newHeapSample()
	return func() {
		if reclaimable, _, ok := sample.read(); ok && reclaimable > threshold {
			debug.FreeOSMemory()
		}
	}
}

// shouldReturn decides whether reclaimable heap is handed back: more than threshold, and
// either more than twice what was allocated since the last look (the burst is over) or
// anyway.
func shouldReturn(reclaimable, allocated, threshold uint64, anyway bool) bool {
	return reclaimable > threshold && (anyway || reclaimable > 2*allocated)
}

// settleAfter hands the initial lists' buffers back to the OS once firstStatus (not as the
// caches sync, where a collection would slow that first status), and what the first syncs
// left once every one of started; then it tells setProcs (when set) that the run settled.
func settleAfter(ctx context.Context, firstStatus cache.InformerSynced, started []cache.InformerSynced, setProcs func(bool)) {
	if wait.PollUntilContextCancel(ctx, settlePoll, false, func(context.Context) (bool, error) { return firstStatus(), nil }) != nil {
		return
	}
	runtime.GC()
	debug.FreeOSMemory()
	all := func(context.Context) (bool, error) {
		for _, ok := range started {
			if !ok() {
				return false, nil
			}
		}
		return true, nil
	}
	if wait.PollUntilContextCancel(ctx, time.Second, false, all) != nil {
		return
	}
	runtime.GC()
	debug.FreeOSMemory()
	if setProcs != nil {
		setProcs(true)
		klog.FromContext(ctx).V(2).Info("Settled", "gomaxprocs", runtime.GOMAXPROCS(0))
	}
}

// settlePoll is how often settle asks whether the first status is written.
const settlePoll = 100 * time.Millisecond
