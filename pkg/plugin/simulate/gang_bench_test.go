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
	"io"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
)

// rackedCluster is what Load reads for a gang of H100 pods in a rack, of a cluster of nodes
// nodes with 20 pods each, gpuNodes of them 8-GPU H100 nodes in racks of 16: those whole,
// every other one with a pod holding 4 GPUs (kept: it holds GPUs), the other pods counted;
// the rest (no rack label) left out.
func rackedCluster(nodes, gpuNodes int) Loaded {
	var l Loaded
	l.Cluster.Usage = map[string]*capacity.Usage{}
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods: resource.MustParse("110"), "nvidia.com/gpu": resource.MustParse("8")}
	for i := range min(nodes, gpuNodes) {
		name := fmt.Sprintf("gpu-%05d", i)
		l.Cluster.Nodes = append(l.Cluster.Nodes, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"topology.kubernetes.io/rack": fmt.Sprintf("rack-%03d", i/16), "product": "h100"}},
			Status:     corev1.NodeStatus{Allocatable: alloc}})
		u := &capacity.Usage{}
		for range 19 {
			u.AddRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")})
		}
		l.Cluster.Usage[name] = u
		if i%2 == 0 {
			l.Cluster.Pods = append(l.Cluster.Pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name + "-train", UID: "u-" + "name"},
				Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}}}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning}})
		}
	}
	return l
}

// rackGang is a PodGroup of pods one-GPU pods in one rack.
func rackGang(pods int) string {
	return fmt.Sprintf(`apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: trainer, namespace: ml}
spec:
  schedulingPolicy: {gang: {minCount: %d}}
  schedulingConstraints: {topology: [{key: topology.kubernetes.io/rack}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: trainer, namespace: ml}
spec:
  parallelism: %d
  template:
    spec:
      schedulingGroup: {podGroupName: trainer}
      nodeSelector: {product: h100}
      containers:
      - name: main
        resources: {limits: {nvidia.com/gpu: 1}}
`, pods, pods)
}

// BenchmarkPlaceGang is what fit -f adds for a gang once the cluster is read: the file read
// and the gang placed as kube-scheduler places a PodGroup of 64 one-GPU H100 pods in one rack,
// of 5,000 nodes of which 250 are H100 nodes in racks (as make bench's questions pin them),
// and of 5,000 nodes all in racks (the most a rack constraint leaves to try).
func BenchmarkPlaceGang(b *testing.B) {
	for _, tc := range []struct{ nodes, gpuNodes int }{{5000, 250}, {5000, 5000}} {
		l := rackedCluster(tc.nodes, tc.gpuNodes)
		b.Run(fmt.Sprintf("nodes=%d/racked=%d", tc.nodes, tc.gpuNodes), func(b *testing.B) {
			for b.Loop() {
				in, err := ReadWorkload(strings.NewReader(rackGang(64)), "bench", "ml")
				if err != nil {
					b.Fatal(err)
				}
				a, err := NewView(l).PlaceGangs(in, io.Discard)
				if err != nil || !a.Fits {
					b.Fatalf("fits %v: %v", a != nil && a.Fits, err)
				}
			}
		})
	}
}
