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
	"net/http"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
)

// The operator's Lease client and the fake clientset's both serve a LeaseLock.
var (
	_ LeaseClient = kubeclient.Leases(nil, testNamespace)
	_ LeaseClient = fake.NewClientset().CoordinationV1().Leases(testNamespace)
)

const (
	testNamespace = "gpu-system"
	testLease     = "gpu-inventory-operator"
	leaseDuration = 15 * time.Second
)

// candidate is one elector on a shared fake clientset, driven by a fake clock.
type candidate struct {
	le    *LeaderElector
	clock *testingclock.FakeClock
}

func newCandidate(t *testing.T, client *fake.Clientset, identity string) *candidate {
	t.Helper()
	le, err := NewLeaderElector(testConfig(client, identity))
	if err != nil {
		t.Fatalf("NewLeaderElector: %v", err)
	}
	c := &candidate{le: le, clock: testingclock.NewFakeClock(time.Now())}
	le.clock = c.clock
	return c
}

func testConfig(client *fake.Clientset, identity string) LeaderElectionConfig {
	return LeaderElectionConfig{
		Lock:          NewLeaseLock(client.CoordinationV1().Leases(testNamespace), testNamespace, testLease, identity),
		LeaseDuration: leaseDuration,
		RenewDeadline: 10 * time.Second,
		RetryPeriod:   2 * time.Second,
		Name:          testLease,
		Callbacks: LeaderCallbacks{
			OnStartedLeading: func(context.Context) {},
			OnStoppedLeading: func() {},
		},
	}
}

// seedLease stores a Lease held by holder, renewed long ago by the holder's clock: the
// elector must judge expiry by its own observations, not by these times.
func seedLease(holder string, transitions int) *coordinationv1.Lease {
	past := time.Now().Add(-1000 * time.Hour)
	record := LeaderElectionRecord{
		HolderIdentity:       holder,
		LeaseDurationSeconds: int(leaseDuration / time.Second),
		AcquireTime:          metav1.NewTime(past),
		RenewTime:            metav1.NewTime(past),
		LeaderTransitions:    transitions,
	}
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: testLease},
		Spec:       LeaderElectionRecordToLeaseSpec(&record),
	}
}

func readLease(t *testing.T, client *fake.Clientset) *LeaderElectionRecord {
	t.Helper()
	lease, err := client.CoordinationV1().Leases(testNamespace).Get(context.Background(), testLease, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Lease: %v", err)
	}
	return LeaseSpecToLeaderElectionRecord(&lease.Spec)
}

func (c *candidate) try(t *testing.T) bool {
	_, ctx := ktesting.NewTestContext(t)
	ok := c.le.tryAcquireOrRenew(ctx)
	c.le.maybeReportTransition()
	return ok
}

func TestAcquireFreeLease(t *testing.T) {
	client := fake.NewClientset()
	a := newCandidate(t, client, "a")
	if !a.try(t) {
		t.Fatal("a did not acquire a Lease that does not exist")
	}
	if got := readLease(t, client); got.HolderIdentity != "a" || got.LeaseDurationSeconds != 15 {
		t.Errorf("Lease after acquiring = holder %q, %ds; want a, 15s", got.HolderIdentity, got.LeaseDurationSeconds)
	}
	if !a.le.IsLeader() || a.le.GetLeader() != "a" {
		t.Errorf("IsLeader = %v, GetLeader = %q after acquiring; want true, a", a.le.IsLeader(), a.le.GetLeader())
	}
}

func TestAcquireReleasedLease(t *testing.T) {
	client := fake.NewClientset(seedLease("", 3))
	b := newCandidate(t, client, "b")
	if !b.try(t) {
		t.Fatal("b did not acquire a Lease with no holder")
	}
	if got := readLease(t, client); got.HolderIdentity != "b" || got.LeaderTransitions != 4 {
		t.Errorf("Lease = holder %q, %d transitions; want b, 4", got.HolderIdentity, got.LeaderTransitions)
	}
}

func TestNoAcquireWhileHeld(t *testing.T) {
	client := fake.NewClientset(seedLease("a", 0))
	b := newCandidate(t, client, "b")
	// The record's renew time is 1000 h old, but b has only just seen it.
	if b.try(t) {
		t.Fatal("b acquired a Lease held by a that it observed just now")
	}
	b.clock.Step(leaseDuration - time.Second)
	if b.try(t) {
		t.Fatal("b acquired a Lease held by a before a lease duration had passed")
	}
	if got := readLease(t, client); got.HolderIdentity != "a" {
		t.Errorf("holder = %q, want a", got.HolderIdentity)
	}
	if b.le.IsLeader() || b.le.GetLeader() != "a" {
		t.Errorf("b: IsLeader = %v, GetLeader = %q; want false, a", b.le.IsLeader(), b.le.GetLeader())
	}
}

