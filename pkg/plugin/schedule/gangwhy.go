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

package schedule

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/simulate"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// jobUIDLabel is the label of Kueue's Workload that holds its Job's UID.
const jobUIDLabel = "kueue.x-k8s.io/job-uid"

var podGroups = schema.GroupVersionResource{Group: schedulingv1beta1.GroupName, Version: "v1beta1", Resource: "podgroups"}

// gangWait finds the gang a pending pod waits with: its PodGroup (spec.schedulingGroup),
// or the Kueue Workload of its owner (a Job's, or the pod's own) while it waits for quota
// in a queue of a flavor with a Topology. Nil when the pod waits alone.
func gangWait(ctx context.Context, c *factory.Factory, api factory.KubeAPI, pod *corev1.Pod, errOut io.Writer) (*simulate.GangWait, error) {
	sg := pod.Spec.SchedulingGroup
	if (sg == nil || sg.PodGroupName == nil) && !kueueManaged(pod) {
		return nil, nil
	}
	dyn, err := c.Dynamic()
	if errors.Is(err, factory.ErrNoDynamic) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if sg != nil && sg.PodGroupName != nil {
		pg, err := dyn.Resource(podGroups).Namespace(pod.Namespace).Get(ctx, *sg.PodGroupName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			fmt.Fprintf(errOut, "Note: the pod names PodGroup %q, which does not exist: the scheduler keeps it out of its queue until it does\n", *sg.PodGroupName)
			return nil, nil
		case err != nil:
			return nil, c.Explain(err, factory.Request{Verb: "get", Resource: "podgroups", Group: schedulingv1beta1.GroupName, Name: *sg.PodGroupName, Namespaced: true, Namespace: pod.Namespace})
		}
		var pods []*corev1.Pod
		err = factory.ListAll(ctx, api.Pods(pod.Namespace).List, metav1.ListOptions{}, func(l *corev1.PodList) string {
			for i := range l.Items {
				pods = append(pods, &l.Items[i])
			}
			return l.Continue
		})
		if err != nil {
			return nil, c.ExplainList(err, factory.ListPods(pod.Namespace))
		}
		return simulate.PodGroupWait(pg, pods)
	}
	wl, err := kueueWorkloadOf(ctx, c, pod)
	if err != nil || wl == nil {
		return nil, err
	}
	w, err := simulate.KueueWait(wl)
	if err != nil || w == nil {
		return nil, err
	}
	if err := w.In.ResolveQueues(ctx, c, errOut); err != nil {
		return nil, err
	}
	if !w.Kueue() {
		return nil, nil
	}
	return w, nil
}

// kueueManaged reports a pod Kueue manages: it carries Kueue's labels, annotations or
// scheduling gates.
func kueueManaged(pod *corev1.Pod) bool {
	for k := range pod.Labels {
		if strings.HasPrefix(k, simulate.KueueGroup+"/") {
			return true
		}
	}
	for k := range pod.Annotations {
		if strings.HasPrefix(k, simulate.KueueGroup+"/") {
			return true
		}
	}
	return slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
		return strings.HasPrefix(g.Name, simulate.KueueGroup+"/")
	})
}

// kueueWorkloadOf is Kueue's Workload of the pod's owner (the Job whose UID it carries or
// that owns it) or of the pod itself; nil where Kueue is not served or has none.
func kueueWorkloadOf(ctx context.Context, c *factory.Factory, pod *corev1.Pod) (*unstructured.Unstructured, error) {
	uids := []string{string(pod.UID)}
	for _, ref := range pod.OwnerReferences {
		uids = append(uids, string(ref.UID))
	}
	dyn, err := c.Dynamic()
	if err != nil {
		return nil, err
	}
	for _, v := range []string{"v1beta2", "v1beta1"} {
		list, err := dyn.Resource(schema.GroupVersionResource{Group: simulate.KueueGroup, Version: v, Resource: "workloads"}).Namespace(pod.Namespace).List(ctx, metav1.ListOptions{})
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
			continue
		case err != nil:
			return nil, c.Explain(err, factory.Request{Verb: "list", Resource: "workloads", Group: simulate.KueueGroup, Namespaced: true, Namespace: pod.Namespace})
		}
		for i := range list.Items {
			wl := &list.Items[i]
			if slices.Contains(uids, wl.GetLabels()[jobUIDLabel]) || slices.ContainsFunc(wl.GetOwnerReferences(), func(r metav1.OwnerReference) bool {
				return slices.Contains(uids, string(r.UID))
			}) {
				return wl, nil
			}
		}
		return nil, nil
	}
	return nil, nil
}

// whyGang answers for a pod of a gang: the component's own words, then per domain how many
// of the gang's pods it takes now and what holds the rest, with the pods holding GPUs in
// the nearest domains.
func whyGang(ctx context.Context, a *printer.Why, env factory.Environment, c *factory.Factory, load simulate.Loader, w *simulate.GangWait, compressionSet bool) error {
	preempt, err := w.In.Priorities(ctx, c, io.Discard)
	if err != nil {
		return err
	}
	q := w.In.GangQuestion()
	q.CompressionSet, q.Preemption = compressionSet, preempt
	l, err := load(ctx, c, q)
	if err != nil {
		return err
	}
	if err := w.In.Resolve(ctx, c, &l.Cluster, env.ErrOut); err != nil {
		return err
	}
	v := simulate.NewView(l)
	answer, err := v.PlaceGangs(w.In, env.ErrOut)
	if err != nil {
		return err
	}
	g := answer.Gangs[0]
	v.AddHolders(&g, printer.NearestShown)
	a.Gang, a.Group, a.GroupCondition = &g, w.Group, w.Condition
	return nil
}
