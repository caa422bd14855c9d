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
	"cmp"
	"context"
	"hash/maphash"
	"slices"
	"time"
)

// The reader does not ask for the whole window at each reading: it keeps, per device, what
// the window's queries would answer, and asks only for the steps that entered the window
// since the last reading and those that left it. After a start, or a gap longer than the
// window, it reads the window's past in chunks, newest first, one chunk per reading.

// Chunk is the longest span one reading asks for: a chunk of the window's past after a
// start, or of the steps missed after a gap.
const Chunk = 30 * time.Minute

// tally is what the ledger keeps of one device read from one series: the steps it was seen
// and seen idle within the counted span, the first step it was seen and the last it was busy
// (Unix minutes; busy 0: never seen busy). The two are kept after they leave the window: a
// holder idle since before it stays idle since then.
type tally struct {
	held, idle  int32
	first, busy uint32
}

// entry is a device's tally under its key.
type entry struct {
	key uint64
	tally
}

// ledger holds the tallies of the steps (from, to], Unix seconds, to - from at most the
// window. A device is keyed by a hash of its labels (Reader.key). The entries are sorted by
// key, in a slice of their exact length rather than a map: a map would keep room to grow.
type ledger struct {
	tallies  []entry // nil: nothing read yet
	from, to int64
	at       int64 // the last reading's step
}

// span is the steps (from, to], added to the tallies or, leaving the window, taken out.
type span struct {
	from, to int64
	out      bool
}

// plan is what one reading asks: the step at now (addNow), the spans, and the ledger's
// counted steps once they are in.
type plan struct {
	reset    bool
	addNow   bool
	spans    []span
	from, to int64
}

// plan says what a reading at now asks: the steps missed since the last reading (at most a
// chunk), the step at now once those are in, then, caught up, a chunk of the window's past
// the ledger lacks; and takes out the steps that left the window.
func (l *ledger) plan(now int64, window, chunk time.Duration) plan {
	step, w, c := int64(Step/time.Second), int64(window/time.Second), int64(chunk/time.Second)
	var p plan
	from, to := l.from, l.to
	if l.tallies == nil || now-to >= w || now < to {
		p.reset, from, to = true, now-step, now-step
	}
	behind := to < now-step
	if behind {
		b := min(now-step, to+c)
		p.spans = append(p.spans, span{from: to, to: b})
		to = b
	}
	if to == now-step {
		p.addNow, to = true, now
	}
	if !behind && to == now && from > to-w {
		a := max(to-w, from-c)
		p.spans = append(p.spans, span{from: a, to: from})
		from = a
	}
	if from < to-w {
		p.spans = append(p.spans, span{from: from, to: to - w, out: true})
		from = to - w
	}
	p.from, p.to = from, to
	return p
}

// find is the tally of the device keyed k.
func (l *ledger) find(k uint64) (tally, bool) {
	i, ok := slices.BinarySearchFunc(l.tallies, k, compareKey)
	if !ok {
		return tally{}, false
	}
	return l.tallies[i].tally, true
}

func compareKey(e entry, k uint64) int { return cmp.Compare(e.key, k) }

// apply adds a reading's deltas to the tallies; a device with no step left is dropped. The
// entries are updated in place; a new slice is made only when devices came or went.
func (l *ledger) apply(p plan, now int64, deltas map[uint64]tally) {
	old := l.tallies
	if p.reset {
		old = []entry{}
	}
	var added []entry
	dropped := 0
	for k, d := range deltas {
		i, ok := slices.BinarySearchFunc(old, k, compareKey)
		if !ok {
			if d.held > 0 {
				var t tally
				t.add(d)
				added = append(added, entry{k, t})
			}
			continue // else leaving the window, never counted
		}
		old[i].add(d)
		if old[i].held <= 0 {
			dropped++
		}
	}
	l.tallies = old
	if len(added) > 0 || dropped > 0 {
		slices.SortFunc(added, func(a, b entry) int { return cmp.Compare(a.key, b.key) })
		l.tallies = merge(old, added, len(old)-dropped+len(added))
	}
	l.from, l.to, l.at = p.from, p.to, now
}

// add counts a reading's delta in the tally.
func (t *tally) add(d tally) {
	t.held += d.held
	t.idle = min(max(t.idle+d.idle, 0), max(t.held, 0))
	if d.first != 0 && (t.first == 0 || d.first < t.first) {
		t.first = d.first
	}
	t.busy = max(t.busy, d.busy)
}

// merge is old's entries with steps left and added, in key order, n of them.
func merge(old, added []entry, n int) []entry {
	out := make([]entry, 0, n)
	for len(old) > 0 || len(added) > 0 {
		if len(added) == 0 || len(old) > 0 && old[0].key < added[0].key {
			if old[0].held > 0 {
				out = append(out, old[0])
			}
			old = old[1:]
			continue
		}
		out = append(out, added[0])
		added = added[1:]
	}
	return out
}

// covered is how much of the window ending at the last reading the tallies count.
func (l *ledger) covered(window time.Duration) time.Duration {
	if l.tallies == nil {
		return 0
	}
	from := max(l.from, l.at-int64(window/time.Second))
	return time.Duration(max(l.to-from, 0)) * time.Second
}

// deltas are one reading's changes to the tallies.
type deltas map[uint64]tally

// add counts one step at t of a device's series with utilisation v, taken out when out.
func (d deltas) step(k uint64, t int64, idle, out bool) {
	x := d[k]
	n := int32(1)
	if out {
		n = -1
	}
	x.held += n
	if idle {
		x.idle += n
	}
	if !out {
		m := minutes(t)
		if x.first == 0 || m < x.first {
			x.first = m
		}
		if !idle {
			x.busy = max(x.busy, m)
		}
	}
	d[k] = x
}

