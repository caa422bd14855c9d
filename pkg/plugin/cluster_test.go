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

package plugin

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/simulate"
)

// loadWhole reads the whole of what kube-scheduler decides on, as its informers hold it: every
// Node, the unfinished Pods of every namespace, and DRA's ResourceSlices, ResourceClaims and
// DeviceClasses (none where resource.k8s.io/v1 is not served). Load's answers must
// be the same.
func loadWhole(ctx context.Context, c *factory.Factory, _ simulate.Question) (simulate.Loaded, error) {
	l, err := readWhole(ctx, c)
	return simulate.Loaded{Cluster: l}, err
}

func readWhole(ctx context.Context, c *factory.Factory) (capacity.Cluster, error) {
	var cl capacity.Cluster
	api, err := c.Typed()
	if err != nil {
		return cl, err
	}
	err = factory.ListAll(ctx, api.Nodes().List, metav1.ListOptions{}, func(l *corev1.NodeList) string {
		cl.Nodes = appendAll(cl.Nodes, l.Items)
		return l.Continue
	})
	if err != nil {
		return cl, c.ExplainList(err, factory.ListNodes)
	}
	unfinished := "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)
	err = factory.ListAll(ctx, api.Pods("").List, metav1.ListOptions{FieldSelector: unfinished}, func(l *corev1.PodList) string {
		for i := range l.Items {
			if p := &l.Items[i]; p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				cl.Pods = append(cl.Pods, p)
			}
		}
		return l.Continue
	})
	if err != nil {
		return cl, c.ExplainList(err, factory.ListPods(""))
	}
	err = factory.ListAll(ctx, api.ResourceSlices().List, metav1.ListOptions{}, func(l *resourcev1.ResourceSliceList) string {
		cl.Slices = appendAll(cl.Slices, l.Items)
		return l.Continue
	})
	if apierrors.IsNotFound(err) {
		return cl, nil
	}
	if err != nil {
		return cl, err
	}
	cl.Claims = []*resourcev1.ResourceClaim{}
	err = factory.ListAll(ctx, api.ResourceClaims("").List, metav1.ListOptions{}, func(l *resourcev1.ResourceClaimList) string {
		cl.Claims = appendAll(cl.Claims, l.Items)
		return l.Continue
	})
	if err != nil {
		return cl, err
	}
	err = factory.ListAll(ctx, api.DeviceClasses().List, metav1.ListOptions{}, func(l *resourcev1.DeviceClassList) string {
		cl.Classes = appendAll(cl.Classes, l.Items)
		return l.Continue
	})
	return cl, err
}

// appendAll appends pointers to items.
func appendAll[T any](out []*T, items []T) []*T {
	for i := range items {
		out = append(out, &items[i])
	}
	return out
}

// The loader keeps the nodes the node-only filters leave, and only their names and reasons
// of the others; it reads the pods of the nodes it keeps, and keeps of each object what the
// filters read.
func TestLoadClusterReadsWhatTheQuestionNeeds(t *testing.T) {
	objs := whyCluster(t)
	var trainer *corev1.Pod
	for _, o := range objs {
		o.(metav1.Object).SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl"}})
		if p, ok := o.(*corev1.Pod); ok && p.Name == "trainer" {
			trainer = p
		}
	}
	c, _ := kubeClients(objs...)
	l, err := simulate.Load(context.Background(), c, simulate.Question{Pods: []*corev1.Pod{trainer}})
	if err != nil {
		t.Fatal(err)
	}
	cl := l.Cluster
	var nodes, pods []string
	for _, n := range cl.Nodes {
		if n.ManagedFields != nil || n.Status.Images != nil || n.Status.Capacity != nil {
			t.Errorf("node %s is not trimmed", n.Name)
		}
		nodes = append(nodes, n.Name)
	}
	for _, p := range cl.Pods {
		if p.ManagedFields != nil || p.Labels != nil || len(p.Spec.Containers[0].Image) > 0 {
			t.Errorf("pod %s/%s is not trimmed", p.Namespace, p.Name)
		}
		pods = append(pods, p.Namespace+"/"+p.Name)
	}
	slices.Sort(nodes)
	slices.Sort(pods)
	if diff := cmp.Diff([]string{"dra-h100-1", "gpu-a", "gpu-b"}, nodes); diff != "" {
		t.Errorf("nodes kept (-want +got):\n%s", diff)
	}
	wantRejected := []simulate.Rejection{{Node: "cordoned", Reasons: []string{capacity.ReasonUnschedulable}},
		{Node: "infer-1", Reasons: []string{capacity.ReasonAffinity}}, {Node: "tainted", Reasons: []string{capacity.ReasonTaint}}}
	if diff := cmp.Diff(wantRejected, l.Rejected); diff != "" {
		t.Errorf("nodes rejected (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ml/dra-job", "ml/train-a", "monitoring/dcgm", "serving/infer-b", "serving/old-b"}, pods); diff != "" {
		t.Errorf("pods, those of the candidates that have not finished (-want +got):\n%s", diff)
	}
	if len(cl.Slices) != 1 || len(cl.Claims) != 2 || len(cl.Classes) != 1 {
		t.Errorf("%d slices, %d claims, %d classes; want 1, 2, 1", len(cl.Slices), len(cl.Claims), len(cl.Classes))
	}
}

