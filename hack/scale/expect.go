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

package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// fleetNode is what the expectations need of one generated GPU node.
type fleetNode struct {
	index   int
	name    string
	labels  labels.Set // every label, NFD's and GFD's included, as created
	gpus    int32      // nvidia.com/gpu.count, or the GPUs of a DRA node's slice
	product string     // nvidia.com/gpu.product, or the normalised product of a DRA node's slice
	dra     bool       // run by NVIDIA's DRA driver: no GFD label, one ResourceSlice
}

// gpuFleet returns the GPU nodes among the first n of the fleet fixture, as created, with
// draShare of them DRA nodes.
func gpuFleet(n int, draShare float64) []fleetNode {
	var out []fleetNode
	for i := range n {
		if !fixtures.IsFleetGPUNode(i) {
			continue
		}
		if fixtures.IsFleetDRANode(i, draShare) {
			node, extra := fixtures.FleetDRANode(i)
			maps.Copy(node.Labels, extra)
			facts := inventory.DeviceFactsOf([]*resourcev1.ResourceSlice{fixtures.FleetSlice(i, "")})
			out = append(out, fleetNode{index: i, name: node.Name, labels: node.Labels, gpus: facts.GpuCount, product: facts.Product, dra: true})
			continue
		}
		node, extra := fixtures.FleetNode(i)
		maps.Copy(node.Labels, extra)
		count, _ := strconv.Atoi(node.Labels["nvidia.com/gpu.count"])
		out = append(out, fleetNode{index: i, name: node.Name, labels: node.Labels, gpus: int32(count), product: node.Labels["nvidia.com/gpu.product"]})
	}
	return out
}

// gfdNodes are the nodes of fleet that GPU Feature Discovery labels (no DRA node).
func gfdNodes(fleet []fleetNode) []fleetNode {
	var out []fleetNode
	for _, n := range fleet {
		if !n.dra {
			out = append(out, n)
		}
	}
	return out
}

// draNodes counts the DRA nodes of fleet.
func draNodes(fleet []fleetNode) int { return len(fleet) - len(gfdNodes(fleet)) }

// totals are the figures of an inventory that the fixture determines once every GPU node is
// Ready with its generated labels: the inventory's totals and its nodes per base model.
type totals struct {
	Nodes, Ready, Gpus, ReadyGpus, Unhealthy, LabelsMissing int32
	Models, ModelGpus                                       map[string]int32 // nodes and GPUs per base model
}

// expectTotals computes the totals of an inventory whose selector is sel over fleet, every
// node Ready.
func expectTotals(fleet []fleetNode, sel labels.Selector) totals {
	t := totals{Models: map[string]int32{}, ModelGpus: map[string]int32{}}
	for _, n := range fleet {
		if !sel.Matches(n.labels) {
			continue
		}
		t.Nodes++
		t.Ready++
		t.Gpus += n.gpus
		t.ReadyGpus += n.gpus
		t.Models[baseProduct(n.product)]++
		t.ModelGpus[baseProduct(n.product)] += n.gpus
	}
	return t
}

// baseProduct groups MIG single-strategy (<model>-MIG-<profile>) and time-sliced
// (<model>-SHARED) products under their model, as the status's model summary does.
func baseProduct(p string) string {
	if i := strings.Index(p, "-MIG-"); i >= 0 {
		return p[:i]
	}
	return strings.TrimSuffix(p, "-SHARED")
}

// statusTotals reads the same figures from a status.
func statusTotals(st homelabv1.GpuInventoryStatus) totals {
	t := totals{Nodes: st.TotalGpuNodes, Ready: st.ReadyGpuNodes, Gpus: st.TotalGpus, ReadyGpus: st.ReadyGpus,
		Unhealthy: st.UnhealthyGpus, LabelsMissing: st.LabelsMissingNodes, Models: map[string]int32{}, ModelGpus: map[string]int32{}}
	for _, m := range st.Models {
		t.Models[m.Product], t.ModelGpus[m.Product] = m.Nodes, m.Gpus
	}
	return t
}

func (t totals) equal(o totals) bool {
	return t.Nodes == o.Nodes && t.Ready == o.Ready && t.Gpus == o.Gpus && t.ReadyGpus == o.ReadyGpus &&
		t.Unhealthy == o.Unhealthy && t.LabelsMissing == o.LabelsMissing && maps.Equal(t.Models, o.Models) &&
		maps.Equal(t.ModelGpus, o.ModelGpus)
}

func (t totals) String() string {
	return fmt.Sprintf("%d GPU nodes (%d ready), %d GPUs (%d ready), %d unhealthy, %d labels missing, models %s",
		t.Nodes, t.Ready, t.Gpus, t.ReadyGpus, t.Unhealthy, t.LabelsMissing, t.models())
}

