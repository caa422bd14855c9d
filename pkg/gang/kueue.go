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
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/topology"
)

// Kueue is what Kueue's Topology Aware Scheduling reads besides the gang: the Topology and
// the ResourceFlavor that names it.
type Kueue struct {
	// Topology is the Topology's name, as Kueue's messages say it ("default" when "").
	Topology string
	// Levels are the Topology's spec.levels[].nodeLabel, broadest first.
	Levels []string
	// Flavor is the ResourceFlavor's name ("default" when ""); NodeLabels and Tolerations
	// are its spec.nodeLabels and spec.tolerations.
	Flavor      string
	NodeLabels  map[string]string
	Tolerations []corev1.Toleration
	// PodSets name the templates' PodSets; a lone template is "main", as a Job's PodSet
	// is, and more are "podset-<index>" when not named.
	PodSets []string
}

// Kueue's modes for a PodSet's flavor assignment.
const (
	// KueueFit: the TAS assignment is found now.
	KueueFit = "Fit"
	// KueuePreempt: it is found only with the pods of TAS workloads gone (Kueue then
	// looks for workloads to preempt).
	KueuePreempt = "Preempt"
	// KueueNoFit: it is not found even then.
	KueueNoFit = "NoFit"
)

// KueueResult is what Kueue decides for the Workload.
type KueueResult struct {
	Mode string
	// Assignments are the PodSets' topologyAssignment as the Workload's
	// status.admission.podSetAssignments[] would hold them, when Mode is Fit.
	Assignments []TopologyAssignment
}

// TopologyAssignment is one PodSet's assignment: pod counts per domain of Levels (only
// the hostname level when the topology's lowest level is the hostname).
type TopologyAssignment struct {
	PodSet  string
	Levels  []string
	Domains []DomainCount
	// Level is the level the PodSet fit at (a preferred topology may fit higher up) and
	// Chosen the values, at that level, of the domains it was given.
	Level  string
	Chosen []string
}

// DomainCount is one domain of an assignment and its pods.
type DomainCount struct {
	Values []string
	Count  int32
}

// The words of Kueue's webhook and flavor assigner.
const (
	kueueSliceSizeMissing   = "slice topology requested, but slice size not provided"
	kueueNoLevel            = "Flavor %q does not contain the requested level"
	kueueCouldNotAssign     = "couldn't assign flavors to pod set %s: %s"
	kueueHostnameNotLowest  = "the kubernetes.io/hostname label can only be used at the lowest level of topology"
	kueueMoreThanOneRequest = "must not contain more than one topology annotation"
)

// PlaceAsKueue answers as Kueue v0.17.0's Topology Aware Scheduling (with its default
// gates: TASProfileMixed on, balanced placement and multi-layer slices off) assigns the
// gang's PodSets to topology domains when the quota fits: each PodSet in turn, its pods
// counted into each node's capacity as Kueue counts it (allocatable minus what bound pods
// request), on the Ready, uncordoned nodes of the flavor that carry every level's label.
// A gang without a topology key is a PodSet whose topology is implied (a ClusterQueue of
// TAS flavors only). Kueue has no minCount.
func PlaceAsKueue(s *capacity.Snapshot, g Gang, k Kueue) (Result, error) {
	total, err := g.count()
	if err != nil {
		return Result{}, err
	}
	if g.MinCount != 0 && g.MinCount != total {
		return Result{}, inputErr("Kueue admits a PodSet's whole count; minCount %d is kube-scheduler's", g.MinCount)
	}
	k = k.withDefaults(len(g.Templates))
	if err := k.check(g); err != nil {
		return Result{}, err
	}
	snap := newTASSnapshot(s, k)
	res := Result{Kueue: &KueueResult{Mode: KueueFit}}
	assignments, failed, reason := snap.assignAll(g, k, false)
	if reason != "" {
		res.Message = fmt.Sprintf(kueueCouldNotAssign, k.PodSets[failed], reason)
		res.Kueue.Mode = KueuePreempt
		if _, _, again := snap.assignAll(g, k, true); again != "" {
			res.Kueue.Mode = KueueNoFit
		}
	} else {
		res.Fits = true
		res.Kueue.Assignments = assignments
		res.Domain = strings.Join(assignments[0].Chosen, ",")
	}
	res.Pods = snap.pods(g, assignments)
	res.Domains = snap.rooms(g, k)
	return res, nil
}

