package app

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// After a burst of work (a churn, an attack, many inventories at once) the heap holds free
// pages the Go scavenger hands back only slowly; the operator's resident set would stay at
// the burst's height. Once a minute, when more than freeMemoryThreshold is free but still
// held, it is handed back (one forced GC of a heap of a few tens of MiB).
const (
	freeMemoryEvery     = time.Minute
	freeMemoryThreshold = 8 << 20
)

// returnFreeMemory checks every period until ctx is done.
func returnFreeMemory(ctx context.Context, every time.Duration, threshold uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 && sample[0].Value.Uint64() > threshold {
			debug.FreeOSMemory()
		}
	}
}
