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
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Products as GPU Feature Discovery names them.
const (
	a100 = "NVIDIA-A100-SXM4-80GB"
	h100 = "NVIDIA-H100-80GB-HBM3"
	l4   = "NVIDIA-L4"
)

const (
	gpu     corev1.ResourceName = "nvidia.com/gpu"
	mig1g   corev1.ResourceName = "nvidia.com/mig-1g.10gb"
	product                     = "nvidia.com/gpu.product"
)

// nodes makes n Ready nodes of one product, each with gpus whole GPUs, of which free are free.
func nodes(prefix, model string, n int, gpus, free int64) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i] = Node{Name: fmt.Sprintf("%s-%d", prefix, i), Model: model, Ready: true,
			Labels:    map[string]string{product: model},
			Resources: []NodeResource{{Name: gpu, Capacity: gpus, Free: free}}}
	}
	return out
}

// productFlavor selects the nodes of one product, as most clusters write their flavors.
func productFlavor(name, model string) Flavor {
	return Flavor{Name: name, NodeLabels: map[string]string{product: model}}
}

func quota(flavor string, resource corev1.ResourceName, nominal int64) Limit {
	return Limit{Flavor: flavor, Resource: resource, Nominal: nominal}
}

func ptr(v int64) *int64 { return &v }

func queue(name, cohort string, limits ...Limit) ClusterQueue {
	return ClusterQueue{Name: name, Cohort: cohort, Quotas: limits}
}

func kueue(flavors []Flavor, queues []ClusterQueue, cohorts ...Cohort) *Kueue {
	return &Kueue{Version: "v1beta2", Flavors: flavors, ClusterQueues: queues, Cohorts: cohorts}
}

func concat[T any](parts ...[]T) []T {
	var out []T
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// lineWith is the one line of lines holding every part, or "" (and how many) when not one.
func lineWith(lines []string, parts ...string) (string, int) {
	var found []string
	for _, l := range lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			found = append(found, l)
		}
	}
	if len(found) != 1 {
		return "", len(found)
	}
	return found[0], 1
}
