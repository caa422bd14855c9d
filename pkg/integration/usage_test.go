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
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/usage"
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

// The nodes of TestHeldButIdle.
const (
	usageIdleNode = "h100-idle" // eight H100s through the device plugin
	usageBusyNode = "h100-busy" // eight H100s through the device plugin
	usageMIGNode  = "h100-mig"  // one H100 cut into seven 1g.10gb MIG devices (mixed strategy)
	usageDRANode  = "dra-h100-1"
)

// usageInterval is how often the operators of these tests ask Prometheus: the flag refuses
// less than a minute, a test need not wait that long to see an outage.
const usageInterval = 2 * time.Second

// createMIGNode creates a Ready node whose one H100 is cut into seven 1g.10gb devices, as GPU
// Feature Discovery and the device plugin report it with the mixed strategy.
func (c *cluster) createMIGNode(t *testing.T, name string) {
	t.Helper()
	node := readyNode(name, map[string]string{"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": h100Product,
		"nvidia.com/gpu.count": "1", "nvidia.com/mig.capable": "true", "nvidia.com/mig.strategy": "mixed",
		"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": "success",
		"nvidia.com/mig-1g.10gb.count": "7", "nvidia.com/mig-1g.10gb.memory": "9856"}, 0)
	node.Status.Capacity[migResource] = resource.MustParse("7")
	node.Status.Allocatable[migResource] = resource.MustParse("7")
	if err := testenv.CreateNodes(testContext(t), c.kube, []*corev1.Node{node}); err != nil {
		t.Fatal(err)
	}
}

// waitUsage polls the inventory "cluster" until check accepts it, for up to timeout.
func (c *cluster) waitUsage(t *testing.T, what string, timeout time.Duration, check func(gi *homelabv1.GpuInventory) error) *homelabv1.GpuInventory {
	t.Helper()
	var gi *homelabv1.GpuInventory
	eventually(t, timeout, what, func() error {
		var err error
		if gi, err = c.gpu.HomelabV1().GpuInventories().Get(context.Background(), "cluster", metav1.GetOptions{}); err != nil {
			return err
		}
		return check(gi)
	})
	return gi
}

// usageCondition checks the UsageUnknown condition's status and reason.
func usageCondition(gi *homelabv1.GpuInventory, status metav1.ConditionStatus, reason string) error {
	cond := meta.FindStatusCondition(gi.Status.Conditions, homelabv1.ConditionUsageUnknown)
	if cond == nil || cond.Status != status || cond.Reason != reason {
		return fmt.Errorf("condition %s = %+v, want %s with reason %s", homelabv1.ConditionUsageUnknown, cond, status, reason)
	}
	return nil
}

// ignoreIdleSince leaves IdleSince out of a usage comparison (checked with a tolerance apart).
var ignoreIdleSince = cmpopts.IgnoreFields(homelabv1.IdleHolder{}, "IdleSince")

