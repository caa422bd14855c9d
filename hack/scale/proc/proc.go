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

// Package proc reads a Linux process's memory and CPU time from /proc, and samples its
// resident size over time: the one sampler every phase of hack/scale measures memory with.
package proc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Process is a running process, by its ID.
type Process int

// Self is the calling process.
func Self() Process { return Process(os.Getpid()) }

// KiB returns a figure of the process's /proc/PID/status in KiB (VmRSS, VmHWM, RssAnon,
// RssFile, ...), or 0 when it cannot be read.
func (p Process) KiB(field string) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p))
	if err != nil {
		return 0
	}
	defer f.Close()
	return statusField(f, field)
}

// statusField reads one "Field:   123 kB" line of a status file.
func statusField(r io.Reader, field string) float64 {
	s := bufio.NewScanner(r)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			v, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return v
		}
	}
	return 0
}

// RSS is the resident size now (VmRSS), in KiB.
func (p Process) RSS() float64 { return p.KiB("VmRSS") }

// Peak is the largest resident size since the start or the last ResetPeak (VmHWM), in KiB.
func (p Process) Peak() float64 { return p.KiB("VmHWM") }

// ResetPeak sets VmHWM to the current RSS, so that a later Peak is the peak of what follows
// (where the kernel lets a process do that to another).
func (p Process) ResetPeak() {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p), []byte("5"), 0)
}

// CPUTicks returns the process's user and system time, in clock ticks (0 when it cannot be
// read).
func (p Process) CPUTicks() int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
	if err != nil {
		return 0
	}
	return statTicks(string(data))
}

// statTicks reads utime+stime from a stat line; the command name in parentheses may hold
// spaces, so the fields are counted after its closing parenthesis.
func statTicks(stat string) int64 {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 || end+2 > len(stat) {
		return 0
	}
	fields := strings.Fields(stat[end+2:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return utime + stime
}

// Seconds is clock ticks as seconds: Linux reports them in 1/100 s (USER_HZ).
func Seconds(ticks int64) float64 { return float64(ticks) / 100 }

// CoreShare is the share of a core the process took since it had used ticks0, over wall.
func (p Process) CoreShare(ticks0 int64, wall time.Duration) float64 {
	return Seconds(p.CPUTicks()-ticks0) / wall.Seconds()
}

// SettleCPU waits until the process used at most one clock tick in a second, or for at most
// limit.
func (p Process) SettleCPU(limit time.Duration) {
	deadline := time.Now().Add(limit)
	last := p.CPUTicks()
	for time.Now().Before(deadline) {
		time.Sleep(time.Second) // a process that announces nothing: look again
		now := p.CPUTicks()
		if now-last <= 1 {
			return
		}
		last = now
	}
}

// Window is the resident size sampled over a span: the median and range, in KiB.
type Window struct{ Median, Low, High float64 }

func (w Window) String() string {
	return fmt.Sprintf("%.1f MiB (%.1f–%.1f)", w.Median/1024, w.Low/1024, w.High/1024)
}

// sample reads VmRSS now and then every interval, handing each reading to see, until see
// returns true or ctx ends.
func (p Process) sample(ctx context.Context, every time.Duration, see func(kib float64) bool) {
	if see(p.RSS()) {
		return
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if see(p.RSS()) {
			return
		}
	}
}

// Window samples VmRSS once a second for d. With nothing changing, the garbage of periodic
// work still comes and goes between collections: one reading can sit anywhere in that
// cycle, the median of the window does not.
func (p Process) Window(ctx context.Context, d time.Duration) Window {
	return p.window(ctx, d, time.Second)
}

func (p Process) window(ctx context.Context, d, every time.Duration) Window {
	want := max(1, int(d/every))
	var samples []float64
	p.sample(ctx, every, func(kib float64) bool {
		samples = append(samples, kib)
		return len(samples) >= want
	})
	slices.Sort(samples)
	return Window{Median: samples[len(samples)/2], Low: samples[0], High: samples[len(samples)-1]}
}

// PeakUntil returns the largest VmRSS seen, polled every 100 ms until ctx ends (Peak is the
// better figure where the kernel lets ResetPeak work).
func (p Process) PeakUntil(ctx context.Context) float64 {
	return p.peakUntil(ctx, 100*time.Millisecond)
}

func (p Process) peakUntil(ctx context.Context, every time.Duration) float64 {
	var most float64
	p.sample(ctx, every, func(kib float64) bool {
		most = max(most, kib)
		return false
	})
	return most
}

// Settle polls VmRSS once a second until it is at most target 5 times in a row, or has not
// reached a new low for 60 s once Go's forced collection (every 2 minutes when nothing
// allocates) has had time to run, for at most bound; it returns the last figure (KiB) and
// how long it took.
func (p Process) Settle(ctx context.Context, target float64, bound time.Duration) (float64, time.Duration) {
	return p.settle(ctx, target, bound, time.Second)
}

func (p Process) settle(ctx context.Context, target float64, bound, every time.Duration) (float64, time.Duration) {
	start := time.Now()
	var rss, low float64
	var lowAt time.Time
	within, first := 0, true
	p.sample(ctx, every, func(kib float64) bool {
		rss = kib
		if first {
			low, lowAt, first = kib, start, false
			return time.Since(start) >= bound
		}
		if kib < low {
			low, lowAt = kib, time.Now()
		}
		if kib <= target {
			within++
		} else {
			within = 0
		}
		return within >= 5 ||
			(time.Since(start) > 130*time.Second && time.Since(lowAt) > 60*time.Second) || time.Since(start) >= bound
	})
	return rss, time.Since(start)
}
