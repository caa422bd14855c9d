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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
)

// fitObject is an object of the file whose pods `fit` places.
type fitObject struct {
	kind, namespace, name string
	replicas              int64
	template              corev1.PodTemplateSpec
	isPod                 bool // a Pod: its one replica keeps its name
	// queue is the object's Kueue queue (its kueue.x-k8s.io/queue-name label).
	queue string
	// inGang: the object's pods are those of a gang.
	inGang bool
}

func (o *fitObject) String() string { return fmt.Sprintf("%s %s/%s", o.kind, o.namespace, o.name) }

// pod is the object's replica i, as its controller would make it (not yet scheduled).
func (o *fitObject) pod(i int64) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: *o.template.ObjectMeta.DeepCopy(), Spec: *o.template.Spec.DeepCopy()}
	p.Namespace, p.Name = o.namespace, o.name
	if !o.isPod {
		p.Name = fmt.Sprintf("%s-%d", o.name, i)
	}
	// Distinct per replica, so that claims made from templates are too.
	p.UID = types.UID(fmt.Sprintf("gpuinv-fit-%s-%s-%s", strings.ToLower(o.kind), o.namespace, p.Name))
	p.Status = corev1.PodStatus{Phase: corev1.PodPending}
	return p
}

// Workload is what fit's file holds: the objects whose replicas it places, the claim
// templates and claims they use.
type Workload struct {
	objects   []*fitObject
	templates map[types.NamespacedName]*resourcev1.ResourceClaimTemplate
	claims    []*resourcev1.ResourceClaim
	// The gangs (gangread.go): the pod groups pods join, by namespace and name; the gangs;
	// Jobs that are gangs if their queue is of a TAS flavor; JobSets, which Kueue admits
	// whole; the pods of gangs so far; what reading assumed.
	groups     map[types.NamespacedName]*podGroup
	groupOrder []*podGroup
	gangs      []*fitGang
	maybe      []*fitGang
	jobSets    []*jobSet
	gangPods   int64
	notes      []string
}

// ReadWorkload reads the YAML or JSON documents of r (named source in messages); objects
// without a namespace are in namespace.
func ReadWorkload(r io.Reader, source, namespace string) (*Workload, error) {
	in := &Workload{templates: map[types.NamespacedName]*resourcev1.ResourceClaimTemplate{}, groups: map[types.NamespacedName]*podGroup{}}
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for doc := 1; ; doc++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d is not YAML or JSON: %w", source, doc, err)
		}
		if trimmed := bytes.TrimSpace(raw); len(trimmed) == 0 || string(trimmed) == "null" {
			continue
		}
		var m map[string]any
		if err := utiljson.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("%s: document %d is not a Kubernetes object: %w", source, doc, err)
		}
		if err := in.add(m, namespace, fmt.Sprintf("%s: document %d", source, doc)); err != nil {
			return nil, err
		}
	}
	if len(in.objects) == 0 && len(in.groupOrder) == 0 {
		return nil, fmt.Errorf("%s holds nothing to place: no Pod, and no object with a pod template (spec.template)", source)
	}
	if err := in.formGangs(); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return in, nil
}

