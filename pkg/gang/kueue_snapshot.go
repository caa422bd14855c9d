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
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/topology"
)

// The pod annotations that make a pod a TAS pod (Kueue's utiltas.IsTAS): its usage counts
// through its Workload's admission, not as a non-TAS pod.
var tasAnnotations = []string{
	"kueue.x-k8s.io/podset-required-topology",
	"kueue.x-k8s.io/podset-preferred-topology",
	"kueue.x-k8s.io/podset-unconstrained-topology",
}

// kdomain is a domain of Kueue's TAS snapshot (its domain and leafDomain).
type kdomain struct {
	id       string
	values   []string
	parent   *kdomain
	children []*kdomain
	// state and sliceState are the algorithm's scratch: pods (slices) that fit, then
	// pods (slices) assigned.
	state, sliceState int32
	// excluded is why fillInCounts left a leaf out or found no room in it.
	excluded exclusion
	// Of leaves: capacity minus non-TAS pods' usage, TAS pods' usage, the nodes.
	free  requests
	tas   requests
	node  *corev1.Node // when the lowest level is the hostname
	nodes []string
}

// tasSnapshot is Kueue's TASFlavorSnapshot of one flavor.
type tasSnapshot struct {
	name         string
	levels       []string
	lowestIsNode bool
	tolerations  []corev1.Toleration
	leaves       []*kdomain // sorted by id
	byLevel      []map[string]*kdomain
	byID         map[string]*kdomain
}

// newTASSnapshot is TASFlavorCache.snapshot: the flavor's Ready, uncordoned nodes that
// carry every level's label (nodesCache.find), each leaf's capacity the sum of its nodes'
// allocatable minus what their pods request.
func newTASSnapshot(s *capacity.Snapshot, k Kueue) *tasSnapshot {
	t := &tasSnapshot{
		name:         k.Topology,
		levels:       k.Levels,
		lowestIsNode: k.Levels[len(k.Levels)-1] == topology.Hostname,
		tolerations:  k.Tolerations,
		byLevel:      make([]map[string]*kdomain, len(k.Levels)),
		byID:         map[string]*kdomain{},
	}
	for l := range t.byLevel {
		t.byLevel[l] = map[string]*kdomain{}
	}
	for _, name := range s.Nodes() {
		n := s.Node(name)
		if n.Spec.Unschedulable || !ready(n) || !matchesFlavor(n.Labels, k.NodeLabels, k.Levels) {
			continue
		}
		t.addNode(s, n)
	}
	slices.SortFunc(t.leaves, func(a, b *kdomain) int { return strings.Compare(a.id, b.id) })
	for _, leaf := range t.leaves {
		t.connect(leaf, len(t.levels)-1)
	}
	return t
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// matchesFlavor is Kueue's NodeMatchesFlavor.
func matchesFlavor(labels, flavor map[string]string, levels []string) bool {
	for k, v := range flavor {
		if labels[k] != v {
			return false
		}
	}
	for _, key := range levels {
		if _, ok := labels[key]; !ok {
			return false
		}
	}
	return true
}

// addNode adds the node's capacity to its leaf (made if new), less its pods' usage.
func (t *tasSnapshot) addNode(s *capacity.Snapshot, n *corev1.Node) {
	values := make([]string, len(t.levels))
	for l, key := range t.levels {
		values[l] = n.Labels[key]
	}
	id := domainID(values)
	if t.lowestIsNode {
		id = n.Labels[topology.Hostname]
	}
	leaf := t.byID[id]
	if leaf == nil {
		leaf = &kdomain{id: id, values: values, free: requests{}, tas: requests{}}
		if t.lowestIsNode {
			leaf.node = n
		}
		t.byID[id] = leaf
		t.leaves = append(t.leaves, leaf)
	}
	leaf.nodes = append(leaf.nodes, n.Name)
	for name, q := range n.Status.Allocatable {
		leaf.free[name] += value(name, q)
	}
	count, used := s.Requested(n.Name)
	used[corev1.ResourcePods] = count
	for _, p := range s.PodsOn(n.Name) {
		if !isTAS(p) {
			continue
		}
		for name, q := range capacity.Requests(p) {
			v := value(name, q)
			used[name] -= v
			leaf.tas[name] += v
		}
		used[corev1.ResourcePods]--
		leaf.tas[corev1.ResourcePods]++
	}
	for name, v := range used {
		leaf.free[name] -= v
	}
}

func isTAS(p *corev1.Pod) bool {
	for _, a := range tasAnnotations {
		if _, ok := p.Annotations[a]; ok {
			return true
		}
	}
	return false
}

// connect links a domain of level l to its parent, making the parent if new
// (initializeHelper).
func (t *tasSnapshot) connect(d *kdomain, l int) {
	if t.byLevel[l][d.id] == nil {
		t.byLevel[l][d.id] = d
	}
	if l == 0 {
		return
	}
	parentValues := d.values[:l]
	pid := domainID(parentValues)
	parent := t.byLevel[l-1][pid]
	if parent == nil {
		parent = &kdomain{id: pid, values: parentValues}
		t.connect(parent, l-1)
	}
	d.parent = parent
	parent.children = append(parent.children, d)
}

// exclusion is why one leaf was left out: its kind and the taint or resource.
type exclusion struct {
	kind byte // 0 none, 't' taint, 's' node selector, 'a' affinity, 'r' resource
	name string
}

// add counts an exclusion.
func (e *exclusions) add(x exclusion) {
	switch x.kind {
	case 't':
		e.taints[x.name]++
	case 's':
		e.nodeSelector++
	case 'a':
		e.affinity++
	case 'r':
		e.resources[corev1.ResourceName(x.name)]++
	}
}

func newExclusions() *exclusions {
	return &exclusions{taints: map[string]int{}, resources: map[corev1.ResourceName]int{}}
}

// exclusions is Kueue's ExclusionStats.
type exclusions struct {
	taints       map[string]int
	nodeSelector int
	affinity     int
	resources    map[corev1.ResourceName]int
	totalNodes   int
}

// reasons is formatReasons: the exclusions, sorted, comma-separated.
func (e *exclusions) reasons() string {
	var out []string
	if e.nodeSelector > 0 {
		out = append(out, fmt.Sprintf("nodeSelector: %d", e.nodeSelector))
	}
	if e.affinity > 0 {
		out = append(out, fmt.Sprintf("affinity: %d", e.affinity))
	}
	for _, taint := range slices.Sorted(maps.Keys(e.taints)) {
		out = append(out, fmt.Sprintf("taint %q: %d", taint, e.taints[taint]))
	}
	for _, r := range slices.Sorted(maps.Keys(e.resources)) {
		out = append(out, fmt.Sprintf("resource %q: %d", r, e.resources[r]))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// notFit is notFitMessage.
func (t *tasSnapshot) notFit(fit, total, sliceSize int32, e *exclusions) string {
	unit := "slice"
	if sliceSize == 1 {
		unit = "pod"
	}
	msg := fmt.Sprintf("topology %q allows to fit only %d out of %d %s(s)", t.name, fit, total, unit)
	if fit == 0 {
		msg = fmt.Sprintf("topology %q doesn't allow to fit any of %d %s(s)", t.name, total, unit)
	}
	if reasons := e.reasons(); reasons != "" {
		msg += fmt.Sprintf(". Total nodes: %d; excluded: %s", e.totalNodes, reasons)
	}
	return msg
}
