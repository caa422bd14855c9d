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

package usage

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/intern"
)

// DCGM exporter's labels the queries keep: what tells one held device from another.
const deviceLabels = "Hostname, UUID, GPU_I_PROFILE, GPU_I_ID, namespace, pod, modelName"

// sourceLabel marks which series a step was read from: p for the profiling one, u for the
// utilisation percent.
const sourceLabel = "usage_source"

// Queries are the PromQL the reader asks. Now is asked at single steps; the others over a
// span ending at the instant asked.
type Queries struct {
	// Now is each device's utilisation at one step: a series per device and source.
	Now string
	// Held and Idle count the span's steps each device was seen, and seen idle; FirstSeen and
	// LastBusy are the first step seen and the last step busy (Unix seconds). Every device
	// seen within the span is answered, held at its end or not.
	Held, Idle, FirstSeen, LastBusy string
	// Present finds any DCGM series at all, asked only when no device is held.
	Present string
}

// QueriesFor writes the queries for the settings, the counts over span (whole minutes).
// Each keeps one series per device.
func QueriesFor(s Settings, span time.Duration) Queries {
	threshold := strconv.FormatFloat(s.IdleBelow, 'g', -1, 64)
	util := fmt.Sprintf(`label_replace(%s{pod!=""}, "%s", "p", "", "") or ignoring(%s) label_replace(%s{pod!=""} / 100, "%s", "u", "", "")`,
		MetricEngineActive, sourceLabel, sourceLabel, MetricGPUUtil, sourceLabel)
	perDevice := fmt.Sprintf("max by (%s, %s) (%s)", deviceLabels, sourceLabel, util)
	window := fmt.Sprintf("[%ds:%ds]", int64(span/time.Second), int64(Step/time.Second))
	return Queries{
		Now:       perDevice,
		Held:      "count_over_time((" + perDevice + ")" + window + ")",
		Idle:      "count_over_time((" + perDevice + " < " + threshold + ")" + window + ")",
		FirstSeen: "min_over_time(timestamp(" + perDevice + ")" + window + ")",
		LastBusy:  "max_over_time(timestamp(" + perDevice + " >= " + threshold + ")" + window + ")",
		Present:   fmt.Sprintf("count(%s) or count(%s)", MetricEngineActive, MetricGPUUtil),
	}
}

// ReaderConfig is how to reach Prometheus.
type ReaderConfig struct {
	URL string
	// BearerTokenFile is read at each query (a rotated token is picked up); CAFile verifies
	// Prometheus' certificate. Both optional.
	BearerTokenFile, CAFile string
	Timeout                 time.Duration
}

// Reader asks Prometheus for the held devices' use over the window. It keeps a ledger of
// each device's figures and asks, at each reading, only what the ledger lacks (ledger.go).
type Reader struct {
	client   api.Client   // builds the URLs
	http     *http.Client // reads the answers as they arrive
	url      string
	timeout  time.Duration
	settings Settings
	strings  intern.Strings
	seed     maphash.Seed
	ledger   ledger
	lastHeld int // the devices the last reading answered
}

// NewReader builds a reader; it asks nothing yet.
func NewReader(c ReaderConfig, s Settings) (*Reader, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read Prometheus CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the Prometheus CA file %s holds no PEM certificate", c.CAFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	var rt http.RoundTripper = transport
	if c.BearerTokenFile != "" {
		rt = bearerFile{file: c.BearerTokenFile, next: transport}
	}
	client, err := api.NewClient(api.Config{Address: c.URL, RoundTripper: rt})
	if err != nil {
		return nil, fmt.Errorf("client for Prometheus at %q: %w", c.URL, err)
	}
	return &Reader{client: client, http: &http.Client{Transport: rt}, url: c.URL, timeout: c.Timeout, settings: s, seed: maphash.MakeSeed()}, nil
}

// bearerFile sends the token in file with each request.
type bearerFile struct {
	file string
	next http.RoundTripper
}

func (b bearerFile) RoundTrip(req *http.Request) (*http.Response, error) {
	token, err := os.ReadFile(b.file)
	if err != nil {
		return nil, fmt.Errorf("read Prometheus bearer token: %w", err)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	return b.next.RoundTrip(req)
}

// noDevices tells an answer of no held device (no Problem) from one of no DCGM series.
func (r *Reader) noDevices(ctx context.Context, at time.Time) Problem {
	found := false
	if p := r.query(ctx, QueriesFor(r.settings, Step).Present, at, func(*seriesLabels, float64) { found = true }); p.Reason != "" {
		return p
	}
	if !found {
		return Problem{homelabv1.ReasonNoDCGMSeries, fmt.Sprintf("Prometheus at %s has no %s or %s series: is DCGM exporter scraped?", r.url, MetricEngineActive, MetricGPUUtil)}
	}
	return Problem{}
}

// query asks one instant query that must answer a vector, and calls each with its series.
func (r *Reader) query(ctx context.Context, query string, at time.Time, each func(*seriesLabels, float64)) Problem {
	u := r.client.URL("/api/v1/query", nil)
	params := url.Values{"query": {query}, "time": {strconv.FormatInt(at.Unix(), 10)}}
	if r.timeout > 0 {
		params.Set("timeout", r.timeout.String())
	}
	u.RawQuery = params.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Problem{homelabv1.ReasonPrometheusError, fmt.Sprintf("Prometheus at %s: %v", r.url, err)}
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return r.unreachable(err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16)) // the connection is kept
		_ = resp.Body.Close()
	}()
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		errorType, message := errorAnswer(resp.StatusCode, body)
		if errorType == promv1.ErrTimeout {
			return r.unreachable(context.DeadlineExceeded)
		}
		return Problem{homelabv1.ReasonPrometheusError, fmt.Sprintf("Prometheus at %s answered an error: %s", r.url, cut(message, 512))}
	}
	if err := decodeVector(resp.Body, each); err != nil {
		if ctx.Err() != nil {
			return r.unreachable(ctx.Err())
		}
		return Problem{homelabv1.ReasonPrometheusError, fmt.Sprintf("Prometheus at %s answered an error: not Prometheus' answer of an instant vector: %s", r.url, cut(err.Error(), 256))}
	}
	return Problem{}
}

// unreachable is the problem of no answer: none in time, or none at all.
func (r *Reader) unreachable(err error) Problem {
	if errors.Is(err, context.DeadlineExceeded) {
		return Problem{homelabv1.ReasonPrometheusUnreachable, fmt.Sprintf("Prometheus at %s did not answer within %s", r.url, r.timeout)}
	}
	return Problem{homelabv1.ReasonPrometheusUnreachable, fmt.Sprintf("Prometheus at %s is unreachable: %s", r.url, cut(err.Error(), 512))}
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// device is a held device of a series' labels, its repeated strings interned.
func (r *Reader) device(m *seriesLabels) Device {
	return Device{
		Node: r.strings.Intern(m.Hostname), Namespace: r.strings.Intern(m.Name), Pod: m.Pod, UUID: m.UUID,
		Profile: r.strings.Intern(m.Profile), Instance: r.strings.Intern(m.Instance), Model: r.strings.Intern(m.Model),
		Profiling: m.Source != "u",
	}
}
