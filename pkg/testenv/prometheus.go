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
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ScrapeTarget is an endpoint Prometheus scrapes at http://Addr/metrics.
type ScrapeTarget struct {
	Job  string // job label; DCGMJob when empty
	Addr string // host:port, the instance label
}

// PrometheusOptions configure StartPrometheus.
type PrometheusOptions struct {
	// BinDir holds prometheus and promtool. Default: $TESTBIN_DIR.
	BinDir string
	// Dir holds the configuration, the TSDB and the log. Default: a new temporary directory
	// that Stop removes.
	Dir string
	// Targets are scraped every ScrapeInterval (default 1s) with honor_labels, as the GPU
	// Operator's ServiceMonitor scrapes DCGM exporter (its namespace and pod labels are the
	// holder's, not the exporter's).
	Targets        []ScrapeTarget
	ScrapeInterval time.Duration
	// History is OpenMetrics text (WriteDCGMHistory) written into the TSDB by `promtool tsdb
	// create-blocks-from openmetrics` before Prometheus starts.
	History []byte
	// StartTimeout bounds the start, up to the first scrape of every target. Default: 60s.
	StartTimeout time.Duration
}

// Prometheus is a running Prometheus server from the test bed.
type Prometheus struct {
	// URL is the server's base URL, for example http://127.0.0.1:41234.
	URL string
	// Dir holds prometheus.yml, data/ (the TSDB) and prometheus.log.
	Dir string

	binDir    string
	removeDir bool
	port      int
	opts      PrometheusOptions
	proc      *process
}

// StartPrometheus writes the configuration and the history, starts Prometheus and returns
// once it is ready and has scraped every target once, successfully. On failure the error
// carries the tail of Prometheus' log (or promtool's output).
func StartPrometheus(ctx context.Context, opts PrometheusOptions) (*Prometheus, error) {
	p := &Prometheus{binDir: opts.BinDir, Dir: opts.Dir, opts: opts}
	if p.binDir == "" {
		p.binDir = os.Getenv(BinDirEnv)
	}
	if p.binDir == "" {
		return nil, fmt.Errorf("no Prometheus binary: set %s (`make testbin` prints the directory; `make test` sets it)", BinDirEnv)
	}
	for _, bin := range []string{"prometheus", "promtool"} {
		if _, err := os.Stat(filepath.Join(p.binDir, bin)); err != nil {
			return nil, fmt.Errorf("%s not found in %s=%s (run `make testbin`): %w", bin, BinDirEnv, p.binDir, err)
		}
	}
	if p.opts.ScrapeInterval == 0 {
		p.opts.ScrapeInterval = time.Second
	}
	if p.opts.StartTimeout == 0 {
		p.opts.StartTimeout = 60 * time.Second
	}
	for i, t := range p.opts.Targets {
		if t.Addr == "" {
			return nil, fmt.Errorf("scrape target %d has no address", i)
		}
		if t.Job == "" {
			p.opts.Targets[i].Job = DCGMJob
		}
	}
	if err := p.prepare(ctx); err != nil {
		p.Stop()
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			p.Stop()
			return nil, err
		}
		p.port, p.URL = port, "http://127.0.0.1:"+strconv.Itoa(port)
		err = p.StartServer(ctx)
		if err == nil {
			return p, nil
		}
		p.StopServer()
		if attempt == startAttempts || !strings.Contains(err.Error(), "address already in use") {
			p.Stop()
			return nil, err
		}
	}
}