func minutes(t int64) uint32 { return uint32(t / 60) }

// Covered is how much of the window the last reading's figures cover: the window, unless
// the reader is still reading its past after a start or a gap.
func (r *Reader) Covered() time.Duration { return r.ledger.covered(r.settings.Window) }

// heldNow are the devices held at a reading's step, each once: a device of both series is
// read from the profiling one as long as the ledger counts that one.
type heldNow struct {
	devices []Device
	keys    []uint64
	seen    map[uint64]struct{}
}

func (r *Reader) newHeldNow() *heldNow {
	return &heldNow{devices: make([]Device, 0, r.lastHeld), keys: make([]uint64, 0, r.lastHeld), seen: make(map[uint64]struct{}, r.lastHeld)}
}

// add keeps the device of a series held now, keyed k.
func (r *Reader) addHeld(h *heldNow, m *seriesLabels, k uint64) {
	profiling := m.Source != "u"
	if !profiling {
		if pk := r.key(m.Hostname, m.UUID, m.Instance, m.Name, m.Pod, true); r.ledger.has(pk) {
			profiling, k = true, pk
		}
	}
	if _, dup := h.seen[k]; dup {
		return
	}
	h.seen[k] = struct{}{}
	d := r.device(m)
	d.Profiling = profiling
	h.devices = append(h.devices, d)
	h.keys = append(h.keys, k)
}

// Read reads the devices held at at and their use over the window ending there, within the
// reader's timeout: the step at at and what the ledger lacks (plan). A failure is a Problem
// and leaves the ledger as it was.
func (r *Reader) Read(ctx context.Context, at time.Time) ([]Device, Problem) {
	if r.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	now := at.Truncate(Step).Unix()
	p := r.ledger.plan(now, r.settings.Window, Chunk)
	d := deltas{}
	held := r.newHeldNow()
	if pr := r.query(ctx, QueriesFor(r.settings, Step).Now, at.Truncate(Step), func(m *seriesLabels, v float64) {
		k := r.seriesKey(m)
		r.addHeld(held, m, k)
		if p.addNow {
			d.step(k, now, v < r.settings.IdleBelow, false)
		}
	}); pr.Reason != "" {
		return nil, pr
	}
	for _, s := range p.spans {
		if pr := r.readSpan(ctx, s, d); pr.Reason != "" {
			return nil, pr
		}
	}
	if len(held.devices) == 0 {
		if pr := r.noDevices(ctx, at.Truncate(Step)); pr.Reason != "" {
			return nil, pr
		}
	}
	r.ledger.apply(p, now, d)
	return r.devices(held), Problem{}
}

// readSpan adds a span's figures to d, or takes them out: one step is one answer of Now,
// a longer span the counts over it (and, added, the first and last busy steps).
func (r *Reader) readSpan(ctx context.Context, s span, d deltas) Problem {
	at := time.Unix(s.to, 0)
	length := time.Duration(s.to-s.from) * time.Second
	q := QueriesFor(r.settings, length)
	if length == Step {
		return r.query(ctx, q.Now, at, func(m *seriesLabels, v float64) {
			d.step(r.seriesKey(m), s.to, v < r.settings.IdleBelow, s.out)
		})
	}
	sign := int32(1)
	if s.out {
		sign = -1
	}
	figures := []figure{
		{q.Held, func(x *tally, v int64) { x.held += sign * int32(v) }},
		{q.Idle, func(x *tally, v int64) { x.idle += sign * int32(v) }},
	}
	if !s.out {
		figures = append(figures, figure{q.FirstSeen, func(x *tally, v int64) {
			if m := minutes(v); x.first == 0 || m < x.first {
				x.first = m
			}
		}}, figure{q.LastBusy, func(x *tally, v int64) { x.busy = max(x.busy, minutes(v)) }})
	}
	for _, f := range figures {
		if p := r.query(ctx, f.query, at, func(m *seriesLabels, v float64) {
			k := r.seriesKey(m)
			x := d[k]
			f.set(&x, int64(v))
			d[k] = x
		}); p.Reason != "" {
			return p
		}
	}
	return Problem{}
}

// figure is one query over a span and how its value goes into a tally.
type figure struct {
	query string
	set   func(x *tally, v int64)
}

// devices are the held devices with their tallies; one the ledger does not count yet (a
// reading catching up after a gap) is left out.
func (r *Reader) devices(held *heldNow) []Device {
	out := held.devices[:0]
	for i := range held.devices {
		t, ok := r.ledger.find(held.keys[i])
		if !ok {
			continue
		}
		dev := held.devices[i]
		dev.HeldSteps, dev.IdleSteps, dev.FirstSeen = t.held, t.idle, int64(t.first)*60
		if t.busy != 0 {
			dev.LastBusy = int64(t.busy) * 60
		}
		out = append(out, dev)
	}
	r.lastHeld = len(out)
	return out
}

func (l *ledger) has(k uint64) bool {
	_, ok := l.find(k)
	return ok
}

// key tells devices and the series they were read from apart: a hash of the labels that do.
func (r *Reader) key(node, uuid, instance, namespace, pod string, profiling bool) uint64 {
	var h maphash.Hash
	h.SetSeed(r.seed)
	for _, s := range [...]string{node, uuid, instance, namespace, pod} {
		h.WriteString(s)
		h.WriteByte(0)
	}
	if profiling {
		h.WriteByte(1)
	}
	return h.Sum64()
}

func (r *Reader) seriesKey(m *seriesLabels) uint64 {
	return r.key(m.Hostname, m.UUID, m.Instance, m.Name, m.Pod, m.Source != "u")
}
