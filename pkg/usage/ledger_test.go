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
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// fleetPast is a day and a half of DCGM series ending two hours after t0: a busy GPU, one idle
// for the last six hours (both series), a pod that ends and one that starts, a MIG device, a
// T4 with the percent series only, a GPU missing from the exporter for twenty minutes, a GPU
// whose profiling series begins two hours before t0, one busy every seventh minute, and one
// last busy 23 hours before t0 (its busy step leaves the window as the readings go on).
func fleetPast() *history {
	start, end := t0.Add(-36*time.Hour), t0.Add(2*time.Hour)
	idleSince := t0.Add(-6 * time.Hour).Unix()
	const busy, idle = 0.8, 0.01
	constant := func(v float64) func(int64) float64 { return func(int64) float64 { return v } }
	mig := dcgm("gpu-c", "infer", "small", "GPU-3", "p")
	mig["GPU_I_PROFILE"], mig["GPU_I_ID"] = "1g.10gb", "9"
	gap := held(dcgm("gpu-e", "ml", "gaps", "GPU-7", "p"), start, end, constant(idle))
	gap.hole = [2]int64{t0.Add(20 * time.Minute).Unix(), t0.Add(40 * time.Minute).Unix()}
	return &history{series: []histSeries{
		held(dcgm("gpu-a", "train", "llm", "GPU-1", "p"), start, end, constant(busy)),
		held(dcgm("gpu-a", "train", "llm", "GPU-1", "u"), start, end, constant(busy)),
		held(dcgm("gpu-a", "ml", "nb", "GPU-2", "p"), start, end, func(t int64) float64 { return ifBefore(t, idleSince, busy, idle) }),
		held(dcgm("gpu-a", "ml", "nb", "GPU-2", "u"), start, end, func(t int64) float64 { return ifBefore(t, idleSince, busy, idle) }),
		held(dcgm("gpu-b", "ml", "ends", "GPU-4", "p"), start, t0.Add(30*time.Minute), constant(idle)),
		held(dcgm("gpu-b", "ml", "starts", "GPU-5", "p"), t0.Add(10*time.Minute), end, constant(busy)),
		held(mig, t0.Add(-3*time.Hour), end, constant(idle)),
		held(dcgm("gpu-d", "ml", "t4", "GPU-6", "u"), start, end, constant(0.03)),
		gap,
		held(dcgm("gpu-f", "ml", "late", "GPU-8", "u"), start, end, constant(0.02)),
		held(dcgm("gpu-f", "ml", "late", "GPU-8", "p"), t0.Add(-2*time.Hour), end, constant(idle)),
		held(dcgm("gpu-g", "ml", "bursty", "GPU-9", "p"), start, end, func(t int64) float64 { return map[bool]float64{true: busy, false: idle}[t/60%7 == 0] }),
		held(dcgm("gpu-h", "ml", "old", "GPU-10", "p"), start, end, func(t int64) float64 { return ifBefore(t, t0.Add(-23*time.Hour).Unix(), busy, idle) }),
	}}
}

// everyone holds every series' pod on its node.
type everyone struct{}

func (everyone) Holds(_, pod, _, _, _ string) (string, bool) { return pod, true }

// sameFigures compares a reading's devices with the window queries' over the same past: the
// steps held and idle of each, and the holders Compute makes of them with the snapshot before.
func sameFigures(t *testing.T, at time.Time, got, want []Device, gotPrev, wantPrev *Snapshot) (*Snapshot, *Snapshot) {
	t.Helper()
	line := func(d Device) string {
		return fmt.Sprintf("%s %s %s/%s %s profiling=%v held=%d idle=%d", d.Node, d.UUID, d.Namespace, d.Pod, d.Instance, d.Profiling, d.HeldSteps, d.IdleSteps)
	}
	lines := func(ds []Device) []string {
		out := make([]string, len(ds))
		for i, d := range ds {
			out[i] = line(d)
		}
		slices.Sort(out)
		return out
	}
	if g, w := lines(got), lines(want); !slices.Equal(g, w) {
		t.Fatalf("at %s the reader's devices:\n%s\nthe window queries':\n%s", at.Format(time.TimeOnly), strings.Join(g, "\n"), strings.Join(w, "\n"))
	}
	gs := &Snapshot{At: at, Settings: settings, Holders: Compute(got, everyone{}, settings, at, gotPrev)}
	ws := &Snapshot{At: at, Settings: settings, Holders: Compute(want, everyone{}, settings, at, wantPrev)}
	for i := range gs.Holders {
		g, w := gs.Holders[i], ws.Holders[i]
		if g.Pod == "gaps" && g.IdleSince < w.IdleSince {
			// The window queries forget it, the reader does not: the exporter lost its series
			// for a while, the snapshot its holder, and it is idle since before.
			w.IdleSince = g.IdleSince
		}
		if g.IdleSince != w.IdleSince || g.LongIdle != w.LongIdle || g.HeldSteps != w.HeldSteps || g.IdleSteps != w.IdleSteps {
			t.Fatalf("at %s holder %s/%s: reader %+v, window queries %+v", at.Format(time.TimeOnly), g.Namespace, g.Pod, g, w)
		}
	}
	return gs, ws
}

