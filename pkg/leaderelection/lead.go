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

package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// Leading is what Lead runs while this candidate holds the lease, and how it is told.
type Leading struct {
	// Run does the leader's work until its context ends; its error ends Lead's.
	Run func(ctx context.Context) error
	// Changed is told when this candidate starts (true) and stops (false) leading; nil: not told.
	Changed func(leading bool)
}

// Lead runs leading.Run (with ctx's logger) while this candidate holds the lease of config (whose Callbacks it
// sets), until ctx ends or the lease is lost (an error: the process should exit). On
// shutdown Run stops first and only then is the lease released, so no write of the
// leader's can follow the release; a leader whose Run does not stop within the renew
// deadline releases it anyway.
func Lead(ctx context.Context, config LeaderElectionConfig, leading Leading) error {
	changed := leading.Changed
	if changed == nil {
		changed = func(bool) {}
	}
	logger := klog.FromContext(ctx).WithValues("lease", lockRef(config.Lock), "identity", config.Lock.Identity())
	// The elector runs on its own context: cancelling ctx must not release the lease.
	electorCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElector()
	var led atomic.Bool
	done := make(chan struct{}) // closed once Run has returned
	var runErr error
	config.ReleaseOnCancel = true
	config.Callbacks = LeaderCallbacks{
		OnStartedLeading: func(leadCtx context.Context) {
			led.Store(true)
			changed(true)
			defer close(done)
			logger.Info("Became leader, starting controllers")
			runCtx, cancel := context.WithCancel(leadCtx)
			defer cancel()
			stop := context.AfterFunc(ctx, cancel)
			defer stop()
			runErr = leading.Run(runCtx)
			stopElector() // Run ended (shutdown or error): give the lease up
		},
		OnStoppedLeading: func() {
			changed(false)
			logger.Info("No longer the leader")
		},
		OnNewLeader: func(identity string) {
			if identity != config.Lock.Identity() {
				logger.Info("Another instance leads", "leader", identity)
			}
		},
	}
	elector, err := NewLeaderElector(config)
	if err != nil {
		return fmt.Errorf("configure leader election: %w", err)
	}
	go func() {
		<-ctx.Done()
		if elector.IsLeader() {
			select {
			case <-done:
			case <-time.After(config.RenewDeadline):
			}
		}
		stopElector()
	}()
	elector.Run(electorCtx)
	if led.Load() {
		<-done // the elector cancelled Run; make sure no write is still under way
	}
	switch {
	case ctx.Err() != nil:
		return nil // asked to stop; the lease was released
	case runErr != nil:
		return runErr
	}
	return errors.New("leader election lost: lease " + config.Lock.Describe() + " is no longer held by " + config.Lock.Identity())
}

// lockRef names the lock in logs: a Lease as an object reference, as Kubernetes logs objects.
func lockRef(lock Lock) any {
	if l, ok := lock.(*LeaseLock); ok {
		return klog.KRef(l.LeaseMeta.Namespace, l.LeaseMeta.Name)
	}
	return lock.Describe()
}
