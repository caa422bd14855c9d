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
	"fmt"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

var (
	t0       = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	settings = Settings{Window: 24 * time.Hour, IdleBelow: 0.05, IdleAfter: 4 * time.Hour}
)

const (
	h100 = "NVIDIA H100 80GB HBM3"
	uuid = "GPU-b4895dbf-9350-2524-a89b-98161ddd9fe4"
)

// device is a GPU pod ns/pod holds on node, seen for the whole window: idle for its last
// idleFor (0: busy now).
func device(node, ns, pod, gpu string, idleFor time.Duration) Device {
	steps := int32(settings.Window / Step)
	d := Device{Node: node, Namespace: ns, Pod: pod, UUID: gpu, Model: h100, Profiling: true,
		HeldSteps: steps, FirstSeen: t0.Add(-settings.Window).Unix(), LastBusy: t0.Add(-idleFor).Unix()}
	if idleFor > 0 {
		d.LastBusy = t0.Add(-idleFor - Step).Unix()
		d.IdleSteps = int32(idleFor / Step)
	}
	return d
}

// holders knows pods as ns/pod@node.
type holders map[[3]string]string

func holdersOf(keys ...string) holders {
	h := holders{}
	for _, k := range keys {
		ns, rest, _ := strings.Cut(k, "/")
		pod, node, _ := strings.Cut(rest, "@")
		h[[3]string{ns, pod, node}] = pod
	}
	return h
}

func (h holders) Holds(namespace, pod, node, _, _ string) (string, bool) {
	name, ok := h[[3]string{namespace, pod, node}]
	return name, ok
}

func all(string) bool { return true }

// An idle pod and a busy one: both are held, only the idle one is listed, and, idle for
// longer than idleAfter, counts in idleGpus; hours are whole.
func TestIdleAndBusyHolders(t *testing.T) {
	devices := []Device{
		device("gpu-a", "ml", "notebook", "GPU-1", 6*time.Hour),
		device("gpu-a", "ml", "notebook", "GPU-2", 6*time.Hour),
		device("gpu-b", "ml", "trainer", "GPU-3", 0),
	}
	known := holdersOf("ml/notebook@gpu-a", "ml/trainer@gpu-b")
	s := &Snapshot{At: t0, Settings: settings, Holders: Compute(devices, known, settings, t0, nil)}
	u := Summarize(s, all)
	if u == nil || u.HeldGpus != 3 || u.IdleGpus != 2 || u.Metric != MetricEngineActive || u.Window != "24h0m0s" {
		t.Fatalf("usage = %+v; want 3 held, 2 idle, profiling metric, window 24h0m0s", u)
	}
	if len(u.IdleHolders) != 1 || u.IdleHolders[0].Pod != "notebook" || u.IdleHolders[0].Gpus != 2 ||
		!u.IdleHolders[0].IdleSince.Time.Equal(t0.Add(-6*time.Hour)) || u.IdleHolders[0].Model != "NVIDIA-H100-80GB-HBM3" {
		t.Errorf("idle holders = %+v; want ml/notebook, 2 GPUs, idle since 6h ago, model in GFD form", u.IdleHolders)
	}
	want := homelabv1.UsageNamespace{Namespace: "ml", Model: "NVIDIA-H100-80GB-HBM3", HeldGpus: 3, HeldGpuHours: 72, IdleGpuHours: 12}
	if len(u.Namespaces) != 1 || u.Namespaces[0] != want {
		t.Errorf("namespaces = %+v; want %+v", u.Namespaces, want)
	}
}

// A series whose pod the operator does not know as a holder on that node is not counted.
func TestSeriesOfAPodThatHoldsNothingIsIgnored(t *testing.T) {
	devices := []Device{
		device("gpu-a", "ml", "gone", "GPU-1", 6*time.Hour),
		device("gpu-a", "ml", "moved", "GPU-2", 6*time.Hour),
		device("gpu-a", "", "", "GPU-3", 6*time.Hour),
	}
	known := holdersOf("ml/moved@gpu-b")
	if got := Compute(devices, known, settings, t0, nil); len(got) != 0 {
		t.Errorf("holders = %+v; want none", got)
	}
}

