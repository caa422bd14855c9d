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
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/gang"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
)

// KueueGroup is Kueue's API group; kueueVersions the versions read, the newest first.
const KueueGroup = "kueue.x-k8s.io"

var kueueVersions = []string{"v1beta2", "v1beta1"}

// KueueTarget is where Kueue admits a queue's workloads with Topology Aware Scheduling: the
// LocalQueue, its ClusterQueue, the flavor with a Topology, and what gang.PlaceAsKueue reads.
type KueueTarget struct {
	Queue        string
	ClusterQueue string
	gang.Kueue
}

// ResolveQueues asks the cluster which of the gangs' Kueue queues admit with Topology Aware
// Scheduling: those gangs are answered as Kueue, the others as kube-scheduler. A Job whose
// queue is of no TAS flavor is no gang (and a JobSet in a TAS queue is one Workload). Notes
// say what was not found.
func (in *Workload) ResolveQueues(ctx context.Context, c *factory.Factory, errOut io.Writer) error {
	r := &queueReader{c: c, targets: map[types.NamespacedName]*KueueTarget{}}
	for _, g := range append(slices.Clone(in.gangs), in.maybe...) {
		if g.queue == "" {
			continue
		}
		t, err := r.target(ctx, g.namespace, g.queue, g.members[0].obj)
		if err != nil {
			return fmt.Errorf("%s: %w", g, err)
		}
		g.kueue = t
	}
	for _, note := range r.notes {
		fmt.Fprintf(errOut, "Note: %s\n", note)
	}
	for _, g := range in.maybe {
		if g.kueue != nil {
			g.members[0].obj.inGang = true
			in.gangs = append(in.gangs, g)
		}
	}
	in.maybe = nil
	if err := in.kueueJobSets(); err != nil {
		return err
	}
	return in.checkGangs()
}

// kueueJobSets makes each JobSet of a TAS queue one gang: Kueue's Workload of a PodSet per
// replicated Job.
func (in *Workload) kueueJobSets() error {
	for _, js := range in.jobSets {
		set := "JobSet/" + js.namespace + "/" + js.name
		i := slices.IndexFunc(in.gangs, func(g *fitGang) bool { return g.set == set && g.kueue != nil })
		if i < 0 {
			continue
		}
		g := &fitGang{kind: "JobSet", namespace: js.namespace, name: js.name, queue: js.queue, kueue: in.gangs[i].kueue}
		for k, rj := range js.jobs {
			t, annotated, err := kueueTopology(rj.obj.template.Annotations)
			if err != nil {
				return fmt.Errorf("%s: replicated Job %s: %w", g, rj.name, err)
			}
			if k > 0 && (t != g.topology || annotated != g.annotated) {
				return fmt.Errorf("%s: replicated Jobs %s and %s ask for different topologies: fit places the PodSets of one Kueue Workload with one topology request", g, js.jobs[0].name, rj.name)
			}
			g.topology, g.annotated = t, annotated
			g.members = append(g.members, gangMember{obj: rj.obj, count: int(rj.replicas * rj.obj.replicas), prefix: js.name + "-" + rj.name,
				perJob: int(rj.obj.replicas), podSet: rj.name})
		}
		in.gangs = slices.DeleteFunc(in.gangs, func(g *fitGang) bool { return g.set == set })
		in.gangs = slices.Insert(in.gangs, min(i, len(in.gangs)), g)
	}
	return nil
}

// queueReader reads Kueue's objects, each queue once.
type queueReader struct {
	c       *factory.Factory
	dyn     dynamic.Interface
	served  string // the Kueue version served; "" before the first read
	none    bool   // Kueue is not served, or may not be read
	targets map[types.NamespacedName]*KueueTarget
	notes   []string
}

// target is the TAS flavor the queue admits the object's pods with, or nil.
func (r *queueReader) target(ctx context.Context, namespace, queue string, obj *fitObject) (*KueueTarget, error) {
	key := nsName(namespace, queue)
	if t, ok := r.targets[key]; ok || r.none {
		return t, nil
	}
	lq, err := r.get(ctx, "localqueues", namespace, queue)
	if err != nil || lq == nil {
		return nil, err
	}
	t := &KueueTarget{Queue: namespace + "/" + queue}
	t.ClusterQueue, _, _ = unstructured.NestedString(lq.Object, "spec", "clusterQueue")
	if t.ClusterQueue == "" {
		return nil, fmt.Errorf("LocalQueue %s/%s names no ClusterQueue (spec.clusterQueue)", namespace, queue)
	}
	cq, err := r.get(ctx, "clusterqueues", "", t.ClusterQueue)
	if err != nil || cq == nil {
		return nil, err
	}
	found, err := r.flavor(ctx, cq, obj, t)
	if err != nil {
		return nil, err
	}
	if !found {
		r.notes = append(r.notes, fmt.Sprintf("ClusterQueue %s (of LocalQueue %s) has no ResourceFlavor with a Topology for these pods: Kueue admits them without Topology Aware Scheduling, and the answer is kube-scheduler's", t.ClusterQueue, t.Queue))
		t = nil
	}
	r.targets[key] = t
	return t, nil
}

