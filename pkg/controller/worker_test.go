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
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
)

// A sync that panics is counted and retried; the workers keep going.
func TestLoopSurvivesAPanickingSync(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := metrics.New()
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "test", MetricsProvider: m.QueueMetrics()})
	var calls atomic.Int32
	done := make(chan string, 10)
	loop := Loop[string]{Name: "test", Queue: queue, Metrics: m, Sync: func(_ context.Context, key string) error {
		if key == "bad" && calls.Add(1) == 1 {
			panic("a programming error in a sync")
		}
		done <- key
		return nil
	}}
	stopped := make(chan error, 1)
	go func() { stopped <- loop.Run(ctx, 1) }()
	queue.Add("bad")
	queue.Add("good")
	seen := map[string]bool{}
	for len(seen) < 2 {
		select {
		case key := <-done:
			seen[key] = true
		case err := <-stopped:
			t.Fatalf("the loop stopped: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatalf("synced %v within 10s; want the panicking key retried and the other synced", seen)
		}
	}
	if got := testutil.ToFloat64(m.SyncPanics.WithLabelValues("test")); got != 1 {
		t.Errorf("sync_panics_total = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.Syncs.WithLabelValues("test", "error")); got != 1 {
		t.Errorf("syncs_total{result=error} = %v, want 1 (the panic)", got)
	}
	cancel()
	if err := <-stopped; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v", err)
	}
}

// The wait for the caches ends once every cache has synced, however late one does, and
// reports a wait cut short.
func TestWaitForCacheSync(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var looks atomic.Int32
	late := func() bool { return looks.Add(1) > 3 } // synced at its fourth look
	if !WaitForCacheSync(ctx, func() bool { return true }, late) {
		t.Fatal("the wait failed although every cache synced")
	}
	if n := looks.Load(); n != 4 {
		t.Errorf("the late cache was asked %d times, want 4: the wait ended before it synced, or asked on", n)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if WaitForCacheSync(cancelled, func() bool { return false }) {
		t.Error("the wait succeeded although a cache never synced")
	}
}
