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
	"slices"
	"strconv"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/gang"
)

// The keys the gang inputs are read by: Kueue's (sigs.k8s.io/kueue v0.17.0,
// apis/kueue/v1beta2/topology_types.go, pkg/controller/constants), JobSet's
// (sigs.k8s.io/jobset v0.11.1, api/jobset/v1alpha2) and LeaderWorkerSet's (sigs.k8s.io/lws
// v0.8.0, api/leaderworkerset/v1).
const (
	queueLabel            = "kueue.x-k8s.io/queue-name"
	requiredTopology      = "kueue.x-k8s.io/podset-required-topology"
	preferredTopology     = "kueue.x-k8s.io/podset-preferred-topology"
	unconstrainedTopology = "kueue.x-k8s.io/podset-unconstrained-topology"
	sliceTopology         = "kueue.x-k8s.io/podset-slice-required-topology"
	sliceSize             = "kueue.x-k8s.io/podset-slice-size"
	jobSetGroup           = "jobset.x-k8s.io"
	jobSetExclusive       = "alpha.jobset.sigs.k8s.io/exclusive-topology"
	lwsGroup              = "leaderworkerset.x-k8s.io"
	lwsExclusive          = "leaderworkerset.sigs.k8s.io/exclusive-topology"
)

// gangMember is one kind of a gang's pods: an object's pod template, count times.
type gangMember struct {
	obj   *fitObject
	count int
	// Pods are named <prefix>-<first+i>, a Pod by its own name.
	prefix string
	first  int
	// perJob: the pods are those of several child Jobs of perJob pods each, named
	// <prefix>-<job>-<i> (a JobSet's replicated Job admitted by Kueue).
	perJob int
	// leader: the one pod is named <prefix> (a LeaderWorkerSet's leader).
	leader bool
	podSet string // Kueue's PodSet name
}

func (m *gangMember) podName(i int) string {
	switch {
	case m.obj.isPod:
		return m.obj.name
	case m.leader:
		return m.prefix
	case m.perJob > 0:
		return fmt.Sprintf("%s-%d-%d", m.prefix, i/m.perJob, i%m.perJob)
	}
	return fmt.Sprintf("%s-%d", m.prefix, m.first+i)
}

// fitGang is a gang of the file: pods that start together, in one domain or not.
type fitGang struct {
	kind, namespace, name string
	// part is the child Job of a JobSet, the group of a LeaderWorkerSet.
	part     string
	members  []gangMember
	minCount int
	topology gang.Topology
	// annotated: Kueue's topology annotations were given.
	annotated bool
	queue     string
	// exclusive is JobSet's or LeaderWorkerSet's exclusive-topology key: the gangs of one
	// set (its name) each take a domain of their own.
	exclusive, set string
	kueue          *KueueTarget
}

func (g *fitGang) String() string {
	s := fmt.Sprintf("%s %s/%s", g.kind, g.namespace, g.name)
	if g.part != "" {
		s += " (" + g.part + ")"
	}
	return s
}

func (g *fitGang) pods() int {
	n := 0
	for _, m := range g.members {
		n += m.count
	}
	return n
}

// podGroup is a PodGroup of the file, or a podGroupTemplate of a Workload (the PodGroup
// its controller makes): the gang its pods join.
type podGroup struct {
	kind, namespace, name string
	minCount              int
	key                   string
	gang                  *fitGang
}

// addPodGroup reads a scheduling.k8s.io/v1beta1 PodGroup.
func (in *Workload) addPodGroup(m map[string]any, o *fitObject) error {
	var pg schedulingv1beta1.PodGroup
	if err := fromUnstructured(m, &pg); err != nil {
		return err
	}
	g, err := newPodGroup("PodGroup", o.namespace, o.name, pg.Spec.SchedulingPolicy, pg.Spec.SchedulingConstraints)
	if err != nil {
		return err
	}
	return in.addGroup(g)
}

