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
// empty) and stops them when ctx is done.
func (h *Hub) serveEndpoints(ctx context.Context) error {
	var addrs [2]string
	var err error
	if on(h.opts.MetricsAddress) {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(h.metrics.Registry, promhttp.HandlerOpts{}))
		if addrs[0], err = serve(ctx, h.opts.MetricsAddress, mux); err != nil {
			return fmt.Errorf("--metrics-bind-address: %w", err)
		}
	}
	if on(h.opts.HealthAddress) {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", h.healthz)
		mux.HandleFunc("/readyz", h.readyz)
		if addrs[1], err = serve(ctx, h.opts.HealthAddress, mux); err != nil {
			return fmt.Errorf("--health-probe-bind-address: %w", err)
		}
	}
	h.state.addresses.Store(&addrs)
	return nil
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
func (h *Hub) healthz(w http.ResponseWriter, r *http.Request) {
	if h.leaderHealth != nil {
		if err := h.leaderHealth.Check(r); err != nil {
			http.Error(w, "unhealthy: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	fmt.Fprintln(w, "ok")
}

func (h *Hub) readyz(w http.ResponseWriter, _ *http.Request) {
	if why := h.notReady(); why != "" {
		http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}
