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

package gpuinventory

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/usage"
)

// usageSource is a usage cache a test sets: what it says and whom it tells.
type usageSource struct {
	snapshot  *usage.Snapshot
	listeners []func(string)
}

func (u *usageSource) OnChange(f func(string)) { u.listeners = append(u.listeners, f) }
func (u *usageSource) HasSynced() bool         { return true }
func (u *usageSource) now() *usage.Snapshot    { return u.snapshot }
func (u *usageSource) set(s *usage.Snapshot)   { u.snapshot = s; u.tell() }
func (u *usageSource) fail(p usage.Problem)    { next := *u.snapshot; next.Problem = p; u.set(&next) }
func (u *usageSource) tell() {
	for _, f := range u.listeners {
		f("")
	}
}
func withUsage(u *usageSource) func(*controller.Context, *Options) {
	return func(_ *controller.Context, opts *Options) {
		opts.Sections = append(opts.Sections, usage.NewSection(u.now, u))
	}
}

var usageAt = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

// idleFleet: a notebook on gpu-a idle for six hours on 2 GPUs, a trainer on gpu-b busy on 4.
func idleFleet() *usage.Snapshot {
	return &usage.Snapshot{At: usageAt, Settings: usage.Settings{Window: 24 * time.Hour, IdleBelow: 0.05, IdleAfter: 4 * time.Hour},
		Holders: []usage.Holder{
			{Namespace: "ml", Pod: "notebook", Node: "gpu-a", Model: "NVIDIA-H100-80GB-HBM3", GPUs: 2, Profiling: true,
				HeldSteps: 2 * 1440, IdleSteps: 2 * 360, IdleSince: usageAt.Add(-6 * time.Hour).Unix(), LongIdle: true},
			{Namespace: "ml", Pod: "trainer", Node: "gpu-b", Model: "NVIDIA-H100-80GB-HBM3", GPUs: 4, Profiling: true, HeldSteps: 4 * 1440},
		}}
}

// Usage reaches each inventory for its own nodes: held and idle GPUs, the idle holder, the
// condition and the metrics; the same usage again writes nothing; a change is enqueued.
func TestUsageReachesTheStatusAndMetrics(t *testing.T) {
	src := &usageSource{snapshot: idleFleet()}
	all := gpuInventory("all", 1, homelabv1.GpuInventoryStatus{})
	pool := gpuInventory("pool-b", 1, homelabv1.GpuInventoryStatus{})
	pool.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "b"}}
	nodes := []*corev1.Node{h100("gpu-a", "a"), h100("gpu-b", "b")}
	f := newFixtureWith(t, withUsage(src), nodes, all, pool)

	status := f.appliedStatus(f.sync("all"), "all")
	u := status.Usage
	if u == nil || u.HeldGpus != 6 || u.IdleGpus != 2 || u.Window != "24h0m0s" || u.IdleAfter != "4h0m0s" || u.Metric != usage.MetricEngineActive {
		t.Fatalf("status.usage = %+v; want 6 held, 2 idle, 24h window, idle after 4h, profiling metric", u)
	}
	if len(u.IdleHolders) != 1 || u.IdleHolders[0].Pod != "notebook" || !u.IdleHolders[0].IdleSince.Time.Equal(usageAt.Add(-6*time.Hour)) {
		t.Errorf("idle holders = %+v; want ml/notebook idle since 06:00", u.IdleHolders)
	}
	if len(u.Namespaces) != 1 || u.Namespaces[0].HeldGpuHours != 144 || u.Namespaces[0].IdleGpuHours != 12 {
		t.Errorf("namespaces = %+v; want ml: 144 GPU-hours held, 12 idle", u.Namespaces)
	}
	if c := meta.FindStatusCondition(status.Conditions, homelabv1.ConditionUsageUnknown); c == nil || c.Status != metav1.ConditionFalse || c.Reason != homelabv1.ReasonUsageRead {
		t.Errorf("UsageUnknown = %+v; want False, UsageRead", c)
	}
	if got, _ := f.gauge("gpu_inventory_idle_gpus", "all", "NVIDIA-H100-80GB-HBM3", "ml"); got != 2 {
		t.Errorf("gpu_inventory_idle_gpus = %v, want 2", got)
	}
	if got, _ := f.gauge("gpu_inventory_held_gpu_hours", "all", "NVIDIA-H100-80GB-HBM3", "ml"); got != 144 {
		t.Errorf("gpu_inventory_held_gpu_hours = %v, want 144", got)
	}
	poolUsage := f.appliedStatus(f.sync("pool-b"), "pool-b").Usage
	if poolUsage == nil || poolUsage.HeldGpus != 4 || poolUsage.IdleGpus != 0 || len(poolUsage.IdleHolders) != 0 {
		t.Errorf("pool-b's usage = %+v; want the trainer's 4 busy GPUs only", poolUsage)
	}

	// The same usage: no write.
	f = newFixtureWith(t, withUsage(src), nodes, gpuInventory("all", 1, status))
	if actions := f.sync("all"); len(actions) != 0 || len(f.writer.written) != 0 {
		t.Fatalf("unchanged usage: %d writes, calls %v; want none", len(f.writer.written), actions)
	}
	// The notebook got busy: the change reaches the queue and the status.
	busy := idleFleet()
	busy.Holders[0].IdleSince, busy.Holders[0].LongIdle = 0, false
	src.set(busy)
	if got := drain(f.controller); !got["all"] {
		t.Errorf("a usage change enqueued %v, want all", got)
	}
	if u := f.appliedStatus(f.sync("all"), "all").Usage; u.IdleGpus != 0 || len(u.IdleHolders) != 0 {
		t.Errorf("after the notebook got busy: %+v; want nothing idle", u)
	}
}

