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
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

var nuc1Labels = map[string]string{
	inventory.LabelProduct: "NVIDIA-GeForce-RTX-4070-Laptop-GPU-SHARED", inventory.LabelCount: "1", inventory.LabelMemory: "8188",
}

// removeLabels deletes labels from a node with a JSON merge patch.
func (c *cluster) removeLabels(t *testing.T, name string, keys ...string) {
	t.Helper()
	patch := `{"metadata":{"labels":{`
	for i, k := range keys {
		if i > 0 {
			patch += ","
		}
		patch += fmt.Sprintf("%q:null", k)
	}
	patch += `}}}`
	if _, err := c.kube.CoreV1().Nodes().Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("remove labels from %s: %v", name, err)
	}
}

// waitEvent waits for an event with reason on the GpuInventory named name.
func (c *cluster) waitEvent(t *testing.T, name, reason string) corev1.Event {
	t.Helper()
	return c.waitEventIn(t, "default", name, reason)
}

// waitEventIn waits for an event in namespace with reason on the object named name.
func (c *cluster) waitEventIn(t *testing.T, namespace, name, reason string) corev1.Event {
	t.Helper()
	var found corev1.Event
	eventually(t, 20*time.Second, "event "+reason, func() error {
		list, err := c.kube.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.name": name, "reason": reason}.String(),
		})
		if err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return fmt.Errorf("none yet")
		}
		found = list.Items[0]
		return nil
	})
	return found
}

