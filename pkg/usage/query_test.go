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
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// series is one answer row: the labels the queries keep, and a value.
type series struct {
	labels map[string]string
	value  float64
}

// dcgm are the labels DCGM exporter's series of a held GPU keep through the queries.
func dcgm(node, ns, pod, gpu, source string) map[string]string {
	return map[string]string{"Hostname": node, "UUID": gpu, "modelName": h100, "namespace": ns, "pod": pod, sourceLabel: source}
}

// fakePrometheus answers the reader's queries from history when set (history.go's shapes),
// else from answers by query (a query missing there answers no series); it records the
// requests' queries and Authorization headers.
type fakePrometheus struct {
	answers map[string][]series
	history *history
	auth    []string
	asked   []asked
	down    bool
}

// asked is a query and the instant it was asked at.
type asked struct {
	query string
	at    int64
}

func (f *fakePrometheus) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/query" {
		http.NotFound(w, r)
		return
	}
	if f.down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	_ = r.ParseForm()
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	at, _ := strconv.ParseInt(r.Form.Get("time"), 10, 64)
	f.asked = append(f.asked, asked{r.Form.Get("query"), at})
	type sample struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	}
	answer := f.answers[r.Form.Get("query")]
	if f.history != nil {
		answer = f.history.answer(r.Form.Get("query"), at)
	}
	result := []sample{}
	for _, s := range answer {
		result = append(result, sample{Metric: s.labels, Value: [2]any{float64(at), fmt.Sprint(s.value)}})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": result}})
}

