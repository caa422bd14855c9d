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

package gang

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// The functions below follow Kueue's tas_flavor_snapshot.go function by function, for
// PodSets without a leader (no podset-group-name) and with the default gates.

// request is what one PodSet asks of the topology.
type request struct {
	podSet        string
	pod           *corev1.Pod
	perPod        requests // with one pod
	count         int32
	sliceSize     int32
	levelIdx      int
	sliceLevelIdx int
	required      bool
	unconstrained bool
}

// newRequest resolves the gang's topology against the snapshot's levels (levelKey,
// sliceLevelKeyWithDefault, isUnconstrained with the PodSet implied when it names none).
func (t *tasSnapshot) newRequest(tmpl Template, top Topology, name string) (*request, string) {
	r := &request{podSet: name, pod: tmpl.Pod, perPod: podSetRequests(tmpl.Pod), count: int32(tmpl.Count), sliceSize: 1}
	r.perPod[corev1.ResourcePods]++
	last := len(t.levels) - 1
	sliceOnly := top.Key == "" && top.SliceKey != ""
	r.required = top.Key != "" && !top.Preferred
	r.unconstrained = top.Unconstrained || top.Key == ""
	switch {
	case top.Key != "":
		r.levelIdx = slices.Index(t.levels, top.Key)
	case sliceOnly:
		r.levelIdx = 0
	default:
		r.levelIdx = last
	}
	r.sliceLevelIdx = last
	if top.SliceKey != "" {
		r.sliceLevelIdx = slices.Index(t.levels, top.SliceKey)
		r.sliceSize = int32(top.SliceSize)
	}
	if r.levelIdx > r.sliceLevelIdx {
		return nil, fmt.Sprintf("podset slice topology %s is above the podset topology %s", top.SliceKey, t.levels[r.levelIdx])
	}
	return r, ""
}

// assignAll is FindTopologyAssignmentsForFlavor: the PodSets one after the other, each
// seeing what the ones before were assigned. It returns the assignments, or the index of
// the PodSet that failed and why.
func (t *tasSnapshot) assignAll(g Gang, k Kueue, simulateEmpty bool) ([]TopologyAssignment, int, string) {
	assumed := map[string]requests{}
	var out []TopologyAssignment
	for i, tmpl := range g.Templates {
		r, reason := t.newRequest(tmpl, g.Topology, k.PodSets[i])
		if reason != "" {
			return nil, i, reason
		}
		ta, reason := t.findTopologyAssignment(r, assumed, simulateEmpty)
		if reason != "" {
			return nil, i, reason
		}
		for _, d := range ta.Domains {
			id := domainID(d.Values)
			if assumed[id] == nil {
				assumed[id] = requests{}
			}
			for name, v := range r.perPod {
				if name != corev1.ResourcePods {
					assumed[id][name] += v * int64(d.Count)
				}
			}
		}
		out = append(out, ta)
	}
	return out, 0, ""
}

// findTopologyAssignment counts what fits per domain, finds the level and domains that
// take the PodSet, then walks down the levels giving each domain the fewest children.
func (t *tasSnapshot) findTopologyAssignment(r *request, assumed map[string]requests, simulateEmpty bool) (TopologyAssignment, string) {
	selector, affinity, reason := t.selectors(r.pod)
	if reason != "" {
		return TopologyAssignment{}, reason
	}
	stats := t.fillInCounts(r, assumed, simulateEmpty, selector, affinity)
	fitLevel, fit, reason := t.findLevelWithFitDomains(r.levelIdx, r, stats)
	if reason != "" {
		return TopologyAssignment{}, reason
	}
	fit = t.updateCountsToMinimum(fit, r.count, r.sliceSize, r.unconstrained, true)
	var chosen []string
	for _, d := range fit {
		chosen = append(chosen, d.values[len(d.values)-1])
	}
	l := fitLevel
	for ; l < min(len(t.levels)-1, r.sliceLevelIdx); l++ {
		var lower []*kdomain
		for _, d := range fit {
			lower = append(lower, d.children...)
		}
		fit = t.updateCountsToMinimum(sortDomains(lower, r.unconstrained), r.count, r.sliceSize, r.unconstrained, true)
	}
	for ; l < len(t.levels)-1; l++ {
		var next []*kdomain
		for _, d := range fit {
			next = append(next, t.updateCountsToMinimum(sortDomains(d.children, r.unconstrained), d.state, 1, r.unconstrained, false)...)
		}
		fit = next
	}
	ta := t.buildAssignment(fit)
	ta.PodSet, ta.Level, ta.Chosen = r.podSet, t.levels[fitLevel], chosen
	return ta, ""
}

