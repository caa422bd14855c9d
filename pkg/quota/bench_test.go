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

package quota

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// benchCluster is a large shared cluster: 5,000 GPU nodes of five models in twenty pools,
// 100 flavors (model × pool), 1,000 ClusterQueues in 100 cohorts under ten parents, and
// ResourceQuotas in 200 namespaces.
func benchCluster() Cluster {
	models := []string{a100, h100, l4, "NVIDIA-B200", "Tesla-T4"}
	c := Cluster{Kueue: &Kueue{Version: "v1beta2"}}
	for i := range 5000 {
		labels := map[string]string{product: models[i%5], "pool": fmt.Sprint("pool-", i/5%20)}
		for j := range 20 {
			labels[fmt.Sprint("feature.node.kubernetes.io/label-", j)] = "true"
		}
		c.Nodes = append(c.Nodes, Node{Name: fmt.Sprint("node-", i), Model: models[i%5], Ready: i%50 != 0, Labels: labels,
			Taints:    []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}},
			Resources: []NodeResource{{Name: gpu, Capacity: 8, Free: int64(i % 9)}}})
	}
	for i := range 100 {
		c.Kueue.Flavors = append(c.Kueue.Flavors, Flavor{Name: fmt.Sprint("flavor-", i),
			NodeLabels: map[string]string{product: models[i%5], "pool": fmt.Sprint("pool-", i/5)},
			NodeTaints: []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}})
	}
	for i := range 1000 {
		f1, f2 := fmt.Sprint("flavor-", i%100), fmt.Sprint("flavor-", (i*7+3)%100)
		c.Kueue.ClusterQueues = append(c.Kueue.ClusterQueues, ClusterQueue{Name: fmt.Sprint("queue-", i), Cohort: fmt.Sprint("cohort-", i%100),
			Quotas:   []Limit{quota(f1, gpu, 16), {Flavor: f2, Resource: gpu, Nominal: 8, BorrowingLimit: ptr(8), LendingLimit: ptr(4)}, quota(f1, corev1.ResourceCPU, 512)},
			Reserved: []Usage{{Flavor: f1, Resource: gpu, Total: 8}}, Used: []Usage{{Flavor: f1, Resource: gpu, Total: 4}}, Pending: 3, Admitted: 2})
	}
	for i := range 100 {
		c.Kueue.Cohorts = append(c.Kueue.Cohorts, Cohort{Name: fmt.Sprint("cohort-", i), Parent: fmt.Sprint("org-", i%10)})
	}
	for i := range 200 {
		c.ResourceQuotas = append(c.ResourceQuotas, NamespaceQuota{Namespace: fmt.Sprint("ns-", i), Name: "gpus",
			Hard: map[corev1.ResourceName]int64{"requests.nvidia.com/gpu": int64(i % 17)}})
	}
	return c
}

// BenchmarkCompute runs Compute on benchCluster: the controller may run it on every change.
func BenchmarkCompute(b *testing.B) {
	c := benchCluster()
	b.ReportAllocs()
	for b.Loop() {
		if r := Compute(c, MaxRows); r.Status == nil || r.Status.ClusterQueues != 1000 {
			b.Fatalf("unexpected result %+v", r.Status)
		}
	}
}