// addWorkloadGroups reads a scheduling.k8s.io/v1beta1 Workload: each podGroupTemplate is a
// group the pods join by its name.
func (in *Workload) addWorkloadGroups(m map[string]any, o *fitObject) error {
	var wl schedulingv1beta1.Workload
	if err := fromUnstructured(m, &wl); err != nil {
		return err
	}
	if len(wl.Spec.PodGroupTemplates) == 0 {
		return fmt.Errorf("spec.podGroupTemplates is empty: composite pod groups are not placed by fit")
	}
	for _, t := range wl.Spec.PodGroupTemplates {
		g, err := newPodGroup("Workload", o.namespace, t.Name, t.SchedulingPolicy, t.SchedulingConstraints)
		if err != nil {
			return fmt.Errorf("podGroupTemplate %s: %w", t.Name, err)
		}
		g.name = o.name + "/" + t.Name
		in.groups[nsName(o.namespace, t.Name)] = g
		in.groupOrder = append(in.groupOrder, g)
	}
	return nil
}

func (in *Workload) addGroup(g *podGroup) error {
	key := nsName(g.namespace, g.name)
	if in.groups[key] != nil {
		return fmt.Errorf("the file holds two pod groups named %s/%s", g.namespace, g.name)
	}
	in.groups[key] = g
	in.groupOrder = append(in.groupOrder, g)
	return nil
}

// newPodGroup reads a group's policy: gang minCount (basic: every pod alone, minCount 1)
// and its one topology key.
func newPodGroup(kind, namespace, name string, policy schedulingv1beta1.PodGroupSchedulingPolicy, constraints *schedulingv1beta1.PodGroupSchedulingConstraints) (*podGroup, error) {
	g := &podGroup{kind: kind, namespace: namespace, name: name, minCount: 1}
	switch {
	case policy.Gang != nil && policy.Basic != nil:
		return nil, fmt.Errorf("spec.schedulingPolicy sets both basic and gang")
	case policy.Gang != nil:
		if policy.Gang.MinCount < 1 {
			return nil, fmt.Errorf("spec.schedulingPolicy.gang.minCount is %d: it must be at least 1", policy.Gang.MinCount)
		}
		g.minCount = int(policy.Gang.MinCount)
	case policy.Basic == nil:
		return nil, fmt.Errorf("spec.schedulingPolicy sets neither basic nor gang")
	}
	if constraints != nil {
		switch len(constraints.Topology) {
		case 0:
		case 1:
			if g.key = constraints.Topology[0].Key; g.key == "" {
				return nil, fmt.Errorf("spec.schedulingConstraints.topology[0].key is empty")
			}
		default:
			return nil, fmt.Errorf("spec.schedulingConstraints.topology has %d keys: the API allows one", len(constraints.Topology))
		}
	}
	return g, nil
}