func nodeEntry(t *testing.T, gi *homelabv1.GpuInventory, name string) homelabv1.GpuNodeEntry {
	t.Helper()
	for _, n := range gi.Status.Nodes {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("node %s not in status.nodes", name)
	return homelabv1.GpuNodeEntry{}
}

// GFD's labels vanish (GFD restarts, or the node goes NotReady) and come back: the inventory
// keeps the last-known values across an operator restart, never shrinks the fleet on the way,
// and says what happened in Events.
func TestLabelsVanishAndComeBack(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	op := startOperator(t, c.env.Config, testOptions())
	c.setReady(t, "nuc1", corev1.ConditionTrue)
	before := c.waitTotals(t, "cluster", totals{Nodes: 4, ReadyNodes: 1, Gpus: 1, ReadyGpus: 1})

	// Watch every status the operator writes while the labels are gone.
	w, err := c.gpu.HomelabV1().GpuInventories().Watch(context.Background(), metav1.ListOptions{
		FieldSelector: "metadata.name=cluster", ResourceVersion: before.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	c.removeLabels(t, "nuc1", inventory.LabelProduct, inventory.LabelCount, inventory.LabelMemory)
	deadline := time.After(20 * time.Second)
	var gi *homelabv1.GpuInventory
	for gi == nil {
		select {
		case ev, open := <-w.ResultChan():
			if !open {
				t.Fatal("the watch of the inventory ended")
			}
			obj, ok := ev.Object.(*homelabv1.GpuInventory)
			if !ok {
				continue
			}
			if s := obj.Status; s.TotalGpus != 1 || s.ReadyGpus != 1 || s.TotalGpuNodes != 4 {
				t.Fatalf("totals flapped while labels were missing: %d/%d GPUs, %d nodes", s.ReadyGpus, s.TotalGpus, s.TotalGpuNodes)
			}
			if obj.Status.LabelsMissingNodes == 1 {
				gi = obj
			}
		case <-deadline:
			t.Fatal("status never reported the missing labels")
		}
	}
	nuc1 := nodeEntry(t, gi, "nuc1")
	if !nuc1.LabelsMissing || nuc1.LabelsMissingSince == nil || nuc1.Product != nuc1Labels[inventory.LabelProduct] ||
		nuc1.GpuCount != 1 || nuc1.GpuMemoryMiB != 8188 || gi.Status.UnlabeledGpus != 1 {
		t.Errorf("nuc1 = %+v (unlabeled GPUs %d); want last-known product, count and memory", nuc1, gi.Status.UnlabeledGpus)
	}
	c.waitEvent(t, "cluster", inventory.EventLabelsMissing)

	// An operator restart (a new leader, say) keeps the last-known data: it lives in the status.
	if err := op.stop(t); err != nil {
		t.Fatal(err)
	}
	startOperator(t, c.env.Config, testOptions())
	c.setReady(t, "omen", corev1.ConditionTrue) // a change the new operator must write
	after := c.waitTotals(t, "cluster", totals{Nodes: 4, ReadyNodes: 2, Gpus: 1, ReadyGpus: 1})
	again := nodeEntry(t, after, "nuc1")
	if !again.LabelsMissing || again.Product != nuc1.Product || again.GpuCount != 1 ||
		!again.LabelsMissingSince.Equal(nuc1.LabelsMissingSince) {
		t.Errorf("after the restart nuc1 = %+v, want the last-known values and the same labelsMissingSince %v", again, nuc1.LabelsMissingSince)
	}

	// The labels come back.
	c.patchLabels(t, "nuc1", nuc1Labels)
	eventually(t, 20*time.Second, "labels restored", func() error {
		gi := c.inventory(t, "cluster")
		if n := nodeEntry(t, gi, "nuc1"); n.LabelsMissing || gi.Status.UnlabeledGpus != 0 {
			return fmt.Errorf("nuc1 still missing labels: %+v", n)
		}
		return nil
	})
	c.waitEvent(t, "cluster", inventory.EventLabelsRestored)
	if ev := c.waitEvent(t, "cluster", inventory.EventNodeReady); ev.Type != corev1.EventTypeNormal {
		t.Errorf("GPUNodeReady event has type %s", ev.Type)
	}
}

// A 5,000-node inventory stays far below the API server's object size limit.
func TestLargeInventoryStaysUnderSizeBound(t *testing.T) {
	c := startCluster(t)
	const n = 5000
	bulk := rest.CopyConfig(c.env.Config)
	bulk.QPS = -1 // no client-side rate limit for the bulk creation
	kube := kubernetes.NewForConfigOrDie(bulk)
	createNodes(t, kube, n)

	startOperator(t, c.env.Config, testOptions())
	c.waitTotals(t, "cluster", totals{Nodes: n, ReadyNodes: n - n/100, Gpus: 8 * n, ReadyGpus: 8 * (n - n/100)})
	raw, err := c.gpu.HomelabV1().RESTClient().Get().Resource("gpuinventories").Name("cluster").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 256<<10 {
		t.Errorf("the GpuInventory is %d bytes, want at most 256 KiB", len(raw))
	}
	gi := c.inventory(t, "cluster")
	if gi.Status.ListedNodes != inventory.DefaultMaxStatusNodes || len(gi.Status.Nodes) != inventory.DefaultMaxStatusNodes {
		t.Errorf("listed %d nodes (%d), want %d", gi.Status.ListedNodes, len(gi.Status.Nodes), inventory.DefaultMaxStatusNodes)
	}
	problems := 0
	for _, e := range gi.Status.Nodes {
		if !e.Ready {
			problems++
		}
	}
	if problems != n/100 {
		t.Errorf("listed %d NotReady nodes, want all %d of them", problems, n/100)
	}
	truncated := meta.FindStatusCondition(gi.Status.Conditions, homelabv1.ConditionTruncated)
	if truncated == nil || truncated.Status != metav1.ConditionTrue {
		t.Errorf("Truncated = %+v, want True", truncated)
	}
	t.Logf("5,000-node GpuInventory: %d bytes", len(raw))
}

// createNodes creates n H100 nodes with GFD labels, one in a hundred NotReady.
func createNodes(t *testing.T, kube kubernetes.Interface, n int) {
	t.Helper()
	nodes := make(chan *corev1.Node)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for node := range nodes {
				if err := testenv.CreateNodes(context.Background(), kube, []*corev1.Node{node}); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := range n {
		ready := corev1.ConditionTrue
		if i%100 == 0 {
			ready = corev1.ConditionFalse
		}
		nodes <- &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gpu-node-%05d.us-east-1.compute.internal", i), Labels: map[string]string{
				"nvidia.com/gpu.present": "true", inventory.LabelProduct: "NVIDIA-H100-80GB-HBM3", inventory.LabelCount: "8",
				inventory.LabelMemory: "81559", inventory.LabelFamily: "hopper", inventory.LabelComputeMajor: "9", inventory.LabelComputeMinor: "0",
				inventory.LabelDriverFull: "570.124.06", inventory.LabelRuntimeFull: "12.8",
			}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}},
		}
	}
	close(nodes)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("create nodes: %v", err)
	default:
	}
}
