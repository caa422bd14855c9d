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

package simulate

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/gang"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// GangQuestion is what placing the file's gangs asks of the cluster: a pod of each
// template, the topology keys (and Kueue's levels and flavor labels) of every node; the
// nodes the filters reject as stubs, for the scheduler counts them in its placements; every
// node whole where Kueue answers.
func (in *Workload) GangQuestion() Question {
	q := Question{Claims: len(in.claims) > 0, Stubs: true}
	seen := map[*fitObject]bool{}
	keys := map[string]bool{}
	for _, g := range in.gangs {
		for _, m := range g.members {
			if !seen[m.obj] {
				seen[m.obj] = true
				q.Pods = append(q.Pods, m.obj.pod(0))
			}
		}
		for _, k := range []string{g.topology.Key, g.topology.SliceKey, g.exclusive} {
			keys[k] = true
		}
		if g.kueue != nil {
			q.EveryNode = true
			for _, k := range g.kueue.Levels {
				keys[k] = true
			}
			for k := range g.kueue.NodeLabels {
				keys[k] = true
			}
		}
	}
	delete(keys, "")
	for k := range keys {
		q.Labels = append(q.Labels, k)
	}
	slices.Sort(q.Labels)
	q.Within = in.within()
	return q
}

// within are the labels every node a gang can go to carries, when the gangs agree on them:
// the scheduler's placements are made of the nodes with the topology key, Kueue's topology
// of those with every level's label. Nil when some gang may go anywhere.
func (in *Workload) within() []string {
	var out []string
	for i, g := range in.gangs {
		var need []string
		switch {
		case g.kueue != nil:
			need = g.kueue.Levels
		case g.topology.Key != "" && !g.topology.Preferred && !g.topology.Unconstrained:
			need = []string{g.topology.Key}
		case g.exclusive != "":
			need = []string{g.exclusive}
		default:
			return nil
		}
		if i > 0 && !slices.Equal(need, out) {
			return nil
		}
		out = need
	}
	return out
}

// PlaceGangs places the file's gangs one after the other, each all or nothing: as
// kube-scheduler places a PodGroup of its pods (gang.PlaceAsScheduler), or, in a queue of a
// flavor with a Topology, as Kueue's Topology Aware Scheduling assigns it
// (gang.PlaceAsKueue). A gang that fits holds its nodes for the next; the gangs of a JobSet
// or LeaderWorkerSet with exclusive placement each take a domain the others have not.
func (v *View) PlaceGangs(in *Workload, errOut io.Writer) (*printer.GangFit, error) {
	a := &printer.GangFit{Gangs: []printer.GangAnswer{}, Pods: []printer.FitPod{}}
	taken := map[string][]string{}
	a.Fits, a.FitsByPreemption = true, true
	for _, fg := range in.gangs {
		g, note := in.gangOf(fg, taken[fg.set])
		if note != "" {
			fmt.Fprintf(errOut, "Note: %s\n", note)
		}
		var res gang.Result
		var err error
		if fg.kueue != nil {
			k := fg.kueue.Kueue
			for _, m := range fg.members {
				k.PodSets = append(k.PodSets, m.podSet)
			}
			res, err = gang.PlaceAsKueue(v.snap, g, k)
		} else {
			res, err = gang.PlaceAsScheduler(v.snap, g)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fg, err)
		}
		ans, pods := fg.answer(g, res)
		a.Gangs, a.Pods = append(a.Gangs, ans), append(a.Pods, pods...)
		a.Replicas += int64(ans.Pods)
		a.Placed += int64(ans.Placed)
		a.Fits = a.Fits && res.Fits
		a.FitsByPreemption = a.FitsByPreemption && (res.Fits || ans.Preemption != nil && len(ans.Preemption.Victims) > 0)
		if !res.Fits {
			continue
		}
		if err := v.assumeGang(in, fg, g, res); err != nil {
			return nil, fmt.Errorf("%s: %w", fg, err)
		}
		if fg.exclusive != "" {
			taken[fg.set] = append(taken[fg.set], res.Domain)
		}
	}
	a.FitsByPreemption = a.FitsByPreemption && !a.Fits
	return a, nil
}

// gangOf is the gang pkg/gang places: a template per member, named by the member's prefix
// (pkg/gang names the pods <prefix>-<i>), kept off the domains its set took. Without Kueue
// only a required topology counts: note says so of Kueue's other requests.
func (in *Workload) gangOf(fg *fitGang, taken []string) (gang.Gang, string) {
	g := gang.Gang{Name: fg.name, MinCount: fg.minCount, Topology: fg.topology}
	note := ""
	if fg.kueue == nil && fg.annotated {
		t := fg.topology
		g.Topology = gang.Topology{Key: t.Key}
		switch {
		case t.Preferred || t.Unconstrained:
			g.Topology.Key = ""
			note = fmt.Sprintf("%s: Kueue's preferred and unconstrained topologies mean nothing to kube-scheduler: without Kueue's Topology Aware Scheduling its pods are placed anywhere, as a PodGroup without a topology key", fg)
		case t.Key != "" || t.SliceKey != "":
			note = fmt.Sprintf("%s: without Kueue's Topology Aware Scheduling, answered as kube-scheduler places a PodGroup of its pods with the required topology as its key (slices are Kueue's alone)", fg)
		}
		if fg.exclusive != "" {
			g.Topology = gang.Topology{Key: fg.exclusive}
		}
	}
	for _, m := range fg.members {
		p := m.obj.pod(0)
		p.Name = m.prefix
		if len(taken) > 0 {
			avoid(p, fg.exclusive, taken)
		}
		g.Templates = append(g.Templates, gang.Template{Pod: p, ClaimTemplates: in.templatesIn(fg.namespace), Count: m.count})
	}
	return g, note
}

