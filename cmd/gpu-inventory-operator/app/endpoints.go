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
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// serveEndpoints starts the metrics and health servers (each unless its address is "0" or
// empty) and stops them when ctx is done; the bound addresses are the state's.
func (o *Operator) serveEndpoints(ctx context.Context) error {
	metricsAddr, healthAddr, err := o.listen(ctx)
	if err != nil {
		return err
	}
	o.state.addresses.Store(&[2]string{metricsAddr, healthAddr})
	return nil
}

func (o *Operator) listen(ctx context.Context) (metricsAddr, healthAddr string, err error) {
	if on(o.opts.MetricsAddress) {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(o.metrics.Registry, promhttp.HandlerOpts{}))
		if metricsAddr, err = serve(ctx, o.opts.MetricsAddress, mux); err != nil {
			return "", "", fmt.Errorf("--metrics-bind-address: %w", err)
		}
	}
	if on(o.opts.HealthAddress) {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", o.healthz)
		mux.HandleFunc("/readyz", o.readyz)
		if healthAddr, err = serve(ctx, o.opts.HealthAddress, mux); err != nil {
			return "", "", fmt.Errorf("--health-probe-bind-address: %w", err)
		}
	}
	return metricsAddr, healthAddr, nil
}

func on(addr string) bool { return addr != "" && addr != "0" }

func serve(ctx context.Context, addr string, handler http.Handler) (string, error) {
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	server := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = server.Serve(listener) }()
	context.AfterFunc(ctx, func() { _ = server.Close() })
	return listener.Addr().String(), nil
}

// healthz fails when a leader has not renewed its lease in time (the elector's watchdog).
func (o *Operator) healthz(w http.ResponseWriter, r *http.Request) {
	if o.leaderHealth != nil {
		if err := o.leaderHealth.Check(r); err != nil {
			http.Error(w, "unhealthy: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	fmt.Fprintln(w, "ok")
}

func (o *Operator) readyz(w http.ResponseWriter, _ *http.Request) {
	if why := o.notReady(); why != "" {
		http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// notReady says why the operator is not ready, or "" when it is: a standby is ready (it has
// nothing to sync); a leader, or an instance without leader election, once every
// controller's caches have synced and it has made progress.
func (o *Operator) notReady() string {
	if o.opts.LeaderElect && !o.state.leading.Load() {
		return ""
	}
	cs := o.state.controllers.Load()
	if cs == nil {
		return "controllers not started (CRD install or default inventory pending)"
	}
	for _, c := range *cs {
		if !c.runner.Started() {
			return c.row.waiting
		}
	}
	return ""
}