// addJobSet reads a jobset.x-k8s.io JobSet: each replicated Job's replicas child Jobs of
// parallelism pods. For kube-scheduler each child Job is a gang, in a domain of its own
// with the exclusive-topology annotation; Kueue admits the JobSet as one Workload, a PodSet
// per replicated Job (kueueJobSet).
func (in *Workload) addJobSet(m map[string]any, o *fitObject) error {
	u := &unstructured.Unstructured{Object: m}
	list, found, err := unstructured.NestedSlice(m, "spec", "replicatedJobs")
	if err != nil || !found || len(list) == 0 {
		return fmt.Errorf("spec.replicatedJobs: a JobSet needs at least one replicated Job")
	}
	set := &jobSet{name: o.name, namespace: o.namespace, queue: u.GetLabels()[queueLabel]}
	total := int64(0)
	for i, item := range list {
		rm, ok := item.(map[string]any)
		if !ok {
			return fmt.Errorf("spec.replicatedJobs[%d] is not an object", i)
		}
		rj, err := readReplicatedJob(rm, i, o)
		if err != nil {
			return err
		}
		rj.exclusive = u.GetAnnotations()[jobSetExclusive]
		if v, ok := unstructuredAnnotations(rm, "template")[jobSetExclusive]; ok {
			rj.exclusive = v
		}
		total += rj.replicas * rj.obj.replicas
		if err := in.countGangPods(total, o); err != nil {
			return err
		}
		set.jobs = append(set.jobs, rj)
	}
	in.jobSets = append(in.jobSets, set)
	for _, rj := range set.jobs {
		rj.obj.inGang = true
		in.objects = append(in.objects, rj.obj)
		for j := range rj.replicas {
			child := fmt.Sprintf("%s-%s-%d", o.name, rj.name, j)
			g := &fitGang{kind: "JobSet", namespace: o.namespace, name: o.name, part: "Job " + child, queue: set.queue,
				exclusive: rj.exclusive, set: "JobSet/" + o.namespace + "/" + o.name,
				members: []gangMember{{obj: rj.obj, count: int(rj.obj.replicas), prefix: child, podSet: rj.name}}}
			g.topology, g.annotated, err = kueueTopology(rj.obj.template.Annotations)
			if err != nil {
				return fmt.Errorf("replicated Job %s: %w", rj.name, err)
			}
			if g.exclusive != "" {
				g.topology = gang.Topology{Key: g.exclusive}
			}
			in.gangs = append(in.gangs, g)
		}
	}
	return nil
}

// jobSet is a JobSet of the file, kept to be admitted as one Kueue Workload.
type jobSet struct {
	namespace, name, queue string
	jobs                   []*replicatedJob
}

type replicatedJob struct {
	name      string
	replicas  int64
	exclusive string
	obj       *fitObject // its pods: replicas are the child Job's parallelism
}

func readReplicatedJob(rm map[string]any, i int, o *fitObject) (*replicatedJob, error) {
	name, _, _ := unstructured.NestedString(rm, "name")
	if name == "" {
		return nil, fmt.Errorf("spec.replicatedJobs[%d] has no name", i)
	}
	replicas, set, err := count(rm, "replicas")
	if err != nil {
		return nil, fmt.Errorf("replicated Job %s: %w", name, err)
	}
	if !set {
		replicas = 1
	}
	obj := &fitObject{kind: o.kind, namespace: o.namespace, name: o.name}
	if err := obj.readJob(rm, "template", "spec"); err != nil {
		return nil, fmt.Errorf("replicated Job %s: %w", name, err)
	}
	return &replicatedJob{name: name, replicas: replicas, obj: obj}, nil
}

// addLeaderWorkerSet reads a leaderworkerset.x-k8s.io LeaderWorkerSet: replicas groups of
// size pods, a leader (leaderTemplate, else workerTemplate) and size-1 workers. Each group
// is a gang, in a domain of its own with the exclusive-topology annotation.
func (in *Workload) addLeaderWorkerSet(m map[string]any, o *fitObject) error {
	u := &unstructured.Unstructured{Object: m}
	replicas, set, err := count(m, "spec", "replicas")
	if err != nil {
		return err
	}
	if !set {
		replicas = 1
	}
	size, set, err := count(m, "spec", "leaderWorkerTemplate", "size")
	if err != nil {
		return err
	}
	if !set {
		size = 1
	}
	if size < 1 {
		return fmt.Errorf("spec.leaderWorkerTemplate.size is 0: a group has at least its leader")
	}
	if err := in.countGangPods(replicas*size, o); err != nil {
		return err
	}
	worker := &fitObject{kind: o.kind, namespace: o.namespace, name: o.name}
	if err := worker.readTemplate(m, "spec", "leaderWorkerTemplate", "workerTemplate"); err != nil {
		return err
	}
	leader := worker
	if t, found, _ := unstructured.NestedFieldNoCopy(m, "spec", "leaderWorkerTemplate", "leaderTemplate"); found && t != nil {
		leader = &fitObject{kind: o.kind, namespace: o.namespace, name: o.name}
		if err := leader.readTemplate(m, "spec", "leaderWorkerTemplate", "leaderTemplate"); err != nil {
			return err
		}
		leader.inGang = true
		in.objects = append(in.objects, leader)
	}
	worker.inGang = true
	in.objects = append(in.objects, worker)
	topo, annotated, err := kueueTopology(worker.template.Annotations)
	if err != nil {
		return fmt.Errorf("workerTemplate: %w", err)
	}
	exclusive := u.GetAnnotations()[lwsExclusive]
	if exclusive != "" {
		topo = gang.Topology{Key: exclusive}
	}
	for g := range replicas {
		group := fmt.Sprintf("%s-%d", o.name, g)
		fg := &fitGang{kind: "LeaderWorkerSet", namespace: o.namespace, name: o.name, part: "group " + strconv.FormatInt(g, 10),
			queue: u.GetLabels()[queueLabel], exclusive: exclusive, set: "LeaderWorkerSet/" + o.namespace + "/" + o.name,
			topology: topo, annotated: annotated,
			members: []gangMember{{obj: leader, count: 1, prefix: group, leader: true, podSet: "leader"}}}
		if size > 1 {
			fg.members = append(fg.members, gangMember{obj: worker, count: int(size - 1), prefix: group, first: 1, podSet: "worker"})
		}
		in.gangs = append(in.gangs, fg)
	}
	return nil
}

