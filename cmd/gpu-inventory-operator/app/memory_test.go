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
	"testing"
	"time"
)

var sink [][]byte

// Memory a burst left free is handed back to the OS: the free-but-held heap falls under the
// threshold without waiting for the scavenger.
func TestFreeMemoryIsHandedBack(t *testing.T) {
	free := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	for range 64 {
		sink = append(sink, make([]byte, 1<<20)) // a burst of 64 MiB
	}
	sink = nil
	runtime.GC()
	if free() < 32<<20 {
		t.Fatalf("setup: the runtime handed the burst back at once (%d bytes free)", free())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go returnFreeMemory(ctx, 10*time.Millisecond, 8<<20)
	deadline := time.Now().Add(10 * time.Second)
	for free() > 8<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still free and held after 10 s", free())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The garbage of a burst goes back too, when no GC would collect it soon: a quiet operator
// may not reach its next GC for minutes.
func TestGarbageIsHandedBack(t *testing.T) {
	held := func() uint64 { // what the heap holds of the OS: objects, garbage included, and free pages
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/free:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64() + s[1].Value.Uint64()
	}
	runtime.GC()
	before := held()
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no GC but the hand-back's
	for range 64 {
		sink = append(sink, make([]byte, 1<<20)) // a burst of 64 MiB, garbage once dropped
	}
	sink = nil
	if held() < before+32<<20 {
		t.Fatalf("setup: the burst is not held (%d bytes before, %d after)", before, held())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go returnFreeMemory(ctx, 10*time.Millisecond, 8<<20)
	deadline := time.Now().Add(10 * time.Second)
	for held() > before+8<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes held after 10 s, %d before the burst", held(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// After a known burst (a round of usage readings) its garbage goes back at once, without
// waiting for the periodic look or crossing its threshold.
func TestAfterBurstHandsBackAtOnce(t *testing.T) {
	held := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/free:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64() + s[1].Value.Uint64()
	}
	runtime.GC()
	debug.FreeOSMemory()
	before := held()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for range 6 {
		sink = append(sink, make([]byte, 1<<20)) // 6 MiB: under the periodic look's threshold
	}
	sink = nil
	afterBurst(2 << 20)()
	if got := held(); got > before+2<<20 {
		t.Errorf("%d bytes held after the burst was handed back, %d before it", got, before)
	}
}

// Free memory goes back once the burst is over, not while a churn would reuse it; once a
// minute it goes back whatever the pace.
func TestShouldReturn(t *testing.T) {
	const mib = 1 << 20
	for _, tt := range []struct {
		name         string
		reclaimable  uint64
		allocated    uint64
		anyway, want bool
	}{
		{"quiet after a burst", 40 * mib, 1 * mib, false, true},
		{"under a churn", 40 * mib, 300 * mib, false, false},
		{"under a churn, the minute's look", 40 * mib, 300 * mib, true, true},
		{"little reclaimable", 6 * mib, 0, true, false},
		{"at the threshold", 8 * mib, 0, true, false},
		{"half of it allocated again", 20 * mib, 10 * mib, false, false},
	} {
		if got := shouldReturn(tt.reclaimable, tt.allocated, 8*mib, tt.anyway); got != tt.want {
			t.Errorf("%s: shouldReturn(%d MiB reclaimable, %d MiB allocated, anyway %v) = %v; want %v",
				tt.name, tt.reclaimable/mib, tt.allocated/mib, tt.anyway, got, tt.want)
		}
	}
}