// add reads one object (a List's items each).
func (in *Workload) add(m map[string]any, namespace, where string) error {
	u := &unstructured.Unstructured{Object: m}
	kind, apiVersion := u.GetKind(), u.GetAPIVersion()
	if kind == "" || apiVersion == "" {
		return fmt.Errorf("%s: not a Kubernetes object (no kind or apiVersion)", where)
	}
	if strings.HasSuffix(kind, "List") && m["items"] != nil {
		items, ok := m["items"].([]any)
		if !ok {
			return fmt.Errorf("%s: %s: items is not a list", where, kind)
		}
		for i, item := range items {
			obj, ok := item.(map[string]any)
			if !ok {
				return fmt.Errorf("%s: %s item %d is not an object", where, kind, i)
			}
			if err := in.add(obj, namespace, fmt.Sprintf("%s item %d", where, i)); err != nil {
				return err
			}
		}
		return nil
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	o := &fitObject{kind: kind, namespace: u.GetNamespace(), name: u.GetName(), queue: u.GetLabels()[queueLabel]}
	if o.namespace == "" {
		o.namespace = namespace
	}
	if o.name == "" {
		o.name = strings.TrimSuffix(u.GetGenerateName(), "-")
	}
	if o.name == "" {
		return fmt.Errorf("%s: %s has no metadata.name", where, kind)
	}
	if err := in.addObject(m, gv, o); err != nil {
		return fmt.Errorf("%s: %w", o, err)
	}
	return nil
}

// addObject reads what the object holds by its kind: a pod, a claim or template, or a pod
// template with a replica count.
func (in *Workload) addObject(m map[string]any, gv schema.GroupVersion, o *fitObject) error {
	switch {
	case gv.Group == "" && o.kind == "Pod":
		var pod corev1.Pod
		if err := fromUnstructured(m, &pod); err != nil {
			return err
		}
		o.template, o.replicas, o.isPod = corev1.PodTemplateSpec{ObjectMeta: pod.ObjectMeta, Spec: pod.Spec}, 1, true
		defaultRequests(&o.template.Spec)
	case gv.Group == resourcev1.GroupName && (o.kind == "ResourceClaimTemplate" || o.kind == "ResourceClaim"):
		return in.addDRA(m, gv, o)
	case gv.Group == schedulingv1beta1.GroupName && o.kind == "PodGroup" && gv.Version == "v1beta1":
		return in.addPodGroup(m, o)
	case gv.Group == schedulingv1beta1.GroupName && o.kind == "Workload" && gv.Version == "v1beta1":
		return in.addWorkloadGroups(m, o)
	case gv.Group == schedulingv1beta1.GroupName && (o.kind == "PodGroup" || o.kind == "Workload"):
		return fmt.Errorf("%s is not read: write it as %s", gv, schedulingv1beta1.SchemeGroupVersion)
	case gv.Group == jobSetGroup && o.kind == "JobSet":
		return in.addJobSet(m, o)
	case gv.Group == lwsGroup && o.kind == "LeaderWorkerSet":
		return in.addLeaderWorkerSet(m, o)
	case gv.Group == "apps" && o.kind == "DaemonSet":
		return errors.New("a DaemonSet places one pod on each node it selects, not replicas: fit does not place DaemonSets")
	case gv.Group == "batch" && o.kind == "Job":
		if err := o.readJob(m, "spec"); err != nil {
			return err
		}
	case gv.Group == "batch" && o.kind == "CronJob":
		if err := o.readJob(m, "spec", "jobTemplate", "spec"); err != nil {
			return err
		}
	default:
		if err := o.readTemplate(m, "spec", "template"); err != nil {
			return err
		}
		n, set, err := count(m, "spec", "replicas")
		if err != nil {
			return err
		}
		o.replicas = 1 // the default of Deployments, StatefulSets and ReplicaSets
		if set {
			o.replicas = n
		}
	}
	in.objects = append(in.objects, o)
	return nil
}

// readJob reads a Job's spec at path: spec.parallelism pods at once (1 when unset), at most
// spec.completions.
func (o *fitObject) readJob(m map[string]any, path ...string) error {
	if err := o.readTemplate(m, append(path, "template")...); err != nil {
		return err
	}
	parallelism, set, err := count(m, append(path, "parallelism")...)
	if err != nil {
		return err
	}
	o.replicas = 1
	if set {
		o.replicas = parallelism
	}
	completions, set, err := count(m, append(path, "completions")...)
	if err != nil {
		return err
	}
	if set {
		o.replicas = min(o.replicas, completions)
	}
	return nil
}

// readTemplate reads the PodTemplateSpec at path.
func (o *fitObject) readTemplate(m map[string]any, path ...string) error {
	field := strings.Join(path, ".")
	t, found, err := unstructured.NestedFieldNoCopy(m, path...)
	if err != nil || !found || t == nil {
		return fmt.Errorf("no pod template (%s): fit places Pods and objects with one (Deployment, StatefulSet, ReplicaSet, Job, CronJob, or a custom resource with spec.template and spec.replicas)", field)
	}
	tm, ok := t.(map[string]any)
	if !ok {
		return fmt.Errorf("%s is not a pod template", field)
	}
	if err := fromUnstructured(tm, &o.template); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	defaultRequests(&o.template.Spec)
	return nil
}

// defaultRequests sets a missing request to its limit, as the API server's defaulting does
// (a GPU is often given as a limit only).
func defaultRequests(spec *corev1.PodSpec) {
	fill := func(r *corev1.ResourceRequirements) {
		for name, q := range r.Limits {
			if _, ok := r.Requests[name]; !ok {
				if r.Requests == nil {
					r.Requests = corev1.ResourceList{}
				}
				r.Requests[name] = q.DeepCopy()
			}
		}
	}
	for i := range spec.InitContainers {
		fill(&spec.InitContainers[i].Resources)
	}
	for i := range spec.Containers {
		fill(&spec.Containers[i].Resources)
	}
	if spec.Resources != nil {
		fill(spec.Resources)
	}
}

// defaultClaim sets what the API server's defaulting sets in a claim's requests: allocation
// mode ExactCount, and then a count of 1.
func defaultClaim(spec *resourcev1.ResourceClaimSpec) {
	set := func(mode *resourcev1.DeviceAllocationMode, count *int64) {
		if *mode == "" {
			*mode = resourcev1.DeviceAllocationModeExactCount
		}
		if *mode == resourcev1.DeviceAllocationModeExactCount && *count == 0 {
			*count = 1
		}
	}
	for i := range spec.Devices.Requests {
		r := &spec.Devices.Requests[i]
		if r.Exactly != nil {
			set(&r.Exactly.AllocationMode, &r.Exactly.Count)
		}
		for j := range r.FirstAvailable {
			set(&r.FirstAvailable[j].AllocationMode, &r.FirstAvailable[j].Count)
		}
	}
}

// addDRA reads a ResourceClaimTemplate or ResourceClaim (resource.k8s.io/v1).
func (in *Workload) addDRA(m map[string]any, gv schema.GroupVersion, o *fitObject) error {
	if gv.Version != "v1" {
		return fmt.Errorf("%s is not read: write it as resource.k8s.io/v1", gv)
	}
	if o.kind == "ResourceClaimTemplate" {
		t := &resourcev1.ResourceClaimTemplate{}
		if err := fromUnstructured(m, t); err != nil {
			return err
		}
		t.Namespace, t.Name = o.namespace, o.name
		defaultClaim(&t.Spec.Spec)
		in.templates[nsName(o.namespace, o.name)] = t
		return nil
	}
	c := &resourcev1.ResourceClaim{}
	if err := fromUnstructured(m, c); err != nil {
		return err
	}
	c.Namespace, c.Name, c.UID = o.namespace, o.name, types.UID("gpuinv-fit-claim-"+o.namespace+"-"+o.name)
	c.Status = resourcev1.ResourceClaimStatus{} // as created: not allocated
	defaultClaim(&c.Spec)
	in.claims = append(in.claims, c)
	return nil
}

// fromUnstructured converts strictly: an unknown field (a typo) is an error.
func fromUnstructured(m map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(m, into, true)
}

// count reads a replica count at path: a whole number, not negative.
func count(m map[string]any, path ...string) (n int64, set bool, err error) {
	field := strings.Join(path, ".")
	v, found, _ := unstructured.NestedFieldNoCopy(m, path...)
	if !found || v == nil {
		return 0, false, nil
	}
	switch x := v.(type) {
	case int64:
		n = x
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > math.MaxInt32 {
			return 0, false, fmt.Errorf("%s is %v: not a whole number", field, x)
		}
		n = int64(x)
	default:
		return 0, false, fmt.Errorf("%s is %v: not a number", field, v)
	}
	if n < 0 {
		return 0, false, fmt.Errorf("%s is %d: a replica count must not be negative", field, n)
	}
	return n, true, nil
}

// Question is what placing the objects asks of the cluster: a replica of each, in order
// (the others are the same pod to the node-only filters), the nodes' free devices (best
// fit), the file's claims.
func (in *Workload) Question() Question {
	q := Question{FreeDevices: true, Claims: len(in.claims) > 0}
	for _, o := range in.objects {
		q.Pods = append(q.Pods, o.pod(0))
	}
	return q
}

// Resolve adds the file's claims to the cluster (a claim that exists is taken as it is
// there) and gets from the cluster the claim templates the objects name that the file lacks.
func (in *Workload) Resolve(ctx context.Context, c *factory.Factory, cl *capacity.Cluster, errOut io.Writer) error {
	exists := map[types.NamespacedName]bool{}
	for _, claim := range cl.Claims {
		exists[nsName(claim.Namespace, claim.Name)] = true
	}
	for _, claim := range in.claims {
		if exists[nsName(claim.Namespace, claim.Name)] {
			fmt.Fprintf(errOut, "Note: ResourceClaim %s/%s exists: fit uses it as it is in the cluster\n", claim.Namespace, claim.Name)
			continue
		}
		cl.Claims = append(cl.Claims, claim)
	}
	api, err := c.Typed()
	if err != nil {
		return err
	}
	for _, o := range in.objects {
		for _, pc := range o.template.Spec.ResourceClaims {
			if pc.ResourceClaimTemplateName == nil || in.templates[nsName(o.namespace, *pc.ResourceClaimTemplateName)] != nil {
				continue
			}
			name := *pc.ResourceClaimTemplateName
			t, err := api.ResourceClaimTemplates(o.namespace).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("%s: resource claim %s: ResourceClaimTemplate %s/%s is neither in the file nor in the cluster", o, pc.Name, o.namespace, name)
			}
			if err != nil {
				return c.Explain(err, factory.Request{Verb: "get", Resource: "resourceclaimtemplates", Group: resourcev1.GroupName, Name: name, Namespaced: true, Namespace: o.namespace})
			}
			in.templates[nsName(o.namespace, name)] = t
		}
	}
	return nil
}

// templatesIn are the claim templates of a namespace, by name, as PodClaims takes them.
func (in *Workload) templatesIn(namespace string) map[string]*resourcev1.ResourceClaimTemplate {
	out := map[string]*resourcev1.ResourceClaimTemplate{}
	for key, t := range in.templates {
		if key.Namespace == namespace {
			out[key.Name] = t
		}
	}
	return out
}
