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

package capacity

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// Pods trimmed by KeepPod, or only counted in a node's Usage, give the verdicts the whole pods
// give: the pod count, and requests summed per pod as the scheduler sums them.
func TestKeptAndCountedPodsFitAsWholePods(t *testing.T) {
	n := node("n1", map[corev1.ResourceName]string{"cpu": "8", "memory": "8Gi", "pods": "3", gpuResource: "4"})
	var pods []*corev1.Pod
	for i := range 3 {
		p := gpuPod(fmt.Sprintf("p%d", i), "n1", gpuResource, 0, true)
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{gpuResource: *resource.NewQuantity(int64(1-i%2), resource.DecimalSI),
			corev1.ResourceCPU: resource.MustParse("1100m")}
		p.Spec.InitContainers = []corev1.Container{{Name: "sidecar", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}}}}
		p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.0001")} // a millicore, rounded up per pod
		pods = append(pods, p)
	}
	whole := NewSnapshot(Cluster{Nodes: []*corev1.Node{n}, Pods: pods})
	kept, usage := []*corev1.Pod{KeepPod(pods[0])}, &Usage{}
	for _, p := range pods[1:] {
		usage.Add(p)
	}
	trimmed := NewSnapshot(Cluster{Nodes: []*corev1.Node{n}, Pods: kept, Usage: map[string]*Usage{"n1": usage}})
	for _, cpu := range []string{"4696m", "4697m", "4698m"} { // 8 less 3 × 1101m (1100m and a millicore, rounded up per pod)
		for gpus := range int64(5) {
			p := gpuPod("probe", "n1", gpuResource, gpus, false)
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{gpuResource: *resource.NewQuantity(gpus, resource.DecimalSI),
				corev1.ResourceCPU: resource.MustParse(cpu)}
			want, err := whole.Fit(p, nil, "n1")
			if err != nil {
				t.Fatal(err)
			}
			got, _ := trimmed.Fit(p, nil, "n1")
			if !slices.Equal(want.Reasons, got.Reasons) {
				t.Errorf("%s CPUs, %d GPUs: reasons %q with the pods counted, %q with them listed", cpu, gpus, got.Reasons, want.Reasons)
			}
		}
	}
	if got := trimmed.PodsOn("n1"); len(got) != 1 || got[0].Name != "p0" {
		t.Errorf("PodsOn = %v, want the pod listed only", got)
	}
}
