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
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/crd"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// fleetFigures are the exact figures of a generated fleet of n nodes.
func fleetFigures(t *testing.T, n int) inventory.Inventory {
	t.Helper()
	inv, _ := inventory.Compute(fixtures.Fleet(n), nil, time.Now())
	return inv
}

// watchFigures records every status of the default inventory that counts all GPU nodes but
// gets a figure wrong, until the test ends.
func watchFigures(t *testing.T, c *cluster, want inventory.Inventory) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.gpu.HomelabV1().GpuInventories().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=cluster"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var wrong []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			gi, ok := ev.Object.(*homelabv1.GpuInventory)
			if !ok || ev.Type == watch.Error || gi.Status.TotalGpuNodes != want.TotalGpuNodes {
				continue
			}
			s := gi.Status
			got := fmt.Sprintf("gpus %d, models %s", s.TotalGpus, modelFigures(s.Models))
			if expected := fmt.Sprintf("gpus %d, models %s", want.TotalGpus, modelFigures(want.Models)); got != expected {
				mu.Lock()
				wrong = append(wrong, fmt.Sprintf("rv %s: %s, want %s", gi.ResourceVersion, got, expected))
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), wrong...) }
}

func modelFigures(models []homelabv1.GpuModel) string {
	s := ""
	for _, m := range models {
		s += fmt.Sprintf("%s=%d/%d ", m.Product, m.Nodes, m.Gpus)
	}
	return s
}

// waitLabelsMissing waits until the default inventory says n nodes lost their labels.
func (c *cluster) waitLabelsMissing(t *testing.T, n int32, timeout time.Duration) *homelabv1.GpuInventory {
	t.Helper()
	var gi *homelabv1.GpuInventory
	eventually(t, timeout, fmt.Sprintf("%d nodes with labels missing", n), func() error {
		var err error
		if gi, err = c.gpu.HomelabV1().GpuInventories().Get(context.Background(), "cluster", metav1.GetOptions{}); err != nil {
			return err
		}
		if gi.Status.LabelsMissingNodes != n {
			return fmt.Errorf("labelsMissingNodes %d", gi.Status.LabelsMissingNodes)
		}
		return nil
	})
	return gi
}

