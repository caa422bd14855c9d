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
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"
	"unsafe"
)

// fleet is a large cluster's answer: 20,000 holders of two GPUs each on 5,000 nodes, in 200
// namespaces, one in four idle for six hours.
func fleet() ([]Device, holders) {
	const pods, perPod, nodes = 20000, 2, 5000
	devices := make([]Device, 0, pods*perPod)
	known := holders{}
	namespaces := make([]string, 200)
	for i := range namespaces {
		namespaces[i] = fmt.Sprintf("team-%03d", i)
	}
	nodeNames := make([]string, nodes)
	for i := range nodeNames {
		nodeNames[i] = fmt.Sprintf("gpu-node-%04d", i)
	}
	for p := range pods {
		ns, node, pod := namespaces[p%len(namespaces)], nodeNames[p%nodes], fmt.Sprintf("job-%05d-worker", p)
		known[[3]string{ns, pod, node}] = pod
		idle := time.Duration(0)
		if p%4 == 0 {
			idle = 6 * time.Hour
		}
		for g := range perPod {
			devices = append(devices, device(node, ns, pod, fmt.Sprintf("GPU-%08x-%d", p, g), idle))
		}
	}
	return devices, known
}

// BenchmarkCompute is one refresh at that size: the holders, the digest that decides a
// change, and one inventory's status; snapshot-bytes is what a snapshot keeps.
func BenchmarkCompute(b *testing.B) {
	devices, known := fleet()
	prev := &Snapshot{At: t0, Settings: settings, Holders: Compute(devices, known, settings, t0, nil)}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		s := &Snapshot{At: t0, Settings: settings, Holders: Compute(devices, known, settings, t0, prev)}
		_ = s.Digest()
		_ = Summarize(s, all)
	}
	b.ReportMetric(float64(snapshotBytes(prev)), "snapshot-bytes")
}

// snapshotBytes is what a snapshot keeps: its holders (their strings are the holders' and
// the interned ones, one copy for all).
func snapshotBytes(s *Snapshot) uintptr {
	return uintptr(cap(s.Holders)) * unsafe.Sizeof(Holder{})
}

// BenchmarkRead is one reading of that fleet's 40,000 devices from a fake Prometheus, the
// window's past read: the step entering the window and the one leaving it, two answers of
// 40,000 series each, decoded and added to the ledger (what a reading allocates and drops).
// ledger-bytes is what the ledger keeps.
func BenchmarkRead(b *testing.B) {
	devices, _ := fleet()
	q := QueriesFor(settings, Step)
	answer := make([]series, len(devices))
	for i, d := range devices {
		answer[i] = series{dcgm(d.Node, d.Namespace, d.Pod, d.UUID, "p"), 0.5}
	}
	f := &fakePrometheus{answers: map[string][]series{q.Now: answer}}
	rec := httptest.NewRecorder()
	f.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/query?query="+url.QueryEscape(q.Now), nil))
	body := rec.Body.Bytes() // encoded once: the reader's allocations are measured, not the fake's
	empty := []byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("query") == q.Now {
			_, _ = w.Write(body)
			return
		}
		_, _ = w.Write(empty)
	}))
	defer server.Close()
	r, err := NewReader(ReaderConfig{URL: server.URL, Timeout: time.Minute}, settings)
	if err != nil {
		b.Fatal(err)
	}
	at := t0
	for r.Covered() < settings.Window {
		r.Read(b.Context(), at)
	}
	b.ReportAllocs()
	for b.Loop() {
		at = at.Add(Step)
		if got, p := r.Read(b.Context(), at); len(got) != len(devices) || p.Reason != "" {
			b.Fatalf("read %d devices (%+v), want %d", len(got), p, len(devices))
		}
	}
	b.ReportMetric(float64(cap(r.ledger.tallies))*float64(unsafe.Sizeof(entry{})), "ledger-bytes")
}
