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
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/crd"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// createGpuNodeRecords writes a GpuNode record for each GPU node of nodes whose labels name
// its GPUs, as the operator's records controller would.
func (c *cluster) createGpuNodeRecords(t *testing.T, nodes []*corev1.Node) {
	t.Helper()
	content, _ := inventory.Compute(nodes, nil, time.Now())
	for i := range content.Nodes {
		spec := inventory.Identity(&content.Nodes[i])
		spec.LastSeen = &metav1.Time{Time: time.Now()}
		if !inventory.KnowsGPUs(&spec) {
			continue
		}
		c.createGpuNodeRecord(t, content.Nodes[i].Name, spec)
	}
}

func (c *cluster) createGpuNodeRecord(t *testing.T, name string, spec homelabv1.GpuNodeSpec) {
	t.Helper()
	if _, err := c.gpu.HomelabV1().GpuNodes().Create(context.Background(), &homelabv1.GpuNode{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create GpuNode %s: %v", name, err)
	}
}

func TestPluginNodes(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	admin := c.env.KubeconfigPath()
	apiext := apiextensionsclient.NewForConfigOrDie(c.env.Config)

	// No CRD at all; then only GpuInventory's, as an operator older than the records installs.
	if r := runPlugin(ctx, admin, "nodes"); r.code != plugin.ExitError || r.err != "error: "+plugin.GpuNodeCRDNotInstalled+"\n" || r.out != "" {
		t.Errorf("nodes without CRDs: exit %d, stderr %q, stdout %q; want exit 1 and %q", r.code, r.err, r.out, plugin.GpuNodeCRDNotInstalled)
	}
	inventoryCRD, err := crd.GpuInventory()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apiext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, inventoryCRD, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := crd.WaitEstablished(ctx, apiext.ApiextensionsV1().CustomResourceDefinitions(), homelabv1.CustomResourceDefinitionName, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "nodes says the operator is older than the plugin", func() error {
		if r := runPlugin(ctx, admin, "nodes"); r.code != plugin.ExitError || r.err != "error: "+plugin.GpuNodeCRDOlderOperator+"\n" {
			return fmt.Errorf("exit %d, stderr %q", r.code, r.err)
		}
		return nil
	})

	// Both CRDs (as the operator installs them), no record yet.
	if _, err := crd.Ensure(ctx, apiext.ApiextensionsV1().CustomResourceDefinitions()); err != nil {
		t.Fatal(err)
	}
	if err := crd.WaitAllEstablished(ctx, apiext.ApiextensionsV1().CustomResourceDefinitions(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "nodes sees the GpuNode CRD", func() error {
		if r := runPlugin(ctx, admin, "nodes"); r.code != plugin.ExitOK || !strings.HasPrefix(r.out, "No GpuNode records: ") || r.err != "" {
			return fmt.Errorf("exit %d, stderr %q, stdout %q", r.code, r.err, r.out)
		}
		return nil
	})

	// The mixed fleet (dgx-09 unreachable: Ready Unknown) with its records; dgx-09's labels
	// are gone and its record has held the last-known facts for 50 hours; a100-migfail goes NotReady; dgx-07's Node is deleted
	// (no garbage collector runs here, so its record stays).
	nodes := fixtures.MixedFleet()
	if err := testenv.CreateNodes(ctx, c.kube, nodes); err != nil {
		t.Fatal(err)
	}
	c.createGpuNodeRecords(t, nodes)
	c.createGpuNodeRecord(t, "dgx-09", homelabv1.GpuNodeSpec{Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8, GpuMemoryMiB: 81559,
		Source: homelabv1.SourceGPUFeatureDiscovery, MissingSince: &metav1.Time{Time: time.Now().Add(-50 * time.Hour)}})
	c.setReady(t, "a100-migfail", corev1.ConditionFalse)
	if err := c.kube.CoreV1().Nodes().Delete(ctx, "dgx-07", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	want := `NAME          READY    PRODUCT                           GPUS  MEMORY     MIG/SHARING              DRIVER      SOURCE                 MISSING-SINCE
a100-mig-7    True     NVIDIA-A100-SXM4-40GB-MIG-1g.5gb  7     4864 MiB   MIG 7x1g.5gb             570.124.06  gpu-feature-discovery
a100-migfail  False    NVIDIA-A100-SXM4-40GB             8     40960 MiB  MIG mixed                550.90.07   gpu-feature-discovery
a100-mixed    True     NVIDIA-A100-SXM4-40GB             8     40960 MiB  MIG 16x1g.5gb+8x2g.10gb  570.124.06  gpu-feature-discovery
dgx-01        True     NVIDIA-H100-80GB-HBM3             8     81559 MiB                           570.124.06  gpu-feature-discovery
dgx-07        gone     NVIDIA-H100-80GB-HBM3             8     81559 MiB                           570.124.06  gpu-feature-discovery
dgx-09        Unknown  NVIDIA-H100-80GB-HBM3             8     81559 MiB                                       gpu-feature-discovery  2d2h
l4-odd        True     NVIDIA-L4                         0     23034 MiB                                       gpu-feature-discovery
t4-shared-1   True     Tesla-T4-SHARED                   4     15360 MiB  time-slicing x4          570.124.06  gpu-feature-discovery

8 GPU nodes, 3 problems (2 not Ready, 1 Node gone, 1 with facts missing)
`
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nodes"}, want},
		{[]string{"nodes", "--problems", "--chunk-size", "2"}, `NAME          READY    PRODUCT                GPUS  MEMORY     MIG/SHARING  DRIVER      SOURCE                 MISSING-SINCE
a100-migfail  False    NVIDIA-A100-SXM4-40GB  8     40960 MiB  MIG mixed    550.90.07   gpu-feature-discovery
dgx-07        gone     NVIDIA-H100-80GB-HBM3  8     81559 MiB               570.124.06  gpu-feature-discovery
dgx-09        Unknown  NVIDIA-H100-80GB-HBM3  8     81559 MiB                           gpu-feature-discovery  2d2h

3 of 8 GPU nodes (--problems), 3 problems (2 not Ready, 1 Node gone, 1 with facts missing)
`},
		{[]string{"nodes", "--model", "h100"}, `NAME    READY    PRODUCT                GPUS  MEMORY     MIG/SHARING  DRIVER      SOURCE                 MISSING-SINCE
dgx-01  True     NVIDIA-H100-80GB-HBM3  8     81559 MiB               570.124.06  gpu-feature-discovery
dgx-07  gone     NVIDIA-H100-80GB-HBM3  8     81559 MiB               570.124.06  gpu-feature-discovery
dgx-09  Unknown  NVIDIA-H100-80GB-HBM3  8     81559 MiB                           gpu-feature-discovery  2d2h

3 of 8 GPU nodes (--model h100), 2 problems (1 not Ready, 1 Node gone, 1 with facts missing)
`},
		{[]string{"nodes", "--model", "h100", "--problems"}, `NAME    READY    PRODUCT                GPUS  MEMORY     MIG/SHARING  DRIVER      SOURCE                 MISSING-SINCE
dgx-07  gone     NVIDIA-H100-80GB-HBM3  8     81559 MiB               570.124.06  gpu-feature-discovery
dgx-09  Unknown  NVIDIA-H100-80GB-HBM3  8     81559 MiB                           gpu-feature-discovery  2d2h

2 of 8 GPU nodes (--model h100 --problems), 2 problems (1 not Ready, 1 Node gone, 1 with facts missing)
`},
	} {
		r := runPlugin(ctx, admin, tc.args...)
		if r.code != plugin.ExitOK || r.err != "" || r.out != tc.want {
			t.Errorf("kubectl gpuinv %s: exit %d, stderr %q, output:\n%s\nwant:\n%s", strings.Join(tc.args, " "), r.code, r.err, r.out, tc.want)
		}
	}

	// -o json: the records as stored, filtered.
	r := runPlugin(ctx, admin, "nodes", "--problems", "-o", "json")
	var list homelabv1.GpuNodeList
	if err := json.Unmarshal([]byte(r.out), &list); r.code != plugin.ExitOK || err != nil {
		t.Fatalf("nodes --problems -o json: exit %d, stderr %q, %v:\n%s", r.code, r.err, err, r.out)
	}
	var names []string
	for _, item := range list.Items {
		names = append(names, item.Name)
	}
	if got := strings.Join(names, ","); list.Kind != "GpuNodeList" || got != "a100-migfail,dgx-07,dgx-09" {
		t.Errorf("nodes --problems -o json: kind %q, items %s; want GpuNodeList of a100-migfail,dgx-07,dgx-09", list.Kind, got)
	}

	// Without RBAC the message names what is missing: the records first, then the Nodes.
	if _, err := c.kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "viewer"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	saConfig, err := c.env.ServiceAccountConfig(ctx, "default", "viewer")
	if err != nil {
		t.Fatal(err)
	}
	viewer := filepath.Join(t.TempDir(), "kubeconfig")
	if err := c.env.WriteKubeconfig(viewer, saConfig); err != nil {
		t.Fatal(err)
	}
	wantForbidden := `error: permission denied: kubectl gpuinv needs "list" on gpunodes in API group "homelab.youngju.dev" (cluster-scoped); ask a cluster admin for a ClusterRole that grants it (` + "`kubectl auth can-i list gpunodes.homelab.youngju.dev`" + ` checks). The API server said: gpunodes.homelab.youngju.dev is forbidden: User "system:serviceaccount:default:viewer" cannot list resource "gpunodes" in API group "homelab.youngju.dev" at the cluster scope`
	if r := runPlugin(ctx, viewer, "nodes"); r.code != plugin.ExitError || !strings.HasPrefix(r.err, wantForbidden) || r.out != "" {
		t.Errorf("nodes without RBAC: exit %d, stderr:\n%s\nwant exit 1 and a message starting:\n%s", r.code, r.err, wantForbidden)
	}
	grant := func(name string, rule rbacv1.PolicyRule) {
		t.Helper()
		if _, err := c.kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{rule}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: "viewer"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	grant("gpunode-reader", rbacv1.PolicyRule{APIGroups: []string{homelabv1.GroupName}, Resources: []string{"gpunodes"}, Verbs: []string{"list"}})
	wantForbidden = `error: permission denied: kubectl gpuinv needs "list" on nodes in the core API group ("") (cluster-scoped)`
	eventually(t, 20*time.Second, "nodes with list on gpunodes only names the Nodes", func() error {
		if r := runPlugin(ctx, viewer, "nodes"); r.code != plugin.ExitError || !strings.HasPrefix(r.err, wantForbidden) {
			return fmt.Errorf("exit %d, stderr %q", r.code, r.err)
		}
		return nil
	})
	grant("node-lister", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}})
	eventually(t, 20*time.Second, "nodes with list on gpunodes and nodes works", func() error {
		if r := runPlugin(ctx, viewer, "nodes"); r.code != plugin.ExitOK || r.out != want {
			return fmt.Errorf("exit %d, stderr %q, output:\n%s", r.code, r.err, r.out)
		}
		return nil
	})
}
