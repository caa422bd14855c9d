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
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
)

// The loader keeps what the scheduler reads: unfinished pods, no managed fields, no images.
func TestLoadClusterTrims(t *testing.T) {
	objs := whyCluster(t)
	for _, o := range objs {
		o.(metav1.Object).SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl"}})
	}
	c, _ := kubeClients(objs...)
	cl, err := loadCluster(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(cl.Nodes) != 6 || len(cl.Pods) != 6 || len(cl.Slices) != 1 || len(cl.Claims) != 2 || len(cl.Classes) != 1 {
		t.Errorf("%d nodes, %d pods, %d slices, %d claims, %d classes; want 6, 6 (not ml/done-a, finished), 1, 2, 1",
			len(cl.Nodes), len(cl.Pods), len(cl.Slices), len(cl.Claims), len(cl.Classes))
	}
	for _, n := range cl.Nodes {
		if n.ManagedFields != nil || n.Status.Images != nil {
			t.Errorf("node %s keeps its managed fields or images", n.Name)
		}
	}
	for _, p := range cl.Pods {
		if p.ManagedFields != nil || p.Status.Phase == corev1.PodSucceeded {
			t.Errorf("pod %s/%s: managed fields %v, phase %s", p.Namespace, p.Name, p.ManagedFields, p.Status.Phase)
		}
	}
}

// Where resource.k8s.io/v1 is not served, there are no slices, claims or classes, and the
// answer is the device plugins'.
func TestWhyWithoutDRA(t *testing.T) {
	c, kube := kubeClients(whyCluster(t)...)
	notServed := func(action clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: resourcev1.GroupName, Resource: action.GetResource().Resource}, "")
	}
	kube.PrependReactor("list", "resourceslices", notServed)
	r := runPlugin(context.Background(), c, false, nil, "why", "-n", "ml", "trainer")
	if r.code != ExitOK || r.err != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	// dra-h100-1 has no nvidia.com/gpu of its own, and no class maps it now.
	want := "Now:        0/6 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, 3 Insufficient nvidia.com/gpu.\n"
	if !strings.Contains(r.out, want) {
		t.Errorf("no line %q in:\n%s", want, r.out)
	}
	for _, action := range kube.Actions() {
		if r := action.GetResource().Resource; r == "resourceclaims" || r == "deviceclasses" {
			t.Errorf("listed %s although resource.k8s.io/v1 is not served", r)
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
	if r.code != ExitOK || !strings.Contains(r.out, want) {
		t.Errorf("exit %d, stderr %q, no line %q in:\n%s", r.code, r.err, want, r.out)
	}
	forbidden := func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", nil)
	}
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"why", "-n", "ml", "late"}, ExitError},
		{[]string{"fit", "-f", "-"}, ExitFitError},
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
