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

package app

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/leaderelection"
)

// candidacy is one run of the elector: whether this instance led, and how its controllers ended.
type candidacy struct {
	led             atomic.Bool
	controllersDone chan struct{} // closed when the controllers have returned
	controllersErr  error         // set before controllersDone is closed
	stopElector     context.CancelFunc
}

// runWithLeaderElection runs the controllers while this instance holds the Lease. On
// shutdown the controllers stop first and only then is the lease released, so no write can
// follow the release.
func (o *Operator) runWithLeaderElection(ctx context.Context) error {
	lock := leaderelection.NewLeaseLock(kubeclient.Leases(o.clients.coordination, o.namespace), o.namespace, o.opts.LeaderElectionID, o.identity)
	// The elector runs on its own context: cancelling ctx must not release the lease.
	electorCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElector()
	t := &candidacy{controllersDone: make(chan struct{}), stopElector: stopElector}
	elector, err := leaderelection.NewLeaderElector(o.electionConfig(ctx, lock, t))
	if err != nil {
		return fmt.Errorf("configure leader election: %w", err)
	}
	go o.releaseAfterControllers(ctx, elector, t)
	elector.Run(electorCtx)
	if t.led.Load() {
		<-t.controllersDone // the elector cancelled them; make sure no write is still under way
	}

	switch {
	case ctx.Err() != nil:
		return nil // asked to stop; the lease was released
	case t.controllersErr != nil:
		return t.controllersErr
	default:
		return fmt.Errorf("leader election lost: lease %s/%s is no longer held by %s", o.namespace, o.opts.LeaderElectionID, o.identity)
	}
}

func (o *Operator) electionConfig(ctx context.Context, lock leaderelection.Lock, t *candidacy) leaderelection.LeaderElectionConfig {
	logger := klog.FromContext(ctx).WithValues("lease", klog.KRef(o.namespace, o.opts.LeaderElectionID), "identity", o.identity)
	return leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.opts.LeaseDuration,
		RenewDeadline:   o.opts.RenewDeadline,
		RetryPeriod:     o.opts.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            o.opts.LeaderElectionID,
		WatchDog:        o.leaderHealth,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadCtx context.Context) {
				o.lead(klog.NewContext(ctx, logger), leadCtx, t)
			},
			OnStoppedLeading: func() {
				o.state.leading.Store(false)
				o.metrics.Leader.Set(0)
				logger.Info("No longer the leader")
			},
			OnNewLeader: func(identity string) {
				if identity != o.identity {
					logger.Info("Another instance leads", "leader", identity)
				}
			},
		},
	}
}

// lead runs the controllers until the lease is lost or ctx (the operator's) is cancelled,
// then gives the lease up.
func (o *Operator) lead(ctx, leadCtx context.Context, t *candidacy) {
	t.led.Store(true)
	o.state.leading.Store(true)
	o.metrics.Leader.Set(1)
	defer close(t.controllersDone)
	klog.FromContext(ctx).Info("Became leader, starting controllers")
	runCtx, cancel := context.WithCancel(leadCtx)
	defer cancel()
	stopOnShutdown := context.AfterFunc(ctx, cancel)
	defer stopOnShutdown()
	t.controllersErr = o.runControllers(runCtx)
	t.stopElector() // controllers ended (shutdown or error): give the lease up
}

// releaseAfterControllers stops the elector once ctx is cancelled and the controllers have
// finished (or the renew deadline has passed).
func (o *Operator) releaseAfterControllers(ctx context.Context, elector *leaderelection.LeaderElector, t *candidacy) {
	<-ctx.Done()
	if elector.IsLeader() {
		select {
		case <-t.controllersDone:
		case <-time.After(o.opts.RenewDeadline):
		}
	}
	t.stopElector()
}
