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

package usage

import (
	"cmp"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Source answers the held devices' use at an instant (Reader, or a test's).
type Source interface {
	Read(ctx context.Context, at time.Time) ([]Device, Problem)
}

// coverer is a Source whose answers may count less than the window (Reader, while it reads
// the window's past): Covered is how much the last answer counts.
type coverer interface {
	Covered() time.Duration
}

// Cache reads usage once per interval in a goroutine of its own and keeps the last answer
// as a Snapshot. It tells its listeners of a change (as node "") only when the snapshot
// would write a different status: a rounded figure, a holder, an idle class or the problem.
type Cache struct {
	source   Source
	holders  func() Holders
	settings Settings
	interval time.Duration
	clock    clock.WithTicker
	synced   []cache.InformerSynced
	observe  func(time.Duration, string)
	done     func()

	snapshot  atomic.Pointer[Snapshot]
	mu        sync.Mutex // one refresh at a time
	last      *Snapshot  // the last computed, published or not
	digest    uint64
	listeners []func(node string)
}

// CacheConfig is what a cache is made of. Holders is called once per refresh: what it
// returns may keep what it looks up for that refresh only.
type CacheConfig struct {
	Source   Source
	Holders  func() Holders
	Settings Settings
	// Interval is the time between readings (0: Step); the operator's flag allows no less
	// than Step, tests may.
	Interval time.Duration
	// Clock is the time source; nil: the real clock.
	Clock clock.WithTicker
	// Synced are the caches Holders reads: the first query waits for them.
	Synced []cache.InformerSynced
	// Observe, when set, is told how long each reading took and its result ("ok", or the
	// problem's reason).
	Observe func(took time.Duration, result string)
	// Done, when set, is called after each round of readings (one, or the chunks of the
	// window's past): what the answers held is garbage now.
	Done func()
}

// NewCache makes a cache; nothing is asked until Run.
func NewCache(c CacheConfig) *Cache {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Interval <= 0 {
		c.Interval = Step
	}
	out := &Cache{source: c.Source, holders: c.Holders, settings: c.Settings, interval: c.Interval, clock: c.Clock, synced: c.Synced, observe: c.Observe, done: c.Done}
	out.snapshot.Store(&Snapshot{Settings: c.Settings})
	return out
}

// OnChange registers f, called with "" when the snapshot changed. Register before Run.
func (c *Cache) OnChange(f func(node string)) { c.listeners = append(c.listeners, f) }

// HasSynced is always true: usage never holds back the rest of the status.
func (c *Cache) HasSynced() bool { return true }

// Snapshot is the last published usage; never nil, never modified.
func (c *Cache) Snapshot() *Snapshot { return c.snapshot.Load() }

// Run refreshes once the holders' caches have synced, then every interval until ctx ends.
func (c *Cache) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	ticker := c.clock.NewTicker(c.interval)
	defer ticker.Stop()
	for {
		for c.Refresh(ctx) && ctx.Err() == nil {
			// the window's past is read chunk after chunk, not one chunk per interval
		}
		if c.done != nil {
			c.done()
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// Refresh asks the source once and publishes the answer if it changes the status. A failed
// query keeps the last good holders and says what failed. It reports whether the answer
// counted less than the window: more of its past is to be read.
//
// An answer that changes nothing the status shows replaces the published snapshot without
// telling anyone, so that one snapshot is kept, not two. While the window's past is read,
// the first partial answer is published and the next ones are not, until the window is whole.
func (c *Cache) Refresh(ctx context.Context) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	start := c.clock.Now()
	at := start.Truncate(Step)
	devices, problem := c.source.Read(ctx, at)
	if c.observe != nil {
		c.observe(c.clock.Since(start), cmp.Or(problem.Reason, "ok"))
	}
	next := *c.Snapshot()
	next.Problem = problem
	if problem.Reason == "" {
		next.Holders = Compute(devices, c.holders(), c.settings, at, c.last)
		next.At = at
		next.Covered = c.settings.Window
		if cv, ok := c.source.(coverer); ok {
			next.Covered = cv.Covered()
		}
		c.last = &next
	} else {
		klog.FromContext(ctx).V(2).Info("GPU usage not read", "reason", problem.Reason, "message", problem.Message)
	}
	more := problem.Reason == "" && next.Partial()
	published := c.Snapshot()
	digest := next.Digest()
	if digest == c.digest && published.Known() == next.Known() {
		c.snapshot.Store(&next)
		return more
	}
	if next.Partial() && published.Partial() && next.Problem == published.Problem {
		return more
	}
	c.digest = digest
	c.snapshot.Store(&next)
	for _, f := range c.listeners {
		f("")
	}
	return more
}