func TestTakeOverExpiredLease(t *testing.T) {
	client := fake.NewClientset(seedLease("a", 2))
	b := newCandidate(t, client, "b")
	if b.try(t) {
		t.Fatal("b acquired a Lease held by a that it observed just now")
	}
	b.clock.Step(leaseDuration + time.Second)
	if !b.try(t) {
		t.Fatal("b did not take over a Lease unchanged for longer than the lease duration")
	}
	if got := readLease(t, client); got.HolderIdentity != "b" || got.LeaderTransitions != 3 {
		t.Errorf("Lease = holder %q, %d transitions; want b, 3", got.HolderIdentity, got.LeaderTransitions)
	}
}

func TestRenewalByHolderKeepsLeaseValid(t *testing.T) {
	client := fake.NewClientset()
	a := newCandidate(t, client, "a")
	b := newCandidate(t, client, "b")
	if !a.try(t) {
		t.Fatal("a did not acquire a free Lease")
	}
	if b.try(t) {
		t.Fatal("b acquired the Lease a just took")
	}
	for range 3 { // 30 s of b's time, but a renews every 10 s
		a.clock.Step(10 * time.Second)
		b.clock.Step(10 * time.Second)
		if !a.try(t) {
			t.Fatal("a failed to renew its own Lease")
		}
		if b.try(t) {
			t.Fatal("b took over a Lease that a keeps renewing")
		}
	}
}

func TestRenewKeepsAcquireTime(t *testing.T) {
	client := fake.NewClientset()
	a := newCandidate(t, client, "a")
	if !a.try(t) {
		t.Fatal("a did not acquire a free Lease")
	}
	first := readLease(t, client)
	a.clock.Step(5 * time.Second)
	if !a.try(t) {
		t.Fatal("a did not renew its Lease")
	}
	got := readLease(t, client)
	if !got.RenewTime.After(first.RenewTime.Time) {
		t.Errorf("renew time %v not after %v", got.RenewTime, first.RenewTime)
	}
	if !got.AcquireTime.Equal(&first.AcquireTime) || got.LeaderTransitions != first.LeaderTransitions {
		t.Errorf("renewal changed acquire time or transitions: %+v, was %+v", got, first)
	}
}

func TestRenewAfterOthersTookOver(t *testing.T) {
	client := fake.NewClientset()
	a := newCandidate(t, client, "a")
	if !a.try(t) {
		t.Fatal("a did not acquire a free Lease")
	}
	// c overwrites the Lease while a still believes it leads.
	if _, err := client.CoordinationV1().Leases(testNamespace).Update(context.Background(), seedLease("c", 5), metav1.UpdateOptions{}); err != nil {
		t.Fatalf("overwrite Lease: %v", err)
	}
	a.clock.Step(leaseDuration + time.Second) // a's view has expired: the slow path reads the Lease
	if a.try(t) {
		t.Fatal("a renewed a Lease that c holds and a had not seen expire")
	}
	if a.le.IsLeader() || a.le.GetLeader() != "c" {
		t.Errorf("a: IsLeader = %v, GetLeader = %q; want false, c", a.le.IsLeader(), a.le.GetLeader())
	}
}

func TestReleaseWritesEmptyHolder(t *testing.T) {
	client := fake.NewClientset()
	a := newCandidate(t, client, "a")
	if !a.try(t) {
		t.Fatal("a did not acquire a free Lease")
	}
	logger, _ := ktesting.NewTestContext(t)
	if !a.le.release(logger) {
		t.Fatal("release failed")
	}
	got := readLease(t, client)
	if got.HolderIdentity != "" || got.LeaseDurationSeconds != 1 || got.LeaderTransitions != 0 {
		t.Errorf("released Lease = %+v; want no holder, 1s, 0 transitions", got)
	}
	if a.le.IsLeader() {
		t.Error("a still leads after releasing")
	}
}

func TestReleaseByNonLeaderLeavesLease(t *testing.T) {
	client := fake.NewClientset(seedLease("a", 0))
	b := newCandidate(t, client, "b")
	logger, _ := ktesting.NewTestContext(t)
	if !b.le.release(logger) {
		t.Fatal("release by a non-leader failed")
	}
	if got := readLease(t, client); got.HolderIdentity != "a" {
		t.Errorf("holder after b's release = %q, want a", got.HolderIdentity)
	}
}

// runConfig is a config for Run: a short retry period, so the loops turn quickly.
func runConfig(client *fake.Clientset, identity string) LeaderElectionConfig {
	lec := testConfig(client, identity)
	lec.RenewDeadline = 200 * time.Millisecond
	lec.RetryPeriod = 10 * time.Millisecond
	return lec
}

