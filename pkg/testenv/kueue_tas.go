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

package testenv

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TopologiesResource is Kueue's Topology (cluster-scoped), which Topology Aware Scheduling
// (beta, on in v0.17) reads.
var TopologiesResource = schema.GroupVersionResource{Group: KueueGroup, Version: KueueVersion, Resource: "topologies"}

// KueueTopology is a Topology of the node labels levels, broadest first (the hostname
// only last).
func KueueTopology(name string, levels ...string) *unstructured.Unstructured {
	list := make([]any, len(levels))
	for i, l := range levels {
		list[i] = map[string]any{"nodeLabel": l}
	}
	return kueueObject("Topology", "", name, map[string]any{"levels": list})
}

// KueueTopologyFlavor is KueueResourceFlavor with Topology Aware Scheduling over the
// Topology named topology: Kueue assigns the workloads it admits on the flavor to domains of
// that topology.
func KueueTopologyFlavor(name, topology string, nodeLabels map[string]string) *unstructured.Unstructured {
	f := KueueResourceFlavor(name, nodeLabels)
	f.Object["spec"].(map[string]any)["topologyName"] = topology
	return f
}