// selectors are the PodSet's node selector and required node affinity, which Kueue reads
// only when the lowest level is the hostname.
func (t *tasSnapshot) selectors(p *corev1.Pod) (labels.Selector, *nodeaffinity.NodeSelector, string) {
	if !t.lowestIsNode {
		return labels.Everything(), nil, ""
	}
	sel, err := labels.ValidatedSelectorFromSet(p.Spec.NodeSelector)
	if err != nil {
		return nil, nil, fmt.Sprintf("invalid node selectors: %s, reason: %s", p.Spec.NodeSelector, err)
	}
	var aff *nodeaffinity.NodeSelector
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		req := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		if aff, err = nodeaffinity.NewNodeSelector(req); err != nil {
			return nil, nil, fmt.Sprintf("invalid affinity node selectors: %s, reason: %s", req, err)
		}
	}
	return sel, aff, ""
}

// fillInCounts sets each leaf's state to the pods that fit in it, then each domain's
// state and sliceState from its children, and counts the nodes excluded and why.
func (t *tasSnapshot) fillInCounts(r *request, assumed map[string]requests, simulateEmpty bool, sel labels.Selector, aff *nodeaffinity.NodeSelector) *exclusions {
	for _, level := range t.byLevel {
		for _, d := range level {
			d.state, d.sliceState = 0, 0
		}
	}
	stats := newExclusions()
	tolerations := append(slices.Clone(r.pod.Spec.Tolerations), t.tolerations...)
	for _, leaf := range t.leaves {
		stats.totalNodes++
		leaf.excluded = t.leafState(leaf, r, tolerations, sel, aff, assumed, simulateEmpty)
		stats.add(leaf.excluded)
	}
	for _, root := range t.byLevel[0] {
		fillInCountsHelper(root, r.sliceSize, r.sliceLevelIdx, 0)
	}
	return stats
}

// leafState sets the pods that fit in the leaf, or says why it is left out.
func (t *tasSnapshot) leafState(leaf *kdomain, r *request, tolerations []corev1.Toleration, sel labels.Selector, aff *nodeaffinity.NodeSelector,
	assumed map[string]requests, simulateEmpty bool) exclusion {
	if t.lowestIsNode {
		if taint, bad := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), leaf.node.Spec.Taints, tolerations, doNotSchedule, true); bad {
			return exclusion{kind: 't', name: taint.ToString()}
		}
		if !sel.Matches(labels.Set(leaf.node.Labels)) {
			return exclusion{kind: 's'}
		}
		if aff != nil && !aff.Match(leaf.node) {
			return exclusion{kind: 'a'}
		}
	}
	remaining := maps.Clone(leaf.free)
	if !simulateEmpty {
		subtract(remaining, leaf.tas)
	}
	subtract(remaining, assumed[leaf.id])
	var limiting corev1.ResourceName
	leaf.state, limiting = r.perPod.countIn(remaining)
	if leaf.state == 0 && limiting != "" {
		return exclusion{kind: 'r', name: string(limiting)}
	}
	return exclusion{}
}

