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
	"regexp"
	"slices"
	"strconv"
	"time"
)

// history is DCGM exporter's past as Prometheus would hold it, at one step a minute: series
// present over a span with a utilisation per step. It answers the reader's query shapes
// (QueriesFor) as Prometheus evaluates them, and the window queries the reader replaces
// (window), so that a test can compare the two over the same past.
type history struct {
	series []histSeries
}

// histSeries is one series of S (a device read from one source), present at the steps in
// [from, to] but not in [hole[0], hole[1]) (Unix seconds).
type histSeries struct {
	labels   map[string]string
	from, to int64
	hole     [2]int64
	util     func(t int64) float64
}

func (s *histSeries) present(t int64) bool {
	return s.from <= t && t <= s.to && (t < s.hole[0] || t >= s.hole[1])
}

var spanOf = regexp.MustCompile(`\[(\d+)s:60s\]`)

// answer evaluates query at at.
func (h *history) answer(query string, at int64) []series {
	span := Step
	if m := spanOf.FindStringSubmatch(query); m != nil {
		n, _ := strconv.Atoi(m[1])
		span = time.Duration(n) * time.Second
	}
	q := QueriesFor(settings, span)
	var out []series
	if query == q.Present {
		if len(h.series) > 0 {
			return []series{{map[string]string{}, float64(len(h.series))}}
		}
		return nil
	}
	for _, s := range h.series {
		f := s.over(at, span)
		var v float64
		switch query {
		case q.Now:
			if f.held == 0 {
				continue
			}
			v = s.util(at)
		case q.Held:
			v = float64(f.held)
		case q.Idle:
			v = float64(f.idle)
		case q.FirstSeen:
			v = float64(f.first)
		case q.LastBusy:
			v = float64(f.busy)
		default:
			panic("a query the history does not know: " + query)
		}
		if v == 0 && query != q.Now {
			continue // an empty range answers no series
		}
		out = append(out, series{s.labels, v})
	}
	return out
}

// figures are a series' counts over a span.
type figures struct {
	held, idle  int32
	first, busy int64
}

// over counts the steps (at-span, at].
func (s *histSeries) over(at int64, span time.Duration) figures {
	var f figures
	for t := at - int64(span/time.Second) + 60; t <= at; t += 60 {
		if !s.present(t) {
			continue
		}
		f.held++
		if f.first == 0 {
			f.first = t
		}
		if s.util(t) < settings.IdleBelow {
			f.idle++
		} else {
			f.busy = t
		}
	}
	return f
}

// window is what the window queries the reader replaces answered at at: the devices held at
// at, their figures over the window, a device of both series read from the profiling one.
func (h *history) window(at int64) []Device {
	var out []Device
	for _, s := range h.series {
		if s.over(at, settings.Window).held == 0 || !slices.ContainsFunc(h.series, func(o histSeries) bool {
			return sameDevice(o.labels, s.labels) && o.present(at)
		}) {
			continue // not held at at (by either series)
		}
		if s.labels[sourceLabel] == "u" && slices.ContainsFunc(h.series, func(p histSeries) bool {
			return p.labels[sourceLabel] == "p" && sameDevice(p.labels, s.labels) && p.over(at, settings.Window).held > 0
		}) {
			continue // counted from the profiling series
		}
		f := s.over(at, settings.Window)
		out = append(out, Device{Node: s.labels["Hostname"], Namespace: s.labels["namespace"], Pod: s.labels["pod"],
			UUID: s.labels["UUID"], Profile: s.labels["GPU_I_PROFILE"], Instance: s.labels["GPU_I_ID"], Model: s.labels["modelName"],
			Profiling: s.labels[sourceLabel] == "p", HeldSteps: f.held, IdleSteps: f.idle, FirstSeen: f.first, LastBusy: f.busy})
	}
	return out
}

func sameDevice(a, b map[string]string) bool {
	for _, l := range []string{"Hostname", "UUID", "GPU_I_ID", "namespace", "pod"} {
		if a[l] != b[l] {
			return false
		}
	}
	return true
}
