//go:build integration

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

package integration

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/gang"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/topology"
)

// The gang tables' cluster: racks (topology.kubernetes.io/rack) and NVLink cliques
// (nvidia.com/gpu.clique), every node 64 CPUs and 512Gi:
//
//	rack-a    g-a1 8 GPUs, 6 held; g-a2 8 free
//	rack-b    g-b1, g-b2 8 free; g-b3 8 free but cordoned; g-b4 8 free but NotReady
//	          (rack-b's nodes alone also carry example.com/row=r1)
//	rack-c    g-c1, g-c2 8 free
//	rack-d    g-d1, g-d2 8 free: the same as rack-c
//	rack-m    g-m-mig MIG mixed (4 whole GPUs, 14 1g.10gb); g-m-ts time-sliced T4s (16
//	          replicas of nvidia.com/gpu); g-m-whole 8 whole GPUs
//	rack-dra  g-dra1, g-dra2 DRA: 8 H100s each in ResourceSlices, nvidia.com/gpu served
//	          through the DeviceClass (no device plugin)
//	rack-p    g-p1, g-p2 8 GPUs (pool=preempt), each held by two low-priority pods of 4
//	clique 1  g-q1-01..18, 4 GPUs each, free
//	clique 2  g-q2-01..18, 4 GPUs each; 01..03 held (4 GPUs and 32 CPUs each)
const (
	gangNS       = "gangs"
	gangRow      = "example.com/row"
	kueueFleet   = "example.com/fleet" // racks or nvlink: the nodes of Kueue's two flavors
	gangPool     = "example.com/pool"
	cliqueNodes  = 18
	cliqueGPUs   = 4
	cliqueHeld   = 3
	cliqueFirst  = "4e2a.1"
	cliqueSecond = "4e2a.2"
)

// buildGangCluster makes the table above; the holders are placed by the scheduler.
func (c *cluster) buildGangCluster(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	c.ensureNamespace(t, gangNS)
	c.oracleClasses(t)
	gpu8 := corev1.ResourceList{oracleGPU: resource.MustParse("8")}
	inRack := func(n *corev1.Node, rack string) *corev1.Node { return labelled(n, topology.Rack, rack) }
	nodes := []*corev1.Node{
		inRack(kwokNode("g-a1", gpu8), "rack-a"), inRack(kwokNode("g-a2", gpu8), "rack-a"),
		inRack(kwokNode("g-b1", gpu8), "rack-b"), inRack(kwokNode("g-b2", gpu8), "rack-b"), inRack(kwokNode("g-b3", gpu8), "rack-b"),
		inRack(kwokNode("g-c1", gpu8), "rack-c"), inRack(kwokNode("g-c2", gpu8), "rack-c"),
		inRack(kwokNode("g-d1", gpu8), "rack-d"), inRack(kwokNode("g-d2", gpu8), "rack-d"),
		inRack(kwokNode("g-m-mig", corev1.ResourceList{oracleGPU: resource.MustParse("4"), oracleMIG: resource.MustParse("14")}), "rack-m"),
		labelled(inRack(kwokNode("g-m-ts", corev1.ResourceList{oracleGPU: resource.MustParse("16")}), "rack-m"),
			inventory.LabelProduct, "Tesla-T4-SHARED", inventory.LabelCount, "4", "nvidia.com/gpu.replicas", "4", "nvidia.com/gpu.sharing-strategy", "time-slicing"),
		inRack(kwokNode("g-m-whole", gpu8), "rack-m"),
		inRack(kwokNode("g-dra1", nil), "rack-dra"), inRack(kwokNode("g-dra2", nil), "rack-dra"),
		labelled(inRack(kwokNode("g-p1", gpu8), "rack-p"), gangPool, "preempt"), labelled(inRack(kwokNode("g-p2", gpu8), "rack-p"), gangPool, "preempt"),
	}
	for _, clique := range []string{cliqueFirst, cliqueSecond} {
		for i := 1; i <= cliqueNodes; i++ {
			name := fmt.Sprintf("g-q%s-%02d", clique[len(clique)-1:], i)
			nodes = append(nodes, labelled(kwokNode(name, corev1.ResourceList{oracleGPU: *resource.NewQuantity(cliqueGPUs, resource.DecimalSI)}),
				topology.NVLinkClique, clique, inventory.LabelProduct, "NVIDIA-GB200", inventory.LabelCount, "4"))
		}
	}
	for _, n := range nodes {
		n.Labels[kueueFleet] = "racks"
		if n.Labels[topology.NVLinkClique] != "" {
			n.Labels[kueueFleet] = "nvlink"
		}
		if n.Labels[topology.Rack] == "rack-b" {
			n.Labels[gangRow] = "r1"
		}
	}
	// g-b4 has no kubelet: NotReady, it keeps the not-ready taint.
	notReady := inRack(kwokNode("g-b4", gpu8), "rack-b")
	notReady.Labels[gangRow], notReady.Labels[kueueFleet] = "r1", "racks"
	delete(notReady.Annotations, testenv.KwokAnnotation)
	notReady.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	if err := testenv.CreateNodes(ctx, c.kube, append(nodes, notReady)); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		c.waitSchedulable(t, n.Name)
	}
	c.cordon(t, "g-b3")
	for _, node := range []string{"g-dra1", "g-dra2"} {
		for _, s := range renamedSlices(t, dra.H100, node) {
			if _, err := c.kube.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create slice %s: %v", s.Name, err)
			}
		}
	}
	c.gangHolders(t)
}