// A MIG holder's devices are its MIG instances: two instances of one GPU are two devices.
func TestMIGDevicesCountEach(t *testing.T) {
	a, b := device("gpu-a", "ml", "mig-pod", uuid, 5*time.Hour), device("gpu-a", "ml", "mig-pod", uuid, 5*time.Hour)
	a.Profile, a.Instance, b.Profile, b.Instance = "1g.10gb", "9", "1g.10gb", "10"
	got := Compute([]Device{a, b}, holdersOf("ml/mig-pod@gpu-a"), settings, t0, nil)
	if len(got) != 1 || got[0].GPUs != 2 || !got[0].LongIdle {
		t.Errorf("holders = %+v; want one holder of 2 MIG devices, long idle", got)
	}
}

// A DRA holder is known by the device its namespace holds, matched by UUID (MIG: parent UUID
// and profile) with the node's slices; a pod of another namespace on it is not.
func TestDRAHolderMatchedByUUID(t *testing.T) {
	tracker := allocation.NewTracker()
	tracker.SetClaim(&allocation.Claim{Namespace: "ml", Name: "gpus", UID: "c1",
		Devices: []allocation.Device{{Pool: "dra-a", Device: "gpu-0"}, {Pool: "dra-a", Device: "gpu-1-mig-1g10gb-19-0"}},
		Holders: []allocation.Holder{{Name: "trainer"}}})
	devices := func(node string) []homelabv1.GpuDevice {
		if node != "dra-a" {
			return nil
		}
		return []homelabv1.GpuDevice{{Name: "gpu-0", UUID: "GPU-0"}, {Name: "gpu-7", UUID: "GPU-7"},
			{Name: "gpu-1-mig-1g10gb-19-0", UUID: "MIG-1", ParentUUID: "GPU-1", Profile: "1g.10gb"}}
	}
	known := NewKnown(tracker, devices)
	mig := device("dra-a", "ml", "trainer", "GPU-1", time.Hour)
	mig.Profile, mig.Instance = "1g.10gb", "9"
	in := []Device{device("dra-a", "ml", "trainer", "GPU-0", time.Hour), mig,
		device("dra-a", "ml", "trainer", "GPU-7", time.Hour), device("dra-a", "other", "trainer", "GPU-0", time.Hour)}
	got := Compute(in, known, settings, t0, nil)
	if len(got) != 1 || got[0].Namespace != "ml" || got[0].GPUs != 2 {
		t.Errorf("holders = %+v; want ml/trainer with GPU-0 and its MIG device (GPU-7 is not its, other holds nothing)", got)
	}
}

// A device-plugin pod the tracker keeps is known on the node it is bound to only.
func TestDevicePluginHolderFromTracker(t *testing.T) {
	tracker := allocation.NewTracker()
	tracker.SetPod(&allocation.Pod{Namespace: "ml", Name: "nb", Node: "gpu-a", UID: allocation.UIDOf("u1"),
		Requests: []allocation.ResourceCount{{Name: allocation.ResourceGPU, Count: 1}}})
	known := NewKnown(tracker, nil)
	holds := func(pod, node string) bool {
		_, ok := known.Holds("ml", pod, node, "GPU-1", "")
		return ok
	}
	if !holds("nb", "gpu-a") || holds("nb", "gpu-b") || holds("x", "gpu-a") {
		t.Error("the tracker's pod ml/nb is known on gpu-a only")
	}
}

// The window moves on while a holder stays idle: it stays idle since the same time.
func TestIdleSinceKeptAsTheWindowMoves(t *testing.T) {
	known := holdersOf("ml/nb@gpu-a")
	never := device("gpu-a", "ml", "nb", "GPU-1", 0)
	never.LastBusy, never.IdleSteps = 0, never.HeldSteps // never busy within the window
	first := Compute([]Device{never}, known, settings, t0, nil)
	later := t0.Add(time.Hour)
	never.FirstSeen = later.Add(-settings.Window).Unix()
	next := Compute([]Device{never}, known, settings, later, &Snapshot{Holders: first})
	if first[0].IdleSince != t0.Add(-settings.Window).Unix() || next[0].IdleSince != first[0].IdleSince {
		t.Errorf("idle since %d, then %d; want the window's start both times", first[0].IdleSince, next[0].IdleSince)
	}
}

