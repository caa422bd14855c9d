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

package demo

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The demo's GPU workloads: pods bound to nodes (as the scheduler would bind them), one pod
// that waits for a model no node has free, and, with DRA, a claim allocated on the DRA node.
const (
	trainingNamespace  = "ml-training"
	inferenceNamespace = "inference"
)

// gpuPod is a pod asking for count of resource, bound to node ("" waits).
func gpuPod(namespace, name, node, resourceName string, count int64) *corev1.Pod {
	q := *resource.NewQuantity(count, resource.DecimalSI)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceName(resourceName): q},
					Limits: corev1.ResourceList{corev1.ResourceName(resourceName): q}}}},
		},
	}
}

// runWorkloads creates the namespaces and pods, and with DRA the claim; it returns how many
// pods hold GPUs.
func runWorkloads(ctx context.Context, kube kubernetes.Interface, dra bool) (int, error) {
	for _, ns := range []string{trainingNamespace, inferenceNamespace} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return 0, fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	waiting := gpuPod(trainingNamespace, "llm-pretrain-0", "", "nvidia.com/gpu", 8)
	waiting.Spec.NodeSelector = map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
	pods := []*corev1.Pod{
		gpuPod(trainingNamespace, "llm-finetune-0", "dgx-h100-1", "nvidia.com/gpu", 4),
		gpuPod(trainingNamespace, "llm-finetune-1", "dgx-h100-1", "nvidia.com/gpu", 2),
		gpuPod(inferenceNamespace, "l4-serving-0", GKENode, "nvidia.com/gpu", 1),
		gpuPod(inferenceNamespace, "notebook-0", "a100-mig-1", "nvidia.com/gpu", 1),
		waiting,
	}
	for _, p := range pods {
		if _, err := kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return 0, fmt.Errorf("create pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	held := len(pods) - 1
	if !dra {
		return held, nil
	}
	if err := claimDRAGPU(ctx, kube); err != nil {
		return 0, err
	}
	return held + 1, nil
}

// claimDRAGPU creates a pod with a ResourceClaim and allocates the claim one GPU of the DRA
// node, writing its status as the scheduler does.
func claimDRAGPU(ctx context.Context, kube kubernetes.Interface) error {
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: inferenceNamespace, Name: "vllm-0-gpu"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com"}}}}},
	}
	claim, err := kube.ResourceV1().ResourceClaims(inferenceNamespace).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create ResourceClaim: %w", err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: inferenceNamespace, Name: "vllm-0"},
		Spec: corev1.PodSpec{
			NodeName:       DRANode,
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim.Name}},
			Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
		},
	}
	if pod, err = kube.CoreV1().Pods(inferenceNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod vllm-0: %w", err)
	}
	claim.Status = resourcev1.ResourceClaimStatus{
		Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: "gpu.nvidia.com", Pool: DRANode, Device: "gpu-0"}}}},
		ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}},
	}
	if _, err := kube.ResourceV1().ResourceClaims(inferenceNamespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("allocate ResourceClaim: %w", err)
	}
	return nil
}