func doNotSchedule(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// subtract is Requests.Sub.
func subtract(r, other requests) {
	for name, v := range other {
		r[name] -= v
	}
}

func fillInCountsHelper(d *kdomain, sliceSize int32, sliceLevelIdx, level int) {
	if len(d.children) == 0 {
		if level == sliceLevelIdx {
			d.sliceState = d.state / sliceSize
		}
		return
	}
	var state, sliceState int32
	for _, c := range d.children {
		fillInCountsHelper(c, sliceSize, sliceLevelIdx, level+1)
		state += c.state
		sliceState += c.sliceState
	}
	d.state = state
	if level == sliceLevelIdx {
		sliceState = d.state / sliceSize
	}
	d.sliceState = sliceState
}

// findLevelWithFitDomains finds the domains that take the PodSet: one of the requested
// level (the best fit, or with LeastFreeCapacity the least free that fits); for a
// preferred topology one of a level above; else, unless required, several of the top level.
func (t *tasSnapshot) findLevelWithFitDomains(levelIdx int, r *request, stats *exclusions) (int, []*kdomain, string) {
	if len(t.byLevel[levelIdx]) == 0 {
		return 0, nil, fmt.Sprintf("no topology domains at level: %s", t.levels[levelIdx])
	}
	sorted := sortDomains(slices.Collect(maps.Values(t.byLevel[levelIdx])), r.unconstrained)
	top := sorted[0]
	sliceCount := r.count / r.sliceSize
	bestFit := !r.unconstrained
	if bestFit && top.sliceState >= sliceCount {
		top = bestFitDomain(sorted, sliceCount, true)
	}
	if !bestFit {
		for _, d := range sorted {
			if d.sliceState >= sliceCount {
				return levelIdx, []*kdomain{d}, ""
			}
		}
	}
	if top.sliceState >= sliceCount {
		return levelIdx, []*kdomain{top}, ""
	}
	if r.required {
		return 0, nil, t.notFit(top.sliceState, sliceCount, r.sliceSize, stats)
	}
	if levelIdx > 0 && !r.unconstrained {
		return t.findLevelWithFitDomains(levelIdx-1, r, stats)
	}
	var results []*kdomain
	remaining := sliceCount
	for i := 0; remaining > 0 && i < len(sorted); i++ {
		d := sorted[i]
		if bestFit && d.sliceState >= remaining {
			d = bestFitDomain(sorted[i:], remaining, true)
		}
		results = append(results, d)
		remaining -= d.sliceState
	}
	if remaining > 0 {
		return 0, nil, t.notFit(sliceCount-remaining, sliceCount, r.sliceSize, stats)
	}
	return levelIdx, results, ""
}

// sortDomains is sortedDomains: BestFit by sliceState descending, LeastFreeCapacity
// (unconstrained, TASProfileMixed) ascending; then state ascending, then values.
func sortDomains(domains []*kdomain, unconstrained bool) []*kdomain {
	out := slices.Clone(domains)
	slices.SortFunc(out, func(a, b *kdomain) int {
		if a.sliceState != b.sliceState {
			if unconstrained {
				return cmp.Compare(a.sliceState, b.sliceState)
			}
			return cmp.Compare(b.sliceState, a.sliceState)
		}
		if a.state != b.state {
			return cmp.Compare(a.state, b.state)
		}
		return slices.Compare(a.values, b.values)
	})
	return out
}

// bestFitDomain is findBestFitDomain(ForSlices): the first domain with the fewest pods
// (slices) that still holds needed; the first domain when none does.
func bestFitDomain(domains []*kdomain, needed int32, slicesState bool) *kdomain {
	state := func(d *kdomain) int32 { return d.state }
	if slicesState {
		state = func(d *kdomain) int32 { return d.sliceState }
	}
	best := domains[0]
	for _, d := range domains {
		if state(d) >= needed && state(d) < state(best) {
			best = d
		}
	}
	return best
}

// updateCountsToMinimum is updateCountsToMinimumGeneric without leaders: the domains in
// order (the last one chosen as the best fit) until they hold count pods (or slices),
// each domain's state set to what it is given.
func (t *tasSnapshot) updateCountsToMinimum(domains []*kdomain, count, sliceSize int32, unconstrained, bySlices bool) []*kdomain {
	var out []*kdomain
	remaining := count
	if bySlices {
		remaining = count / sliceSize
	}
	bestFit := !unconstrained
	for i, d := range domains {
		if bySlices {
			if bestFit && d.sliceState >= remaining {
				d = bestFitDomain(domains[i:], remaining, true)
			}
			if d.sliceState >= remaining {
				d.state, d.sliceState = remaining*sliceSize, remaining
				return append(out, d)
			}
			d.state = d.sliceState * sliceSize
			remaining -= d.sliceState
			out = append(out, d)
			continue
		}
		if bestFit && d.state >= remaining {
			d = bestFitDomain(domains[i:], remaining, false)
		}
		if d.state >= remaining {
			d.state = remaining
			return append(out, d)
		}
		remaining -= d.state
		out = append(out, d)
	}
	// Kueue logs "unexpected remainingCount" and assigns nothing.
	return nil
}

// buildAssignment lists the lowest domains with their pods, by values; only the
// hostname when it is the lowest level.
func (t *tasSnapshot) buildAssignment(domains []*kdomain) TopologyAssignment {
	domains = slices.Clone(domains)
	slices.SortFunc(domains, func(a, b *kdomain) int { return slices.Compare(a.values, b.values) })
	from := 0
	if t.lowestIsNode {
		from = len(t.levels) - 1
	}
	ta := TopologyAssignment{Levels: t.levels[from:]}
	for _, d := range domains {
		if d.state == 0 {
			continue
		}
		ta.Domains = append(ta.Domains, DomainCount{Values: d.values[from:], Count: d.state})
	}
	return ta
}