// cordon marks a node unschedulable.
func (c *cluster) cordon(t *testing.T, name string) {
	t.Helper()
	patch := []byte(`{"spec":{"unschedulable":true}}`)
	if _, err := c.kube.CoreV1().Nodes().Patch(context.Background(), name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("cordon %s: %v", name, err)
	}
}

// gangHolders makes the scheduler place the pods that hold GPUs in the table.
func (c *cluster) gangHolders(t *testing.T) {
	t.Helper()
	c.priorityClass(t, "gang-low", 100, false)
	c.priorityClass(t, "gang-high", 1000, false)
	c.priorityClass(t, "gang-high-never", 1000, true)
	holders := []*corev1.Pod{pinned("g-a1", "hold-a1", oracleGPU, 6)}
	for i := 1; i <= cliqueHeld; i++ {
		node := fmt.Sprintf("g-q2-%02d", i)
		holders = append(holders, withResources(pinned(node, "hold-"+node, oracleGPU, cliqueGPUs), corev1.ResourceCPU, 32))
	}
	for _, node := range []string{"g-p1", "g-p2"} {
		for i := range 2 {
			holders = append(holders, withPriority(pinned(node, fmt.Sprintf("low-%s-%d", node, i), oracleGPU, 4), "gang-low"))
		}
	}
	for _, p := range holders {
		c.placeHolder(t, inNamespace(p, gangNS), nil, "running")
	}
}

// gpuClaim asks for n devices of the GPU class.
func gpuClaimTemplate(name string, n int64) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: gangNS, Name: name},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: claimSpec(gpuClass, "", n)}}
}

// buildKueueGangCluster is buildGangCluster with Kueue's view of it: a Topology of racks
// and hosts and one of NVLink cliques and hosts, a flavor and a queue for each.
func (c *cluster) buildKueueGangCluster(t *testing.T) {
	t.Helper()
	c.buildGangCluster(t)
	c.ensureNamespace(t, kueueGangNS)
	for _, k := range []gang.Kueue{(kueueCase{}).kueue(), (kueueCase{clique: true}).kueue()} {
		c.applyKueue(t, testenv.KueueTopology(k.Topology, k.Levels...), testenv.KueueTopologyFlavor(k.Flavor, k.Topology, k.NodeLabels))
		c.createClusterQueue(t, testenv.KueueClusterQueue{Name: k.Flavor, Quotas: []testenv.KueueQuota{
			{Flavor: k.Flavor, Resource: string(oracleGPU), Nominal: "1000"}, {Flavor: k.Flavor, Resource: string(oracleMIG), Nominal: "1000"}}})
		c.createLocalQueue(t, kueueGangNS, k.Flavor, k.Flavor)
	}
}
