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

// Package leaderelection elects one leader among candidates sharing a Lease. It does not
// guarantee that only one candidate acts as leader at a time (no fencing).
//
// This copy keeps the election algorithm and the Lease lock but reaches the Lease through a
// three-method client, so a binary using it need not link client-go's typed clientset.
//
// A candidate acts only on timestamps taken by its own clock: the times in the record are
// never compared with it, only their change is taken as proof that the holder renewed. The
// election therefore tolerates any clock skew between candidates, but not an arbitrary
// skew rate; the ratio of LeaseDuration to RenewDeadline bounds the tolerated rate.
//
// Adapted from k8s.io/client-go/tools/leaderelection (Copyright The Kubernetes Authors, Apache-2.0).
package leaderelection

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// JitterFactor spreads the retries of candidates waiting to acquire the lease.
const JitterFactor = 1.2

// NewLeaderElector creates a LeaderElector from a LeaderElectionConfig and ties the
// config's WatchDog, if any, to it.
func NewLeaderElector(lec LeaderElectionConfig) (*LeaderElector, error) {
	if err := lec.validate(); err != nil {
		return nil, err
	}
	le := &LeaderElector{config: lec, clock: clock.RealClock{}}
	if lec.WatchDog != nil {
		lec.WatchDog.SetLeaderElection(le)
	}
	return le, nil
}

func (lec *LeaderElectionConfig) validate() error {
	switch {
	case lec.LeaseDuration <= lec.RenewDeadline:
		return errors.New("leaseDuration must be greater than renewDeadline")
	case lec.RenewDeadline <= time.Duration(JitterFactor*float64(lec.RetryPeriod)):
		return errors.New("renewDeadline must be greater than retryPeriod*JitterFactor")
	case lec.LeaseDuration < 1:
		return errors.New("leaseDuration must be greater than zero")
	case lec.RenewDeadline < 1:
		return errors.New("renewDeadline must be greater than zero")
	case lec.RetryPeriod < 1:
		return errors.New("retryPeriod must be greater than zero")
	case lec.Callbacks.OnStartedLeading == nil:
		return errors.New("OnStartedLeading callback must not be nil")
	case lec.Callbacks.OnStoppedLeading == nil:
		return errors.New("OnStoppedLeading callback must not be nil")
	case lec.Lock == nil:
		return errors.New("lock must not be nil")
	case lec.Lock.Identity() == "":
		return errors.New("lock identity is empty")
	}
	return nil
}

// LeaderElectionConfig configures a LeaderElector.
type LeaderElectionConfig struct {
	// Lock is the resource that will be used for locking.
	Lock Lock

	// LeaseDuration is how long a candidate that is not the leader waits, from the last
	// change of the record it observed, before it takes the lease over. Core clients use
	// 15 seconds.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps retrying to renew before it gives up.
	// Core clients use 10 seconds.
	RenewDeadline time.Duration
	// RetryPeriod is the wait between tries of an action. Core clients use 2 seconds.
	RetryPeriod time.Duration

	// Callbacks are called on the elector's lifecycle events.
	Callbacks LeaderCallbacks

	// WatchDog, when set, reports on a health endpoint a leader that fails to renew.
	WatchDog *HealthzAdaptor

	// ReleaseOnCancel releases the lock when Run's context is cancelled. All work guarded
	// by the lease must have finished before that context is cancelled, or two processes
	// may act as leader at once.
	ReleaseOnCancel bool

	// Name is the name of the lock, for logs and health errors.
	Name string
}

// LeaderCallbacks are called on the lifecycle events of a LeaderElector, asynchronously.
type LeaderCallbacks struct {
	// OnStartedLeading is called when the elector starts leading, with a context that is
	// cancelled when it stops.
	OnStartedLeading func(context.Context)
	// OnStoppedLeading is called when Run returns, whether or not the elector ever led.
	OnStoppedLeading func()
	// OnNewLeader is called when the elector observes a leader other than the one it
	// observed before, including the first leader it observes.
	OnNewLeader func(identity string)
}

// LeaderElector is a leader election client.
type LeaderElector struct {
	config LeaderElectionConfig
	// internal bookkeeping
	observedRecord    LeaderElectionRecord
	observedRawRecord []byte
	observedTime      time.Time
	// used to implement OnNewLeader(); may lag behind observedRecord.HolderIdentity
	// until the transition is reported.
	reportedLeader string

	clock clock.Clock

	// guards observedRecord and observedTime
	observedRecordLock sync.RWMutex
}