// spans are the spans of the span queries asked (not Now's), in order, as (from, to] in
// minutes before t0.
func spans(asked []asked) [][2]int64 {
	var out [][2]int64
	for _, a := range asked {
		m := spanOf.FindStringSubmatch(a.query)
		if m == nil {
			continue
		}
		var n int64
		fmt.Sscan(m[1], &n)
		if a.query != QueriesFor(settings, time.Duration(n)*time.Second).Held {
			continue
		}
		out = append(out, [2]int64{(t0.Unix() - a.at + n) / 60, (t0.Unix() - a.at) / 60})
	}
	return out
}

// Reading after reading, each asking only the step entering the window and the one leaving
// it, the figures are the window queries' over the same past: as the window rolls on, pods
// end and start, a series goes missing and comes back, profiling begins, a busy step leaves.
func TestReadingsAccumulateAsTheWindowQueries(t *testing.T) {
	h := fleetPast()
	f := &fakePrometheus{history: h}
	server := httptest.NewServer(f)
	defer server.Close()
	r := newReader(t, server.URL, time.Second)
	got, p := readWhole(t, r, t0)
	if p.Reason != "" {
		t.Fatal(p)
	}
	gotPrev, wantPrev := sameFigures(t, t0, got, h.window(t0.Unix()), nil, nil)
	for at := t0.Add(Step); !at.After(t0.Add(2 * time.Hour)); at = at.Add(Step) {
		f.asked = nil
		got, p := r.Read(t.Context(), at)
		if p.Reason != "" {
			t.Fatalf("at %s: %+v", at, p)
		}
		if len(f.asked) != 2 || r.Covered() != settings.Window {
			t.Fatalf("at %s the reading asked %d queries (%v), covering %s; want 2, the step in and the step out, the whole window", at, len(f.asked), f.asked, r.Covered())
		}
		gotPrev, wantPrev = sameFigures(t, at, got, h.window(at.Unix()), gotPrev, wantPrev)
	}
	if n := len(r.ledger.tallies); n != 13 {
		t.Errorf("the ledger keeps %d series, want the 13 seen within the window", n)
	}
}

// A new reader (the operator restarted) reads the window's past a chunk a reading, newest
// first, each chunk at most Chunk long; each reading's figures count what it has read, and
// the last the whole window, as the window queries do.
func TestRestartReadsTheWindowsPastInChunks(t *testing.T) {
	h := fleetPast()
	f := &fakePrometheus{history: h}
	server := httptest.NewServer(f)
	defer server.Close()
	r := newReader(t, server.URL, time.Second)
	var covered []time.Duration
	var got []Device
	for r.Covered() < settings.Window && len(covered) < 100 {
		var p Problem
		if got, p = r.Read(t.Context(), t0); p.Reason != "" {
			t.Fatal(p)
		}
		covered = append(covered, r.Covered())
	}
	if len(covered) != int(settings.Window/Chunk) || covered[0] != Chunk+Step || covered[1] != 2*Chunk+Step {
		t.Errorf("covered %v after each reading; want %d readings, a chunk more each", covered, int(settings.Window/Chunk))
	}
	want := [][2]int64{{31, 1}}
	for to := int64(31); to < 1440; to += 30 {
		want = append(want, [2]int64{min(to+30, 1440), to})
	}
	if s := spans(f.asked); !slices.Equal(s, want) {
		t.Errorf("spans asked (minutes before t0, from and to):\n%v\nwant newest first, at most %s each:\n%v", s, Chunk, want)
	}
	sameFigures(t, t0, got, h.window(t0.Unix()), nil, nil)
}

// Prometheus down for ninety minutes: the readings fail and change nothing; back, the
// reader catches up on the steps it missed a chunk a reading, oldest first, and its figures
// are the window queries' again. Down for longer than the window, it reads the window anew.
func TestGapIsCaughtUp(t *testing.T) {
	h := fleetPast()
	f := &fakePrometheus{history: h}
	server := httptest.NewServer(f)
	defer server.Close()
	r := newReader(t, server.URL, time.Second)
	before := t0.Add(-time.Hour)
	got, p := readWhole(t, r, before)
	if p.Reason != "" {
		t.Fatal(p)
	}
	gotPrev, wantPrev := sameFigures(t, before, got, h.window(before.Unix()), nil, nil)
	f.down = true
	for at := t0.Add(-time.Hour + Step); at.Before(t0.Add(30 * time.Minute)); at = at.Add(Step) {
		if _, p := r.Read(t.Context(), at); p.Reason == "" {
			t.Fatalf("a reading of a Prometheus that is down answered")
		}
	}
	f.down, f.asked = false, nil
	at := t0.Add(30 * time.Minute)
	readings := 0
	for ; readings == 0 || r.Covered() < settings.Window; readings++ {
		var p Problem
		if got, p = r.Read(t.Context(), at); p.Reason != "" {
			t.Fatal(p)
		}
	}
	if readings != 3 {
		t.Errorf("caught up on 90 minutes in %d readings, want 3 of at most %s", readings, Chunk)
	}
	if s, want := spans(f.asked), [][2]int64{{60, 30}, {1500, 1470}, {30, 0}, {1470, 1440}, {0, -29}, {1440, 1410}}; !slices.Equal(s, want) {
		t.Errorf("spans asked (minutes before t0): %v, want %v: the missed steps oldest first, each with the steps leaving the window", s, want)
	}
	sameFigures(t, at, got, h.window(at.Unix()), gotPrev, wantPrev) // the snapshot before the gap is the cache's last

	r.Read(t.Context(), at.Add(25*time.Hour))
	if c := r.Covered(); c != Chunk+Step {
		t.Errorf("after 25 hours without a reading the reader covers %s, want the first chunk of a new window", c)
	}
}
