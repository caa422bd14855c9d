package controller

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Coalescer holds each key to at most one write per interval: an event that arrives sooner
// after the key's last sync that wrote is queued for the end of the interval, where the
// workqueue merges it with every other event for the key. A quiet key is synced at once, so a
// single change is seen without delay, while a burst of node events costs one sync per
// interval. A sync that found nothing to write (a periodic resync, say) holds the key back
// for a tenth of the interval only, so that a change right after it is not delayed. With a
// delay, every event waits at least that long: a secondary writer follows the primary one
// instead of competing with it at the API server.
type Coalescer[T comparable] struct {
	interval  time.Duration
	delay     time.Duration
	clock     clock.PassiveClock
	mu        sync.Mutex
	started   map[T]time.Time // when the key's current or last sync started
	notBefore map[T]time.Time // when the key may be synced again
}

// NewCoalescer returns a Coalescer for interval (0 disables coalescing).
func NewCoalescer[T comparable](interval time.Duration, clk clock.PassiveClock) *Coalescer[T] {
	return &Coalescer[T]{interval: interval, clock: clk, started: map[T]time.Time{}, notBefore: map[T]time.Time{}}
}

// WithDelay makes every event wait at least d before its sync; it returns c.
func (c *Coalescer[T]) WithDelay(d time.Duration) *Coalescer[T] {
	c.delay = d
	return c
}

// Enqueue adds key to queue now, or when it may be synced again.
func (c *Coalescer[T]) Enqueue(queue workqueue.TypedDelayingInterface[T], key T) {
	c.mu.Lock()
	notBefore, seen := c.notBefore[key]
	c.mu.Unlock()
	wait := c.delay
	if held := notBefore.Sub(c.clock.Now()); seen && held > wait {
		wait = held
	}
	if wait > 0 {
		queue.AddAfter(key, wait)
		return
	}
	queue.Add(key)
}

// Synced records that a sync of key starts now. Until it ends (and, if it writes, for the
// rest of the interval) events for the key wait.
func (c *Coalescer[T]) Synced(key T) {
	now := c.clock.Now()
	c.mu.Lock()
	c.started[key], c.notBefore[key] = now, now.Add(c.interval)
	c.mu.Unlock()
}

// Skipped records that the sync of key that started last wrote nothing: the next event
// waits for a tenth of the interval from that start only.
func (c *Coalescer[T]) Skipped(key T) {
	c.mu.Lock()
	if started, ok := c.started[key]; ok {
		c.notBefore[key] = started.Add(c.interval / 10)
	}
	c.mu.Unlock()
}

// Forget drops a key that no longer exists.
func (c *Coalescer[T]) Forget(key T) {
	c.mu.Lock()
	delete(c.started, key)
	delete(c.notBefore, key)
	c.mu.Unlock()
}
