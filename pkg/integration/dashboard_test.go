//go:build integration

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

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// dcgmH100 is DCGM exporter's modelName of an H100.
const dcgmH100 = "NVIDIA H100 80GB HBM3"

// dashboardTarget is a query of a panel of the shipped dashboard.
type dashboardTarget struct {
	Panel, RefID, Expr string
}

// dashboardTargets reads every panel query of manifests/monitoring/dashboard/gpu-inventory.json.
func dashboardTargets(t *testing.T) []dashboardTarget {
	t.Helper()
	data, err := os.ReadFile("../../manifests/monitoring/dashboard/gpu-inventory.json")
	if err != nil {
		t.Fatal(err)
	}
	var board struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &board); err != nil {
		t.Fatal(err)
	}
	var out []dashboardTarget
	for _, p := range board.Panels {
		for _, q := range p.Targets {
			out = append(out, dashboardTarget{Panel: p.Title, RefID: q.RefID, Expr: q.Expr})
		}
	}
	return out
}

// serveOperatorMetrics serves m's /metrics on a loopback port until the test ends.
func serveOperatorMetrics(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// dashboardFleet is what the operator exports for the inventory "cluster" in this test: H100s
// fragmented (10 free, at most 4 on a node, spec.fragmentationGpus 8), L4s not, waiting pods
// for the H100 and for any model, an overcommitted cohort, a not-Ready node, GPUs held idle
// in two namespaces.
func dashboardFleet(now time.Time) metrics.Content {
	return metrics.Content{
		GPUNodes: 5, ReadyGPUNodes: 4, GPUs: 36, ReadyGPUs: 28, UnhealthyGPUs: 1, LabelsMissingNodes: 1,
		Models: []metrics.ModelContent{
			{Product: "NVIDIA-H100-80GB-HBM3", GPUs: 32, ReadyGPUs: 24, Allocated: 13, Free: 10, LargestFit: 4},
			{Product: "NVIDIA-L4", GPUs: 4, ReadyGPUs: 4, Allocated: 0, Free: 4, LargestFit: 4},
		},
		ConditionNodes:    []metrics.Count{{Name: "NotReady", Value: 1}, {Name: "XIDError", Value: 1}},
		Allocation:        true,
		Pending:           []metrics.Pending{{Product: "", GPUs: 2, Since: now.Add(-time.Hour).Unix()}, {Product: "NVIDIA-H100-80GB-HBM3", GPUs: 8}},
		Namespaces:        []metrics.Count{{Name: "ml", Value: 13}},
		NotReadyNodes:     []string{"gpu-4"},
		FragmentationGPUs: 8,
		Quota: &metrics.QuotaContent{
			Models:  []metrics.QuotaRow{{Model: "NVIDIA-H100-80GB-HBM3", Resource: "nvidia.com/gpu", Capacity: 32, Ready: 24, Free: 10, Nominal: 40, Reserved: 13, Used: 13, Pending: 2}},
			Cohorts: []metrics.QuotaRow{{Cohort: "research", Model: "NVIDIA-H100-80GB-HBM3", Resource: "nvidia.com/gpu", Ready: 24, Nominal: 40, Finding: "Overcommitted"}},
		},
		Usage: &metrics.UsageContent{Rows: []metrics.UsageRow{
			{Namespace: "ml", Model: "NVIDIA-H100-80GB-HBM3", Held: 8, Idle: 2, HeldHours: 192, IdleHours: 60},
			{Namespace: "ml", Model: "NVIDIA-L4", Held: 1, Idle: 1, HeldHours: 24, IdleHours: 24},
			{Namespace: "notebooks", Model: "NVIDIA-H100-80GB-HBM3", Held: 5, HeldHours: 100, IdleHours: 3},
		}},
	}
}

// Every query of the shipped dashboard runs on a real Prometheus scraping the operator's
// metrics and a DCGM exporter: each parses and evaluates, each on series the operator
// exported gives figures, and the panels show what the fleet is.
func TestDashboardQueriesOnRealPrometheus(t *testing.T) {
	now := time.Now()
	m := metrics.New()
	m.SetContent("cluster", dashboardFleet(now))
	m.LastSuccessfulSync.WithLabelValues("cluster").Set(float64(now.Add(-time.Minute).Unix()))
	m.SetContent("pool", metrics.Content{GPUNodes: 1, GPUs: 99, Models: []metrics.ModelContent{{Product: "Tesla-T4", GPUs: 99}}})
	operator := serveOperatorMetrics(t, m)
	dcgm, err := testenv.StartDCGMExporter(
		testenv.DCGMGPU{Node: "gpu-0", Index: 0, UUID: "GPU-00000000-0000-0000-0000-000000000000", Model: dcgmH100, Util: 0.9},
		testenv.DCGMGPU{Node: "gpu-0", Index: 1, UUID: "GPU-00000000-0000-0000-0000-000000000001", Model: dcgmH100, Util: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dcgm.Close() })
	p, err := testenv.StartPrometheus(testContext(t), testenv.PrometheusOptions{Targets: []testenv.ScrapeTarget{
		{Job: "gpu-inventory-operator", Addr: operator}, {Addr: dcgm.Addr()}}})
	if err != nil {
		t.Fatalf("start Prometheus: %v", err)
	}
	t.Cleanup(p.Stop)

	scraped := map[string]bool{}
	for _, s := range queryAll(t, p, `count by (__name__) ({__name__=~"gpu_inventory_.+|DCGM_.+"})`) {
		scraped[s.Labels["__name__"]] = true
	}
	series := regexp.MustCompile(`\b(gpu_inventory_[a-z_]+|DCGM_[A-Z_]+)\b`)
	results := map[string][]testenv.Sample{}
	for _, q := range dashboardTargets(t) {
		samples, err := p.Query(context.Background(), strings.ReplaceAll(q.Expr, "$inventory", "cluster"))
		if err != nil {
			t.Errorf("panel %q query %s: %v", q.Panel, q.RefID, err)
			continue
		}
		results[q.Panel+"/"+q.RefID] = samples
		for _, name := range series.FindAllString(q.Expr, -1) {
			if !scraped[name] {
				t.Errorf("panel %q query %s reads %s, which Prometheus did not scrape", q.Panel, q.RefID, name)
			}
		}
		if len(samples) == 0 && !strings.Contains(q.Expr, "> 0") { // a filter may leave nothing
			t.Errorf("panel %q query %s gives nothing: %s", q.Panel, q.RefID, q.Expr)
		}
	}
	if len(results) < 30 {
		t.Fatalf("ran %d queries of the dashboard, want its 30 and more", len(results))
	}
	checkDashboardFigures(t, results)
}

func queryAll(t *testing.T, p *testenv.Prometheus, expr string) []testenv.Sample {
	t.Helper()
	samples, err := p.Query(context.Background(), expr)
	if err != nil {
		t.Fatal(err)
	}
	return samples
}

// checkDashboardFigures compares panels' figures with dashboardFleet: by panel/refId, the
// value for each value of the labels of key, comma-separated (one sample for "").
func checkDashboardFigures(t *testing.T, results map[string][]testenv.Sample) {
	t.Helper()
	for _, tc := range []struct {
		query, key string
		want       map[string]float64
	}{
		{"GPUs/A", "", map[string]float64{"": 36}},
		{"Free GPUs/A", "", map[string]float64{"": 14}},
		{"Pending GPUs/A", "", map[string]float64{"": 10}},
		{"GPUs per model/A", "product", map[string]float64{"NVIDIA-H100-80GB-HBM3": 32, "NVIDIA-L4": 4}},
		{"GPUs per model/B", "product", map[string]float64{"NVIDIA-H100-80GB-HBM3": 24, "NVIDIA-L4": 4}},
		{"GPUs per model/E", "product", map[string]float64{"NVIDIA-H100-80GB-HBM3": 8}},
		{"Pending GPUs per requested model/A", "product", map[string]float64{"NVIDIA-H100-80GB-HBM3": 8, "any model": 2}},
		{"Largest job that fits on one node, per model/A", "product", map[string]float64{"NVIDIA-H100-80GB-HBM3": 4, "NVIDIA-L4": 4}},
		{"Largest job that fits on one node, per model/B", "", map[string]float64{"": 8}},
		{"Fragmented models/C", "product", map[string]float64{"NVIDIA-H100-80GB-HBM3": 10}},
		{"Quota findings/A", "finding", map[string]float64{"Overcommitted": 1}},
		{"Nominal quota against Ready and free GPUs, per model/A", "model", map[string]float64{"NVIDIA-H100-80GB-HBM3": 40}},
		{"Idle GPU-hours per namespace/A", "namespace", map[string]float64{"ml": 84, "notebooks": 3}},
		{"GPUs held idle per namespace/A", "namespace", map[string]float64{"ml": 3, "notebooks": 0}},
		{"Held and idle per namespace and model/D", "namespace,model", map[string]float64{"ml/NVIDIA-H100-80GB-HBM3": 60, "ml/NVIDIA-L4": 24, "notebooks/NVIDIA-H100-80GB-HBM3": 3}},
		{"Usage unknown/A", "", map[string]float64{"": 0}},
		{"GPU utilisation per model (DCGM exporter)/A", "modelName", map[string]float64{dcgmH100: 50}},
		{"GPU nodes by condition/A", "condition", map[string]float64{"NotReady": 1, "XIDError": 1}},
		{"Not Ready GPU nodes, by name/A", "node", map[string]float64{"gpu-4": 1}},
	} {
		samples, ok := results[tc.query]
		if !ok {
			t.Errorf("no query %s in the dashboard", tc.query)
			continue
		}
		got := map[string]float64{}
		for _, s := range samples {
			var key []string
			for _, label := range strings.Split(tc.key, ",") {
				key = append(key, s.Labels[label])
			}
			got[strings.Join(key, "/")] = s.Value
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s shows %v, want %v", tc.query, got, tc.want)
		}
	}
	for query, want := range map[string]float64{"Oldest GPU pod waiting/A": 3600, "Since the last successful sync/A": 60} {
		if got := results[query]; len(got) != 1 || got[0].Value < want || got[0].Value > want+120 {
			t.Errorf("%s shows %v, want %v s and the test's duration", query, got, want)
		}
	}
}
