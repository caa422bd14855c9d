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
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// WriteLimiter spaces each key's writes with a token bucket: a key that has a token is queued
// at once, otherwise when its next token is due, where the workqueue merges it with every
// other event for the key. Only syncs that write take a token, so a quiet key answers a
// burst of changes at once while sustained churn costs one write per interval.
type WriteLimiter[T comparable] struct {
	every time.Duration
	burst int
	delay time.Duration
	clock clock.PassiveClock

	mu       sync.Mutex
	limiters map[T]*rate.Limiter
}

// NewWriteLimiter allows each key burst writes at once and one more per every (every 0:
// no limit).
func NewWriteLimiter[T comparable](every time.Duration, burst int, clk clock.PassiveClock) *WriteLimiter[T] {
	return &WriteLimiter[T]{every: every, burst: max(burst, 1), clock: clk, limiters: map[T]*rate.Limiter{}}
}

// WithDelay makes every event wait at least d: a secondary writer then follows the primary
// one instead of reaching the API server with it. It returns w.
func (w *WriteLimiter[T]) WithDelay(d time.Duration) *WriteLimiter[T] {
	w.delay = d
	return w
}

func (w *WriteLimiter[T]) limiter(key T) *rate.Limiter {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, ok := w.limiters[key]
	if !ok {
		l = rate.NewLimiter(rate.Every(w.every), w.burst) // full: a new key writes at once
		w.limiters[key] = l
	}
	return l
}

// Enqueue adds key to queue now, or when it may write again.
func (w *WriteLimiter[T]) Enqueue(queue workqueue.TypedDelayingInterface[T], key T) {
	wait := w.delay
	if w.every > 0 {
		now := w.clock.Now()
		if tokens := w.limiter(key).TokensAt(now); tokens < 1 {
			wait = max(wait, time.Duration(math.Ceil((1-tokens)*float64(w.every))))
		}
	}
	if wait > 0 {
		queue.AddAfter(key, wait)
		return
	}
	queue.Add(key)
}

// Wrote takes a token of key's bucket for a write made now.
func (w *WriteLimiter[T]) Wrote(key T) {
	if w.every > 0 {
		w.limiter(key).ReserveN(w.clock.Now(), 1)
	}
}

// Forget drops a key that no longer exists.
func (w *WriteLimiter[T]) Forget(key T) {
	w.mu.Lock()
	delete(w.limiters, key)
	w.mu.Unlock()
}