func TestRunReleasesOnCancel(t *testing.T) {
	client := fake.NewClientset()
	started, stopped := make(chan struct{}), make(chan struct{})
	lec := runConfig(client, "a")
	lec.ReleaseOnCancel = true
	lec.Callbacks.OnStartedLeading = func(context.Context) { close(started) }
	lec.Callbacks.OnStoppedLeading = func() { close(stopped) }
	le, err := NewLeaderElector(lec)
	if err != nil {
		t.Fatalf("NewLeaderElector: %v", err)
	}
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { le.Run(ctx); close(done) }()

	<-started
	if got := readLease(t, client); got.HolderIdentity != "a" {
		t.Fatalf("holder while leading = %q, want a", got.HolderIdentity)
	}
	cancel()
	<-done
	<-stopped
	if got := readLease(t, client); got.HolderIdentity != "" {
		t.Errorf("holder after Run returned = %q, want none", got.HolderIdentity)
	}
}

func TestRunReportsNewLeaders(t *testing.T) {
	client := fake.NewClientset(seedLease("a", 0))
	leaders := make(chan string, 10)
	lec := runConfig(client, "b")
	lec.Callbacks.OnNewLeader = func(identity string) { leaders <- identity }
	le, err := NewLeaderElector(lec)
	if err != nil {
		t.Fatalf("NewLeaderElector: %v", err)
	}
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { le.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	if got := <-leaders; got != "a" {
		t.Fatalf("first leader reported = %q, want a", got)
	}
	if _, err := client.CoordinationV1().Leases(testNamespace).Update(context.Background(), seedLease("c", 1), metav1.UpdateOptions{}); err != nil {
		t.Fatalf("hand the Lease to c: %v", err)
	}
	if got := <-leaders; got != "c" {
		t.Fatalf("leader reported after the change = %q, want c", got)
	}
}

func TestConfigValidation(t *testing.T) {
	client := fake.NewClientset()
	for name, mutate := range map[string]func(*LeaderElectionConfig){
		"lease duration not above renew deadline": func(c *LeaderElectionConfig) { c.LeaseDuration = c.RenewDeadline },
		"renew deadline within jittered retry":    func(c *LeaderElectionConfig) { c.RetryPeriod = c.RenewDeadline },
		"no OnStartedLeading":                     func(c *LeaderElectionConfig) { c.Callbacks.OnStartedLeading = nil },
		"no OnStoppedLeading":                     func(c *LeaderElectionConfig) { c.Callbacks.OnStoppedLeading = nil },
		"no lock":                                 func(c *LeaderElectionConfig) { c.Lock = nil },
		"empty identity":                          func(c *LeaderElectionConfig) { c.Lock = NewLeaseLock(nil, "ns", "name", "") },
	} {
		t.Run(name, func(t *testing.T) {
			lec := testConfig(client, "a")
			mutate(&lec)
			if _, err := NewLeaderElector(lec); err == nil {
				t.Error("NewLeaderElector accepted the config")
			}
		})
	}
}

func TestHealthzFailsWhenLeaderStopsRenewing(t *testing.T) {
	const timeout = 20 * time.Second
	client := fake.NewClientset()
	adaptor := NewLeaderHealthzAdaptor(timeout)
	req := &http.Request{}
	if err := adaptor.Check(req); err != nil {
		t.Fatalf("Check before any elector: %v", err)
	}
	lec := testConfig(client, "a")
	lec.WatchDog = adaptor
	le, err := NewLeaderElector(lec)
	if err != nil {
		t.Fatalf("NewLeaderElector: %v", err)
	}
	clock := testingclock.NewFakeClock(time.Now())
	le.clock = clock
	_, ctx := ktesting.NewTestContext(t)
	if !le.tryAcquireOrRenew(ctx) {
		t.Fatal("did not acquire a free Lease")
	}

	clock.Step(leaseDuration + timeout)
	if err := adaptor.Check(req); err != nil {
		t.Errorf("Check at the end of the tolerated time: %v", err)
	}
	clock.Step(time.Second)
	if err := adaptor.Check(req); err == nil {
		t.Error("Check passed for a leader that has not renewed past the lease duration plus the timeout")
	}
	if !le.tryAcquireOrRenew(ctx) {
		t.Fatal("did not renew")
	}
	if err := adaptor.Check(req); err != nil {
		t.Errorf("Check after renewing: %v", err)
	}
}

func TestHealthzIgnoresStandby(t *testing.T) {
	client := fake.NewClientset(seedLease("a", 0))
	adaptor := NewLeaderHealthzAdaptor(time.Second)
	lec := testConfig(client, "b")
	lec.WatchDog = adaptor
	le, err := NewLeaderElector(lec)
	if err != nil {
		t.Fatalf("NewLeaderElector: %v", err)
	}
	clock := testingclock.NewFakeClock(time.Now())
	le.clock = clock
	_, ctx := ktesting.NewTestContext(t)
	if le.tryAcquireOrRenew(ctx) {
		t.Fatal("b acquired a Lease held by a")
	}
	clock.Step(time.Hour)
	if err := adaptor.Check(&http.Request{}); err != nil {
		t.Errorf("Check on a standby: %v", err)
	}
}