// flavor finds the first flavor with a Topology in the ClusterQueue's resource group that
// covers the pods' GPUs (or their first resource), and reads it and its Topology into t.
func (r *queueReader) flavor(ctx context.Context, cq *unstructured.Unstructured, obj *fitObject, t *KueueTarget) (bool, error) {
	groups, _, _ := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
	requests := capacity.Requests(obj.pod(0))
	for _, item := range groups {
		g, _ := item.(map[string]any)
		covered, _, _ := unstructured.NestedStringSlice(g, "coveredResources")
		if !coversPod(covered, requests) {
			continue
		}
		flavors, _, _ := unstructured.NestedSlice(g, "flavors")
		for _, f := range flavors {
			fm, _ := f.(map[string]any)
			name, _, _ := unstructured.NestedString(fm, "name")
			rf, err := r.get(ctx, "resourceflavors", "", name)
			if err != nil {
				return false, err
			}
			if rf == nil {
				continue
			}
			topology, _, _ := unstructured.NestedString(rf.Object, "spec", "topologyName")
			if topology == "" {
				continue
			}
			return true, r.readFlavor(ctx, rf, topology, t)
		}
	}
	return false, nil
}

// coversPod reports a resource group that covers a GPU resource the pod asks for, or, for a
// pod without GPUs, any resource it asks for.
func coversPod(covered []string, requests corev1.ResourceList) bool {
	gpus := false
	for name := range requests {
		gpus = gpus || allocation.IsGPUResource(string(name))
	}
	for _, c := range covered {
		if _, asked := requests[corev1.ResourceName(c)]; asked && (!gpus || allocation.IsGPUResource(c)) {
			return true
		}
	}
	return false
}

// readFlavor reads the flavor's node labels and tolerations and its Topology's levels.
func (r *queueReader) readFlavor(ctx context.Context, rf *unstructured.Unstructured, topology string, t *KueueTarget) error {
	var spec struct {
		NodeLabels  map[string]string   `json:"nodeLabels"`
		Tolerations []corev1.Toleration `json:"tolerations"`
	}
	raw, _, _ := unstructured.NestedMap(rf.Object, "spec")
	raw = map[string]any{"nodeLabels": raw["nodeLabels"], "tolerations": raw["tolerations"]}
	if err := fromUnstructuredLoose(raw, &spec); err != nil {
		return fmt.Errorf("ResourceFlavor %s: %w", rf.GetName(), err)
	}
	t.Flavor, t.Topology, t.NodeLabels, t.Tolerations = rf.GetName(), topology, spec.NodeLabels, spec.Tolerations
	tp, err := r.get(ctx, "topologies", "", topology)
	if err != nil {
		return err
	}
	if tp == nil {
		return fmt.Errorf("ResourceFlavor %s names Topology %q, which does not exist: Kueue admits none of its workloads", rf.GetName(), topology)
	}
	levels, _, _ := unstructured.NestedSlice(tp.Object, "spec", "levels")
	for _, l := range levels {
		lm, _ := l.(map[string]any)
		key, _, _ := unstructured.NestedString(lm, "nodeLabel")
		t.Levels = append(t.Levels, key)
	}
	return nil
}

// get reads one of Kueue's objects in the version served (found with the first read); nil
// when it does not exist. When Kueue is not served, or may not be read, it notes so and
// every gang is kube-scheduler's.
func (r *queueReader) get(ctx context.Context, resource, namespace, name string) (*unstructured.Unstructured, error) {
	if r.dyn == nil {
		dyn, err := r.c.Dynamic()
		if errors.Is(err, factory.ErrNoDynamic) {
			r.none = true
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		r.dyn = dyn
	}
	versions := kueueVersions
	if r.served != "" {
		versions = []string{r.served}
	}
	for _, v := range versions {
		var obj *unstructured.Unstructured
		var err error
		res := r.dyn.Resource(schema.GroupVersionResource{Group: KueueGroup, Version: v, Resource: resource})
		if namespace != "" {
			obj, err = res.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		} else {
			obj, err = res.Get(ctx, name, metav1.GetOptions{})
		}
		switch {
		case apierrors.IsNotFound(err) && factory.IsMissingResource(err) && r.served == "":
			continue
		case apierrors.IsNotFound(err) && resource == "localqueues":
			return nil, fmt.Errorf("LocalQueue %s/%s not found: Kueue admits no workload of it (`kubectl get localqueues -n %s` lists them)", namespace, name, namespace)
		case apierrors.IsNotFound(err) && resource == "clusterqueues":
			return nil, fmt.Errorf("ClusterQueue %s not found: Kueue admits no workload of its LocalQueues", name)
		case apierrors.IsNotFound(err):
			return nil, nil
		case apierrors.IsForbidden(err):
			r.none = true
			r.notes = append(r.notes, fmt.Sprintf("Kueue's %s may not be read (%v): the answer is kube-scheduler's, not Kueue's Topology Aware Scheduling", resource, err))
			return nil, nil
		case err != nil:
			return nil, r.c.Explain(err, factory.Request{Verb: "get", Resource: resource, Group: KueueGroup, Name: name, Namespaced: namespace != "", Namespace: namespace})
		}
		r.served = v
		return obj, nil
	}
	r.none = true
	r.notes = append(r.notes, "the API server serves no Kueue (kueue.x-k8s.io v1beta2 or v1beta1): the answer is kube-scheduler's")
	return nil, nil
}

// fromUnstructuredLoose converts without refusing unknown fields: the objects of other
// projects' APIs carry fields fit does not read.
func fromUnstructuredLoose(m map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(m, into)
}
