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

package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The configuration scrapes each job's targets at the interval, with honor_labels (DCGM
// exporter's namespace and pod are the holder's) and the text format as fallback.
func TestPrometheusConfigScrapesEveryTarget(t *testing.T) {
	config, err := prometheusConfig([]ScrapeTarget{{Job: "dcgm-exporter", Addr: "127.0.0.1:1"}, {Job: "other", Addr: "127.0.0.1:2"},
		{Job: "dcgm-exporter", Addr: "127.0.0.1:3"}}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(config, &got); err != nil {
		t.Fatal(err)
	}
	want := `{"global":{"evaluation_interval":"1s","scrape_interval":"1s"},"scrape_configs":[` +
		`{"fallback_scrape_protocol":"PrometheusText0.0.4","honor_labels":true,"job_name":"dcgm-exporter","scrape_interval":"1s","scrape_timeout":"1s","static_configs":[{"targets":["127.0.0.1:1","127.0.0.1:3"]}]},` +
		`{"fallback_scrape_protocol":"PrometheusText0.0.4","honor_labels":true,"job_name":"other","scrape_interval":"1s","scrape_timeout":"1s","static_configs":[{"targets":["127.0.0.1:2"]}]}]}`
	if compact, _ := json.Marshal(got); string(compact) != want {
		t.Errorf("prometheus.yml:\n%s\nwant:\n%s", compact, want)
	}
}

// writeScripts writes executable shell scripts into a new directory.
func writeScripts(t *testing.T, scripts map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, script := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A start that fails says why: no binaries, promtool refusing the history (with its output),
// Prometheus exiting (with its log).
func TestStartPrometheusFailuresSayWhy(t *testing.T) {
	ctx := context.Background()
	if _, err := StartPrometheus(ctx, PrometheusOptions{BinDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "prometheus not found in TESTBIN_DIR") {
		t.Errorf("without binaries: %v", err)
	}
	t.Setenv(BinDirEnv, "")
	if _, err := StartPrometheus(ctx, PrometheusOptions{}); err == nil || !strings.Contains(err.Error(), "set TESTBIN_DIR") {
		t.Errorf("without TESTBIN_DIR: %v", err)
	}

	bin := writeScripts(t, map[string]string{
		"promtool":   `echo "parse error: expected a timestamp"; exit 1` + "\n",
		"prometheus": `echo "err=\"opening storage failed: lock DB directory: resource temporarily unavailable\""; exit 1` + "\n",
	})
	dir := t.TempDir()
	_, err := StartPrometheus(ctx, PrometheusOptions{BinDir: bin, Dir: dir, History: []byte("x 1\n# EOF\n"), StartTimeout: 10 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "backfill the history with promtool") || !strings.Contains(err.Error(), "expected a timestamp") {
		t.Errorf("promtool failing: %v", err)
	}
	if history, err := os.ReadFile(filepath.Join(dir, "history.om")); err != nil || string(history) != "x 1\n# EOF\n" {
		t.Errorf("history file %q %v", history, err)
	}

	_, err = StartPrometheus(ctx, PrometheusOptions{BinDir: bin, Dir: t.TempDir(), Targets: []ScrapeTarget{{Addr: "127.0.0.1:9"}}, StartTimeout: 10 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "prometheus exited") || !strings.Contains(err.Error(), "lock DB directory") {
		t.Errorf("prometheus exiting: %v", err)
	}

	if _, err := StartPrometheus(ctx, PrometheusOptions{BinDir: bin, Targets: []ScrapeTarget{{Job: "j"}}}); err == nil || !strings.Contains(err.Error(), "has no address") {
		t.Errorf("a target without an address: %v", err)
	}
}

// fakePrometheusAPI answers /api/v1/query for `timestamp(up) * up` with the scrape times
// of scraped (milliseconds; 0: the target is down), telling queried when it has answered,
// and /api/v1/targets with lastError.
func fakePrometheusAPI(scraped *atomic.Int64, lastError string, queried chan<- struct{}) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/query":
			if queried != nil {
				defer func() {
					select {
					case queried <- struct{}{}:
					default:
					}
				}()
			}
			if r.URL.Query().Get("query") != "timestamp(up) * up" {
				fmt.Fprint(w, `{"status":"error","error":"unexpected query"}`)
				return
			}
			fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[`+
				`{"metric":{"job":"dcgm-exporter","instance":"127.0.0.1:9400"},"value":[1700000000,"%.3f"]}]}}`, float64(scraped.Load())/1000)
		case "/api/v1/targets":
			fmt.Fprintf(w, `{"status":"success","data":{"activeTargets":[{"scrapeUrl":"http://127.0.0.1:9400/metrics","lastError":%q}]}}`, lastError)
		default:
			http.NotFound(w, r)
		}
	}))
}

// runningProcess is a process that runs until the test ends, standing in for Prometheus.
func runningProcess(t *testing.T) *process {
	t.Helper()
	p, err := startProcess("/bin/sleep", filepath.Join(t.TempDir(), "log"), "60")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(time.Second) })
	return p
}

// WaitScraped waits for a successful scrape of every target after the time given, as
// Prometheus' up says; when none comes it names the target and its last scrape error.
func TestWaitScrapedWatchesUp(t *testing.T) {
	var scraped atomic.Int64
	since := time.Now()
	scraped.Store(since.Add(-time.Second).UnixMilli())
	queried := make(chan struct{}, 1)
	api := fakePrometheusAPI(&scraped, "", queried)
	defer api.Close()
	p := &Prometheus{URL: api.URL, proc: runningProcess(t),
		opts: PrometheusOptions{Targets: []ScrapeTarget{{Job: DCGMJob, Addr: "127.0.0.1:9400"}}}}

	done := make(chan error, 1)
	go func() { done <- p.WaitScraped(context.Background(), since) }()
	for range 3 { // three answers with the scrape before since
		<-queried
	}
	select {
	case err := <-done:
		t.Fatalf("WaitScraped returned %v before a scrape after %s", err, since)
	default:
	}
	scraped.Store(since.Add(time.Second).UnixMilli())
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	scraped.Store(0)
	down := fakePrometheusAPI(&scraped, "connection refused", nil)
	defer down.Close()
	p.URL = down.URL
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := p.WaitScraped(ctx, since)
	if err == nil || !strings.Contains(err.Error(), "dcgm-exporter/127.0.0.1:9400") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("target down: %v", err)
	}
}
