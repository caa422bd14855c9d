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
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// The conditions why quotes: the scheduler's of a PodGroup, Kueue's of a Workload.
const (
	PodGroupScheduled = "PodGroupInitiallyScheduled"
	QuotaReserved     = "QuotaReserved"
)

// GangWait is a pending pod's gang as it waits: the gang, and what the component that
// holds it back says.
type GangWait struct {
	In *Workload
	// Group names the gang: PodGroup ns/name, or Kueue's Workload ns/name.
	Group string
	// Condition is the group's condition message (PodGroupInitiallyScheduled=False, or
	// the Workload's QuotaReserved=False); "" when it has none yet.
	Condition string
}

// PodGroupWait is the gang of the PodGroup pg as it waits: its pods not bound yet, placed as
// kube-scheduler places the group (minCount less the pods bound). Nil when the group was
// scheduled: a pod of it that is still pending waits alone.
func PodGroupWait(pg *unstructured.Unstructured, pods []*corev1.Pod) (*GangWait, error) {
	var group schedulingv1beta1.PodGroup
	if err := fromUnstructuredLoose(pg.Object, &group); err != nil {
		return nil, fmt.Errorf("PodGroup %s/%s: %w", pg.GetNamespace(), pg.GetName(), err)
	}
	w := &GangWait{Group: "PodGroup " + group.Namespace + "/" + group.Name}
	if c := meta.FindStatusCondition(group.Status.Conditions, PodGroupScheduled); c != nil {
		if c.Status == metav1.ConditionTrue {
			return nil, nil
		}
		w.Condition = c.Message
	}
	g, err := newPodGroup("PodGroup", group.Namespace, group.Name, group.Spec.SchedulingPolicy, group.Spec.SchedulingConstraints)
	if err != nil {
		return nil, fmt.Errorf("PodGroup %s/%s: %w", group.Namespace, group.Name, err)
	}
	in := &Workload{templates: map[types.NamespacedName]*resourcev1.ResourceClaimTemplate{}, groups: map[types.NamespacedName]*podGroup{}}
	bound := 0
	for _, p := range pods {
		sg := p.Spec.SchedulingGroup
		if p.Namespace != group.Namespace || sg == nil || sg.PodGroupName == nil || *sg.PodGroupName != group.Name || finished(p) {
			continue
		}
		if p.Spec.NodeName != "" {
			bound++
			continue
		}
		o := &fitObject{kind: "Pod", namespace: p.Namespace, name: p.Name, replicas: 1, isPod: true,
			template: corev1.PodTemplateSpec{ObjectMeta: *p.ObjectMeta.DeepCopy(), Spec: *p.Spec.DeepCopy()}}
		o.template.Spec.SchedulingGates = nil
		in.objects = append(in.objects, o)
		in.join(g, o)
	}
	if g.gang == nil {
		return nil, nil
	}
	g.gang.minCount = min(max(1, g.minCount-bound), g.gang.pods())
	in.gangs = []*fitGang{g.gang}
	w.In = in
	return w, nil
}

// KueueWait is the gang of Kueue's Workload wl as it waits for admission: its PodSets, with
// their topology requests, in its LocalQueue (ResolveQueues finds whether the queue's flavor
// has a Topology). Nil when the Workload holds quota already.
func KueueWait(wl *unstructured.Unstructured) (*GangWait, error) {
	var w struct {
		Spec struct {
			QueueName string `json:"queueName"`
			PodSets   []struct {
				Name            string                 `json:"name"`
				Count           int32                  `json:"count"`
				Template        corev1.PodTemplateSpec `json:"template"`
				TopologyRequest *struct {
					Required                    *string `json:"required"`
					Preferred                   *string `json:"preferred"`
					Unconstrained               *bool   `json:"unconstrained"`
					PodSetSliceRequiredTopology *string `json:"podSetSliceRequiredTopology"`
					PodSetSliceSize             *int32  `json:"podSetSliceSize"`
				} `json:"topologyRequest"`
			} `json:"podSets"`
		} `json:"spec"`
		Status struct {
			Conditions []metav1.Condition `json:"conditions"`
		} `json:"status"`
	}
	if err := fromUnstructuredLoose(wl.Object, &w); err != nil {
		return nil, fmt.Errorf("Workload %s/%s: %w", wl.GetNamespace(), wl.GetName(), err)
	}
	out := &GangWait{Group: "Workload " + wl.GetNamespace() + "/" + wl.GetName()}
	if c := meta.FindStatusCondition(w.Status.Conditions, QuotaReserved); c != nil {
		if c.Status == metav1.ConditionTrue {
			return nil, nil
		}
		out.Condition = c.Message
	}
	if len(w.Spec.PodSets) == 0 || w.Spec.QueueName == "" {
		return nil, nil
	}
	in := &Workload{templates: map[types.NamespacedName]*resourcev1.ResourceClaimTemplate{}, groups: map[types.NamespacedName]*podGroup{}}
	g := &fitGang{kind: "Workload", namespace: wl.GetNamespace(), name: wl.GetName(), queue: w.Spec.QueueName}
	for i, ps := range w.Spec.PodSets {
		o := &fitObject{kind: "Workload", namespace: wl.GetNamespace(), name: wl.GetName(), replicas: int64(ps.Count), template: ps.Template, inGang: true}
		defaultRequests(&o.template.Spec)
		in.objects = append(in.objects, o)
		g.members = append(g.members, gangMember{obj: o, count: int(ps.Count), prefix: wl.GetName() + "-" + ps.Name, podSet: ps.Name})
		if t := ps.TopologyRequest; i == 0 && t != nil {
			g.topology.Key = deref(t.Required)
			if t.Preferred != nil {
				g.topology.Key, g.topology.Preferred = *t.Preferred, true
			}
			g.topology.Unconstrained = t.Unconstrained != nil && *t.Unconstrained
			g.topology.SliceKey = deref(t.PodSetSliceRequiredTopology)
			if t.PodSetSliceSize != nil {
				g.topology.SliceSize = int(*t.PodSetSliceSize)
			}
			g.annotated = true
		}
	}
	in.gangs = []*fitGang{g}
	out.In = in
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Kueue reports whether the gang is answered as Kueue (its queue's flavor has a Topology).
func (w *GangWait) Kueue() bool { return len(w.In.gangs) > 0 && w.In.gangs[0].kueue != nil }

// AddHolders names, in the first shown domains of the gang, the pods holding GPUs on their
// nodes (terminating ones marked).
func (v *View) AddHolders(g *printer.GangAnswer, shown int) {
	key := ""
	switch {
	case g.Topology != nil && g.Topology.Key != "":
		key = g.Topology.Key
	case g.Kueue != nil && len(g.Kueue.Levels) > 0:
		key = g.Kueue.Levels[0] // Kueue's domains without a key are its top level's
	}
	for i := range g.Domains[:min(shown, len(g.Domains))] {
		d := &g.Domains[i]
		for _, n := range v.snap.Nodes() {
			if key == "" || v.snap.Node(n).Labels[key] == d.Value {
				d.Holders = append(d.Holders, v.holders(n)...)
			}
		}
	}
}