// models lists the models as [product:nodes/GPUs ...].
func (t totals) models() string {
	models := slices.Sorted(maps.Keys(t.Models))
	for i, m := range models {
		models[i] = fmt.Sprintf("%s:%d/%d", m, t.Models[m], t.ModelGpus[m])
	}
	return "[" + strings.Join(models, " ") + "]"
}

// synced reports whether gi's status is for its current spec and shows want.
func synced(gi *homelabv1.GpuInventory, want totals) bool {
	return gi.Status.ObservedGeneration == gi.Generation && statusTotals(gi.Status).equal(want)
}

// waitTotals follows inventory name until its status shows want (at most timeout).
func waitTotals(ctx context.Context, gpu versioned.Interface, name string, want totals, timeout time.Duration) error {
	var last totals
	err := watchInventory(ctx, gpu, name, timeout, func(gi *homelabv1.GpuInventory) bool {
		last = statusTotals(gi.Status)
		return synced(gi, want)
	})
	if err != nil {
		return fmt.Errorf("inventory %s: want %s; last seen %s: %w", name, want, last, err)
	}
	return nil
}

// resetFleet brings the GPU nodes back to the fixture's state after the churn and the
// probes: every one there and with its labels (a rejoin in flight when the churn ends leaves
// its node deleted, or unlabelled) and Ready, the probes' marker node with its own product,
// no device of a DRA node tainted (a node re-created with draShare as the fleet was). kube
// lists in protobuf.
func resetFleet(ctx context.Context, kube kubernetes.Interface, fleet []fleetNode, draShare float64) (resetCounts, error) {
	var counts resetCounts
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return counts, fmt.Errorf("list nodes: %w", err)
	}
	if counts.untainted, err = untaintSlices(ctx, kube, fleet); err != nil {
		return counts, err
	}
	byName := map[string]*corev1.Node{}
	for i := range nodes.Items {
		byName[nodes.Items[i].Name] = &nodes.Items[i]
	}
	var notReady []string
	for _, n := range fleet {
		node := byName[n.name]
		if node == nil {
			if err := testenv.CreateDRAFleet(ctx, kube, n.index, 1, 1, draShare); err != nil {
				return counts, fmt.Errorf("re-create node %s, missing after the churn: %w", n.name, err)
			}
			counts.recreated++
			continue
		}
		if !nodeReady(node) {
			notReady = append(notReady, n.name)
		}
		if labelsDiffer(node.Labels, n.labels) {
			counts.relabelled++
			apply := applycorev1.Node(n.name).WithLabels(n.labels)
			if _, err := kube.CoreV1().Nodes().Apply(ctx, apply, metav1.ApplyOptions{FieldManager: "nfd-master", Force: true}); err != nil {
				return counts, fmt.Errorf("restore the labels of node %s: %w", n.name, err)
			}
		}
	}
	errs := make(chan error, len(notReady))
	names := make(chan string)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for name := range names {
				errs <- testenv.SetNodeReady(ctx, kube, name, true)
			}
		})
	}
	for _, name := range notReady {
		names <- name
	}
	close(names)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return counts, err
		}
	}
	counts.madeReady = len(notReady)
	return counts, nil
}

// untaintSlices republishes without taints the slices of fleet's DRA nodes that have any
// (the churn toggles taints), and returns how many.
func untaintSlices(ctx context.Context, kube kubernetes.Interface, fleet []fleetNode) (int, error) {
	if draNodes(fleet) == 0 {
		return 0, nil
	}
	slices, err := kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list ResourceSlices: %w", err)
	}
	tainted := map[string]bool{}
	for _, s := range slices.Items {
		for _, d := range s.Spec.Devices {
			tainted[s.Name] = tainted[s.Name] || len(d.Taints) > 0
		}
	}
	count := 0
	for _, n := range fleet {
		if n.dra && tainted[fixtures.FleetSliceName(n.index)] {
			if err := testenv.RepublishSlice(ctx, kube, n.index, false); err != nil {
				return count, err
			}
			count++
		}
	}
	return count, nil
}

// resetCounts says what resetFleet did.
type resetCounts struct{ recreated, relabelled, madeReady, untainted int }

func (c resetCounts) String() string {
	return fmt.Sprintf("%d GPU nodes re-created, %d given their labels back, %d made Ready again, %d slices republished without taints", c.recreated, c.relabelled, c.madeReady, c.untainted)
}

// labelsDiffer reports whether have lacks or changed a label of want, GFD's timestamp aside
// (the churn rewrites it).
func labelsDiffer(have, want labels.Set) bool {
	for k, v := range want {
		if have[k] != v && k != "nvidia.com/gfd.timestamp" {
			return true
		}
	}
	return false
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
