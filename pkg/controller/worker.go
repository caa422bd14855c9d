// Package controller holds what every controller of the operator shares: the worker loop
// around a named rate-limited workqueue, and the trimmed form in which Nodes are cached.
package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	// Imported first for its side effect too: the workqueue metrics provider must be set
	// before NewQueue makes a queue.
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
)

// NewQueue returns a named rate-limited queue (the name makes workqueue metrics exist). Failed
// items are retried with per-item exponential backoff from 5ms to 5 minutes, and the queue as
// a whole is held to 10 retries per second with bursts of 100.
func NewQueue[T comparable](name string) workqueue.TypedRateLimitingInterface[T] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[T](),
		workqueue.TypedRateLimitingQueueConfig[T]{Name: name},
	)
}

// Run waits for the caches, runs workers that hand each queued key to sync until ctx is
// cancelled, then shuts the queue down and waits for every worker to return. A key whose sync
// fails is requeued with backoff; a key that succeeds has its backoff forgotten.
func Run[T comparable](ctx context.Context, name string, queue workqueue.TypedRateLimitingInterface[T],
	workers int, syncFn func(context.Context, T) error, synced ...cache.InformerSynced) error {
	logger := klog.FromContext(ctx).WithValues("controller", name)
	ctx = klog.NewContext(ctx, logger)
	defer utilruntime.HandleCrashWithContext(ctx)

	logger.V(2).Info("Waiting for informer caches to sync")
	if !cache.WaitForNamedCacheSyncWithContext(ctx, synced...) {
		queue.ShutDown()
		if ctx.Err() != nil {
			return nil // asked to stop before the caches synced
		}
		return fmt.Errorf("controller %s: caches did not sync", name)
	}

	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for processNext(ctx, name, queue, syncFn) {
			}
		})
	}
	logger.V(2).Info("Started workers", "count", workers)
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
	logger.V(2).Info("Stopped workers")
	return nil
}

func processNext[T comparable](ctx context.Context, name string, queue workqueue.TypedRateLimitingInterface[T], sync func(context.Context, T) error) bool {
	key, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(key)

	start := time.Now()
	err := sync(ctx, key)
	metrics.SyncDuration.WithLabelValues(name).Observe(time.Since(start).Seconds())
	logger := klog.FromContext(ctx)
	if err == nil {
		metrics.Syncs.WithLabelValues(name, "success").Inc()
		queue.Forget(key)
		logger.V(4).Info("Synced", "key", key, "duration", time.Since(start))
		return true
	}
	metrics.Syncs.WithLabelValues(name, "error").Inc()
	utilruntime.HandleErrorWithContext(ctx, err, "Sync failed, will retry", "key", key, "retries", queue.NumRequeues(key))
	queue.AddRateLimited(key)
	return true
}
