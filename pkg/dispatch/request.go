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

package dispatch

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
)

// Request is what a Workload asks of a worker's GPUs: each pod set that asks for whole GPUs,
// in the Workload's order. A Workload that asks for no GPU has no Sets; one whose GPUs the
// hub cannot judge (MIG devices, shared replicas, DRA claims) has NotJudged set.
type Request struct {
	// Workload is namespace/name, for messages.
	Workload string
	// ClusterQueue is the manager's ClusterQueue for the Workload, the name looked up in a
	// worker's quota (MultiKueue's layout mirrors queues); "" before quota is reserved.
	ClusterQueue string
	Sets         []Ask
	// NotJudged says why the Workload's GPUs are not judged; "" when they are.
	NotJudged string
}

// Ask is one pod set's question: Pods pods of Gpus whole GPUs each, on one of Models.
type Ask struct {
	Name string
	Pods int32
	Gpus int32
	// Models are the nvidia.com/gpu.product values the pods may land on, sorted; nil for any.
	Models      []string
	Tolerations []corev1.Toleration
	// Required, Preferred and SliceLevel are topology levels (node label keys); SliceSize
	// pods of a slice fit inside one domain of SliceLevel.
	Required, Preferred string
	SliceLevel          string
	SliceSize           int32
}

// GPUs is the whole GPUs the request asks in all.
func (r Request) GPUs() int64 {
	var n int64
	for _, a := range r.Sets {
		n += int64(a.Pods) * int64(a.Gpus)
	}
	return n
}

// NoGPUs reports a Workload that asks for no GPU the hub judges.
func (r Request) NoGPUs() bool { return len(r.Sets) == 0 }

// RequestOf is the Workload's question. An error is bad input a person must fix (a
// negative count, a slice size that does not divide the pods).
func RequestOf(w *Workload) (Request, error) {
	r := Request{Workload: w.Namespace + "/" + w.Name}
	if w.Status.Admission != nil {
		r.ClusterQueue = w.Status.Admission.ClusterQueue
	}
	for i := range w.Spec.PodSets {
		ps := &w.Spec.PodSets[i]
		ask, notJudged, err := askOf(ps)
		if err != nil {
			return Request{}, fmt.Errorf("pod set %s: %w", podSetName(ps, i), err)
		}
		if notJudged != "" && r.NotJudged == "" {
			r.NotJudged = fmt.Sprintf("pod set %s %s", podSetName(ps, i), notJudged)
		}
		if ask.Gpus > 0 && ask.Pods > 0 {
			r.Sets = append(r.Sets, ask)
		}
	}
	if r.NotJudged != "" {
		r.Sets = nil
	}
	return r, nil
}

func podSetName(ps *PodSet, i int) string {
	if ps.Name != "" {
		return ps.Name
	}
	return fmt.Sprintf("#%d", i)
}

// askOf is one pod set's question, or why its GPUs are not judged.
func askOf(ps *PodSet) (Ask, string, error) {
	if ps.Count < 0 {
		return Ask{}, "", fmt.Errorf("count %d is negative", ps.Count)
	}
	spec := &ps.Template.Spec
	if len(spec.ResourceClaims) > 0 {
		return Ask{}, "asks for DRA claims, whose devices the hub cannot see", nil
	}
	pod := allocation.FromPod(&corev1.Pod{Spec: *spec})
	var gpus int64
	if pod != nil {
		for _, rc := range pod.Requests {
			if rc.Name != allocation.ResourceGPU {
				return Ask{}, "asks for " + rc.Name + ", which the hub does not judge (only whole nvidia.com/gpu)", nil
			}
			gpus = rc.Count
		}
	}
	if gpus > math.MaxInt32 {
		return Ask{}, "", fmt.Errorf("%d nvidia.com/gpu per pod is more than any node has", gpus)
	}
	a := Ask{Name: ps.Name, Pods: ps.Count, Gpus: int32(gpus), Models: allowedModels(spec), Tolerations: spec.Tolerations}
	if tr := ps.TopologyRequest; tr != nil {
		a.Required, a.Preferred, a.SliceLevel = deref(tr.Required), deref(tr.Preferred), deref(tr.PodSetSliceRequiredTopology)
		if a.SliceLevel != "" {
			a.SliceSize = a.Pods
			if tr.PodSetSliceSize != nil {
				a.SliceSize = *tr.PodSetSliceSize
			}
			if a.SliceSize <= 0 || a.Pods%a.SliceSize != 0 {
				return Ask{}, "", fmt.Errorf("slice size %d does not divide its %d pods", a.SliceSize, a.Pods)
			}
		}
	}
	return a, "", nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// allowedModels are the product values the pod's node selector and required node affinity
// allow, sorted; nil when they allow any. Affinity terms are ORed: a term that does not name
// the product allows any.
func allowedModels(spec *corev1.PodSpec) []string {
	var allowed []string
	if v, ok := spec.NodeSelector[allocation.ProductLabel]; ok {
		allowed = []string{v}
	}
	na := spec.Affinity
	if na == nil || na.NodeAffinity == nil || na.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return allowed
	}
	var union []string
	for _, term := range na.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		in, pinned := termModels(term)
		if !pinned {
			return allowed // this term allows any model
		}
		union = append(union, in...)
	}
	slices.Sort(union)
	union = slices.Compact(union)
	if allowed == nil {
		return nonNil(union)
	}
	return nonNil(slices.DeleteFunc(union, func(m string) bool { return m != allowed[0] }))
}

// nonNil keeps "no model allowed" apart from "any model" (nil).
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// termModels are the products a node selector term allows (its expressions are ANDed), and
// whether it restricts them at all.
func termModels(term corev1.NodeSelectorTerm) ([]string, bool) {
	var in []string
	pinned := false
	for _, e := range term.MatchExpressions {
		if e.Key != allocation.ProductLabel || e.Operator != corev1.NodeSelectorOpIn {
			continue
		}
		vals := slices.Clone(e.Values)
		if pinned {
			vals = slices.DeleteFunc(vals, func(v string) bool { return !slices.Contains(in, v) })
		}
		in, pinned = vals, true
	}
	return in, pinned
}

// tolerates reports whether tolerations tolerate a taint written key=value:Effect (or
// key:Effect), as the scheduler matches them.
func tolerates(tolerations []corev1.Toleration, taint string) bool {
	t, ok := parseTaint(taint)
	if !ok {
		return false
	}
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(logr.Discard(), &t, false) {
			return true
		}
	}
	return false
}

func parseTaint(s string) (corev1.Taint, bool) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok || kv == "" {
		return corev1.Taint{}, false
	}
	key, value, _ := strings.Cut(kv, "=")
	return corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)}, true
}