// Run runs the election until ctx is cancelled or the lease, once held, is lost.
func (le *LeaderElector) Run(ctx context.Context) {
	defer runtime.HandleCrashWithContext(ctx)
	defer le.config.Callbacks.OnStoppedLeading()

	if !le.acquire(ctx) {
		return // ctx signalled done
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go le.config.Callbacks.OnStartedLeading(ctx)
	le.renew(ctx)
}

// GetLeader returns the identity of the last observed leader, or "" if none was observed.
func (le *LeaderElector) GetLeader() string {
	return le.getObservedRecord().HolderIdentity
}

// IsLeader reports whether the last observed leader is this client.
func (le *LeaderElector) IsLeader() bool {
	return le.getObservedRecord().HolderIdentity == le.config.Lock.Identity()
}

// acquire tries to acquire the lease every RetryPeriod (jittered) until it succeeds (true)
// or ctx is done (false).
func (le *LeaderElector) acquire(ctx context.Context) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	succeeded := false
	desc := le.config.Lock.Describe()
	logger := klog.FromContext(ctx)
	logger.Info("Attempting to acquire leader lease...", "lock", desc)
	wait.JitterUntilWithContext(ctx, func(ctx context.Context) {
		succeeded = le.tryAcquireOrRenew(ctx)
		le.maybeReportTransition()
		if !succeeded {
			logger.V(4).Info("Failed to acquire lease", "lock", desc)
			return
		}
		logger.Info("Successfully acquired lease", "lock", desc)
		cancel()
	}, le.config.RetryPeriod, JitterFactor, true)
	return succeeded
}

// renew renews the lease every RetryPeriod and returns when a renewal has not succeeded
// within RenewDeadline or ctx is done.
func (le *LeaderElector) renew(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	logger := klog.FromContext(ctx)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		err := wait.PollUntilContextTimeout(ctx, le.config.RetryPeriod, le.config.RenewDeadline, true, func(ctx context.Context) (done bool, err error) {
			// With immediate=true the condition runs even on a cancelled context.
			if err := ctx.Err(); err != nil {
				return false, err
			}
			return le.tryAcquireOrRenew(ctx), nil
		})
		le.maybeReportTransition()
		desc := le.config.Lock.Describe()
		if err == nil {
			logger.V(5).Info("Successfully renewed lease", "lock", desc)
			return
		}
		logger.Info("Failed to renew lease", "lock", desc, "err", err)
		cancel()
	}, le.config.RetryPeriod)

	// if we hold the lease, give it up
	if le.config.ReleaseOnCancel {
		le.release(logger)
	}
}

// release gives up the lease if this client holds it, within RenewDeadline.
func (le *LeaderElector) release(logger klog.Logger) bool {
	ctx := klog.NewContext(context.Background(), logger)
	timeoutCtx, timeoutCancel := context.WithTimeout(ctx, le.config.RenewDeadline)
	defer timeoutCancel()
	return le.tryRelease(timeoutCtx)
}

// tryRelease writes a record with no holder. It retries on conflict, which happens when
// the cancellation raced with a renewal the API server still completed.
func (le *LeaderElector) tryRelease(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	oldLeaderElectionRecord, _, err := le.config.Lock.Get(ctx)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			logger.Error(err, "Error retrieving resource lock", "lock", le.config.Lock.Describe())
			return false
		}
		logger.Info("Lease lock not found", "lock", le.config.Lock.Describe())
		return false
	}

	if !le.IsLeader() {
		return true
	}
	now := metav1.NewTime(le.clock.Now())
	leaderElectionRecord := LeaderElectionRecord{
		LeaderTransitions:    oldLeaderElectionRecord.LeaderTransitions,
		LeaseDurationSeconds: 1,
		RenewTime:            now,
		AcquireTime:          now,
	}
	if err := le.config.Lock.Update(ctx, leaderElectionRecord); err != nil {
		if apierrors.IsConflict(err) {
			logger.V(4).Info("Conflict when releasing lease, retrying", "lock", le.config.Lock.Describe())
			return le.tryRelease(ctx)
		}
		logger.Error(err, "Failed to release lease", "lock", le.config.Lock.Describe())
		return false
	}

	le.setObservedRecord(&leaderElectionRecord)
	return true
}

