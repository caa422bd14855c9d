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

// Package controller holds what every controller of the operator shares: the Context each
// is made with, the NodeFacts sources of a node's GPU facts, the worker loop around a named
// rate-limited workqueue, and the limiter that spaces each key's writes.
package controller

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
)

// LoopMetrics are what a worker loop and its queue count in: metrics.Loops, which the
// operator's and the hub's metrics both hold.
type LoopMetrics interface {
	QueueMetrics() workqueue.MetricsProvider
	ObserveSync(controller, result string, took time.Duration)
	SyncPanicked(controller string)
}

var _ LoopMetrics = &metrics.Loops{}

// NewQueue returns a named rate-limited queue whose metrics go to m. Failed items are retried
// with per-item exponential backoff from 5ms to 5 minutes, and the queue as a whole is held
// to 10 retries per second with bursts of 100.
func NewQueue[T comparable](name string, m LoopMetrics) workqueue.TypedRateLimitingInterface[T] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[T](),
		workqueue.TypedRateLimitingQueueConfig[T]{Name: name, MetricsProvider: m.QueueMetrics()},
	)
}

// Loop hands each key of a queue to Sync, counting the results in Metrics.
type Loop[T comparable] struct {
	Name    string
	Queue   workqueue.TypedRateLimitingInterface[T]
	Sync    func(context.Context, T) error
	Metrics LoopMetrics
}

// Run waits for the caches, runs workers until ctx is cancelled, then shuts the queue down
// and waits for every worker to return. A key whose sync fails is requeued with backoff; a
// key that succeeds has its backoff forgotten.
func (l Loop[T]) Run(ctx context.Context, workers int, synced ...cache.InformerSynced) error {
	logger := klog.FromContext(ctx).WithValues("controller", l.Name)
	ctx = klog.NewContext(ctx, logger)
	defer utilruntime.HandleCrashWithContext(ctx)

	logger.V(2).Info("Waiting for informer caches to sync")
	if !WaitForCacheSync(ctx, synced...) {
		l.Queue.ShutDown()
		if ctx.Err() != nil {
			return nil // asked to stop before the caches synced
		}
		return fmt.Errorf("controller %s: caches did not sync", l.Name)
	}

	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for l.processNext(ctx) {
			}
		})
	}
	logger.V(2).Info("Started workers", "count", workers)
	<-ctx.Done()
	l.Queue.ShutDown()
	wg.Wait()
	logger.V(2).Info("Stopped workers")
	return nil
}

// syncPollPeriod is how often WaitForCacheSync looks at the caches: a look is a few atomic
// loads, and the first status waits for it (client-go's WaitForCacheSync looks every 100 ms).
const syncPollPeriod = 5 * time.Millisecond

// WaitForCacheSync waits until every synced reports true, logging when it starts and ends
// as client-go's WaitForNamedCacheSyncWithContext does; it returns false if ctx ends first.
func WaitForCacheSync(ctx context.Context, synced ...cache.InformerSynced) bool {
	logger := klog.FromContext(ctx)
	logger.Info("Waiting for caches to sync")
	all := func(context.Context) (bool, error) {
		for _, ok := range synced {
			if !ok() {
				return false, nil
			}
		}
		return true, nil
	}
	if wait.PollUntilContextCancel(ctx, syncPollPeriod, true, all) != nil {
		return false
	}
	logger.Info("Caches are synced")
	return true
}

func (l Loop[T]) processNext(ctx context.Context) bool {
	key, shutdown := l.Queue.Get()
	if shutdown {
		return false
	}
	defer l.Queue.Done(key)

	start := time.Now()
	err := l.syncRecovering(ctx, key)
	logger := klog.FromContext(ctx)
	if err == nil {
		l.Metrics.ObserveSync(l.Name, "success", time.Since(start))
		l.Queue.Forget(key)
		logger.V(4).Info("Synced", "key", key, "duration", time.Since(start))
		return true
	}
	l.Metrics.ObserveSync(l.Name, "error", time.Since(start))
	utilruntime.HandleErrorWithContext(ctx, err, "Sync failed, will retry", "key", key, "retries", l.Queue.NumRequeues(key))
	l.Queue.AddRateLimited(key)
	return true
}

// syncRecovering runs Sync and turns a panic into an error, so that one bad object costs a
// retry with backoff instead of the process. client-go's HandleCrash re-panics unless the
// process-wide ReallyCrash is off, hence the recover here.
func (l Loop[T]) syncRecovering(ctx context.Context, key T) (err error) {
	defer func() {
		if r := recover(); r != nil {
			l.Metrics.SyncPanicked(l.Name)
			err = fmt.Errorf("sync of %v panicked: %v\n%s", key, r, debug.Stack())
		}
	}()
	return l.Sync(ctx, key)
}
