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
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

const podGroupMessage = "pod group is unschedulable, 0/2 placements are available, first placement status: minCount (4) cannot be satisfied: 2 scheduled, 1 remaining, pod group preemption: No preemption victims found for incoming preemptor"

// waitingGang is racks' nodes and holders, a terminating pod holding 2 GPUs on b1, and
// PodGroup ml/trainer's four pending pods of 6 GPUs.
func waitingGang() []runtime.Object {
	var objs []runtime.Object
	for _, n := range racks().Nodes {
		objs = append(objs, n)
	}
	objs = append(objs, gpuPod("other", "holder", "a1", statusTime, allocation.ResourceGPU, 6))
	leaving := gpuPod("other", "leaving", "b1", statusTime, allocation.ResourceGPU, 2)
	leaving.DeletionTimestamp = &metav1.Time{Time: now}
	objs = append(objs, leaving)
	for i := range 4 {
		p := gpuPod("ml", fmt.Sprintf("trainer-%d", i), "", statusTime, allocation.ResourceGPU, 6)
		p.Status.Phase = corev1.PodPending
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("trainer")}
		objs = append(objs, p)
	}
	return objs
}

func trainerPodGroup(status metav1.ConditionStatus, message string) *unstructured.Unstructured {
	pg := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
		"metadata": map[string]any{"namespace": "ml", "name": "trainer"},
		"spec": map[string]any{"schedulingPolicy": map[string]any{"gang": map[string]any{"minCount": int64(4)}},
			"schedulingConstraints": map[string]any{"topology": []any{map[string]any{"key": rackKey}}}},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "PodGroupInitiallyScheduled", "status": string(status),
			"reason": "Unschedulable", "message": message, "lastTransitionTime": "2026-11-30T00:00:00Z"}}}}}
	return pg
}

// A pod of a PodGroup that no rack can hold: the group's condition, then per rack how many
// of its pods fit and who holds the GPUs there, the rack that takes the most first.
func TestWhyPodGroup(t *testing.T) {
	c, _ := kubeClients(waitingGang()...)
	c.FakeDynamic = kueueDynamic(trainerPodGroup(metav1.ConditionFalse, podGroupMessage))
	r := runPlugin(context.Background(), c, false, nil, "why", "-n", "ml", "trainer-0")
	if r.code != factory.ExitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	golden(t, "why-podgroup.golden", r.out)
	r = runPlugin(context.Background(), c, false, nil, "why", "-n", "ml", "trainer-0", "-o", "json")
	var a printer.Why
	if err := json.Unmarshal([]byte(r.out), &a); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.out)
	}
	if a.Group != "PodGroup ml/trainer" || a.GroupCondition != podGroupMessage || a.Gang == nil || a.Gang.Fits {
		t.Fatalf("answer %+v", a)
	}
	d := a.Gang.Domains
	if len(d) != 2 || d[0].Value != "rack-b" || d[0].Pods != 3 || d[1].Pods != 2 {
		t.Fatalf("domains %+v", d)
	}
	if len(d[0].Holders) != 1 || !d[0].Holders[0].Terminating || len(d[1].Holders) != 1 || d[1].Holders[0].Pod != "holder" {
		t.Errorf("holders: rack-b %+v, rack-a %+v", d[0].Holders, d[1].Holders)
	}
	// Once the group was scheduled, a pod of it still pending waits alone.
	c.FakeDynamic = kueueDynamic(trainerPodGroup(metav1.ConditionTrue, ""))
	r = runPlugin(context.Background(), c, false, nil, "why", "-n", "ml", "trainer-0", "-o", "json")
	if r.code != factory.ExitOK || strings.Contains(r.out, `"gang"`) || !strings.Contains(r.out, `"state": "Pending"`) {
		t.Errorf("scheduled group: exit %d, output %s", r.code, r.out)
	}
}

// A pod that Kueue holds back, whose Workload waits for quota in a queue of a flavor with a
// Topology: Kueue's condition, and the gang as Kueue would assign it.
func TestWhyKueueWorkload(t *testing.T) {
	objs := waitingGang()[:8] // the nodes and holders
	p := gpuPod("ml", "sweep-0", "", statusTime, allocation.ResourceGPU, 6)
	p.Status.Phase = corev1.PodPending
	p.Labels = map[string]string{"kueue.x-k8s.io/managed": "true"}
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}}
	c, _ := kubeClients(append(objs, p)...)
	message := `couldn't assign flavors to pod set main: topology "default" allows to fit only 3 out of 4 pod(s)`
	wl := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"namespace": "ml", "name": "pod-sweep", "ownerReferences": []any{map[string]any{
			"apiVersion": "v1", "kind": "Pod", "name": "sweep-0", "uid": string(p.UID)}}},
		"spec": map[string]any{"queueName": "train", "podSets": []any{map[string]any{"name": "main", "count": int64(4),
			"topologyRequest": map[string]any{"required": rackKey},
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "main",
				"resources": map[string]any{"requests": map[string]any{"nvidia.com/gpu": "6"}}}}}}}}},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "QuotaReserved", "status": "False", "reason": "Pending",
			"message": message, "lastTransitionTime": "2026-11-30T00:00:00Z"}}}}}
	c.FakeDynamic = kueueDynamic(append(tasQueue(), wl)...)
	r := runPlugin(context.Background(), c, false, nil, "why", "-n", "ml", "sweep-0", "-o", "json")
	var a printer.Why
	if err := json.Unmarshal([]byte(r.out), &a); err != nil || r.code != factory.ExitOK {
		t.Fatalf("exit %d, stderr %q, -o json: %v\n%s", r.code, r.err, err, r.out)
	}
	if a.State != "Gated" || a.Group != "Workload ml/pod-sweep" || a.GroupCondition != message || a.Gang == nil || a.Gang.As != printer.AsKueue || a.Gang.Fits {
		t.Fatalf("answer %+v, gang %+v", a, a.Gang)
	}
	if !strings.HasPrefix(a.Gang.Message, message) {
		t.Errorf("fit's Kueue message %q, want Kueue's %q", a.Gang.Message, message)
	}
}
