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

package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/leaderelection"
)

// Instance is one running instance of a daemon, as far as the shared parts go: its
// leader-election identity and watchdog, whether it leads, and where its endpoints listen.
// NewInstance sets its fields; what a run changes is atomic.
type Instance struct {
	opts     *Options
	identity string
	// health is the elector's watchdog; nil without leader election.
	health *leaderelection.HealthzAdaptor
	// leader is the daemon's gauge that is 1 while it leads (or runs without leader election).
	leader    prometheus.Gauge
	leading   atomic.Bool
	addresses atomic.Pointer[[2]string] // metrics, health
}

// NewInstance makes an instance of a daemon with these options, whose leader gauge is leader.
func NewInstance(opts *Options, leader prometheus.Gauge) *Instance {
	hostname, _ := os.Hostname()
	i := &Instance{opts: opts, identity: hostname + "_" + string(uuid.NewUUID()), leader: leader}
	if opts.LeaderElect {
		i.health = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	}
	return i
}

// Identity is this instance's leader-election identity.
func (i *Instance) Identity() string { return i.identity }

// MetricsAddress and HealthAddress are the bound addresses ("" when off or not started).
func (i *Instance) MetricsAddress() string { return i.address(0) }
func (i *Instance) HealthAddress() string  { return i.address(1) }

func (i *Instance) address(n int) string {
	if a := i.addresses.Load(); a != nil {
		return a[n]
	}
	return ""
}

// Lead runs work until ctx is cancelled: with leader election only while this instance holds
// the Lease namespace/--leader-election-id (through leases), without it at once. With leader
// election nothing of work runs before the lease is held, and losing it is an error (the
// process should exit). A stop asked for while work starts (a request cancelled by ctx) is
// no error.
func (i *Instance) Lead(ctx context.Context, leases leaderelection.LeaseClient, namespace string, work func(context.Context) error) error {
	var err error
	if i.opts.LeaderElect {
		lock := leaderelection.NewLeaseLock(leases, namespace, i.opts.LeaderElectionID, i.identity)
		err = leaderelection.Lead(ctx, leaderelection.LeaderElectionConfig{Lock: lock, LeaseDuration: i.opts.LeaseDuration,
			RenewDeadline: i.opts.RenewDeadline, RetryPeriod: i.opts.RetryPeriod, Name: i.opts.LeaderElectionID, WatchDog: i.health},
			leaderelection.Leading{Run: work, Changed: i.setLeading})
	} else {
		i.setLeading(true)
		err = work(ctx)
		i.setLeading(false)
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func (i *Instance) setLeading(leading bool) {
	i.leading.Store(leading)
	if leading {
		i.leader.Set(1)
	} else {
		i.leader.Set(0)
	}
}

// Serve starts the metrics server (metrics on /metrics) and the health server (/healthz,
// /readyz), each unless its address is "0" or empty, until ctx is done. /readyz says
// notReady's reason while it has one, except on a standby, which has nothing to sync and is
// ready.
func (i *Instance) Serve(ctx context.Context, metrics prometheus.Gatherer, notReady func() string) error {
	var addrs [2]string
	var err error
	if on(i.opts.MetricsAddress) {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{}))
		if addrs[0], err = serve(ctx, i.opts.MetricsAddress, mux); err != nil {
			return fmt.Errorf("--metrics-bind-address: %w", err)
		}
	}
	if on(i.opts.HealthAddress) {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", i.healthz)
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if why := i.notReady(notReady); why != "" {
				http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ok")
		})
		if addrs[1], err = serve(ctx, i.opts.HealthAddress, mux); err != nil {
			return fmt.Errorf("--health-probe-bind-address: %w", err)
		}
	}
	i.addresses.Store(&addrs)
	return nil
}

func on(addr string) bool { return addr != "" && addr != "0" }

// healthz fails when a leader has not renewed its lease in time (the elector's watchdog).
func (i *Instance) healthz(w http.ResponseWriter, r *http.Request) {
	if i.health != nil {
		if err := i.health.Check(r); err != nil {
			http.Error(w, "unhealthy: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	fmt.Fprintln(w, "ok")
}

// notReady is the daemon's reason, or "" on a standby.
func (i *Instance) notReady(daemon func() string) string {
	if i.opts.LeaderElect && !i.leading.Load() {
		return ""
	}
	return daemon()
}
