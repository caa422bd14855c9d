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

package allocation

import (
	"math"
	"sort"
	"strings"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

// maxItemMilli bounds what one pod or claim adds to a demand (two million GPUs), so that sums
// over any number of them stay exact in an int64 and can be taken apart again.
const maxItemMilli = 1 << 31

// holds reports whether the pod holds its requests on its node.
func (p *Pod) holds() bool {
	return p.Node != "" && !p.Finished && len(p.Requests) > 0
}

// waits reports whether the pod is demand waiting to be scheduled: pending, or queued behind
// its scheduling gates. A waiting pod being deleted will never be placed: no demand.
func (p *Pod) waits() bool {
	return p.Node == "" && !p.Finished && !p.Deleting && len(p.Requests) > 0
}

// allocated reports whether the claim holds devices.
func (c *Claim) allocated() bool { return len(c.Devices) > 0 }

// nodes are the distinct pools (nodes) of the claim's devices. A device without a pool
// is on no node.
func (c *Claim) nodes() []string {
	var out []string
	seen := map[string]struct{}{"": {}}
	for _, d := range c.Devices {
		if _, dup := seen[d.Pool]; !dup {
			seen[d.Pool] = struct{}{}
			out = append(out, d.Pool)
		}
	}
	return out
}

type demandKey struct {
	model  string
	dra    bool
	queued bool
}

// contribution is what one pod or claim adds to one demand.
type contribution struct {
	key     demandKey
	pods    int64
	milli   int64
	created int64
}

// podDemandMilli is what a waiting pod asks for: nvidia.com/gpu and gpu.shared a whole GPU
// each (the GPU a shared unit lands on is not known yet), a MIG device its slices out of 7.
func podDemandMilli(p *Pod) int64 {
	var milli int64
	for _, r := range p.Requests {
		switch {
		case r.Name == ResourceGPU || r.Name == ResourceGPUShared:
			milli = saturating.Add(milli, saturating.Mul(r.Count, 1000))
		case IsGPUResource(r.Name):
			milli = saturating.Add(milli, MilliOf(r.Name, r.Count, Shape{}))
		}
	}
	return min(milli, maxItemMilli)
}

// demands are what a pod or claim adds to the pending demand: a waiting pod to its pinned
// model's; an unallocated claim to each product its requests ask for, counting as one pod
// (in the first product's demand).
func podDemands(p *Pod) []contribution {
	if !p.waits() {
		return nil
	}
	return []contribution{{key: demandKey{model: p.Model, queued: p.Gated}, pods: 1, milli: podDemandMilli(p), created: p.Created}}
}

func claimDemands(c *Claim) []contribution {
	if c.allocated() {
		return nil
	}
	var out []contribution
	for _, r := range c.Requests {
		m := saturating.Mul(max(r.Count, 0), 1000)
		if strings.HasPrefix(r.Class, "mig.") {
			m /= defaultSlicesPerGPU
		}
		key := demandKey{model: r.Product, dra: true}
		i := 0
		for i < len(out) && out[i].key != key {
			i++
		}
		if i == len(out) {
			out = append(out, contribution{key: key, pods: 0, created: c.Created})
		}
		out[i].milli = min(saturating.Add(out[i].milli, m), maxItemMilli)
	}
	if len(out) > 0 {
		out[0].pods = 1
	}
	return out
}

// demandAgg sums the contributions to one demand; created counts contributors by creation
// time, so the oldest is known again when it leaves.
type demandAgg struct {
	pods, milli int64
	created     map[int64]int32
	since       int64
}

type demands map[demandKey]*demandAgg

func (d demands) add(c contribution) {
	a := d[c.key]
	if a == nil {
		a = &demandAgg{created: map[int64]int32{}, since: c.created}
		d[c.key] = a
	}
	a.pods += c.pods
	a.milli += c.milli
	a.created[c.created]++
	a.since = min(a.since, c.created)
}

func (d demands) remove(c contribution) {
	a := d[c.key]
	if a == nil {
		return
	}
	a.pods -= c.pods
	a.milli -= c.milli
	if a.created[c.created]--; a.created[c.created] > 0 {
		return
	}
	delete(a.created, c.created)
	if len(a.created) == 0 {
		delete(d, c.key)
		return
	}
	if c.created == a.since {
		a.since = math.MaxInt64
		for t := range a.created {
			a.since = min(a.since, t)
		}
	}
}

// list is the demands sorted by model, device-plugin pods before claims, pending before
// queued.
func (d demands) list() []Demand {
	out := make([]Demand, 0, len(d))
	for k, a := range d {
		out = append(out, Demand{
			Model: k.model, DRA: k.dra, Queued: k.queued,
			Pods:  int32(min(max(a.pods, 0), math.MaxInt32)),
			Milli: max(a.milli, 0), Since: a.since,
		})
	}
	sort.Slice(out, func(i, j int) bool {
		switch {
		case out[i].Model != out[j].Model:
			return out[i].Model < out[j].Model
		case out[i].DRA != out[j].DRA:
			return !out[i].DRA
		}
		return !out[i].Queued && out[j].Queued
	})
	return out
}

// buildHeld is what the given holding pods and allocated claims hold on node; nil when
// nothing. The result does not depend on the order of pods or claims.
func buildHeld(node string, pods []*Pod, claims []*Claim) *Held {
	type nsAgg struct {
		pods      map[podID]struct{}
		resources map[string]int64
		devices   map[string]struct{}
	}
	byNS := map[string]*nsAgg{}
	ns := func(name string) *nsAgg {
		a := byNS[name]
		if a == nil {
			a = &nsAgg{pods: map[podID]struct{}{}, resources: map[string]int64{}, devices: map[string]struct{}{}}
			byNS[name] = a
		}
		return a
	}
	for _, p := range pods {
		a := ns(p.Namespace)
		a.pods[podIDOf(p.UID, p.Name)] = struct{}{}
		addTo(a.resources, p.Requests)
	}
	shares := map[string]map[string]int64{}
	for _, c := range claims {
		a := ns(c.Namespace)
		for _, d := range c.Devices {
			if d.Pool == node {
				a.devices[d.Device] = struct{}{}
			}
		}
		for _, s := range c.Shares {
			if s.Pool != node {
				continue
			}
			if shares[s.Device] == nil {
				shares[s.Device] = map[string]int64{}
			}
			addTo(shares[s.Device], s.Consumed)
		}
		for _, h := range c.Holders {
			a.pods[podIDOf(h.UID, h.Name)] = struct{}{}
		}
	}
	if len(byNS) == 0 {
		return nil
	}
	h := &Held{Namespaces: make([]NamespaceHeld, 0, len(byNS))}
	for name, a := range byNS {
		n := NamespaceHeld{Namespace: name, Pods: int32(min(len(a.pods), math.MaxInt32)), Resources: sortedCounts(a.resources)}
		for d := range a.devices {
			n.Devices = append(n.Devices, d)
		}
		sort.Strings(n.Devices)
		h.Pods = saturating.Add(h.Pods, n.Pods)
		h.Namespaces = append(h.Namespaces, n)
	}
	sort.Slice(h.Namespaces, func(i, j int) bool { return h.Namespaces[i].Namespace < h.Namespaces[j].Namespace })
	for device, consumed := range shares {
		h.Shares = append(h.Shares, Share{Pool: node, Device: device, Consumed: sortedCounts(consumed)})
	}
	sort.Slice(h.Shares, func(i, j int) bool { return h.Shares[i].Device < h.Shares[j].Device })
	return h
}

// podID names a pod within its namespace: its UID, or its name when the UID is not known.
type podID struct {
	uid  UID
	name string
}

func podIDOf(uid UID, name string) podID {
	if uid != (UID{}) {
		return podID{uid: uid}
	}
	return podID{name: name}
}

// heldEqual compares two Held by value.
func heldEqual(a, b *Held) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Pods != b.Pods || len(a.Namespaces) != len(b.Namespaces) || len(a.Shares) != len(b.Shares) {
		return false
	}
	for i := range a.Shares {
		if a.Shares[i].Device != b.Shares[i].Device || !equalCounts(a.Shares[i].Consumed, b.Shares[i].Consumed) {
			return false
		}
	}
	for i := range a.Namespaces {
		x, y := &a.Namespaces[i], &b.Namespaces[i]
		if x.Namespace != y.Namespace || x.Pods != y.Pods || !equalCounts(x.Resources, y.Resources) || !equalStrings(x.Devices, y.Devices) {
			return false
		}
	}
	return true
}

