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

package podcache

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// equalPods compares decoded pods: quantities by value, nil and empty alike.
var equalPods = cmp.Options{cmpopts.EquateEmpty(), cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })}

var boundAt = time.Date(2026, 11, 29, 21, 45, 38, 0, time.UTC)

// boundPod is a running pod on node n1 whose one container asks for resources (name,
// count pairs).
func boundPod(name string, resources ...any) *corev1.Pod {
	requests := corev1.ResourceList{}
	for i := 0; i+1 < len(resources); i += 2 {
		requests[corev1.ResourceName(resources[i].(string))] = *resource.NewQuantity(int64(resources[i+1].(int)), resource.DecimalSI)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID("ml-" + name), ResourceVersion: "7",
			CreationTimestamp: metav1.NewTime(boundAt)},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "main", Image: "cuda:12",
			Resources: corev1.ResourceRequirements{Requests: requests, Limits: requests}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// boundPods are pods in the shapes PodRequests reads: sidecars, init containers, overhead,
// pod-level resources, resources in the status and an infeasible resize, claims.
func boundPods() []*corev1.Pod {
	cpu := func(v string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(v)}
	}
	deleted := &metav1.Time{Time: boundAt.Add(time.Hour)}
	plain := boundPod("plain", "nvidia.com/gpu", 2, "cpu", 4)
	plain.Labels, plain.Annotations = map[string]string{"app": "x"}, map[string]string{"a": "b"}
	plain.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	sidecar := boundPod("sidecar", "cpu", 2)
	sidecar.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: cpu("6")}},
		{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: corev1.ResourceRequirements{Requests: cpu("1")}}}
	sidecar.Spec.Overhead = cpu("250m")
	resized := boundPod("resized", "cpu", 8) // asks for 8, its resize to 8 infeasible: 4
	resized.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", AllocatedResources: cpu("4"), Resources: &corev1.ResourceRequirements{Requests: cpu("4")}}}
	resized.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible}}
	podLevel := boundPod("pod-level", "cpu", 2)
	podLevel.Spec.Resources = &corev1.ResourceRequirements{Requests: cpu("3")}
	podLevel.Status.Resources = &corev1.ResourceRequirements{Requests: cpu("5")}
	podLevel.Status.AllocatedResources = cpu("4")
	claims := boundPod("claims")
	claims.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To("shared")},
		{Name: "own", ResourceClaimTemplateName: ptr.To("pair")}}
	claims.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "own", ResourceClaimName: ptr.To("claims-own-x7k2p")}}
	claims.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "claims-extended",
		RequestMappings: []corev1.ContainerExtendedResourceRequest{{ContainerName: "main", ResourceName: "nvidia.com/gpu", RequestName: "r"}}}
	claims.DeletionTimestamp = deleted
	done := boundPod("done", "nvidia.com/gpu", 1)
	done.Status.Phase = corev1.PodSucceeded
	preempted := boundPod("preempted", "nvidia.com/gpu", 4)
	preempted.Spec.Priority = ptr.To(int32(-5))
	preempted.Status.StartTime = &metav1.Time{Time: boundAt}
	preempted.DeletionTimestamp = deleted
	preempted.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse},
		{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonPreemptionByScheduler, Message: "preempted"},
		{Type: corev1.DisruptionTarget, Status: corev1.ConditionFalse}}
	return []*corev1.Pod{plain, sidecar, resized, podLevel, claims, done, preempted}
}

// The scheduling keep-rule reads all that capacity keeps and counts of a bound pod.
func TestDecodeSchedulingPodKeepsWhatCapacityReads(t *testing.T) {
	for _, want := range boundPods() {
		raw, err := want.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeSchedulingPod(raw)
		if err != nil {
			t.Fatalf("%s: %v", want.Name, err)
		}
		if diff := cmp.Diff(capacity.KeepPod(want), capacity.KeepPod(got), equalPods); diff != "" {
			t.Errorf("%s: kept (-generated +hand):\n%s", want.Name, diff)
		}
		if diff := cmp.Diff(capacity.Requests(want), capacity.Requests(got), equalPods); diff != "" {
			t.Errorf("%s: requests (-generated +hand):\n%s", want.Name, diff)
		}
		if requests := capacity.Requests(got); want.Name == "resized" && requests.Cpu().Value() != 4 {
			t.Errorf("resized: requests %v, want the 4 CPUs the infeasible resize leaves", requests)
		}
		if got.Spec.NodeName != want.Spec.NodeName || got.Status.Phase != want.Status.Phase || got.Labels != nil {
			t.Errorf("%s: node %q, phase %q, labels %v", want.Name, got.Spec.NodeName, got.Status.Phase, got.Labels)
		}
	}
}

// Whatever the bytes, the scheduling keep-rule reads a pod as the generated decoder does, for
// all that capacity keeps and counts of it.
func FuzzDecodeSchedulingPod(f *testing.F) {
	for _, p := range boundPods() {
		data, err := p.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeSchedulingPod(data)
		if errors.Is(err, kubeproto.ErrAbsurdQuantity) || errors.Is(err, errTooLarge) || mayParseForever.Match(data) {
			return
		}
		want, ok := unmarshal(data)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("DecodeSchedulingPod fails (%v) where the generated decoder does not", err)
		}
		if diff := cmp.Diff(capacity.KeepPod(want), capacity.KeepPod(got), equalPods); diff != "" {
			t.Fatalf("kept (-generated +hand):\n%s", diff)
		}
		if diff := cmp.Diff(capacity.Requests(want), capacity.Requests(got), equalPods); diff != "" {
			t.Fatalf("requests (-generated +hand):\n%s", diff)
		}
	})
}
