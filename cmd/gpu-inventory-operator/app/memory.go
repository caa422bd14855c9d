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
