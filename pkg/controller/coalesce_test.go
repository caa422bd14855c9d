package controller

import (
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
)

// recordingQueue records how the coalescer queues keys.
type recordingQueue struct {
	workqueue.TypedDelayingInterface[string]                 // not called
	queued                                   []time.Duration // 0: Add, otherwise AddAfter's wait
}

func (q *recordingQueue) Add(string)                         { q.queued = append(q.queued, 0) }
func (q *recordingQueue) AddAfter(_ string, d time.Duration) { q.queued = append(q.queued, d) }

func (q *recordingQueue) last(t *testing.T) time.Duration {
	t.Helper()
	if len(q.queued) == 0 {
		t.Fatal("nothing queued")
	}
	return q.queued[len(q.queued)-1]
}

func TestCoalescer(t *testing.T) {
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	c := NewCoalescer[string](time.Second, clk)
	q := &recordingQueue{}

	c.Enqueue(q, "a")
	if q.last(t) != 0 {
		t.Errorf("a first event waits %s; want it queued at once", q.last(t))
	}

	// A sync that writes holds the key for the whole interval.
	c.Synced("a")
	clk.SetTime(start.Add(300 * time.Millisecond))
	c.Enqueue(q, "a")
	if q.last(t) != 700*time.Millisecond {
		t.Errorf("an event 300ms after a writing sync waits %s; want 700ms", q.last(t))
	}
	c.Enqueue(q, "b")
	if q.last(t) != 0 {
		t.Errorf("another key waits %s; want it queued at once", q.last(t))
	}

	// A sync that wrote nothing (a periodic resync) holds it for a tenth of the interval.
	clk.SetTime(start.Add(2 * time.Second))
	c.Synced("a")
	c.Skipped("a")
	clk.SetTime(start.Add(2*time.Second + 40*time.Millisecond))
	c.Enqueue(q, "a")
	if q.last(t) != 60*time.Millisecond {
		t.Errorf("an event 40ms after a sync that wrote nothing waits %s; want 60ms", q.last(t))
	}
	clk.SetTime(start.Add(2*time.Second + 150*time.Millisecond))
	c.Enqueue(q, "a")
	if q.last(t) != 0 {
		t.Errorf("an event 150ms after a sync that wrote nothing waits %s; want no wait", q.last(t))
	}

	c.Synced("a")
	c.Forget("a")
	c.Enqueue(q, "a")
	if q.last(t) != 0 {
		t.Errorf("a forgotten key waits %s", q.last(t))
	}

	// With a delay, a quiet key waits for the delay and a held one for the longer of both.
	delayed := NewCoalescer[string](time.Second, clk).WithDelay(250 * time.Millisecond)
	delayed.Enqueue(q, "a")
	if q.last(t) != 250*time.Millisecond {
		t.Errorf("with a 250ms delay, a first event waits %s; want 250ms", q.last(t))
	}
	delayed.Synced("a")
	clk.SetTime(clk.Now().Add(100 * time.Millisecond))
	delayed.Enqueue(q, "a")
	if q.last(t) != 900*time.Millisecond {
		t.Errorf("with a 250ms delay, an event 100ms after a writing sync waits %s; want 900ms", q.last(t))
	}
	clk.SetTime(clk.Now().Add(800 * time.Millisecond))
	delayed.Enqueue(q, "a")
	if q.last(t) != 250*time.Millisecond {
		t.Errorf("with a 250ms delay, an event 100ms before the end of the interval waits %s; want 250ms", q.last(t))
	}

	off := NewCoalescer[string](0, clk)
	off.Synced("a")
	off.Enqueue(q, "a")
	if q.last(t) != 0 {
		t.Errorf("with coalescing off an event waits %s", q.last(t))
	}
}