// countGangPods refuses a file whose gangs ask for more pods than a gang simulation places:
// before anything is made of them.
func (in *Workload) countGangPods(more int64, o *fitObject) error {
	if in.gangPods+more > gang.MaxPods {
		return fmt.Errorf("asks for %d pods in gangs (with the file's others: %d): fit places at most %d pods of gangs", more, in.gangPods+more, gang.MaxPods)
	}
	in.gangPods += more
	return nil
}

// unstructuredAnnotations are the annotations of the object at path.
func unstructuredAnnotations(m map[string]any, path ...string) map[string]string {
	out, _, _ := unstructured.NestedStringMap(m, append(path, "metadata", "annotations")...)
	return out
}

// kueueTopology reads Kueue's topology annotations of a pod template; annotated reports
// that some were given.
func kueueTopology(ann map[string]string) (t gang.Topology, annotated bool, err error) {
	if v, ok := ann[requiredTopology]; ok {
		t.Key, annotated = v, true
	}
	if v, ok := ann[preferredTopology]; ok {
		if annotated {
			return t, true, fmt.Errorf("%s and %s are both set: Kueue refuses more than one topology annotation", requiredTopology, preferredTopology)
		}
		t.Key, t.Preferred, annotated = v, true, true
	}
	if v, ok := ann[unconstrainedTopology]; ok {
		on, perr := strconv.ParseBool(v)
		if perr != nil {
			return t, true, fmt.Errorf("%s is %q: not true or false", unconstrainedTopology, v)
		}
		t.Unconstrained, annotated = on, annotated || on
	}
	if v, ok := ann[sliceTopology]; ok {
		t.SliceKey, annotated = v, true
	}
	if v, ok := ann[sliceSize]; ok {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 1 {
			return t, true, fmt.Errorf("%s is %q: not a whole number of at least 1", sliceSize, v)
		}
		t.SliceSize, annotated = n, true
	}
	return t, annotated, nil
}