// prepare makes the directory, writes prometheus.yml and backfills the history.
func (p *Prometheus) prepare(ctx context.Context) error {
	if p.Dir == "" {
		dir, err := os.MkdirTemp("", "gpuinv-prometheus-")
		if err != nil {
			return err
		}
		p.Dir, p.removeDir = dir, true
	}
	if err := os.MkdirAll(filepath.Join(p.Dir, "data"), 0o755); err != nil {
		return err
	}
	config, err := prometheusConfig(p.opts.Targets, p.opts.ScrapeInterval)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(p.Dir, "prometheus.yml"), config, 0o644); err != nil {
		return err
	}
	if len(p.opts.History) == 0 {
		return nil
	}
	history := filepath.Join(p.Dir, "history.om")
	if err := os.WriteFile(history, p.opts.History, 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(p.binDir, "promtool"), "tsdb", "create-blocks-from", "openmetrics", "--quiet",
		history, filepath.Join(p.Dir, "data"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("backfill the history with promtool: %w:\n%s", err, out)
	}
	return nil
}

// prometheusConfig is prometheus.yml (JSON, which YAML reads) for the targets: one scrape
// config per job.
func prometheusConfig(targets []ScrapeTarget, interval time.Duration) ([]byte, error) {
	type staticConfig struct {
		Targets []string `json:"targets"`
	}
	type scrapeConfig struct {
		JobName        string         `json:"job_name"`
		ScrapeInterval string         `json:"scrape_interval"`
		ScrapeTimeout  string         `json:"scrape_timeout"`
		HonorLabels    bool           `json:"honor_labels"`
		Fallback       string         `json:"fallback_scrape_protocol"`
		StaticConfigs  []staticConfig `json:"static_configs"`
	}
	var jobs []string
	byJob := map[string][]string{}
	for _, t := range targets {
		if _, ok := byJob[t.Job]; !ok {
			jobs = append(jobs, t.Job)
		}
		byJob[t.Job] = append(byJob[t.Job], t.Addr)
	}
	scrapes := []scrapeConfig{}
	for _, job := range jobs {
		scrapes = append(scrapes, scrapeConfig{JobName: job, ScrapeInterval: interval.String(), ScrapeTimeout: interval.String(),
			HonorLabels: true, Fallback: "PrometheusText0.0.4", StaticConfigs: []staticConfig{{Targets: byJob[job]}}})
	}
	return json.MarshalIndent(map[string]any{
		"global":         map[string]string{"scrape_interval": interval.String(), "evaluation_interval": interval.String()},
		"scrape_configs": scrapes,
	}, "", "  ")
}

// StartServer starts Prometheus (again, after StopServer) on the same port and data, and
// waits until it is ready and has scraped every target once.
func (p *Prometheus) StartServer(ctx context.Context) error {
	if p.proc != nil && p.proc.running() {
		return errors.New("prometheus is already running")
	}
	started := time.Now()
	var err error
	p.proc, err = startProcess(filepath.Join(p.binDir, "prometheus"), filepath.Join(p.Dir, "prometheus.log"),
		"--config.file="+filepath.Join(p.Dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(p.Dir, "data"),
		"--storage.tsdb.retention.time=30d", // keeps a backfilled past of days
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(p.port),
	)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.StartTimeout)
	defer cancel()
	if err := p.waitReady(ctx); err != nil {
		return err
	}
	return p.WaitScraped(ctx, started)
}

// waitReady polls /-/ready until it answers 200.
func (p *Prometheus) waitReady(ctx context.Context) error {
	return p.poll(ctx, func() error {
		code, body, err := p.get(ctx, "/-/ready")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("/-/ready answered %d %s", code, strings.TrimSpace(body))
		}
		return nil
	})
}

