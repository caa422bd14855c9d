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
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/crd"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventorycache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// manyInventorySelectors are the shapes of the 1,000 inventories' selectors: each selects
// hundreds of the fleet's GPU nodes.
var manyInventorySelectors = []*metav1.LabelSelector{
	{MatchLabels: map[string]string{"nvidia.com/gpu.present": "true"}},
	{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: inventory.LabelProduct, Operator: metav1.LabelSelectorOpIn,
		Values: []string{"NVIDIA-H100-80GB-HBM3", "NVIDIA-L4", "Tesla-T4-SHARED"}}}},
	{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "nvidia.com/gpu.present", Operator: metav1.LabelSelectorOpExists},
		{Key: "feature.node.kubernetes.io/network-sriov.capable", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"true"}}}},
	{MatchLabels: map[string]string{"feature.node.kubernetes.io/network-sriov.capable": "false", "nvidia.com/gpu.present": "true"}},
}

// A thousand inventories, each over hundreds of GPU nodes, all get their status, and the
// operator's resident memory stays under 96 MiB: what it remembers of each inventory's node
// list does not grow with inventories x nodes.
func TestThousandInventoriesOverHundredsOfNodes(t *testing.T) {
	const fleetSize, inventories = 600, 1000
	c := startCluster(t)
	ctx := testContext(t)
	if err := testenv.CreateFleet(ctx, c.kube, 0, fleetSize, 8); err != nil {
		t.Fatal(err)
	}
	fleet := fixtures.Fleet(fleetSize)
	want := make([]int32, len(manyInventorySelectors))
	for i, ls := range manyInventorySelectors {
		sel, err := inventory.Selector(ls)
		if err != nil {
			t.Fatal(err)
		}
		for _, node := range fleet {
			if inventory.IsGPUNode(node) && sel.Matches(labels.Set(node.Labels)) {
				want[i]++
			}
		}
		if want[i] < 100 {
			t.Fatalf("selector %d covers %d GPU nodes, want hundreds", i, want[i])
		}
	}

	apiext := apiextensionsclient.NewForConfigOrDie(c.env.Config)
	if _, err := crd.Ensure(ctx, apiext.ApiextensionsV1().CustomResourceDefinitions()); err != nil {
		t.Fatal(err)
	}
	if err := crd.WaitEstablished(ctx, apiext.ApiextensionsV1().CustomResourceDefinitions(), homelabv1.CustomResourceDefinitionName, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	op := startSubprocessOperator(t, c)
	for i := range inventories {
		gi := &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("team-%04d", i)},
			Spec: homelabv1.GpuInventorySpec{NodeSelector: manyInventorySelectors[i%len(manyInventorySelectors)]}}
		if _, err := c.gpu.HomelabV1().GpuInventories().Create(ctx, gi, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Read back without node lists, as the operator's informer does: the test process stays light.
	light, err := inventorycache.NewInformerClient(c.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Minute, "every inventory has its status", func() error {
		list, err := kubeclient.GpuInventories(light).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		done := 0
		var wrong []string
		for i := range list.Items {
			gi := &list.Items[i]
			if !strings.HasPrefix(gi.Name, "team-") {
				continue
			}
			n, _ := strconv.Atoi(strings.TrimPrefix(gi.Name, "team-"))
			switch got := gi.Status.TotalGpuNodes; {
			case gi.Status.ObservedGeneration != gi.Generation:
			case got != want[n%len(want)]:
				wrong = append(wrong, fmt.Sprintf("%s: %d GPU nodes, want %d", gi.Name, got, want[n%len(want)]))
			default:
				done++
			}
		}
		if len(wrong) > 0 {
			t.Fatalf("wrong totals: %v", wrong[:min(5, len(wrong))])
		}
		if done < inventories {
			return fmt.Errorf("%d of %d inventories have their status", done, inventories)
		}
		return nil
	})
	rss := residentMiB(t, op.cmd.Process.Pid)
	t.Logf("operator resident set with %d inventories over %d GPU nodes: %.1f MiB", inventories, fleetSize/2, rss)
	if rss >= 96 {
		t.Errorf("operator resident set %.1f MiB with %d inventories, want under 96 MiB", rss, inventories)
	}
}

// residentMiB reads a process's resident set size from /proc.
func residentMiB(t *testing.T, pid int) float64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				t.Fatalf("parse %q: %v", line, err)
			}
			return kib / 1024
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}