// tryAcquireOrRenew acquires the lease if it is free or expired, or renews it if this
// client holds it. It reports whether this client holds the lease afterwards.
func (le *LeaderElector) tryAcquireOrRenew(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	now := metav1.NewTime(le.clock.Now())
	leaderElectionRecord := LeaderElectionRecord{
		HolderIdentity:       le.config.Lock.Identity(),
		LeaseDurationSeconds: int(le.config.LeaseDuration / time.Second),
		RenewTime:            now,
		AcquireTime:          now,
	}

	// 1. fast path: the leader updates optimistically, assuming the record it observed
	// last is the current one.
	if le.IsLeader() && le.isLeaseValid(now.Time) {
		oldObservedRecord := le.getObservedRecord()
		leaderElectionRecord.AcquireTime = oldObservedRecord.AcquireTime
		leaderElectionRecord.LeaderTransitions = oldObservedRecord.LeaderTransitions

		err := le.config.Lock.Update(ctx, leaderElectionRecord)
		if err == nil {
			le.setObservedRecord(&leaderElectionRecord)
			return true
		}
		logger.V(2).Info("Failed to update lease optimistically, falling back to slow path", "lock", le.config.Lock.Describe(), "err", err)
	}

	// 2. obtain or create the record
	oldLeaderElectionRecord, oldLeaderElectionRawRecord, err := le.config.Lock.Get(ctx)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			logger.Error(err, "Error retrieving lease lock", "lock", le.config.Lock.Describe())
			return false
		}
		if err = le.config.Lock.Create(ctx, leaderElectionRecord); err != nil {
			logger.Error(err, "Error initially creating lease lock", "lock", le.config.Lock.Describe())
			return false
		}
		le.setObservedRecord(&leaderElectionRecord)
		return true
	}

	// 3. record obtained: a change restarts the expiry count from now, by the local clock
	if !bytes.Equal(le.observedRawRecord, oldLeaderElectionRawRecord) {
		le.setObservedRecord(oldLeaderElectionRecord)
		le.observedRawRecord = oldLeaderElectionRawRecord
	}
	if len(oldLeaderElectionRecord.HolderIdentity) > 0 && le.isLeaseValid(now.Time) && !le.IsLeader() {
		logger.V(4).Info("Lease is held by and has not yet expired", "lock", le.config.Lock.Describe(), "holder", oldLeaderElectionRecord.HolderIdentity)
		return false
	}

	// 4. take over or renew, keeping the acquire time and counting transitions
	if le.IsLeader() {
		leaderElectionRecord.AcquireTime = oldLeaderElectionRecord.AcquireTime
		leaderElectionRecord.LeaderTransitions = oldLeaderElectionRecord.LeaderTransitions
	} else {
		leaderElectionRecord.LeaderTransitions = oldLeaderElectionRecord.LeaderTransitions + 1
	}

	if err = le.config.Lock.Update(ctx, leaderElectionRecord); err != nil {
		logger.Error(err, "Failed to update lease", "lock", le.config.Lock.Describe())
		return false
	}

	le.setObservedRecord(&leaderElectionRecord)
	return true
}

func (le *LeaderElector) maybeReportTransition() {
	if le.observedRecord.HolderIdentity == le.reportedLeader {
		return
	}
	le.reportedLeader = le.observedRecord.HolderIdentity
	if le.config.Callbacks.OnNewLeader != nil {
		go le.config.Callbacks.OnNewLeader(le.reportedLeader)
	}
}

// Check fails when this client is the leader and has not renewed the lease for longer than
// LeaseDuration plus maxTolerableExpiredLease: it should have stopped leading by then, so
// something (a deadlock) keeps it from doing so.
func (le *LeaderElector) Check(maxTolerableExpiredLease time.Duration) error {
	if !le.IsLeader() {
		return nil // a hot standby is healthy
	}
	le.observedRecordLock.RLock()
	lastObservation := le.observedTime
	leaseDuration := le.config.LeaseDuration
	le.observedRecordLock.RUnlock()

	if le.clock.Since(lastObservation) > leaseDuration+maxTolerableExpiredLease {
		return fmt.Errorf("failed election to renew leadership on lease %s", le.config.Name)
	}
	return nil
}

func (le *LeaderElector) isLeaseValid(now time.Time) bool {
	le.observedRecordLock.RLock()
	defer le.observedRecordLock.RUnlock()
	return le.observedTime.Add(time.Second * time.Duration(le.observedRecord.LeaseDurationSeconds)).After(now)
}

// setObservedRecord sets the observed record and the local time it was observed.
func (le *LeaderElector) setObservedRecord(observedRecord *LeaderElectionRecord) {
	le.observedRecordLock.Lock()
	defer le.observedRecordLock.Unlock()
	le.observedRecord = *observedRecord
	le.observedTime = le.clock.Now()
}

func (le *LeaderElector) getObservedRecord() LeaderElectionRecord {
	le.observedRecordLock.RLock()
	defer le.observedRecordLock.RUnlock()
	return le.observedRecord
}
