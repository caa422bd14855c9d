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

package proc

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestStatusFieldReadsKiB(t *testing.T) {
	status := "Name:\tgpu-inventory-op\nVmHWM:\t   51200 kB\nVmRSS:\t   39322 kB\nRssAnon:\t   18432 kB\n"
	for field, want := range map[string]float64{"VmRSS": 39322, "VmHWM": 51200, "RssAnon": 18432, "RssFile": 0} {
		if got := statusField(strings.NewReader(status), field); got != want {
			t.Errorf("%s = %v, want %v", field, got, want)
		}
	}
}

// The command name may hold spaces and parentheses: utime and stime are the 14th and 15th
// fields of the whole line, counted after the name.
func TestStatTicksCountsAfterTheCommandName(t *testing.T) {
	stat := "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 37 0 0 20 0 12 0 100 0 0"
	if got := statTicks(stat); got != 287 {
		t.Errorf("statTicks = %d, want 250+37", got)
	}
	if got := statTicks("garbage"); got != 0 {
		t.Errorf("statTicks of garbage = %d, want 0", got)
	}
}

func TestSelfHasAResidentSizeAndPeak(t *testing.T) {
	p := Self()
	rss, peak := p.RSS(), p.Peak()
	if rss <= 0 || peak < rss {
		t.Errorf("RSS %v KiB, peak %v KiB: want 0 < RSS <= peak", rss, peak)
	}
	if p.CPUTicks() < 0 {
		t.Errorf("CPUTicks < 0")
	}
}

func TestWindowTakesOneSampleAnIntervalForTheSpan(t *testing.T) {
	w := Self().window(context.Background(), 50*time.Millisecond, 10*time.Millisecond)
	if w.Low <= 0 || w.Low > w.Median || w.Median > w.High {
		t.Errorf("window %+v: want 0 < low <= median <= high", w)
	}
}

func TestPeakUntilReturnsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if peak := Self().peakUntil(ctx, 5*time.Millisecond); peak <= 0 {
		t.Errorf("peak %v KiB, want > 0", peak)
	}
}

func TestSettleStopsWithinTargetOrAtTheBound(t *testing.T) {
	p := Self()
	if _, took := p.settle(context.Background(), 1<<40, time.Minute, time.Millisecond); took > 10*time.Second {
		t.Errorf("within the target from the start: settled after %s, want 5 readings", took)
	}
	rss, took := p.settle(context.Background(), 0, 20*time.Millisecond, time.Millisecond)
	if took < 20*time.Millisecond || rss <= 0 {
		t.Errorf("never within the target: %v KiB after %s, want the last reading at the bound of 20ms", rss, took)
	}
}