// formGangs puts the file's pods into their gangs once every document is read: objects
// whose pods name a pod group join it (with one group in the file, those naming none join
// it too); a Job with Kueue's topology annotations is a gang of its own.
func (in *Workload) formGangs() error {
	var loose []*fitObject
	for _, o := range in.objects {
		if o.inGang {
			continue
		}
		sg := o.template.Spec.SchedulingGroup
		switch {
		case sg != nil && sg.PodGroupName != nil:
			g := in.groups[nsName(o.namespace, *sg.PodGroupName)]
			if g == nil {
				return fmt.Errorf("%s: spec.schedulingGroup.podGroupName names pod group %q, which the file does not hold: add the PodGroup (or the Workload whose podGroupTemplates name it)", o, *sg.PodGroupName)
			}
			in.join(g, o)
		default:
			loose = append(loose, o)
		}
	}
	for _, o := range loose {
		switch {
		case len(in.groupOrder) == 1 && in.groupOrder[0].namespace == o.namespace:
			g := in.groupOrder[0]
			in.notes = append(in.notes, fmt.Sprintf("%s names no pod group (spec.schedulingGroup.podGroupName): its pods are placed as members of %s %s/%s, the file's only one", o, g.kind, g.namespace, g.name))
			in.join(g, o)
		case o.kind == "Job":
			if err := in.jobGang(o); err != nil {
				return fmt.Errorf("%s: %w", o, err)
			}
		}
	}
	return in.checkGangs()
}

// join adds the object's pods to the group's gang.
func (in *Workload) join(g *podGroup, o *fitObject) {
	if g.gang == nil {
		g.gang = &fitGang{kind: g.kind, namespace: g.namespace, name: g.name, minCount: g.minCount, topology: gang.Topology{Key: g.key}}
		in.gangs = append(in.gangs, g.gang)
	}
	g.gang.members = append(g.gang.members, gangMember{obj: o, count: int(o.replicas), prefix: o.name, podSet: o.name})
	o.inGang = true
}

// jobGang makes a Job with Kueue's topology annotations (or a queue, which may be of a
// TAS flavor: ResolveQueues decides) a gang of its parallelism pods.
func (in *Workload) jobGang(o *fitObject) error {
	t, annotated, err := kueueTopology(o.template.Annotations)
	if err != nil || (!annotated && o.queue == "") {
		return err
	}
	g := &fitGang{kind: "Job", namespace: o.namespace, name: o.name, topology: t, annotated: annotated, queue: o.queue,
		members: []gangMember{{obj: o, count: int(o.replicas), prefix: o.name, podSet: "main"}}}
	if !annotated {
		in.maybe = append(in.maybe, g) // a gang only in a TAS queue
		return nil
	}
	o.inGang = true
	in.gangs = append(in.gangs, g)
	return nil
}

// checkGangs refuses what no component would place: a group no pod joins, minCount above
// the group's pods, more pods than the simulation places, a file mixing gangs with pods of
// no gang.
func (in *Workload) checkGangs() error {
	total := 0
	for _, g := range in.groupOrder {
		if g.gang == nil {
			return fmt.Errorf("%s %s/%s: no pod of the file joins it (spec.schedulingGroup.podGroupName); fit places a pod group with its pods or the objects that make them", g.kind, g.namespace, g.name)
		}
		if n := g.gang.pods(); g.minCount > n {
			return fmt.Errorf("%s %s/%s: minCount %d is more than its %d pods: kube-scheduler keeps them out of its queue (%q)", g.kind, g.namespace, g.name, g.minCount, n,
				"waiting for minCount pods from a gang to appear in scheduling queue")
		}
	}
	for _, g := range in.gangs {
		total += g.pods()
	}
	if total > gang.MaxPods {
		return fmt.Errorf("the file's gangs ask for %d pods: fit places at most %d pods of gangs", total, gang.MaxPods)
	}
	if len(in.gangs) == 0 {
		return nil
	}
	for _, o := range in.objects {
		undecided := slices.ContainsFunc(in.maybe, func(g *fitGang) bool { return g.members[0].obj == o })
		if !o.inGang && !undecided {
			return fmt.Errorf("%s is in no gang, beside the file's gangs (%s): fit answers for gangs alone; place it with a file of its own", o, in.gangs[0])
		}
	}
	return nil
}

// HasGangs reports gangs in the file, or Jobs that are gangs if their Kueue queue's flavor
// has a topology (ResolveQueues).
func (in *Workload) HasGangs() bool { return len(in.gangs) > 0 || len(in.maybe) > 0 }

// Notes are what reading the file assumed, for stderr.
func (in *Workload) Notes() []string { return in.notes }