// checkIdleSince checks that each idle holder's IdleSince is within three minutes of want (by
// pod): the history and the operator's reads are a minute apart each, and a holder is idle
// from the step after its last busy one.
func checkIdleSince(u *homelabv1.GpuUsage, want map[string]time.Time) error {
	for _, h := range u.IdleHolders {
		w, ok := want[h.Pod]
		if !ok {
			return fmt.Errorf("idle holder %s/%s is not expected", h.Namespace, h.Pod)
		}
		if d := h.IdleSince.Sub(w); d < -3*time.Minute || d > 3*time.Minute {
			return fmt.Errorf("%s/%s idle since %s, want about %s", h.Namespace, h.Pod, h.IdleSince.UTC().Format(time.RFC3339), w.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// withoutUsage is a status less its usage, its UsageUnknown condition and the usage part of
// its hash (":usage:<digest>", which covers the condition): what a Prometheus failure must
// leave as it was.
func withoutUsage(s homelabv1.GpuInventoryStatus) homelabv1.GpuInventoryStatus {
	s = *s.DeepCopy()
	s.Usage = nil
	s.InventoryHash, _, _ = strings.Cut(s.InventoryHash, ":usage:")
	meta.RemoveStatusCondition(&s.Conditions, homelabv1.ConditionUsageUnknown)
	return s
}

// Held but idle, end to end: DCGM exporter's series of a day (promtool's backfill) and live
// (scraped every second by a real Prometheus) for a notebook idle for ten and a half hours, a
// training job busy all day on two GPUs, a MIG device idle for two and a half hours, a DRA
// device idle for six and a half hours, a free GPU and a pod that no longer exists. The status,
// /metrics and kubectl gpuinv idle name the idle holders and count the hours per namespace;
// with Prometheus down the condition says so and the rest of the status stays, and it
// recovers when Prometheus is back.
func TestHeldButIdle(t *testing.T) {
	c := startCluster(t)
	ctx := testContext(t)
	c.createH100Nodes(t, usageIdleNode, usageBusyNode)
	c.createMIGNode(t, usageMIGNode)
	if err := testenv.CreateNodes(ctx, c.kube, []*corev1.Node{readyNode(usageDRANode, draModeLabels, 0)}); err != nil {
		t.Fatal(err)
	}
	published := driverSlices(t, dra.H100, usageDRANode)
	c.publish(t, published...)
	draUUID := *published[0].Spec.Devices[0].Attributes["uuid"].StringValue // gpu-0's
	c.createGPUDeviceClass(t)

	c.createPod(t, gpuPod("notebooks", "left-open", usageIdleNode, "nvidia.com/gpu", 1))
	c.createPod(t, gpuPod("train", "llm-0", usageBusyNode, "nvidia.com/gpu", 2))
	c.createPod(t, gpuPod("infer", "small", usageMIGNode, migResource, 1))
	claim := c.createClaim(t, gpuClaim("dra", "one-gpu", 1, ""))
	worker := c.createPod(t, claimPod("dra", "worker", usageDRANode, claim.Name))
	c.allocateClaim(t, claim, usageDRANode, []string{"gpu-0"}, worker)

	now := time.Now()
	idleSince := map[string]time.Time{
		"left-open": now.Add(-10*time.Hour - 30*time.Minute),
		"worker":    now.Add(-6*time.Hour - 30*time.Minute),
		"small":     now.Add(-2*time.Hour - 30*time.Minute), // idle, but not for --idle-after (4h)
	}
	x := startDCGM(t,
		testenv.DCGMGPU{Node: usageIdleNode, Index: 0, UUID: "GPU-0d1f3a52-8c4e-4b7a-9e21-5f6a7b8c9d01", Model: h100Model,
			Namespace: "notebooks", Pod: "left-open", Container: "jupyter"},
		testenv.DCGMGPU{Node: usageIdleNode, Index: 1, UUID: "GPU-0d1f3a52-8c4e-4b7a-9e21-5f6a7b8c9d02", Model: h100Model}, // free
		testenv.DCGMGPU{Node: usageIdleNode, Index: 2, UUID: "GPU-0d1f3a52-8c4e-4b7a-9e21-5f6a7b8c9d03", Model: h100Model,
			Namespace: "gone", Pod: "finished-yesterday", Container: "main"}, // the pod mapping lags a deleted pod
		testenv.DCGMGPU{Node: usageBusyNode, Index: 0, UUID: "GPU-1e2f3a52-8c4e-4b7a-9e21-5f6a7b8c9d01", Model: h100Model,
			Namespace: "train", Pod: "llm-0", Container: "trainer", Util: 0.93},
		testenv.DCGMGPU{Node: usageBusyNode, Index: 1, UUID: "GPU-1e2f3a52-8c4e-4b7a-9e21-5f6a7b8c9d02", Model: h100Model,
			Namespace: "train", Pod: "llm-0", Container: "trainer", Util: 0.88},
		testenv.DCGMGPU{Node: usageMIGNode, Index: 0, UUID: "GPU-2f3a4b52-8c4e-4b7a-9e21-5f6a7b8c9d01", Model: h100Model,
			MIGProfile: "1g.10gb", MIGInstance: 13, Namespace: "infer", Pod: "small", Container: "server"},
		testenv.DCGMGPU{Node: usageDRANode, Index: 0, UUID: draUUID, Model: h100Model, Namespace: "dra", Pod: "worker", Container: "main",
			DRA: &testenv.DCGMClaim{Namespace: "dra", Name: claim.Name, Pool: usageDRANode, Device: "gpu-0"}},
	)
	// A day and an hour of past, so that the whole 24-hour window is covered.
	p := startPrometheus(t, x, &testenv.DCGMHistory{From: now.Add(-25 * time.Hour), To: now, Step: time.Minute, Profiling: true,
		At: func(at time.Time, g testenv.DCGMGPU) (testenv.DCGMGPU, bool) {
			if since, ok := idleSince[g.Pod]; ok && at.Before(since) {
				g.Util = 0.7
			}
			return g, true
		}})

	opts := testOptions()
	opts.PrometheusURL, opts.Interval = p.URL, usageInterval
	op := startOperator(t, c.env.Config, opts)

	want := &homelabv1.GpuUsage{Window: "24h0m0s", IdleAfter: "4h0m0s", Metric: "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
		HeldGpus: 5, IdleGpus: 2, // the notebook's and the DRA worker's
		Namespaces: []homelabv1.UsageNamespace{
			{Namespace: "notebooks", Model: h100Product, HeldGpus: 1, HeldGpuHours: 24, IdleGpuHours: 10},
			{Namespace: "dra", Model: h100Product, HeldGpus: 1, HeldGpuHours: 24, IdleGpuHours: 6},
			{Namespace: "infer", Model: h100Product, HeldGpus: 1, HeldGpuHours: 24, IdleGpuHours: 2},
			{Namespace: "train", Model: h100Product, HeldGpus: 2, HeldGpuHours: 48},
		},
		IdleHolders: []homelabv1.IdleHolder{ // the longest idle first
			{Namespace: "notebooks", Pod: "left-open", Node: usageIdleNode, Model: h100Product, Gpus: 1},
			{Namespace: "dra", Pod: "worker", Node: usageDRANode, Model: h100Product, Gpus: 1},
			{Namespace: "infer", Pod: "small", Node: usageMIGNode, Model: h100Product, Gpus: 1},
		},
	}
	checkUsage := func(gi *homelabv1.GpuInventory) error {
		if gi.Status.Usage == nil {
			return fmt.Errorf("no status.usage; conditions %+v", gi.Status.Conditions)
		}
		if diff := cmp.Diff(want, gi.Status.Usage, ignoreIdleSince); diff != "" {
			return fmt.Errorf("status.usage (-want +got):\n%s", diff)
		}
		return checkIdleSince(gi.Status.Usage, idleSince)
	}
	read := c.waitUsage(t, "usage read from Prometheus", 30*time.Second, func(gi *homelabv1.GpuInventory) error {
		if err := usageCondition(gi, metav1.ConditionFalse, homelabv1.ReasonUsageRead); err != nil {
			return err
		}
		return checkUsage(gi)
	})
	const h100 = `inventory="cluster",model="NVIDIA-H100-80GB-HBM3"`
	waitMetrics(t, op,
		`gpu_inventory_held_gpus{`+h100+`,namespace="notebooks"} 1`,
		`gpu_inventory_idle_gpus{`+h100+`,namespace="notebooks"} 1`,
		`gpu_inventory_idle_gpus{`+h100+`,namespace="dra"} 1`,
		`gpu_inventory_idle_gpus{`+h100+`,namespace="infer"} 0`,
		`gpu_inventory_held_gpus{`+h100+`,namespace="train"} 2`,
		`gpu_inventory_held_gpu_hours{`+h100+`,namespace="train"} 48`,
		`gpu_inventory_idle_gpu_hours{`+h100+`,namespace="notebooks"} 10`,
		`gpu_inventory_idle_gpu_hours{`+h100+`,namespace="train"} 0`,
		`gpu_inventory_usage_unknown{inventory="cluster"} 0`,
	)
	_, body, err := get("http://" + op.MetricsAddress() + "/metrics")
	if err != nil || strings.Contains(body, `namespace="gone"`) {
		t.Errorf("/metrics names the pod that no longer exists (%v):\n%s", err, grepLines(body, `namespace="gone"`))
	}
	checkAlertRules(t, body, func(group string) bool { return group == usageRuleGroup })
	if !strings.Contains(body, `gpu_inventory_usage_reading_duration_seconds_count{result="ok"} `) {
		t.Errorf("/metrics times no reading of Prometheus:\n%s", grepLines(body, "usage_reading"))
	}

	t.Run("kubectl gpuinv idle", func(t *testing.T) {
		checkIdleCommand(t, c.env.KubeconfigPath(), want)
	})

	t.Run("Prometheus down, then back", func(t *testing.T) {
		p.StopServer()
		down := c.waitUsage(t, "UsageUnknown with Prometheus down", 20*time.Second, func(gi *homelabv1.GpuInventory) error {
			return usageCondition(gi, metav1.ConditionTrue, homelabv1.ReasonPrometheusUnreachable)
		})
		if diff := cmp.Diff(read.Status.Usage, down.Status.Usage); diff != "" {
			t.Errorf("status.usage changed with Prometheus down (-before +after):\n%s", diff)
		}
		if diff := cmp.Diff(withoutUsage(read.Status), withoutUsage(down.Status), ignoreTimes); diff != "" {
			t.Errorf("the rest of the status changed with Prometheus down (-before +after):\n%s", diff)
		}
		waitMetrics(t, op, `gpu_inventory_usage_unknown{inventory="cluster"} 1`,
			`gpu_inventory_idle_gpus{`+h100+`,namespace="notebooks"} 1`)
		if r := runPlugin(ctx, c.env.KubeconfigPath(), "idle"); r.code != plugin.ExitOK || !strings.Contains(r.out, "Usage unknown (PrometheusUnreachable)") ||
			!strings.Contains(r.out, "left-open") {
			t.Errorf("kubectl gpuinv idle with Prometheus down: exit %d\n%s%s\nwant the last good holders and why they may be old", r.code, r.out, r.err)
		}

		if err := p.StartServer(testContext(t)); err != nil {
			t.Fatal(err)
		}
		c.waitUsage(t, "usage read again with Prometheus back", 20*time.Second, func(gi *homelabv1.GpuInventory) error {
			if err := usageCondition(gi, metav1.ConditionFalse, homelabv1.ReasonUsageRead); err != nil {
				return err
			}
			return checkUsage(gi)
		})
		waitMetrics(t, op, `gpu_inventory_usage_unknown{inventory="cluster"} 0`)
	})
}

// checkIdleCommand runs kubectl gpuinv idle in the test process: the table lists want's idle
// holders in order (namespace, pod, node, model, GPUs, idle since), the summary counts its GPUs,
// and -o json prints want.
func checkIdleCommand(t *testing.T, kubeconfig string, want *homelabv1.GpuUsage) {
	t.Helper()
	r := runPlugin(context.Background(), kubeconfig, "idle")
	if r.code != plugin.ExitOK {
		t.Fatalf("kubectl gpuinv idle: exit %d, stderr %s", r.code, r.err)
	}
	table, summary, _ := strings.Cut(r.out, "\n\n")
	lines := strings.Split(table, "\n")
	if len(lines) != len(want.IdleHolders)+1 || !strings.HasPrefix(lines[0], "NAMESPACE") || !strings.HasSuffix(lines[0], "IDLE SINCE") {
		t.Fatalf("kubectl gpuinv idle printed:\n%s\nwant a header and %d holders", r.out, len(want.IdleHolders))
	}
	for i, h := range want.IdleHolders {
		fields := strings.Fields(lines[i+1])
		if len(fields) != 7 || fields[0] != h.Namespace || fields[1] != h.Pod || fields[2] != h.Node || fields[3] != h.Model || fields[4] != fmt.Sprint(h.Gpus) {
			t.Errorf("row %d: %q, want %s %s %s %s %d, the time and the age", i+1, lines[i+1], h.Namespace, h.Pod, h.Node, h.Model, h.Gpus)
		}
	}
	if wantSummary := fmt.Sprintf("%d GPUs held, %d of them by pods idle for longer than %s", want.HeldGpus, want.IdleGpus, want.IdleAfter); !strings.HasPrefix(summary, wantSummary) {
		t.Errorf("kubectl gpuinv idle summary:\n%s\nwant it to start %q", summary, wantSummary)
	}

	r = runPlugin(context.Background(), kubeconfig, "idle", "-o", "json")
	if r.code != plugin.ExitOK {
		t.Fatalf("kubectl gpuinv idle -o json: exit %d, stderr %s", r.code, r.err)
	}
	var got homelabv1.GpuUsage
	if err := json.Unmarshal([]byte(r.out), &got); err != nil {
		t.Fatalf("kubectl gpuinv idle -o json: %v\n%s", err, r.out)
	}
	if diff := cmp.Diff(want, &got, ignoreIdleSince); diff != "" {
		t.Errorf("kubectl gpuinv idle -o json (-want +got):\n%s", diff)
	}
}

// A Prometheus that cannot tell never holds back the status: unreachable from the start, or
// scraping no DCGM exporter series, the inventory is written as fast as without it, with no
// usage and the UsageUnknown condition saying why. Without --prometheus-url neither appears.
func TestUsageUnknownWhenPrometheusCannotTell(t *testing.T) {
	c := startCluster(t)
	c.createH100Nodes(t, "h100-a")
	c.createPod(t, gpuPod("notebooks", "left-open", "h100-a", "nvidia.com/gpu", 1))
	noUsage := func(gi *homelabv1.GpuInventory) error {
		if gi.Status.Usage != nil {
			return fmt.Errorf("status.usage %+v", gi.Status.Usage)
		}
		return nil
	}
	run := func(t *testing.T, url string, check func(gi *homelabv1.GpuInventory) error) *runningOperator {
		opts := testOptions()
		opts.PrometheusURL = url
		op := startOperator(t, c.env.Config, opts)
		c.waitTotals(t, "cluster", totals{Nodes: 1, ReadyNodes: 1, Gpus: 8, ReadyGpus: 8})
		c.waitUsage(t, "usage of "+url, 5*time.Second, func(gi *homelabv1.GpuInventory) error {
			if err := noUsage(gi); err != nil {
				return err
			}
			return check(gi)
		})
		return op
	}

	t.Run("without --prometheus-url", func(t *testing.T) {
		op := run(t, "", func(gi *homelabv1.GpuInventory) error {
			if cond := meta.FindStatusCondition(gi.Status.Conditions, homelabv1.ConditionUsageUnknown); cond != nil {
				return fmt.Errorf("condition %+v without --prometheus-url", cond)
			}
			return nil
		})
		if _, body, err := get("http://" + op.MetricsAddress() + "/metrics"); err != nil || strings.Contains(body, "gpu_inventory_usage_unknown{") {
			t.Errorf("/metrics without --prometheus-url (%v):\n%s", err, grepLines(body, "gpu_inventory_usage"))
		}
		if err := op.stop(t); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := "http://" + l.Addr().String()
		l.Close()
		op := run(t, closed, func(gi *homelabv1.GpuInventory) error {
			return usageCondition(gi, metav1.ConditionTrue, homelabv1.ReasonPrometheusUnreachable)
		})
		waitMetrics(t, op, `gpu_inventory_usage_unknown{inventory="cluster"} 1`)
		if err := op.stop(t); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("no DCGM series", func(t *testing.T) {
		p := startPrometheus(t, startDCGM(t), nil) // an exporter that reports no GPU
		op := run(t, p.URL, func(gi *homelabv1.GpuInventory) error {
			return usageCondition(gi, metav1.ConditionTrue, homelabv1.ReasonNoDCGMSeries)
		})
		waitMetrics(t, op, `gpu_inventory_usage_unknown{inventory="cluster"} 1`)
	})
}

// Where DCGM exporter reports no profiling metrics, utilisation is read from
// DCGM_FI_DEV_GPU_UTIL, a percent: a notebook at 3% for five hours is idle (below --idle-below's
// 5%, not 3 times over it), a job at 50% is busy, and status.usage says which series it read.
func TestUsageFromGPUUtilWithoutProfiling(t *testing.T) {
	c := startCluster(t)
	c.createH100Nodes(t, "h100-a")
	c.createPod(t, gpuPod("notebooks", "left-open", "h100-a", "nvidia.com/gpu", 1))
	c.createPod(t, gpuPod("train", "llm-0", "h100-a", "nvidia.com/gpu", 1))
	now := time.Now()
	since := now.Add(-5*time.Hour - 30*time.Minute)
	x := startDCGM(t,
		testenv.DCGMGPU{Node: "h100-a", Index: 0, UUID: "GPU-3a4b5c52-8c4e-4b7a-9e21-5f6a7b8c9d01", Model: h100Model,
			Namespace: "notebooks", Pod: "left-open", Container: "jupyter", Util: 0.03},
		testenv.DCGMGPU{Node: "h100-a", Index: 1, UUID: "GPU-3a4b5c52-8c4e-4b7a-9e21-5f6a7b8c9d02", Model: h100Model,
			Namespace: "train", Pod: "llm-0", Container: "trainer", Util: 0.5},
	)
	x.SetProfiling(false)
	p := startPrometheus(t, x, &testenv.DCGMHistory{From: now.Add(-25 * time.Hour), To: now, Step: time.Minute,
		At: func(at time.Time, g testenv.DCGMGPU) (testenv.DCGMGPU, bool) {
			if g.Pod == "left-open" && at.Before(since) {
				g.Util = 0.6
			}
			return g, true
		}})
	opts := testOptions()
	opts.PrometheusURL, opts.Interval = p.URL, usageInterval
	startOperator(t, c.env.Config, opts)

	want := &homelabv1.GpuUsage{Window: "24h0m0s", IdleAfter: "4h0m0s", Metric: "DCGM_FI_DEV_GPU_UTIL", HeldGpus: 2, IdleGpus: 1,
		Namespaces: []homelabv1.UsageNamespace{
			{Namespace: "notebooks", Model: h100Product, HeldGpus: 1, HeldGpuHours: 24, IdleGpuHours: 5},
			{Namespace: "train", Model: h100Product, HeldGpus: 1, HeldGpuHours: 24},
		},
		IdleHolders: []homelabv1.IdleHolder{{Namespace: "notebooks", Pod: "left-open", Node: "h100-a", Model: h100Product, Gpus: 1}},
	}
	c.waitUsage(t, "usage read from DCGM_FI_DEV_GPU_UTIL", 30*time.Second, func(gi *homelabv1.GpuInventory) error {
		if err := usageCondition(gi, metav1.ConditionFalse, homelabv1.ReasonUsageRead); err != nil {
			return err
		}
		if diff := cmp.Diff(want, gi.Status.Usage, ignoreIdleSince); diff != "" {
			return fmt.Errorf("status.usage (-want +got):\n%s", diff)
		}
		return checkIdleSince(gi.Status.Usage, map[string]time.Time{"left-open": since})
	})
}

// queryAt evaluates expr at at on p: every sample's labels and value.
func queryAt(t *testing.T, p *testenv.Prometheus, expr string, at time.Time) []testenv.Sample {
	t.Helper()
	u := p.URL + "/api/v1/query?" + url.Values{"query": {expr}, "time": {strconv.FormatInt(at.Unix(), 10)}}.Encode()
	_, body, err := get(u)
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Status string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil || answer.Status != "success" {
		t.Fatalf("%s at %s: %v\n%s", expr, at, err, body)
	}
	out := make([]testenv.Sample, len(answer.Data.Result))
	for i, r := range answer.Data.Result {
		v, _ := strconv.ParseFloat(fmt.Sprint(r.Value[1]), 64)
		out[i] = testenv.Sample{Labels: r.Metric, Value: v}
	}
	return out
}

// The operator's reader keeps each device's window from one reading to the next, asking
// Prometheus only for the step entering the window and the one leaving it; the real
// Prometheus' answer to the window queries it replaced (a day at one-minute steps, of the
// devices held at the instant asked) is the same, reading after reading: a busy GPU, one idle
// for five and a half hours, one busy one minute in seven, a MIG device, one whose series went
// missing for twenty minutes, one held for three hours only.
func TestReaderAgreesWithTheWindowQueries(t *testing.T) {
	now := time.Now().Truncate(time.Minute)
	gpu := func(pod string, index int, util float64) testenv.DCGMGPU {
		return testenv.DCGMGPU{Node: "dgx-a", Index: index, UUID: fmt.Sprintf("GPU-7c1d3a52-8c4e-4b7a-9e21-5f6a7b8c9d%02d", index),
			Model: h100Model, Namespace: "ml", Pod: pod, Container: "main", Util: util}
	}
	mig := gpu("small", 4, 0.01)
	mig.MIGProfile, mig.MIGInstance = "1g.10gb", 9
	x := startDCGM(t, gpu("busy", 0, 0.9), gpu("idle", 1, 0.01), gpu("bursty", 2, 0.01), gpu("gaps", 3, 0.01), mig, gpu("new", 5, 0.3))
	p := startPrometheus(t, x, &testenv.DCGMHistory{From: now.Add(-26 * time.Hour), To: now, Step: time.Minute, Profiling: true,
		At: func(at time.Time, g testenv.DCGMGPU) (testenv.DCGMGPU, bool) {
			switch g.Pod {
			case "idle":
				if at.Before(now.Add(-5*time.Hour - 30*time.Minute)) {
					g.Util = 0.8
				}
			case "bursty":
				if at.Unix()/60%7 == 0 {
					g.Util = 0.6
				}
			case "gaps":
				return g, at.Before(now.Add(-2*time.Hour)) || !at.Before(now.Add(-100*time.Minute))
			case "new":
				return g, !at.Before(now.Add(-3 * time.Hour))
			}
			return g, true
		}})

	settings := usage.Settings{Window: 24 * time.Hour, IdleBelow: 0.05, IdleAfter: 4 * time.Hour}
	reader, err := usage.NewReader(usage.ReaderConfig{URL: p.URL, Timeout: 10 * time.Second}, settings)
	if err != nil {
		t.Fatal(err)
	}
	const labels = "Hostname, UUID, GPU_I_PROFILE, GPU_I_ID, namespace, pod, modelName"
	q := usage.QueriesFor(settings, settings.Window)
	heldNow := " and on (" + labels + ") (" + q.Now + ")"
	start := now.Add(-40 * time.Minute) // the readings' steps all lie in the history
	for at := start; !at.After(start.Add(20 * time.Minute)); at = at.Add(time.Minute) {
		var devices []usage.Device
		for range int(settings.Window/usage.Chunk) + 1 {
			var problem usage.Problem
			if devices, problem = reader.Read(t.Context(), at); problem.Reason != "" {
				t.Fatalf("reading at %s: %+v", at, problem)
			}
			if reader.Covered() == settings.Window {
				break
			}
		}
		want := map[string]string{}
		for _, s := range queryAt(t, p, q.Held+heldNow, at) {
			want[s.Labels["pod"]+"/"+s.Labels["usage_source"]] += fmt.Sprintf("held %v", s.Value)
		}
		for _, s := range queryAt(t, p, q.Idle+heldNow, at) {
			want[s.Labels["pod"]+"/"+s.Labels["usage_source"]] += fmt.Sprintf(" idle %v", s.Value)
		}
		got := map[string]string{}
		for _, d := range devices {
			got[d.Pod+"/p"] = fmt.Sprintf("held %d", d.HeldSteps)
			if d.IdleSteps > 0 {
				got[d.Pod+"/p"] += fmt.Sprintf(" idle %d", d.IdleSteps)
			}
		}
		for k := range want {
			if strings.HasSuffix(k, "/u") {
				delete(want, k) // the reader reads a GPU of both series from the profiling one
			}
		}
		if len(want) != 6 {
			t.Fatalf("at %s the window queries answer %d devices, want the 6 held: %v", at.Format(time.TimeOnly), len(want), want)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("at %s, the window queries' figures (-) and the reader's (+):\n%s", at.Format(time.TimeOnly), diff)
		}
	}
}