// Prometheus down: UsageUnknown says so, the last good usage and the rest of the status are
// written; back up, the condition clears. No usage read at all: neither usage nor condition.
func TestUsageUnknownKeepsTheLastAnswer(t *testing.T) {
	src := &usageSource{snapshot: idleFleet()}
	nodes := []*corev1.Node{h100("gpu-a", "a"), h100("gpu-b", "b")}
	f := newFixtureWith(t, withUsage(src), nodes, gpuInventory("all", 1, homelabv1.GpuInventoryStatus{}))
	src.fail(usage.Problem{Reason: homelabv1.ReasonPrometheusUnreachable, Message: "Prometheus at http://prometheus:9090 did not answer within 10s"})
	status := f.appliedStatus(f.sync("all"), "all")
	c := meta.FindStatusCondition(status.Conditions, homelabv1.ConditionUsageUnknown)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != homelabv1.ReasonPrometheusUnreachable || !strings.Contains(c.Message, "did not answer within 10s") {
		t.Errorf("UsageUnknown = %+v; want True, PrometheusUnreachable, quoting the failure", c)
	}
	if status.Usage == nil || status.Usage.IdleGpus != 2 || status.TotalGpus != 16 {
		t.Errorf("usage %+v, totalGpus %d; want the last good usage and the rest of the status", status.Usage, status.TotalGpus)
	}
	if got, _ := f.gauge("gpu_inventory_usage_unknown", "all"); got != 1 {
		t.Errorf("gpu_inventory_usage_unknown = %v, want 1", got)
	}

	f = newFixtureWith(t, withUsage(src), nodes, gpuInventory("all", 1, status))
	src.set(idleFleet())
	status = f.appliedStatus(f.sync("all"), "all")
	if c := meta.FindStatusCondition(status.Conditions, homelabv1.ConditionUsageUnknown); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("UsageUnknown = %+v after Prometheus answered again; want False", c)
	}

	f = newFixtureWith(t, nil, nodes, gpuInventory("all", 1, homelabv1.GpuInventoryStatus{}))
	status = f.appliedStatus(f.sync("all"), "all")
	if status.Usage != nil || meta.FindStatusCondition(status.Conditions, homelabv1.ConditionUsageUnknown) != nil {
		t.Errorf("without --prometheus-url: usage %+v, conditions %+v; want neither", status.Usage, status.Conditions)
	}
	if _, ok := f.gauge("gpu_inventory_usage_unknown", "all"); ok {
		t.Error("gpu_inventory_usage_unknown served without --prometheus-url")
	}
}

// After a start the window's past is read a chunk at a time: the usage of the part read is
// written, and the condition, not unknown, says how much of the window it counts.
func TestUsageOfAPartlyReadWindowSaysSo(t *testing.T) {
	partial := idleFleet()
	partial.Covered = 31 * time.Minute
	src := &usageSource{snapshot: partial}
	nodes := []*corev1.Node{h100("gpu-a", "a"), h100("gpu-b", "b")}
	f := newFixtureWith(t, withUsage(src), nodes, gpuInventory("all", 1, homelabv1.GpuInventoryStatus{}))
	status := f.appliedStatus(f.sync("all"), "all")
	c := meta.FindStatusCondition(status.Conditions, homelabv1.ConditionUsageUnknown)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != homelabv1.ReasonUsageRead || !strings.Contains(c.Message, "counts its last 31m0s of 24h0m0s") {
		t.Errorf("UsageUnknown = %+v; want False, UsageRead, saying 31m of the 24h window are counted", c)
	}
	if status.Usage == nil || status.Usage.HeldGpus != 6 {
		t.Errorf("usage %+v; want the part read", status.Usage)
	}
	whole := idleFleet()
	whole.Covered = whole.Settings.Window
	src.set(whole)
	f = newFixtureWith(t, withUsage(src), nodes, gpuInventory("all", 1, status))
	status = f.appliedStatus(f.sync("all"), "all")
	if c := meta.FindStatusCondition(status.Conditions, homelabv1.ConditionUsageUnknown); c == nil || strings.Contains(c.Message, "still being read") {
		t.Errorf("UsageUnknown = %+v once the window is read; want no word of its past", c)
	}
}