// avoid keeps the pod off the domains of key taken by the other gangs of its set, as
// JobSet's and LeaderWorkerSet's pod anti-affinity does.
func avoid(p *corev1.Pod, key string, taken []string) {
	req := corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpNotIn, Values: taken}
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	if p.Spec.Affinity.NodeAffinity == nil {
		p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := p.Spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		terms[i].MatchExpressions = append(terms[i].MatchExpressions, req)
	}
}

// memberPod is which member and which of its pods pkg/gang's pod is: its template, and the
// index its name ends with.
func memberPod(p gang.Pod) (int, int) {
	i, _ := strconv.Atoi(p.Name[strings.LastIndex(p.Name, "-")+1:])
	return p.Template, i
}

// answer is what fit says of the gang.
func (fg *fitGang) answer(g gang.Gang, res gang.Result) (printer.GangAnswer, []printer.FitPod) {
	total := fg.pods()
	a := printer.GangAnswer{Gang: fg.kind + "/" + fg.name, Part: fg.part, Namespace: fg.namespace, As: printer.AsScheduler,
		Pods: total, MinCount: cmp.Or(g.MinCount, total), Fits: res.Fits, Domain: res.Domain, Message: res.Message,
		Topology: topologyOf(fg, g.Topology), Domains: []printer.GangDomain{}}
	if fg.kueue != nil {
		k := fg.kueue
		a.As = printer.AsKueue
		a.Kueue = &printer.GangKueue{Queue: k.Queue, ClusterQueue: k.ClusterQueue, Flavor: k.Flavor, Topology: k.Topology, Levels: k.Levels}
		if res.Kueue != nil {
			a.Kueue.Mode = res.Kueue.Mode
		}
	}
	var pods []printer.FitPod
	nodes := map[string]bool{}
	for _, p := range res.Pods {
		k, i := memberPod(p)
		m := &fg.members[k]
		fp := printer.FitPod{Object: a.Gang, Namespace: fg.namespace, Part: fg.part, Pod: m.podName(i), Node: p.Node,
			Domain: p.Domain, Message: p.Message, Nominated: p.Nominated}
		if p.Node != "" || res.Fits && p.Domain != "" {
			a.Placed++
			fp.Resources = GPURequests(g.Templates[k].Pod)
		}
		if p.Node != "" {
			nodes[p.Node] = true
		}
		pods = append(pods, fp)
	}
	a.Nodes = slices.Sorted(func(yield func(string) bool) {
		for n := range nodes {
			if !yield(n) {
				return
			}
		}
	})
	for _, d := range res.Domains {
		a.Domains = append(a.Domains, printer.GangDomain{Value: d.Value, Nodes: d.Nodes, Pods: d.Pods, Held: d.Held, Status: d.Status})
	}
	slices.SortStableFunc(a.Domains, func(x, y printer.GangDomain) int {
		return cmp.Or(cmp.Compare(y.Pods, x.Pods), cmp.Compare(x.Value, y.Value))
	})
	if p := res.Preemption; p != nil {
		a.Preemption = &printer.GangPreemption{Message: p.Message, Domain: p.Domain}
		for _, victim := range p.Victims {
			a.Preemption.Victims = append(a.Preemption.Victims, printer.Victim{Namespace: victim.Namespace, Pod: victim.Name, Priority: corev1helpers.PodPriority(victim)})
		}
	}
	return a, pods
}

// topologyOf says what the gang asked for of the topology, as it was placed.
func topologyOf(fg *fitGang, t gang.Topology) *printer.GangTopology {
	out := &printer.GangTopology{Key: t.Key, Mode: "required", SliceKey: t.SliceKey, SliceSize: t.SliceSize, Exclusive: fg.exclusive != "" && t.Key == fg.exclusive}
	switch {
	case t.Preferred:
		out.Mode = "preferred"
	case t.Unconstrained:
		out.Mode = "unconstrained"
	case t.Key == "" && t.SliceKey == "" && !out.Exclusive:
		return nil
	}
	return out
}

// assumeGang places the pods of a gang that fits on their nodes, for the gangs after it.
// Kueue's pods of a topology whose lowest level is not the hostname have no node: they
// hold nothing here.
func (v *View) assumeGang(in *Workload, fg *fitGang, g gang.Gang, res gang.Result) error {
	for _, p := range res.Pods {
		if p.Node == "" {
			continue
		}
		k, i := memberPod(p)
		pod := g.Templates[k].Pod.DeepCopy()
		pod.Name = fg.members[k].podName(i)
		pod.UID = types.UID("gpuinv-fit-gang-" + fg.namespace + "-" + pod.Name)
		claims, err := v.snap.PodClaims(pod, in.templatesIn(fg.namespace))
		if err != nil {
			return err
		}
		r, err := v.snap.Fit(pod, claims, p.Node)
		if err != nil {
			return err
		}
		if r.Fits() {
			v.assume(pod, claims, r)
		}
	}
	return nil
}
