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
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func newTestInstance(t *testing.T, leaderElect bool) (*Instance, prometheus.Gauge) {
	t.Helper()
	opts := NewOptions("test")
	opts.MetricsAddress, opts.HealthAddress, opts.LeaderElect = "127.0.0.1:0", "127.0.0.1:0", leaderElect
	leader := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_leader"})
	return NewInstance(&opts, leader), leader
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, strings.TrimSpace(string(body))
}

// /readyz says the daemon's reason, except on a standby, which has nothing to sync; /healthz
// is ok; /metrics serves the daemon's registry.
func TestServe(t *testing.T) {
	for _, tc := range []struct {
		name        string
		leaderElect bool
		leading     bool
		want        int
	}{
		{"without leader election", false, false, http.StatusServiceUnavailable},
		{"a standby", true, false, http.StatusOK},
		{"a leader", true, true, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i, leader := newTestInstance(t, tc.leaderElect)
			registry := prometheus.NewRegistry()
			registry.MustRegister(leader)
			if err := i.Serve(t.Context(), registry, func() string { return "caches not synced" }); err != nil {
				t.Fatal(err)
			}
			i.setLeading(tc.leading)
			code, body := get(t, "http://"+i.HealthAddress()+"/readyz")
			if code != tc.want || code != http.StatusOK && body != "not ready: caches not synced" {
				t.Errorf("/readyz = %d %q, want %d", code, body, tc.want)
			}
			if code, body := get(t, "http://"+i.HealthAddress()+"/healthz"); code != http.StatusOK || body != "ok" {
				t.Errorf("/healthz = %d %q, want 200 ok", code, body)
			}
			if code, body := get(t, "http://"+i.MetricsAddress()+"/metrics"); code != http.StatusOK || !strings.Contains(body, "test_leader") {
				t.Errorf("/metrics = %d %q, want the registry's metrics", code, body)
			}
		})
	}
}

// An address of "0" serves nothing and reports no address.
func TestServeOff(t *testing.T) {
	i, _ := newTestInstance(t, false)
	i.opts.MetricsAddress, i.opts.HealthAddress = "0", ""
	if err := i.Serve(t.Context(), prometheus.NewRegistry(), func() string { return "" }); err != nil {
		t.Fatal(err)
	}
	if i.MetricsAddress() != "" || i.HealthAddress() != "" {
		t.Errorf("addresses %q and %q, want none", i.MetricsAddress(), i.HealthAddress())
	}
}

// Without leader election the work runs at once as the leader; a work cancelled by the stop
// is no error, any other error is returned.
func TestLeadWithoutElection(t *testing.T) {
	i, leader := newTestInstance(t, false)
	ctx, cancel := context.WithCancel(t.Context())
	err := i.Lead(ctx, nil, "default", func(ctx context.Context) error {
		if got := testutil.ToFloat64(leader); got != 1 {
			t.Errorf("leader gauge %v while working, want 1", got)
		}
		cancel()
		<-ctx.Done()
		return ctx.Err()
	})
	if err != nil {
		t.Errorf("Lead = %v after a stop, want nil", err)
	}
	if got := testutil.ToFloat64(leader); got != 0 {
		t.Errorf("leader gauge %v after the work, want 0", got)
	}
	failed := errors.New("controller failed")
	if err := i.Lead(t.Context(), nil, "default", func(context.Context) error { return failed }); !errors.Is(err, failed) {
		t.Errorf("Lead = %v, want the work's error", err)
	}
}