func newReader(t *testing.T, url string, timeout time.Duration) *Reader {
	t.Helper()
	r, err := NewReader(ReaderConfig{URL: url, Timeout: timeout}, settings)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A GPU both series report is read from the profiling one; each figure lands on the device
// it names.
func TestReaderPrefersProfiling(t *testing.T) {
	busy := t0.Add(-time.Hour).Unix()
	day := t0.Add(-48 * time.Hour)
	h := &history{series: []histSeries{
		held(dcgm("gpu-a", "ml", "nb", "GPU-1", "p"), day, t0, func(t int64) float64 { return ifBefore(t, busy, 0.7, 0.01) }),
		held(dcgm("gpu-a", "ml", "nb", "GPU-1", "u"), day, t0, func(int64) float64 { return 0.02 }),
		held(dcgm("gpu-b", "ml", "t4", "GPU-2", "u"), t0.Add(-600*time.Minute+Step), t0, func(int64) float64 { return 0.5 }),
	}}
	server := httptest.NewServer(&fakePrometheus{history: h})
	defer server.Close()
	devices, problem := readWhole(t, newReader(t, server.URL, time.Second), t0)
	if problem.Reason != "" || len(devices) != 2 {
		t.Fatalf("Read = %+v, %+v; want 2 devices, no problem", devices, problem)
	}
	nb := devices[0]
	if !nb.Profiling || nb.HeldSteps != 1440 || nb.IdleSteps != 60 || nb.LastBusy != busy || nb.Node != "gpu-a" || nb.Model != h100 {
		t.Errorf("GPU-1 = %+v; want the profiling series' figures (held 1440, idle 60, busy an hour ago)", nb)
	}
	if devices[1].Profiling || devices[1].HeldSteps != 600 {
		t.Errorf("GPU-2 = %+v; want read from DCGM_FI_DEV_GPU_UTIL, held 600", devices[1])
	}
}

// held is a series of S present from from to to (whole minutes).
func held(labels map[string]string, from, to time.Time, util func(t int64) float64) histSeries {
	return histSeries{labels: labels, from: from.Truncate(Step).Unix(), to: to.Truncate(Step).Unix(), util: util}
}

// ifBefore is before when t < at (busy until at, inclusive: t <= at), else after.
func ifBefore(t, at int64, before, after float64) float64 {
	if t <= at {
		return before
	}
	return after
}

// readWhole reads at at until the reader's figures cover the window (a new reader reads the
// window's past a chunk a reading).
func readWhole(t *testing.T, r *Reader, at time.Time) ([]Device, Problem) {
	t.Helper()
	for range int(settings.Window/Chunk) + 1 {
		devices, p := r.Read(t.Context(), at)
		if p.Reason != "" || r.Covered() == settings.Window {
			return devices, p
		}
	}
	t.Fatalf("the reader covers %s of the window after %d readings", r.Covered(), int(settings.Window/Chunk)+1)
	return nil, Problem{}
}

// What goes wrong with Prometheus is a Problem naming it.
func TestReaderProblems(t *testing.T) {
	errorAnswer := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"status":"error","errorType":"bad_data","error":"parse error: unexpected <by>"}`))
	})
	notPrometheus := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("<html>Grafana</html>"))
	})
	slow := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm() // the query is read: the server sees the client go
		<-r.Context().Done()
	})
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, tc := range []struct {
		name, url    string
		handler      http.Handler
		reason, says string
	}{
		{name: "error answer", handler: errorAnswer, reason: homelabv1.ReasonPrometheusError, says: "parse error"},
		{name: "not Prometheus", handler: notPrometheus, reason: homelabv1.ReasonPrometheusError, says: "answered an error"},
		{name: "slow", handler: slow, reason: homelabv1.ReasonPrometheusUnreachable, says: "did not answer within 100ms"},
		{name: "down", url: closed.URL, reason: homelabv1.ReasonPrometheusUnreachable, says: "unreachable"},
		{name: "no DCGM series", handler: &fakePrometheus{}, reason: homelabv1.ReasonNoDCGMSeries, says: "DCGM_FI_DEV_GPU_UTIL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.url
			if tc.handler != nil {
				server := httptest.NewServer(tc.handler)
				t.Cleanup(server.Close)
				t.Cleanup(server.CloseClientConnections) // ends the slow answer, before Close waits for it
				url = server.URL
			}
			devices, p := newReader(t, url, 100*time.Millisecond).Read(t.Context(), t0)
			if p.Reason != tc.reason || !strings.Contains(p.Message, tc.says) || !strings.Contains(p.Message, url) || devices != nil {
				t.Errorf("problem = %+v; want %s naming %s and saying %q", p, tc.reason, url, tc.says)
			}
		})
	}
}

// DCGM series but no GPU held: no devices and no problem.
func TestReaderNothingHeld(t *testing.T) {
	f := &fakePrometheus{answers: map[string][]series{QueriesFor(settings, Step).Present: {{map[string]string{}, 8}}}}
	server := httptest.NewServer(f)
	defer server.Close()
	devices, p := newReader(t, server.URL, time.Second).Read(t.Context(), t0)
	if len(devices) != 0 || p.Reason != "" {
		t.Errorf("Read = %v, %+v; want nothing, no problem", devices, p)
	}
}

// The bearer token is read from its file at each query.
func TestReaderSendsTheBearerToken(t *testing.T) {
	f := &fakePrometheus{}
	server := httptest.NewServer(f)
	defer server.Close()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(ReaderConfig{URL: server.URL, BearerTokenFile: file, Timeout: time.Second}, settings)
	if err != nil {
		t.Fatal(err)
	}
	r.Read(t.Context(), t0)
	if len(f.auth) == 0 || f.auth[0] != "Bearer s3cret" {
		t.Errorf("Authorization headers %q; want Bearer s3cret", f.auth)
	}
	if _, err := NewReader(ReaderConfig{URL: server.URL, CAFile: file}, settings); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a CA file without a certificate: %v; want an error saying so", err)
	}
}

// The queries keep one series per device: every one aggregates by the device's labels.
func TestQueriesAreBoundedPerDevice(t *testing.T) {
	q := QueriesFor(settings, Chunk)
	for _, query := range []string{q.Now, q.Held, q.Idle, q.FirstSeen, q.LastBusy} {
		if !strings.Contains(query, "max by ("+deviceLabels+", "+sourceLabel+")") ||
			!strings.Contains(query, MetricEngineActive) || !strings.Contains(query, MetricGPUUtil+`{pod!=""} / 100`) {
			t.Errorf("query %s: want both series, by device", query)
		}
	}
	for _, query := range []string{q.Held, q.Idle, q.FirstSeen, q.LastBusy} {
		if !strings.Contains(query, "[1800s:60s]") {
			t.Errorf("query %s: want a 30m span at 1m steps", query)
		}
	}
	if !strings.Contains(q.Idle, "< 0.05") || !strings.Contains(q.LastBusy, ">= 0.05") {
		t.Errorf("idle below 0.05: %s / %s", q.Idle, q.LastBusy)
	}
}