// Where resource.k8s.io/v1 is not served, there are no slices, claims or classes, and the
// answer is the device plugins'.
func TestWhyWithoutDRA(t *testing.T) {
	c, kube := kubeClients(whyCluster(t)...)
	notServed := func(action clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: resourcev1.GroupName, Resource: action.GetResource().Resource}, "")
	}
	for _, resource := range []string{"resourceslices", "resourceclaims", "deviceclasses"} {
		kube.PrependReactor("list", resource, notServed)
	}
	r := runPlugin(context.Background(), c, false, nil, "why", "-n", "ml", "trainer")
	if r.code != factory.ExitOK || r.err != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	// dra-h100-1 has no nvidia.com/gpu of its own, and no class maps it now: no eviction
	// makes room there.
	want := "Now:        0/6 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, 3 Insufficient nvidia.com/gpu." +
		" preemption: 0/6 nodes are available: 2 No preemption victims found for incoming pod, 4 Preemption is not helpful for scheduling.\n"
	if !strings.Contains(r.out, want) {
		t.Errorf("no line %q in:\n%s", want, r.out)
	}
	for _, action := range kube.Actions() {
		if r := action.GetResource().Resource; r == "resourceclaims" || r == "resourceslices" {
			t.Errorf("listed %s although resource.k8s.io/v1 is not served (no DeviceClass list)", r)
		}
	}
}

// A pending pod that fits now says where; API errors say what to do, with `fit`'s exit code.
func TestWhyFitsNowAndErrors(t *testing.T) {
	p := gpuPod("ml", "late", "", statusTime, allocation.ResourceGPU, 4)
	p.Status.Phase = corev1.PodPending
	c, _ := kubeClients(append(twoNodes("gpu-a", 6), p)...)
	r := runPlugin(context.Background(), c, false, nil, "why", "-n", "ml", "late")
	want := "Now:        it fits on 1 node: gpu-b (the scheduler retries it when the cluster changes)\n"
	if r.code != factory.ExitOK || !strings.Contains(r.out, want) {
		t.Errorf("exit %d, stderr %q, no line %q in:\n%s", r.code, r.err, want, r.out)
	}
	forbidden := func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", nil)
	}
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"why", "-n", "ml", "late"}, factory.ExitError},
		{[]string{"fit", "-f", "-"}, factory.ExitFitError},
	} {
		c, kube := kubeClients(append(twoNodes(), p)...)
		kube.PrependReactor("list", "nodes", forbidden)
		var r result
		if tc.args[0] == "why" {
			r = runPlugin(context.Background(), c, false, nil, tc.args...)
		} else {
			r = runFit(t, c, trainerDeployment, tc.args[1:]...)
		}
		if r.code != tc.code || !strings.HasPrefix(r.err, `error: permission denied: kubectl gpuinv needs "list" on nodes`) {
			t.Errorf("%v: exit %d, stderr %q; want %d and the permission named", tc.args, r.code, r.err, tc.code)
		}
	}
}
