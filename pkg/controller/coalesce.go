package controller

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Coalescer holds each key to at most one sync per interval: an event that arrives sooner
// after the key's last sync is queued for the end of the interval, where the workqueue merges
// it with every other event for the key. A quiet key is synced at once, so a single change is
// seen without delay, while a burst of node events costs one sync per interval.
type Coalescer[T comparable] struct {
	interval time.Duration
	clock    clock.PassiveClock
	mu       sync.Mutex
	last     map[T]time.Time
}

// NewCoalescer returns a Coalescer for interval (0 disables coalescing).
func NewCoalescer[T comparable](interval time.Duration, clk clock.PassiveClock) *Coalescer[T] {
	return &Coalescer[T]{interval: interval, clock: clk, last: map[T]time.Time{}}
}

// Enqueue adds key to queue now, or at the end of its interval.
func (c *Coalescer[T]) Enqueue(queue workqueue.TypedDelayingInterface[T], key T) {
	c.mu.Lock()
	last, seen := c.last[key]
	c.mu.Unlock()
	if wait := c.interval - c.clock.Since(last); seen && wait > 0 {
		queue.AddAfter(key, wait)
		return
	}
	queue.Add(key)
}

// Synced records that key is being synced now.
func (c *Coalescer[T]) Synced(key T) {
	c.mu.Lock()
	c.last[key] = c.clock.Now()
	c.mu.Unlock()
}

// Forget drops a key that no longer exists.
func (c *Coalescer[T]) Forget(key T) {
	c.mu.Lock()
	delete(c.last, key)
	c.mu.Unlock()
}
