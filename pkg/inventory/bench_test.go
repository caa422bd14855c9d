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

package inventory

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
)

// fleetNodes returns n generated fleet nodes roughly as the operator's informer holds them:
// images and other kubelet status dropped, only the NVIDIA labels kept (the operator's
// transform also drops the rest), resourceVersion set so that an EntryCache recognises them.
func fleetNodes(n int) []*corev1.Node {
	nodes := make([]*corev1.Node, n)
	for i := range nodes {
		node, labels := fixtures.FleetNode(i)
		node.Labels = map[string]string{}
		for k, v := range labels {
			if strings.HasPrefix(k, "nvidia.com/") {
				node.Labels[k] = v
			}
		}
		node.Status.Images, node.Status.Addresses = nil, nil
		node.ResourceVersion = "1"
		nodes[i] = node
	}
	return nodes
}

func BenchmarkEntry(b *testing.B) {
	node := fleetNodes(1)[0]
	b.ReportAllocs()
	for b.Loop() {
		Entry(node)
	}
}

// BenchmarkSync is what one sync costs: compute the inventory, hash it, choose the listed
// nodes and encode the status.
func BenchmarkSync(b *testing.B) {
	for _, n := range []int{5000, 65000} {
		nodes := fleetNodes(n)
		b.Run(fmt.Sprintf("full/nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				syncOnce(nil, nodes)
			}
		})
		for _, change := range []struct {
			name string
			next func(node *corev1.Node, i int) *corev1.Node
		}{
			{"incremental", func(node *corev1.Node, i int) *corev1.Node { // one node changed, as under churn
				node = node.DeepCopy()
				node.ResourceVersion = fmt.Sprint(i + 2)
				return node
			}},
			{"rejoin", func(node *corev1.Node, i int) *corev1.Node { // one node left, another joined
				node = node.DeepCopy()
				node.Name = fmt.Sprintf("%s-%d", node.Name, i)
				return node
			}},
		} {
			b.Run(fmt.Sprintf("%s/nodes=%d", change.name, n), func(b *testing.B) {
				nodes := slices.Clone(nodes)
				cache := NewEntryCache()
				syncOnce(cache, nodes)
				listed := listerOrder(nodes)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					nodes[i%n] = change.next(nodes[i%n], i)
					i++
					syncOnce(cache, listed(i))
				}
			})
		}
	}
	// With allocation, as under pod churn: each GPU node's pods from three namespaces, one
	// node's pods changed since the last sync.
	nodes := fleetNodes(5000)
	held := map[string]*allocation.Held{}
	for i, n := range nodes {
		held[n.Name] = &allocation.Held{Pods: 3, Namespaces: []allocation.NamespaceHeld{
			{Namespace: fmt.Sprintf("ml-%02d", i%16), Pods: 1, Resources: []allocation.ResourceCount{{Name: allocation.ResourceGPU, Count: 1}}},
			{Namespace: fmt.Sprintf("ml-%02d", (i+1)%16), Pods: 1, Resources: []allocation.ResourceCount{{Name: allocation.ResourceGPU, Count: 2}}},
			{Namespace: fmt.Sprintf("ml-%02d", (i+2)%16), Pods: 1, Resources: []allocation.ResourceCount{{Name: allocation.ResourceGPU, Count: 1}}},
		}}
	}
	b.Run("incremental-allocation/nodes=5000", func(b *testing.B) {
		cache := NewEntryCache().WithAllocation(func(node string) *allocation.Held { return held[node] })
		syncOnce(cache, nodes)
		listed := listerOrder(nodes)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			name := nodes[i%len(nodes)].Name
			h := *held[name]
			h.Pods++
			held[name] = &h
			i++
			syncOnce(cache, listed(i))
		}
	})
}

// listerOrder returns nodes as a lister lists them for the i-th sync: in an order of its own
// each time (a map's).
func listerOrder(nodes []*corev1.Node) func(i int) []*corev1.Node {
	rng := rand.New(rand.NewPCG(1, 2))
	perms := make([][]int, 4)
	for i := range perms {
		perms[i] = rng.Perm(len(nodes))
	}
	out := make([]*corev1.Node, len(nodes))
	return func(i int) []*corev1.Node {
		for j, k := range perms[i%len(perms)] {
			out[j] = nodes[k]
		}
		return out
	}
}

func syncOnce(cache *EntryCache, nodes []*corev1.Node) {
	inv, _ := cache.Compute(nodes, nil, t0)
	defer inv.Release() // as the controllers do
	listed, omitted := inv.Listed(DefaultMaxStatusNodes, MaxNodeListBytes)
	status := homelabv1.GpuInventoryStatus{InventoryHash: inv.Hash, Models: inv.Models, Nodes: listed, Conditions: Conditions(inv, omitted, 1), Allocation: inv.Allocation}
	if _, err := json.Marshal(status); err != nil {
		panic(err)
	}
}

// BenchmarkComputeAsTheOperator is a compute as the operator's syncs make it under churn: a
// cache told of changes (Notified), the GPU nodes of a 5,000-node fleet listed in the
// lister's order, one node changed since the last compute.
func BenchmarkComputeAsTheOperator(b *testing.B) {
	var nodes []*corev1.Node
	for i, n := range fleetNodes(5000) {
		if fixtures.IsFleetGPUNode(i) {
			nodes = append(nodes, n)
		}
	}
	cache := NewEntryCache().Notified()
	inv, _ := cache.Compute(nodes, nil, t0)
	inv.Release()
	listed := listerOrder(nodes)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		nodes[i%len(nodes)] = nodes[i%len(nodes)].DeepCopy()
		nodes[i%len(nodes)].ResourceVersion = fmt.Sprint(i + 2)
		i++
		inv, _ := cache.Compute(listed(i), nil, t0)
		inv.Release()
	}
}
