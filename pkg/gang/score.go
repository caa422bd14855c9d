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
	"math"

	corev1 "k8s.io/api/core/v1"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
)

// maxScore is the scheduler's MaxNodeScore and MaxScore.
const maxScore = 100

// The default profile's weights of the node scores this package computes; the others
// (ImageLocality, PodTopologySpread, InterPodAffinity, DynamicResources) are left out.
const (
	weightTaintToleration = 3
	weightNodeAffinity    = 2
	weightLeastAllocated  = 1
	weightBalanced        = 1
)

// load is a node's CPU (millicores) and memory: allocatable, requested as resource
// scoring counts it (non-zero defaults for containers without requests) and as requested.
type load struct {
	allocCPU, allocMem     int64
	nonZeroCPU, nonZeroMem int64
	reqCPU, reqMem         int64
}

// podScoring is what scoring reads of one template's pods.
type podScoring struct {
	nonZeroCPU, nonZeroMem int64
	reqCPU, reqMem         int64
	tolerations            []corev1.Toleration // those of effect PreferNoSchedule or any
	preferred              *nodeaffinity.PreferredSchedulingTerms
}

// scorer scores nodes for the gang's pods as the default profile's Score plugins do, and
// placements as its PlacementScore plugins do. It keeps the nodes' loads up to date with
// the gang's assumed pods.
type scorer struct {
	s     *capacity.Snapshot
	nodes map[string]*load
	pods  map[int]*podScoring // by template
}

func newScorer(s *capacity.Snapshot) *scorer {
	return &scorer{s: s, nodes: map[string]*load{}, pods: map[int]*podScoring{}}
}

func (sc *scorer) load(node string) *load {
	if l := sc.nodes[node]; l != nil {
		return l
	}
	a := sc.s.Node(node).Status.Allocatable
	l := &load{allocCPU: a.Cpu().MilliValue(), allocMem: a.Memory().Value()}
	l.nonZeroCPU, l.nonZeroMem = sc.s.NonZeroRequested(node)
	_, req := sc.s.Requested(node)
	l.reqCPU, l.reqMem = req[corev1.ResourceCPU], req[corev1.ResourceMemory]
	sc.nodes[node] = l
	return l
}