// readings is a Source a test sets.
type readings struct {
	devices []Device
	problem Problem
	reads   int
}

func (s *readings) Read(context.Context, time.Time) ([]Device, Problem) {
	s.reads++
	return s.devices, s.problem
}

// Minutes pass on a quiet cluster: the answers differ by a minute each, the snapshot does
// not change until a rounded hour does; a failing Prometheus keeps the holders and says so.
func TestCacheChangesOnlyWithWhatTheStatusShows(t *testing.T) {
	ctx := t.Context()
	clock := clocktesting.NewFakeClock(t0.Add(10 * time.Second))
	d := device("gpu-a", "ml", "trainer", "GPU-1", 0)
	d.HeldSteps, d.FirstSeen = 60*5+1, t0.Add(-5*time.Hour).Unix()
	src := &readings{devices: []Device{d}}
	c := NewCache(CacheConfig{Source: src, Holders: func() Holders { return holdersOf("ml/trainer@gpu-b", "ml/trainer@gpu-a") },
		Settings: settings, Interval: time.Minute, Clock: clock})
	changes := 0
	c.OnChange(func(string) { changes++ })
	c.Refresh(ctx)
	if changes != 1 || len(c.Snapshot().Holders) != 1 {
		t.Fatalf("first answer: %d changes, %d holders; want 1, 1", changes, len(c.Snapshot().Holders))
	}
	for range 58 {
		clock.Step(time.Minute)
		src.devices[0].HeldSteps++
		src.devices[0].LastBusy = clock.Now().Truncate(Step).Unix()
		c.Refresh(ctx)
	}
	if changes != 1 {
		t.Errorf("%d changes over 58 busy minutes within one hour; want none", changes-1)
	}
	if s := c.Snapshot(); !s.At.Equal(clock.Now().Truncate(Step)) || s != c.last {
		t.Errorf("the published snapshot is of %s, the last computed of %s: want one snapshot kept, the last", s.At, c.last.At)
	}
	clock.Step(time.Minute)
	src.devices[0].HeldSteps++
	c.Refresh(ctx)
	if changes != 2 {
		t.Errorf("the held hours went from 5 to 6: %d changes, want 1", changes-1)
	}
	src.problem = Problem{homelabv1.ReasonPrometheusUnreachable, "Prometheus at http://x did not answer within 10s"}
	c.Refresh(ctx)
	s := c.Snapshot()
	if changes != 3 || s.Problem.Reason != homelabv1.ReasonPrometheusUnreachable || len(s.Holders) != 1 {
		t.Errorf("Prometheus down: %d changes, snapshot %+v; want a change keeping the holder", changes-2, s)
	}
	c.Refresh(ctx)
	if changes != 3 {
		t.Error("the same failure again changed the snapshot")
	}
}

// slowSource is a Source whose every reading takes a minute of the fake clock.
type slowSource struct {
	clock   *clocktesting.FakeClock
	problem Problem
}

func (s *slowSource) Read(context.Context, time.Time) ([]Device, Problem) {
	s.clock.Step(time.Minute)
	return nil, s.problem
}

// Each reading's duration and result are told to Observe (the operator's
// gpu_inventory_usage_reading_duration_seconds): ok, or why it failed.
func TestCacheObservesEachReading(t *testing.T) {
	clock := clocktesting.NewFakeClock(t0)
	src := &slowSource{clock: clock}
	var seen []string
	c := NewCache(CacheConfig{Source: src, Holders: func() Holders { return holdersOf() }, Settings: settings, Clock: clock,
		Observe: func(took time.Duration, result string) { seen = append(seen, fmt.Sprintf("%s %s", took, result)) }})
	c.Refresh(t.Context())
	src.problem = Problem{homelabv1.ReasonPrometheusUnreachable, "down"}
	c.Refresh(t.Context())
	if want := []string{"1m0s ok", "1m0s " + homelabv1.ReasonPrometheusUnreachable}; !slices.Equal(seen, want) {
		t.Errorf("observed %q, want %q", seen, want)
	}
}

// readSignal is a Source that tells the test of each reading.
type readSignal chan time.Time

func (r readSignal) Read(_ context.Context, at time.Time) ([]Device, Problem) {
	r <- at
	return nil, Problem{}
}

