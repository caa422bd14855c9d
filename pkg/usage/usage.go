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

// Package usage reads what the pods that hold GPUs use of them: DCGM exporter's utilisation
// series from Prometheus, matched to the holders the operator knows, summed per holder. The
// computation (Compute, Summarize) is pure; Reader asks Prometheus; Cache runs the two once
// per interval in a goroutine of its own. docs/design/usage.md says what is asked and why.
package usage

import (
	"cmp"
	"hash/fnv"
	"slices"
	"strings"
	"time"
)

// DCGM exporter's utilisation series, the profiling one preferred.
const (
	MetricEngineActive = "DCGM_FI_PROF_GR_ENGINE_ACTIVE" // a 0-1 ratio
	MetricGPUUtil      = "DCGM_FI_DEV_GPU_UTIL"          // a 0-100 percent
)

// Step is the resolution the window is read at: a GPU is busy or idle for whole steps.
const Step = time.Minute

// MinListedIdle is how long a holder must have been idle to be listed as idle: a pod idle
// for a few minutes is between the steps of its work, and listing it would rewrite the
// status at each of them.
const MinListedIdle = 10 * time.Minute

// Settings are the operator's flags that shape the answer.
type Settings struct {
	Window    time.Duration // --idle-window
	IdleBelow float64       // --idle-below, a 0-1 ratio
	IdleAfter time.Duration // --idle-after
}

// Device is one GPU or MIG device a pod holds, as the queries over the window read it.
type Device struct {
	Node, Namespace, Pod string
	// UUID is the GPU's (a MIG device's parent's); Profile and Instance are a MIG device's
	// GPU_I_PROFILE and GPU_I_ID, empty for a whole GPU.
	UUID, Profile, Instance string
	// Model is DCGM exporter's modelName (NVIDIA H100 80GB HBM3).
	Model string
	// Profiling: read from DCGM_FI_PROF_GR_ENGINE_ACTIVE (else DCGM_FI_DEV_GPU_UTIL).
	Profiling bool
	// HeldSteps and IdleSteps count the window's steps the pod held it, and held it idle.
	HeldSteps, IdleSteps int32
	// FirstSeen is the first step it was seen held, LastBusy the last step it was busy
	// (0: never within the window), Unix seconds.
	FirstSeen, LastBusy int64
}

// Holders says whether the operator knows a pod as a holder of GPUs on a node.
type Holders interface {
	// Holds reports whether pod namespace/name holds GPUs on node: through the device
	// plugin, or a DRA device of node with the GPU's uuid (and MIG profile) that its
	// namespace holds. name is the pod's name as the caller keeps it: a snapshot shares
	// that string rather than keep one of its own.
	Holds(namespace, pod, node, uuid, profile string) (name string, ok bool)
}

// Holder is what one pod holds on one node and its use of it over the window.
type Holder struct {
	Namespace, Pod, Node string
	// Model is the product in GPU Feature Discovery's form (NVIDIA-H100-80GB-HBM3).
	Model string
	// GPUs counts its devices (a MIG device counts as one).
	GPUs int32
	// HeldSteps and IdleSteps are summed over its devices.
	HeldSteps, IdleSteps int32
	// Profiling: every device was read from DCGM_FI_PROF_GR_ENGINE_ACTIVE.
	Profiling bool
	// LongIdle: idle for longer than Settings.IdleAfter when the answer was read.
	LongIdle bool
	// IdleSince is when its devices were last busy (Unix seconds); 0: busy now.
	IdleSince int64
}

// Problem is why the last query gave no answer; the zero Problem: it did.
type Problem struct {
	Reason, Message string
}

// Snapshot is the usage the last good answer gave, and how the last query went.
type Snapshot struct {
	// At is when the last good answer was read; zero: none yet.
	At       time.Time
	Settings Settings
	// Holders are sorted by namespace, pod and node.
	Holders []Holder
	Problem Problem
	// Covered is how much of the window ending at At the figures count, less than the window
	// while its past is still being read after a start or a gap; 0: the whole window.
	Covered time.Duration
}

// Known reports whether a good answer was ever read.
func (s *Snapshot) Known() bool { return !s.At.IsZero() }

// Partial reports whether the figures count less than the window.
func (s *Snapshot) Partial() bool {
	return s.Known() && s.Covered > 0 && s.Covered < s.Settings.Window
}