func (sc *scorer) pod(m member) *podScoring {
	if p := sc.pods[m.template]; p != nil {
		return p
	}
	p := &podScoring{}
	p.nonZeroCPU, p.nonZeroMem = capacity.NonZeroRequests(m.pod)
	req := capacity.Requests(m.pod)
	p.reqCPU, p.reqMem = req.Cpu().MilliValue(), req.Memory().Value()
	for _, t := range m.pod.Spec.Tolerations {
		if t.Effect == "" || t.Effect == corev1.TaintEffectPreferNoSchedule {
			p.tolerations = append(p.tolerations, t)
		}
	}
	if a := m.pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		// An invalid term is refused by the API server; here it scores nothing.
		p.preferred, _ = nodeaffinity.NewPreferredSchedulingTerms(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	sc.pods[m.template] = p
	return p
}

// assume adds (sign 1) or takes away (-1) a gang pod's requests on the node.
func (sc *scorer) assume(node string, m member, sign int64) {
	l, p := sc.load(node), sc.pod(m)
	l.nonZeroCPU += sign * p.nonZeroCPU
	l.nonZeroMem += sign * p.nonZeroMem
	l.reqCPU += sign * p.reqCPU
	l.reqMem += sign * p.reqMem
}

// pick returns the index of the feasible node the scheduler would choose: the highest
// weighted sum of TaintToleration, NodeAffinity, NodeResourcesFit (LeastAllocated on CPU
// and memory) and NodeResourcesBalancedAllocation; the first in name order among equals.
func (sc *scorer) pick(m member, feasible []capacity.Result) int {
	p := sc.pod(m)
	taints := make([]int64, len(feasible))
	affinity := make([]int64, len(feasible))
	for i, r := range feasible {
		node := sc.s.Node(r.Node)
		for j := range node.Spec.Taints {
			t := &node.Spec.Taints[j]
			if t.Effect == corev1.TaintEffectPreferNoSchedule && !v1helper.TolerationsTolerateTaint(klog.Background(), p.tolerations, t, false) {
				taints[i]++
			}
		}
		if p.preferred != nil {
			affinity[i] = p.preferred.Score(node)
		}
	}
	normalize(taints, true)
	normalize(affinity, false)
	best, bestScore := 0, int64(math.MinInt64)
	for i, r := range feasible {
		l := sc.load(r.Node)
		score := weightTaintToleration*taints[i] + weightNodeAffinity*affinity[i] +
			weightLeastAllocated*leastAllocated(l, p) + weightBalanced*balanced(l, p)
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	return best
}

// normalize is the scheduler's DefaultNormalizeScore.
func normalize(scores []int64, reverse bool) {
	var top int64
	for _, s := range scores {
		top = max(top, s)
	}
	for i := range scores {
		switch {
		case top == 0 && reverse:
			scores[i] = maxScore
		case top == 0:
		case reverse:
			scores[i] = maxScore - maxScore*scores[i]/top
		default:
			scores[i] = maxScore * scores[i] / top
		}
	}
}

// leastAllocated is NodeResourcesFit's default score: the share of CPU and memory left
// once the pod is there, averaged.
func leastAllocated(l *load, p *podScoring) int64 {
	var sum, n int64
	for _, r := range [][2]int64{{l.nonZeroCPU + p.nonZeroCPU, l.allocCPU}, {l.nonZeroMem + p.nonZeroMem, l.allocMem}} {
		if r[1] == 0 {
			continue
		}
		n++
		if r[0] <= r[1] {
			sum += (r[1] - r[0]) * maxScore / r[1]
		}
	}
	if n == 0 {
		return 0
	}
	return sum / n
}

// balanced is NodeResourcesBalancedAllocation's score: how much closer the CPU and memory
// shares come to each other with the pod; 0 for a pod that requests neither.
func balanced(l *load, p *podScoring) int64 {
	if p.reqCPU == 0 && p.reqMem == 0 {
		return 0
	}
	with := balance([][2]int64{{l.reqCPU + p.reqCPU, l.allocCPU}, {l.reqMem + p.reqMem, l.allocMem}})
	without := balance([][2]int64{{l.reqCPU, l.allocCPU}, {l.reqMem, l.allocMem}})
	return maxScore/2 + (maxScore/2+with-without)/2
}

// balance is balancedResourceScore for two resources: (1 - std of the shares) x 100.
func balance(rs [][2]int64) int64 {
	var fractions []float64
	for _, r := range rs {
		if r[1] == 0 {
			continue
		}
		fractions = append(fractions, min(float64(r[0])/float64(r[1]), 1))
	}
	std := 0.0
	if len(fractions) == 2 {
		std = math.Abs((fractions[0] - fractions[1]) / 2)
	}
	return int64((1 - std) * float64(maxScore))
}

// placementScore is NodeResourcesFit's ScorePlacement: MostAllocated on CPU and memory over
// all the placement's nodes with the gang's pods in it (the pods counted with non-zero
// defaults).
func (sc *scorer) placementScore(members []member, ev evaluation) int64 {
	var reqCPU, reqMem, allocCPU, allocMem int64
	for j, o := range ev.outcomes {
		if o.node != "" {
			p := sc.pod(members[j])
			reqCPU += p.nonZeroCPU
			reqMem += p.nonZeroMem
		}
	}
	for _, n := range ev.placement.nodes {
		l := sc.load(n)
		allocCPU += l.allocCPU
		allocMem += l.allocMem
		reqCPU += l.nonZeroCPU
		reqMem += l.nonZeroMem
	}
	var sum, n int64
	for _, r := range [][2]int64{{reqCPU, allocCPU}, {reqMem, allocMem}} {
		if r[1] == 0 {
			continue
		}
		n++
		sum += min(r[0], r[1]) * maxScore / r[1]
	}
	if n == 0 {
		return 0
	}
	return sum / n
}
