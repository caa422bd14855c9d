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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
)

// The demo's GPU nodes whose facts come from elsewhere than GPU Feature Discovery's labels.
const (
	// DRANode is run by NVIDIA's DRA driver: its GPUs are the devices of a ResourceSlice.
	DRANode = "dra-h100-1"
	// GKENode is a GKE node: an accelerator label and nvidia.com/gpu capacity.
	GKENode = "gke-l4-1"
	// GKENodeGPUs is the GKE node's nvidia.com/gpu capacity (a g2-standard-24 has two L4s).
	GKENodeGPUs = 2
)

// sourceNodes are the DRA node and the GKE node, kept Ready by kwok.
func sourceNodes() []*corev1.Node {
	node := func(name string, labels map[string]string, gpus int64) *corev1.Node {
		labels["kubernetes.io/hostname"] = name
		labels["kubernetes.io/os"] = "linux"
		labels["kubernetes.io/arch"] = "amd64"
		labels["type"] = "kwok"
		capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("24"), corev1.ResourceMemory: resource.MustParse("96Gi"), corev1.ResourcePods: resource.MustParse("110")}
		allocatable := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("23"), corev1.ResourceMemory: resource.MustParse("90Gi"), corev1.ResourcePods: resource.MustParse("110")}
		if gpus > 0 {
			capacity["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
			allocatable["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
		}
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{fixtures.KwokAnnotation: "fake"}},
			Status:     corev1.NodeStatus{Capacity: capacity, Allocatable: allocatable},
		}
	}
	return []*corev1.Node{
		// What the GPU Operator in its DRA mode and NFD leave on a node: no GFD labels, and no
		// nvidia.com/gpu capacity (the driver publishes devices, not an extended resource).
		node(DRANode, fixtures.DRAModeLabels(), 0),
		// GKE's labels with its own device plugin, without GFD.
		node(GKENode, map[string]string{
			"cloud.google.com/gke-accelerator": "nvidia-l4",
			"cloud.google.com/gke-nodepool":    "l4-pool",
			"cloud.google.com/machine-family":  "g2",
			"node.kubernetes.io/instance-type": "g2-standard-24",
		}, GKENodeGPUs),
	}
}

// draSlices are the ResourceSlices NVIDIA's DRA driver publishes for the DRA node: the
// eight-H100 fixture moved to DRANode, named as the kubelet names a driver's slices.
func draSlices() ([]*resourcev1.ResourceSlice, error) {
	slices, err := dra.Slices(dra.H100)
	if err != nil {
		return nil, err
	}
	for _, s := range slices {
		s.Name = ""
		s.GenerateName = DRANode + "-" + s.Spec.Driver + "-"
		s.Spec.NodeName = ptr.To(DRANode)
		s.Spec.Pool.Name = DRANode
	}
	return slices, nil
}

// servesResourceSlices reports whether the API server serves resource.k8s.io/v1
// ResourceSlices (Kubernetes 1.34 and later, unless turned off).
func servesResourceSlices(kube kubernetes.Interface) (bool, error) {
	resources, err := kube.Discovery().ServerResourcesForGroupVersion(resourcev1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", resourcev1.SchemeGroupVersion, err)
	}
	for _, r := range resources.APIResources {
		if r.Name == "resourceslices" {
			return true, nil
		}
	}
	return false, nil
}

// publishDRASlices creates the DRA node's ResourceSlices as the driver would, and returns how
// many GPUs they hold; published is false (and nothing is created) when the API server does
// not serve ResourceSlices.
func publishDRASlices(ctx context.Context, kube kubernetes.Interface) (gpus int, published bool, err error) {
	served, err := servesResourceSlices(kube)
	if err != nil || !served {
		return 0, false, err
	}
	slices, err := draSlices()
	if err != nil {
		return 0, false, err
	}
	for _, s := range slices {
		if _, err := kube.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{FieldManager: "gpu.nvidia.com"}); err != nil {
			return 0, false, fmt.Errorf("create ResourceSlice for %s: %w", DRANode, err)
		}
		gpus += fullGPUs(s)
	}
	return gpus, true, nil
}

// fullGPUs counts a slice's whole GPUs (the driver's type attribute is gpu).
func fullGPUs(s *resourcev1.ResourceSlice) int {
	n := 0
	for _, d := range s.Spec.Devices {
		if t := d.Attributes["type"].StringValue; t != nil && *t == "gpu" {
			n++
		}
	}
	return n
}