// WaitScraped returns once every target has been scraped successfully after the time given
// (Prometheus' own up series says so), failing with the targets' last scrape errors when ctx
// ends first.
func (p *Prometheus) WaitScraped(ctx context.Context, after time.Time) error {
	return p.poll(ctx, func() error {
		samples, err := p.Query(ctx, "timestamp(up) * up")
		if err != nil {
			return err
		}
		scraped := map[ScrapeTarget]bool{}
		for _, s := range samples {
			if s.Value*1000 >= float64(after.UnixMilli()) {
				scraped[ScrapeTarget{Job: s.Labels["job"], Addr: s.Labels["instance"]}] = true
			}
		}
		var missing []string
		for _, t := range p.opts.Targets {
			if !scraped[t] {
				missing = append(missing, t.Job+"/"+t.Addr)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("no successful scrape since %s of %s%s", after.Format(time.RFC3339Nano), strings.Join(missing, ", "), p.targetErrors(ctx))
		}
		return nil
	})
}

// targetErrors returns the targets' last scrape errors as Prometheus reports them.
func (p *Prometheus) targetErrors(ctx context.Context) string {
	_, body, err := p.get(ctx, "/api/v1/targets?state=active")
	if err != nil {
		return ""
	}
	var answer struct {
		Data struct {
			ActiveTargets []struct {
				ScrapeURL string `json:"scrapeUrl"`
				LastError string `json:"lastError"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if json.Unmarshal([]byte(body), &answer) != nil {
		return ""
	}
	var out []string
	for _, t := range answer.Data.ActiveTargets {
		if t.LastError != "" {
			out = append(out, t.ScrapeURL+": "+t.LastError)
		}
	}
	if len(out) == 0 {
		return ""
	}
	return " (last scrape errors: " + strings.Join(out, "; ") + ")"
}

// poll runs check every 100ms until it succeeds, Prometheus exits, or ctx ends; failures
// carry the last check error and the tail of the log.
func (p *Prometheus) poll(ctx context.Context, check func() error) error {
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	var last error
	for {
		err := check()
		if err == nil {
			return nil
		}
		if last == nil || ctx.Err() == nil { // a check cut short by ctx says less than the one before
			last = err
		}
		select {
		case <-p.proc.exited:
			return fmt.Errorf("prometheus exited (%v) before it was ready: %v; last lines of %s:\n%s", p.proc.exitErr, last, p.proc.logPath, p.proc.logTail())
		case <-ctx.Done():
			return fmt.Errorf("prometheus: %v (%v); last lines of %s:\n%s", last, ctx.Err(), p.proc.logPath, p.proc.logTail())
		case <-ticker.C:
		}
	}
}

// Sample is one element of an instant vector.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Query evaluates an instant query now through the HTTP API.
func (p *Prometheus) Query(ctx context.Context, expr string) ([]Sample, error) {
	code, body, err := p.get(ctx, "/api/v1/query?query="+url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	var answer struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil {
		return nil, fmt.Errorf("query %q: answer %d is not JSON: %.200s", expr, code, body)
	}
	if answer.Status != "success" {
		return nil, fmt.Errorf("query %q: %d %s", expr, code, answer.Error)
	}
	if answer.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %q: a %s, not a vector", expr, answer.Data.ResultType)
	}
	out := make([]Sample, 0, len(answer.Data.Result))
	for _, r := range answer.Data.Result {
		text, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return nil, fmt.Errorf("query %q: value %v: %w", expr, r.Value[1], err)
		}
		out = append(out, Sample{Labels: r.Metric, Value: v})
	}
	return out, nil
}

func (p *Prometheus) get(ctx context.Context, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path, nil)
	if err != nil {
		return 0, "", err
	}
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// LogTail returns the last lines of Prometheus' log.
func (p *Prometheus) LogTail() string {
	if p.proc == nil {
		return "(prometheus never started)"
	}
	return p.proc.logTail()
}

// Running says whether the server runs.
func (p *Prometheus) Running() bool { return p.proc != nil && p.proc.running() }

// StopServer stops Prometheus (SIGTERM, SIGKILL after 5 seconds); its data stays, and
// StartServer starts it again on the same URL.
func (p *Prometheus) StopServer() {
	if p.proc != nil {
		p.proc.stop(5 * time.Second)
	}
}

// Stop stops Prometheus and removes the directory StartPrometheus created. It is safe to call
// more than once.
func (p *Prometheus) Stop() {
	p.StopServer()
	if p.removeDir && p.Dir != "" {
		_ = os.RemoveAll(p.Dir)
		p.Dir = ""
	}
}