func equalCounts(a, b []ResourceCount) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Compute is the allocation of a whole state at once: what pods hold on each node and the
// pending demand, by the same rules as a Tracker. When several pods or claims share a key,
// the last one counts.
func Compute(pods []*Pod, claims []*Claim) (map[string]*Held, []Demand) {
	podsByKey := map[string]*Pod{}
	for _, p := range pods {
		if p != nil {
			podsByKey[p.Key()] = p
		}
	}
	claimsByKey := map[string]*Claim{}
	for _, c := range claims {
		if c != nil {
			claimsByKey[c.Key()] = c
		}
	}
	podsOn := map[string][]*Pod{}
	claimsOn := map[string][]*Claim{}
	pending := demands{}
	for _, p := range podsByKey {
		if p.holds() {
			podsOn[p.Node] = append(podsOn[p.Node], p)
		}
		for _, c := range podDemands(p) {
			pending.add(c)
		}
	}
	for _, c := range claimsByKey {
		for _, node := range c.nodes() {
			claimsOn[node] = append(claimsOn[node], c)
		}
		for _, d := range claimDemands(c) {
			pending.add(d)
		}
	}
	held := map[string]*Held{}
	for node, ps := range podsOn {
		held[node] = buildHeld(node, ps, claimsOn[node])
	}
	for node, cs := range claimsOn {
		if _, done := held[node]; !done {
			held[node] = buildHeld(node, nil, cs)
		}
	}
	return held, pending.list()
}