// The seed's failure at scale: every GPU node loses GPU Feature Discovery's labels at once,
// the operator restarts in the middle, and the labels come back. With status.nodes listing
// only 10 of 60 GPU nodes, the records are the only memory of the other 50: every figure
// stays exact throughout and LabelsMissing names the count.
func TestGFDOutageAcrossARestartLosesNothing(t *testing.T) {
	const fleetSize = 120
	c := startCluster(t)
	ctx := testContext(t)
	if err := testenv.CreateFleet(ctx, c.kube, 0, fleetSize, 8); err != nil {
		t.Fatal(err)
	}
	want := fleetFigures(t, fleetSize)
	opts := testOptions()
	opts.MaxStatusNodes = 10
	op := startOperator(t, c.env.Config, opts)
	c.waitTotals(t, "cluster", totals{Nodes: want.TotalGpuNodes, ReadyNodes: want.ReadyGpuNodes, Gpus: want.TotalGpus, ReadyGpus: want.ReadyGpus})
	eventually(t, 30*time.Second, "a record per GPU node", func() error {
		records, err := c.gpu.HomelabV1().GpuNodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if int32(len(records.Items)) != want.TotalGpuNodes {
			return fmt.Errorf("%d records", len(records.Items))
		}
		return nil
	})
	wrong := watchFigures(t, c, want)

	outage := func(present bool) {
		for i := range fleetSize {
			if fixtures.IsFleetGPUNode(i) {
				if err := testenv.SetGFDLabels(ctx, c.kube, i, present); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	outage(false)
	gi := c.waitLabelsMissing(t, want.TotalGpuNodes, 30*time.Second)
	if gi.Status.UnlabeledGpus != want.TotalGpus || gi.Status.ListedNodes != 10 {
		t.Errorf("during the outage: %d unlabeled GPUs of %d, %d listed; want all GPUs unlabeled, 10 listed",
			gi.Status.UnlabeledGpus, want.TotalGpus, gi.Status.ListedNodes)
	}
	cond := findCondition(gi, homelabv1.ConditionLabelsMissing)
	if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, fmt.Sprint(want.TotalGpuNodes)) {
		t.Errorf("LabelsMissing condition %+v; want True naming %d nodes", cond, want.TotalGpuNodes)
	}

	// Restart in the middle of the outage: the new operator has no memory but the records.
	if err := op.stop(t); err != nil {
		t.Fatalf("operator stopped with %v", err)
	}
	restarted := startOperator(t, c.env.Config, opts)
	waitReadyz(t, restarted, 30*time.Second, http.StatusOK, "ok")
	c.waitLabelsMissing(t, want.TotalGpuNodes, 30*time.Second)
	records, err := c.gpu.HomelabV1().GpuNodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records.Items {
		if r.Spec.MissingSince == nil || !inventory.KnowsGPUs(&r.Spec) {
			t.Errorf("record %s during the outage: %+v; want its identity, missing", r.Name, r.Spec)
		}
	}

	outage(true)
	c.waitLabelsMissing(t, 0, 30*time.Second)
	eventually(t, 30*time.Second, "records no longer missing", func() error {
		records, err := c.gpu.HomelabV1().GpuNodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, r := range records.Items {
			if r.Spec.MissingSince != nil {
				return fmt.Errorf("record %s still missing since %s", r.Name, r.Spec.MissingSince)
			}
		}
		return nil
	})
	if w := wrong(); len(w) > 0 {
		t.Errorf("%d statuses got a figure wrong during the outage, first: %s", len(w), w[0])
	}
}

func findCondition(gi *homelabv1.GpuInventory, typ string) *metav1.Condition {
	for i := range gi.Status.Conditions {
		if gi.Status.Conditions[i].Type == typ {
			return &gi.Status.Conditions[i]
		}
	}
	return nil
}

// An upgrade in the middle of a GFD outage: the version before records kept last-known values
// only in status.nodes and the ConfigMap. The first start of this version seeds records from
// both, so nothing is lost; a node neither remembered stays unknown.
func TestUpgradeSeedsRecordsFromTheOldMemory(t *testing.T) {
	c := startCluster(t)
	ctx := testContext(t)
	bare := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"feature.node.kubernetes.io/pci-10de.present": "true"}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	if err := testenv.CreateNodes(ctx, c.kube, []*corev1.Node{bare("in-status"), bare("in-configmap"), bare("forgotten")}); err != nil {
		t.Fatal(err)
	}
	apiext := apiextensionsclient.NewForConfigOrDie(c.env.Config)
	if _, err := crd.Ensure(ctx, apiext.ApiextensionsV1().CustomResourceDefinitions()); err != nil {
		t.Fatal(err)
	}
	if err := crd.WaitAllEstablished(ctx, apiext.ApiextensionsV1().CustomResourceDefinitions(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	since := metav1.NewTime(time.Now().Add(-3 * time.Hour).Truncate(time.Second))
	gi, err := c.gpu.HomelabV1().GpuInventories().Create(ctx, &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gi.Status = homelabv1.GpuInventoryStatus{TotalGpuNodes: 3, TotalGpus: 8, ListedNodes: 1, InventoryHash: "from-the-old-version",
		Nodes: []homelabv1.GpuNodeEntry{{Name: "in-status", Ready: true, Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8, GpuMemoryMiB: 81559,
			LabelsMissing: true, LabelsMissingSince: &since}}}
	if _, err := c.gpu.HomelabV1().GpuInventories().UpdateStatus(ctx, gi, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	entry, _ := json.Marshal(homelabv1.GpuNodeEntry{Name: "in-configmap", Ready: true, Product: "NVIDIA-L4", GpuCount: 4, GpuMemoryMiB: 23034})
	if _, err := c.kube.CoreV1().ConfigMaps(operatorNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: homelabv1.NodeStatusConfigMapName, Namespace: operatorNamespace},
		Data:       map[string]string{"in-configmap": string(entry)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	startOperator(t, c.env.Config, testOptions())
	eventually(t, 30*time.Second, "records seeded from the old memory", func() error {
		records, err := c.gpu.HomelabV1().GpuNodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		got := map[string]homelabv1.GpuNodeSpec{}
		for _, r := range records.Items {
			got[r.Name] = r.Spec
		}
		s, m := got["in-status"], got["in-configmap"]
		if len(got) != 2 || s.Product != "NVIDIA-H100-80GB-HBM3" || s.GpuCount != 8 || s.Source != homelabv1.SourceSeeded ||
			s.MissingSince == nil || !s.MissingSince.Equal(&since) || m.Product != "NVIDIA-L4" || m.GpuCount != 4 || m.MissingSince == nil {
			return fmt.Errorf("records %+v", got)
		}
		return nil
	})
	gi = c.waitLabelsMissing(t, 2, 30*time.Second)
	if gi.Status.TotalGpuNodes != 3 || gi.Status.TotalGpus != 12 || gi.Status.UnlabeledGpus != 12 {
		t.Errorf("after the upgrade: %d GPU nodes, %d GPUs (%d unlabeled); want 3 nodes, 12 GPUs all unlabeled",
			gi.Status.TotalGpuNodes, gi.Status.TotalGpus, gi.Status.UnlabeledGpus)
	}
}