func (k Kueue) withDefaults(templates int) Kueue {
	if k.Topology == "" {
		k.Topology = "default"
	}
	if k.Flavor == "" {
		k.Flavor = "default"
	}
	names := slices.Clone(k.PodSets)
	for i := len(names); i < templates; i++ {
		name := fmt.Sprintf("podset-%d", i)
		if templates == 1 {
			name = "main"
		}
		names = append(names, name)
	}
	k.PodSets = names
	return k
}

// check refuses what Kueue's Topology validation and job webhook refuse, and a level the
// flavor's topology does not have.
func (k Kueue) check(g Gang) error {
	if err := topology.CheckLevels(k.Levels); err != nil {
		return fmt.Errorf("%w: %w", ErrInput, err)
	}
	if i := slices.Index(k.Levels, topology.Hostname); i >= 0 && i != len(k.Levels)-1 {
		return inputErr("topology levels: %s", kueueHostnameNotLowest)
	}
	t := g.Topology
	requests := 0
	for _, on := range []bool{t.Key != "" && !t.Preferred, t.Key != "" && t.Preferred, t.Unconstrained} {
		if on {
			requests++
		}
	}
	if requests > 1 || t.Preferred && t.Key == "" {
		return inputErr("podset annotations %s: [%q, %q, %q]", kueueMoreThanOneRequest,
			"kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology", "kueue.x-k8s.io/podset-unconstrained-topology")
	}
	switch {
	case t.SliceKey != "" && t.SliceSize == 0:
		return inputErr("%s (%q must be set when %q is specified)", kueueSliceSizeMissing, "kueue.x-k8s.io/podset-slice-size", "kueue.x-k8s.io/podset-slice-required-topology")
	case t.SliceKey == "" && t.SliceSize != 0:
		return inputErr("%q may not be set when %q is not specified", "kueue.x-k8s.io/podset-slice-size", "kueue.x-k8s.io/podset-slice-required-topology")
	case t.SliceSize < 0:
		return inputErr("%q must be greater than or equal to 1", "kueue.x-k8s.io/podset-slice-size")
	}
	for i, tmpl := range g.Templates {
		if t.SliceSize > tmpl.Count {
			return inputErr("%q of pod set %s must not be greater than pod set count %d", "kueue.x-k8s.io/podset-slice-size", k.PodSets[i], tmpl.Count)
		}
	}
	for _, key := range []string{t.Key, t.SliceKey} {
		if key != "" && !slices.Contains(k.Levels, key) {
			return fmt.Errorf("%w: %q is not a level of topology %q (Kueue: %q)", ErrNoDomain, key, k.Topology, fmt.Sprintf(kueueNoLevel, k.Flavor))
		}
	}
	return nil
}

// requests is Kueue's per-pod request map (resources.Requests): CPU in millicores, the
// rest in their unit, from the pod spec alone (NewRequestsFromPodSpec).
type requests map[corev1.ResourceName]int64

func podSetRequests(p *corev1.Pod) requests {
	out := requests{}
	for name, q := range resourcehelper.PodRequests(&corev1.Pod{Spec: p.Spec}, resourcehelper.PodResourcesOptions{}) {
		out[name] = value(name, q)
	}
	return out
}

func value(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// countIn is Requests.CountInWithLimitingResource: how many times r fits in capacity,
// and the resource that limits it (the first by name among equals; a resource capacity
// lacks wins at once, as Kueue returns at the first it meets).
func (r requests) countIn(capacity requests) (int32, corev1.ResourceName) {
	names := make([]corev1.ResourceName, 0, len(r))
	for name := range r {
		names = append(names, name)
	}
	slices.Sort(names)
	var result int32
	var limiting corev1.ResourceName
	found := false
	for _, name := range names {
		want := r[name]
		have, ok := capacity[name]
		if !ok && want != 0 {
			return 0, name
		}
		count := int32(1<<31 - 1)
		if want != 0 {
			count = int32(have / want)
		}
		if !found || count < result {
			result, limiting, found = count, name, true
		}
	}
	return result, limiting
}

// domainID is Kueue's TopologyDomainID: the values joined by commas.
func domainID(values []string) string { return strings.Join(values, ",") }