// Compute sums the devices per holder the operator knows: a device whose pod holds nothing
// on its node is left out. prev is the snapshot before (nil: none): a holder idle then and
// not busy since stays idle since the same time, although the window has moved on. It
// reorders devices, those it counts first.
func Compute(devices []Device, holders Holders, s Settings, at time.Time, prev *Snapshot) []Holder {
	kept := devices[:0]
	for i := range devices {
		d := &devices[i]
		if d.Pod == "" {
			continue
		}
		if name, ok := holders.Holds(d.Namespace, d.Pod, d.Node, d.UUID, d.Profile); ok {
			d.Pod = name
			kept = append(kept, *d)
		}
	}
	// Sorted by holder, a holder's devices are adjacent: no map of holders is built.
	slices.SortFunc(kept, func(a, b Device) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Pod, b.Pod), strings.Compare(a.Node, b.Node))
	})
	n := 0
	for i := range kept {
		if i == 0 || !sameHolder(&kept[i-1], &kept[i]) {
			n++
		}
	}
	out := make([]Holder, 0, n)
	lastBusy := make([]int64, 0, n) // each holder's, for this computation only
	models := map[string]string{}   // DCGM's model names in GFD's form, converted once
	for i := range kept {
		d := &kept[i]
		if i == 0 || !sameHolder(&kept[i-1], d) {
			model, ok := models[d.Model]
			if !ok {
				model = ModelOf(d.Model)
				models[d.Model] = model
			}
			out = append(out, Holder{Namespace: d.Namespace, Pod: d.Pod, Node: d.Node, Model: model, Profiling: true})
			lastBusy = append(lastBusy, 0)
		}
		add(&out[len(out)-1], d)
		lastBusy[len(out)-1] = max(lastBusy[len(out)-1], d.LastBusy)
	}
	now := at.Unix()
	for i := range out {
		h := &out[i]
		if h.IdleSince > now {
			h.IdleSince = 0 // busy at the last step
			continue
		}
		if p := prev.find(h); p != nil && p.IdleSince > 0 && p.IdleSince < h.IdleSince && lastBusy[i] < p.IdleSince {
			h.IdleSince = p.IdleSince
		}
		h.LongIdle = now-h.IdleSince > int64(s.IdleAfter/time.Second)
	}
	return out
}

func sameHolder(a, b *Device) bool {
	return a.Namespace == b.Namespace && a.Pod == b.Pod && a.Node == b.Node
}

// add counts one device of a holder. A holder is idle since the latest of its devices.
func add(h *Holder, d *Device) {
	h.GPUs++
	h.Profiling = h.Profiling && d.Profiling
	h.HeldSteps += d.HeldSteps
	h.IdleSteps += d.IdleSteps
	since := d.FirstSeen
	if d.LastBusy > 0 {
		since = max(since, d.LastBusy+int64(Step/time.Second))
	}
	if since == 0 {
		since = 1 // seen, time unknown: idle since the start of time
	}
	h.IdleSince = max(h.IdleSince, since)
}

func compareHolders(a, b Holder) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	if c := strings.Compare(a.Pod, b.Pod); c != 0 {
		return c
	}
	return strings.Compare(a.Node, b.Node)
}

// find is the holder h was in the snapshot; nil when none.
func (s *Snapshot) find(h *Holder) *Holder {
	if s == nil {
		return nil
	}
	i, ok := slices.BinarySearchFunc(s.Holders, *h, compareHolders)
	if !ok {
		return nil
	}
	return &s.Holders[i]
}

// ModelOf is DCGM exporter's modelName in GPU Feature Discovery's form: spaces become dashes.
func ModelOf(name string) string {
	if !strings.Contains(name, " ") {
		return name
	}
	return strings.ReplaceAll(strings.TrimSpace(name), " ", "-")
}

// Digest is what a status made of the snapshot can show: the rounded hours per namespace
// and model, each holder's GPUs and idle class, the problem. Two snapshots with the same
// digest write the same status.
func (s *Snapshot) Digest() uint64 {
	h := fnv.New64a()
	write := func(parts ...string) {
		for _, p := range parts {
			h.Write([]byte(p))
			h.Write([]byte{0})
		}
	}
	var num [8]byte
	writeInt := func(v int64) {
		for i := range num {
			num[i] = byte(v >> (8 * i))
		}
		h.Write(num[:])
	}
	write(s.Problem.Reason, s.Problem.Message)
	if s.Partial() {
		writeInt(3)
	}
	for i := range s.Holders {
		hd := &s.Holders[i]
		write(hd.Namespace, hd.Pod, hd.Node, hd.Model)
		writeInt(int64(hd.GPUs))
		writeInt(listedSince(hd, s.At))
		if hd.LongIdle {
			writeInt(1)
		}
		if hd.Profiling {
			writeInt(2)
		}
	}
	for _, row := range rows(s.Holders, nil) {
		write(row.Namespace, row.Model)
		writeInt(row.HeldGpuHours)
		writeInt(row.IdleGpuHours)
	}
	return h.Sum64()
}

// listedSince is the holder's IdleSince when it is idle long enough to be listed, else 0.
func listedSince(h *Holder, at time.Time) int64 {
	if h.IdleSince == 0 || at.Unix()-h.IdleSince < int64(MinListedIdle/time.Second) {
		return 0
	}
	return h.IdleSince
}