// Run reads once its holders' caches have synced, then once per interval, in its own
// goroutine, until its context ends.
func TestCacheRunReadsOncePerInterval(t *testing.T) {
	clock := clocktesting.NewFakeClock(t0)
	reads := make(readSignal, 4)
	var synced atomic.Bool
	c := NewCache(CacheConfig{Source: reads, Holders: func() Holders { return holdersOf() }, Settings: settings,
		Interval: 2 * time.Minute, Clock: clock, Synced: []cache.InformerSynced{synced.Load}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	synced.Store(true)
	if at := <-reads; !at.Equal(t0) {
		t.Errorf("first reading at %s, want %s", at, t0)
	}
	for i := 1; i <= 2; i++ {
		for !clock.HasWaiters() { // the ticker is set after the reading
			runtime.Gosched()
		}
		clock.Step(2 * time.Minute)
		if at := <-reads; !at.Equal(t0.Add(time.Duration(i) * 2 * time.Minute)) {
			t.Errorf("reading %d at %s, want one interval after the one before", i, at)
		}
	}
	cancel()
	<-done
	if len(reads) != 0 {
		t.Errorf("%d readings more than one per interval", len(reads))
	}
}

// A new cache reads the window's past a chunk a reading (Refresh says more is to be read),
// publishes its first partial answer and then only the whole window's: two changes, not one
// per chunk.
func TestCacheBackfillPublishesThePartAndTheWhole(t *testing.T) {
	server := httptest.NewServer(&fakePrometheus{history: fleetPast()})
	defer server.Close()
	clock := clocktesting.NewFakeClock(t0.Add(10 * time.Second))
	c := NewCache(CacheConfig{Source: newReader(t, server.URL, time.Second), Holders: func() Holders { return everyone{} },
		Settings: settings, Clock: clock})
	var published []time.Duration
	c.OnChange(func(string) { published = append(published, c.Snapshot().Covered) })
	readings := 1
	for c.Refresh(t.Context()) {
		readings++
	}
	if want := []time.Duration{Chunk + Step, settings.Window}; !slices.Equal(published, want) || readings != int(settings.Window/Chunk) {
		t.Errorf("%d readings published snapshots covering %v; want %d readings publishing %v", readings, published, int(settings.Window/Chunk), want)
	}
	if s := c.Snapshot(); s.Partial() || len(s.Holders) != 9 {
		t.Errorf("after the backfill: partial %v, %d holders; want the whole window, 9 holders", s.Partial(), len(s.Holders))
	}
}

// backfilling is a Source whose first answers count part of the window.
type backfilling struct {
	reads   chan time.Time
	partial int
}

func (b *backfilling) Read(_ context.Context, at time.Time) ([]Device, Problem) {
	b.partial--
	b.reads <- at
	return nil, Problem{}
}

func (b *backfilling) Covered() time.Duration {
	if b.partial >= 0 {
		return time.Hour
	}
	return settings.Window
}

// Run reads the window's past reading after reading, without waiting for the interval, then
// once per interval.
func TestCacheRunBackfillsWithoutWaiting(t *testing.T) {
	clock := clocktesting.NewFakeClock(t0)
	src := &backfilling{reads: make(chan time.Time, 8), partial: 3}
	rounds := make(chan struct{}, 8)
	c := NewCache(CacheConfig{Source: src, Holders: func() Holders { return holdersOf() }, Settings: settings,
		Interval: time.Minute, Clock: clock, Done: func() { rounds <- struct{}{} }})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	for i := range 4 {
		if at := <-src.reads; !at.Equal(t0) {
			t.Errorf("reading %d at %s, want %s: the backfill waited", i, at, t0)
		}
	}
	for !clock.HasWaiters() {
		runtime.Gosched()
	}
	if len(src.reads) != 0 {
		t.Errorf("%d readings after the window was whole, before the interval", len(src.reads))
	}
	if len(rounds) != 1 {
		t.Errorf("Done called %d times for the backfill's round of 4 readings, want once, after it", len(rounds))
	}
	<-rounds
	clock.Step(time.Minute)
	if at := <-src.reads; !at.Equal(t0.Add(time.Minute)) {
		t.Errorf("the next reading at %s, want an interval later", at)
	}
	<-rounds // and once after the next reading
	cancel()
	<-done
}
