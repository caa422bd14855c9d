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
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
)

// recordingQueue records how the limiter queues keys.
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

func TestWriteLimiterAllowsABurstThenOnePerInterval(t *testing.T) {
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	w := NewWriteLimiter[string](time.Second, 2, clk)
	q := &recordingQueue{}

	// A quiet key: two changes in a row are both queued at once.
	for i := range 2 {
		w.Enqueue(q, "a")
		if q.last(t) != 0 {
			t.Fatalf("change %d of a quiet key waits %s; want it queued at once", i+1, q.last(t))
		}
		w.Wrote("a")
		clk.SetTime(clk.Now().Add(50 * time.Millisecond))
	}
	// The burst is spent: the third waits for the next token (1 s after the first write).
	w.Enqueue(q, "a")
	if got, want := q.last(t), 900*time.Millisecond; got < want || got > want+time.Microsecond {
		t.Errorf("third change waits %s; want %s", got, want)
	}
	// Another key has its own bucket.
	w.Enqueue(q, "b")
	if q.last(t) != 0 {
		t.Errorf("another key waits %s; want it queued at once", q.last(t))
	}
	// A sync that wrote nothing takes no token.
	clk.SetTime(start.Add(time.Second))
	w.Enqueue(q, "a")
	if q.last(t) != 0 {
		t.Errorf("a change once a token is due waits %s; want it queued at once", q.last(t))
	}

	// Sustained churn: over 10 s of events every 10 ms, writing whenever queued at once,
	// the key writes about once a second.
	writes := 0
	clk.SetTime(start.Add(time.Hour))
	w.Forget("a")
	for range 1000 {
		w.Enqueue(q, "a")
		if q.last(t) == 0 {
			w.Wrote("a")
			writes++
		}
		clk.SetTime(clk.Now().Add(10 * time.Millisecond))
	}
	if writes < 10 || writes > 12 {
		t.Errorf("%d writes in 10 s of churn; want the burst of 2 plus about one a second", writes)
	}
}

func TestWriteLimiterDelayAndOff(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
	q := &recordingQueue{}
	NewWriteLimiter[string](time.Second, 1, clk).WithDelay(300*time.Millisecond).Enqueue(q, "a")
	if q.last(t) != 300*time.Millisecond {
		t.Errorf("with a delay a quiet key waits %s; want 300ms", q.last(t))
	}
	off := NewWriteLimiter[string](0, 1, clk)
	for range 5 {
		off.Enqueue(q, "a")
		off.Wrote("a")
		if q.last(t) != 0 {
			t.Fatalf("without a limit a key waits %s", q.last(t))
		}
	}
}
