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
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// rackNode is a Ready node of 8 H100s in a zone and rack, carrying a label the operator keeps
// only when asked (example.com/pod).
func rackNode(name, rack, pod string) *corev1.Node {
	gpus := resource.MustParse("8")
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
			"nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": "81559",
			"topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/rack": rack, "example.com/pod": pod,
		}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{"nvidia.com/gpu": gpus, corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{"nvidia.com/gpu": gpus, corev1.ResourcePods: resource.MustParse("110")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		},
	}
}

// The operator groups the GPU nodes by their racks into status.topology, judges
// TopologyFragmented at the level the spec requires, exports the topology series every
// shipped topology alert reads, and lists the nodes again, keeping a label, when the spec
// names a level the node cache drops.
func TestTopologyInTheInventory(t *testing.T) {
	c := startCluster(t)
	var nodes []*corev1.Node
	for r := range 3 {
		for i := range 2 {
			nodes = append(nodes, rackNode(fmt.Sprintf("h100-r%d-%d", r, i), fmt.Sprintf("rack-%d", r), fmt.Sprintf("pod-%d", r/2)))
		}
	}
	if err := testenv.CreateNodes(context.Background(), c.kube, nodes); err != nil {
		t.Fatal(err)
	}
	op := startOperator(t, c.env.Config, testOptions())
	tree := c.waitTopology(t, func(gi *homelabv1.GpuInventory) error {
		tree := gi.Status.Topology.Topologies[0]
		want := []homelabv1.TopologyLevel{{Key: "topology.kubernetes.io/zone", Domains: 1}, {Key: "topology.kubernetes.io/rack", Domains: 3}}
		if tree.Name != "labels" || !slices.Equal(tree.Levels, want) {
			return fmt.Errorf("topology %q levels %+v, want the zone and rack labels", tree.Name, tree.Levels)
		}
		return fragmented(gi, metav1.ConditionFalse)
	})
	if i := slices.IndexFunc(tree.Largest, func(l homelabv1.TopologyLargest) bool { return l.Level == "topology.kubernetes.io/rack" }); i < 0 || tree.Largest[i].Gpus != 16 {
		t.Errorf("largest = %+v, want a gang of 16 in one rack", tree.Largest)
	}

	// A gang of 32: the fleet's 48 free GPUs could take it, no rack of 16 can.
	c.updateSpec(t, func(spec *homelabv1.GpuInventorySpec) { spec.FragmentationGpus = 32 })
	c.waitTopology(t, func(gi *homelabv1.GpuInventory) error {
		if err := fragmented(gi, metav1.ConditionTrue); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(gi.Status.Conditions, homelabv1.ConditionTopologyFragmented)
		if !strings.Contains(cond.Message, "no topology.kubernetes.io/rack domain can take it") {
			return fmt.Errorf("message %q does not name the rack level", cond.Message)
		}
		return nil
	})
	var text string
	eventually(t, 20*time.Second, "topology series exported", func() error {
		_, body, err := get("http://" + op.MetricsAddress() + "/metrics")
		text = body
		if err == nil && !strings.Contains(text, `gpu_inventory_topology_fragmented{inventory="cluster",level="topology.kubernetes.io/rack",product="NVIDIA-H100-80GB-HBM3",topology="labels"} 1`) {
			return fmt.Errorf("no fragmented series")
		}
		return err
	})
	checkAlertRules(t, text, func(group string) bool { return group == topologyRuleGroup })

	// The zone takes it: not fragmented there.
	c.updateSpec(t, func(spec *homelabv1.GpuInventorySpec) {
		spec.Topology = &homelabv1.TopologySpec{RequiredLevel: "topology.kubernetes.io/zone"}
	})
	c.waitTopology(t, func(gi *homelabv1.GpuInventory) error { return fragmented(gi, metav1.ConditionFalse) })

	// A level of a label the node cache drops: the operator lists the nodes again with it.
	c.updateSpec(t, func(spec *homelabv1.GpuInventorySpec) {
		spec.Topology = &homelabv1.TopologySpec{Levels: []string{"example.com/pod", "topology.kubernetes.io/rack"}}
	})
	c.waitTopology(t, func(gi *homelabv1.GpuInventory) error {
		tree := gi.Status.Topology.Topologies[0]
		if len(tree.Levels) != 2 || tree.Levels[0] != (homelabv1.TopologyLevel{Key: "example.com/pod", Domains: 2}) {
			return fmt.Errorf("levels %+v, want example.com/pod's 2 domains above the racks", tree.Levels)
		}
		return fragmented(gi, metav1.ConditionTrue) // judged at the narrowest level, the rack
	})

	// A node moved to another rack moves its domain: the rack label, held apart from the
	// labels selectors read, is part of what makes a node change.
	relabel(t, c, "h100-r0-0", "topology.kubernetes.io/rack", "rack-1")
	c.waitTopology(t, func(gi *homelabv1.GpuInventory) error {
		for _, d := range gi.Status.Topology.Topologies[0].Domains {
			if d.Name == "rack-1" && d.Nodes != 3 {
				return fmt.Errorf("rack-1 has %d nodes, want 3 with h100-r0-0 moved in", d.Nodes)
			}
		}
		return nil
	})

	// An inventory selecting by the rack: the label moves to where selectors see it (one
	// more re-list) and the inventory counts the rack's nodes.
	relists := strings.Count(op.logs(), "Re-listing")
	if _, err := c.gpu.HomelabV1().GpuInventories().Create(context.Background(), &homelabv1.GpuInventory{
		ObjectMeta: metav1.ObjectMeta{Name: "rack-1"},
		Spec: homelabv1.GpuInventorySpec{NodeSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{"topology.kubernetes.io/rack": "rack-1"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitTotals(t, "rack-1", totals{Nodes: 3, ReadyNodes: 3, Gpus: 24, ReadyGpus: 24})
	if n := strings.Count(op.logs(), "Re-listing") - relists; n != 1 {
		t.Errorf("%d re-lists for a selector on a topology level, want 1", n)
	}
}

// relabel sets one label of a node.
func relabel(t *testing.T, c *cluster, node, key, value string) {
	t.Helper()
	eventually(t, 10*time.Second, "node relabelled", func() error {
		n, err := c.kube.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Labels[key] = value
		_, err = c.kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
		return err
	})
}

// fragmented checks the TopologyFragmented condition's status.
func fragmented(gi *homelabv1.GpuInventory, want metav1.ConditionStatus) error {
	cond := meta.FindStatusCondition(gi.Status.Conditions, homelabv1.ConditionTopologyFragmented)
	if cond == nil || cond.Status != want {
		return fmt.Errorf("TopologyFragmented = %+v, want %s", cond, want)
	}
	return nil
}

// waitTopology waits until the cluster inventory's status.topology, for its current
// generation, passes check, and returns its first topology.
func (c *cluster) waitTopology(t *testing.T, check func(*homelabv1.GpuInventory) error) homelabv1.TopologyTree {
	t.Helper()
	var tree homelabv1.TopologyTree
	eventually(t, 60*time.Second, "status.topology", func() error {
		gi, err := c.gpu.HomelabV1().GpuInventories().Get(context.Background(), "cluster", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if gi.Status.ObservedGeneration != gi.Generation || gi.Status.Topology == nil || len(gi.Status.Topology.Topologies) == 0 {
			return fmt.Errorf("no status.topology for generation %d yet", gi.Generation)
		}
		tree = gi.Status.Topology.Topologies[0]
		return check(gi)
	})
	return tree
}

// updateSpec changes the cluster inventory's spec.
func (c *cluster) updateSpec(t *testing.T, change func(*homelabv1.GpuInventorySpec)) {
	t.Helper()
	eventually(t, 10*time.Second, "spec updated", func() error {
		gi, err := c.gpu.HomelabV1().GpuInventories().Get(context.Background(), "cluster", metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(&gi.Spec)
		_, err = c.gpu.HomelabV1().GpuInventories().Update(context.Background(), gi, metav1.UpdateOptions{})
		return err
	})
}
