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
	"bytes"
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// h100Model is the modelName DCGM exporter reports for an H100 SXM.
const h100Model = "NVIDIA H100 80GB HBM3"

// startDCGM serves gpus as DCGM exporter until the test ends.
func startDCGM(t *testing.T, gpus ...testenv.DCGMGPU) *testenv.DCGMExporter {
	t.Helper()
	x, err := testenv.StartDCGMExporter(gpus...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	return x
}

// startPrometheus runs the test bed's Prometheus scraping x every second, with x's devices'
// past written first as h says, until the test ends.
func startPrometheus(t *testing.T, x *testenv.DCGMExporter, h *testenv.DCGMHistory) *testenv.Prometheus {
	t.Helper()
	opts := testenv.PrometheusOptions{Targets: []testenv.ScrapeTarget{{Addr: x.Addr()}}}
	if h != nil {
		var history bytes.Buffer
		if err := x.WriteHistory(&history, *h); err != nil {
			t.Fatal(err)
		}
		opts.History = history.Bytes()
	}
	p, err := testenv.StartPrometheus(testContext(t), opts)
	if err != nil {
		t.Fatalf("start Prometheus: %v", err)
	}
	t.Cleanup(p.Stop)
	return p
}

// queryOne evaluates expr, which must give exactly one sample.
func queryOne(t *testing.T, p *testenv.Prometheus, expr string) testenv.Sample {
	t.Helper()
	samples, err := p.Query(context.Background(), expr)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 1 {
		t.Fatalf("%s: %d samples, want 1: %v", expr, len(samples), samples)
	}
	return samples[0]
}

// idleFor is a DCGMHistory.At that makes the devices held by pod busy (at busy) until since
// and idle (0) after; the other devices keep their utilisation.
func idleFor(pod string, since time.Time, busy float64) func(time.Time, testenv.DCGMGPU) (testenv.DCGMGPU, bool) {
	return func(at time.Time, g testenv.DCGMGPU) (testenv.DCGMGPU, bool) {
		if g.Pod == pod {
			g.Util = 0
			if at.Before(since) {
				g.Util = busy
			}
		}
		return g, true
	}
}

// The test bed's own parts: the real Prometheus scrapes the DCGM exporter double, holds a
// day of its devices' past written by promtool as the same series as the live ones, follows
// a change of utilisation, and keeps the past across a stop and a start.
func TestPrometheusHoldsDCGMHistoryAndLiveSeries(t *testing.T) {
	now := time.Now()
	idle := testenv.DCGMGPU{Node: "dgx-a", Index: 0, UUID: "GPU-a8c294d0-6b80-5491-8500-21f3285de696", Model: h100Model,
		Namespace: "notebooks", Pod: "left-open", Container: "jupyter"}
	busy := testenv.DCGMGPU{Node: "dgx-a", Index: 1, UUID: "GPU-c55f9437-3105-5ed2-94b6-6e0cdc1228cd", Model: h100Model,
		Namespace: "train", Pod: "llm-0", Container: "trainer", Util: 0.9}
	mig := testenv.DCGMGPU{Node: "dgx-b", Index: 3, UUID: "GPU-f6a9069a-e282-52a0-8761-13049d9de6c3", Model: h100Model,
		MIGProfile: "1g.10gb", MIGInstance: 9, Namespace: "infer", Pod: "small", Container: "server", Util: 0.3}
	x := startDCGM(t, idle, busy, mig)
	p := startPrometheus(t, x, &testenv.DCGMHistory{From: now.Add(-24 * time.Hour), To: now, Step: time.Minute,
		Profiling: true, At: idleFor("left-open", now.Add(-10*time.Hour), 0.8)})

	live := queryOne(t, p, `DCGM_FI_PROF_GR_ENGINE_ACTIVE{pod="small"}`)
	wantLabels := map[string]string{"__name__": "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gpu": "3", "UUID": mig.UUID,
		"pci_bus_id": "00000000:48:00.0", "device": "nvidia3", "modelName": h100Model, "GPU_I_PROFILE": "1g.10gb", "GPU_I_ID": "9",
		"Hostname": "dgx-b", "DCGM_FI_DRIVER_VERSION": testenv.DefaultDCGMDriverVersion,
		"namespace": "infer", "pod": "small", "container": "server", "job": testenv.DCGMJob, "instance": x.Addr()}
	if fmt.Sprint(live.Labels) != fmt.Sprint(wantLabels) || live.Value != 0.3 {
		t.Errorf("MIG device's series %v %v, want %v 0.3", live.Labels, live.Value, wantLabels)
	}
	if got := queryOne(t, p, `DCGM_FI_DEV_GPU_UTIL{pod="llm-0"}`).Value; got != 90 {
		t.Errorf("DCGM_FI_DEV_GPU_UTIL of the busy GPU = %v, want 90 (percent)", got)
	}
	if s, err := p.Query(context.Background(), `DCGM_FI_DEV_GPU_UTIL{pod="small"}`); err != nil || len(s) != 0 {
		t.Errorf("a MIG device has DCGM_FI_DEV_GPU_UTIL: %v %v", s, err)
	}

	// The past and the present are one series per device and metric.
	if got := queryOne(t, p, `count(count_over_time(DCGM_FI_DEV_GPU_UTIL[25h])) + count(count_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[25h]))`).Value; got != 5 {
		t.Errorf("%v DCGM series over the day, want 5 (two metrics of two GPUs, one of the MIG device)", got)
	}
	if got := queryOne(t, p, `DCGM_FI_PROF_GR_ENGINE_ACTIVE{pod="left-open"} offset 11h`).Value; got != 0.8 {
		t.Errorf("the idle GPU 11 hours ago: %v, want 0.8", got)
	}
	if got := queryOne(t, p, `max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{pod="left-open"}[9h])`).Value; got != 0 {
		t.Errorf("the idle GPU over the last 9 hours: max %v, want 0", got)
	}
	avg := queryOne(t, p, `avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{pod="left-open"}[24h])`).Value
	if want := 0.8 * 14 / 24; math.Abs(avg-want) > 0.01 {
		t.Errorf("the idle GPU's average over the day %v, want about %v", avg, want)
	}

	t.Run("a change is scraped", func(t *testing.T) {
		if err := x.Update(idle.UUID, 0, func(g *testenv.DCGMGPU) { g.Util = 0.5 }); err != nil {
			t.Fatal(err)
		}
		changed := time.Now()
		if err := p.WaitScraped(testContext(t), changed); err != nil {
			t.Fatal(err)
		}
		if got := queryOne(t, p, `DCGM_FI_PROF_GR_ENGINE_ACTIVE{pod="left-open"}`).Value; got != 0.5 {
			t.Errorf("after the change: %v, want 0.5", got)
		}
	})

	t.Run("stopped, then started again with its past", func(t *testing.T) {
		p.StopServer()
		if _, err := p.Query(context.Background(), "up"); err == nil {
			t.Fatalf("a stopped Prometheus answered a query")
		}
		if err := p.StartServer(testContext(t)); err != nil {
			t.Fatal(err)
		}
		if got := queryOne(t, p, `DCGM_FI_PROF_GR_ENGINE_ACTIVE{pod="left-open"} offset 11h`).Value; got != 0.8 {
			t.Errorf("after a restart, the idle GPU 11 hours ago: %v, want 0.8", got)
		}
	})
}
