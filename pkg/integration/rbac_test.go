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
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// The project's own RBAC manifests grant the operator everything it does: CRD self-install,
// default inventory, informers, status writes, the ConfigMap and leader election.
func TestOperatorRunsWithOnlyItsOwnRBAC(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	ctx := context.Background()
	if _, err := testenv.ApplyManifests(ctx, c.env.Config, "integration-test", "../../manifests/namespace.yaml", "../../manifests/rbac"); err != nil {
		t.Fatalf("apply manifests/rbac: %v", err)
	}
	saConfig, err := c.env.ServiceAccountConfig(ctx, operatorNamespace, "gpu-inventory-operator")
	if err != nil {
		t.Fatal(err)
	}
	recorder := &forbiddenRecorder{}
	opts := testOptions()
	opts.LeaderElect = true
	op := startOperator(t, recorder.wrap(saConfig), opts)

	c.waitLeader(t, 30*time.Second, func(h string) bool { return h == op.Identity() })
	c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})
	eventually(t, 20*time.Second, "ConfigMap written by the ServiceAccount", func() error {
		cm, err := c.kube.CoreV1().ConfigMaps(operatorNamespace).Get(ctx, homelabv1.NodeStatusConfigMapName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(cm.Data) != 4 {
			return fmt.Errorf("%d keys", len(cm.Data))
		}
		return nil
	})
	c.setReady(t, "nuc1", corev1.ConditionTrue)
	c.waitTotals(t, "cluster", totals{Nodes: 4, ReadyNodes: 1, Gpus: 1, ReadyGpus: 1})
	eventually(t, 20*time.Second, "ConfigMap follows the node", func() error {
		cm, err := c.kube.CoreV1().ConfigMaps(operatorNamespace).Get(ctx, homelabv1.NodeStatusConfigMapName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if want := `"name":"nuc1","ready":true`; !strings.Contains(cm.Data["nuc1"], want) {
			return fmt.Errorf("nuc1 = %s", cm.Data["nuc1"])
		}
		return nil
	})
	// A deleted ConfigMap is recreated with only the Role's rights.
	if err := c.kube.CoreV1().ConfigMaps(operatorNamespace).Delete(ctx, homelabv1.NodeStatusConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "ConfigMap recreated", func() error {
		_, err := c.kube.CoreV1().ConfigMaps(operatorNamespace).Get(ctx, homelabv1.NodeStatusConfigMapName, metav1.GetOptions{})
		return err
	})

	if err := op.stop(t); err != nil {
		t.Errorf("operator stopped with %v", err)
	}
	if forbidden := recorder.requests(); len(forbidden) != 0 {
		t.Errorf("the operator made requests its ClusterRole/Role do not allow:\n%v", forbidden)
	}
}

// `kubectl apply -k manifests/` and the samples apply to a real API server (rendered by the
// kustomize library kubectl uses, so a kustomization.yaml that misses a file fails here too),
// and the ClusterRoles grant exactly the documented verbs.
func TestManifestsApplyAndGrantOnlyWhatIsDocumented(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	objs, err := testenv.Kustomize("../../manifests")
	if err != nil {
		t.Fatal(err)
	}
	samples, err := testenv.ReadManifests("../../manifests/samples")
	if err != nil {
		t.Fatal(err)
	}
	applied, err := testenv.ApplyObjects(ctx, c.env.Config, "integration-test", append(objs, samples...))
	if err != nil {
		t.Fatalf("apply manifests/ and manifests/samples/: %v", err)
	}
	kinds := map[string]int{}
	for _, obj := range applied {
		kinds[obj.GetKind()]++
	}
	for kind, n := range map[string]int{"Namespace": 1, "CustomResourceDefinition": 3, "ServiceAccount": 1, "ClusterRole": 2,
		"ClusterRoleBinding": 2, "Role": 1, "RoleBinding": 1, "Deployment": 1, "PodDisruptionBudget": 1, "Service": 1,
		"GpuInventory": len(samples)} {
		if kinds[kind] != n {
			t.Errorf("applied %d %s, want %d (all: %v)", kinds[kind], kind, n, kinds)
		}
	}
	// Every YAML file under manifests/ (outside the optional components and the samples) is
	// part of the kustomization: a file left out of a kustomization.yaml would not be applied.
	files, err := testenv.ReadManifests("../../manifests/namespace.yaml", "../../manifests/crd", "../../manifests/rbac", "../../manifests/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(objs) {
		t.Errorf("manifests/ holds %d objects but its kustomization renders %d", len(files), len(objs))
	}

	documented := map[string][]string{
		"gpu-inventory-operator": {
			"/nodes: get,list,watch",
			"homelab.youngju.dev/gpuinventories: get,list,watch,create",
			"homelab.youngju.dev/gpuinventories/status: get,patch",
			"homelab.youngju.dev/gpunodes: create,get,list,watch,patch,delete",
			"resource.k8s.io/resourceslices: get,list,watch",
			"/pods: get,list,watch",
			"resource.k8s.io/resourceclaims: get,list,watch",
			"kueue.x-k8s.io/resourceflavors: get,list,watch",
			"kueue.x-k8s.io/clusterqueues: get,list,watch",
			"kueue.x-k8s.io/cohorts: get,list,watch",
			"kueue.x-k8s.io/localqueues: get,list,watch",
			"/resourcequotas: get,list,watch",
			"kueue.x-k8s.io/topologies: get,list,watch",
			"apiextensions.k8s.io/customresourcedefinitions[clusterqueues.kueue.x-k8s.io]: get,list,watch",
			"/events: create,patch",
		},
		"gpu-inventory-operator-crd-installer": {
			"apiextensions.k8s.io/customresourcedefinitions: create",
			"apiextensions.k8s.io/customresourcedefinitions[gpuinventories.homelab.youngju.dev,gpunodes.homelab.youngju.dev]: get,update",
			"homelab.youngju.dev/gpuinventories: patch",
		},
	}
	for name, want := range documented {
		role, err := c.kube.RbacV1().ClusterRoles().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range role.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					s := g + "/" + res
					if len(r.ResourceNames) > 0 {
						s += "[" + strings.Join(r.ResourceNames, ",") + "]"
					}
					got = append(got, s+": "+strings.Join(r.Verbs, ","))
				}
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("ClusterRole %s grants:\n%s\nwant exactly:\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// The optional components, used the way the README says (an overlay of one's own), render and
// apply: the ServiceMonitor and PrometheusRule against the Prometheus Operator's real CRDs,
// without-crd-install leaves out the CRD rights, and list-pods-by-namespace adds the right to
// list namespaces; an operator with only the resulting rights, --install-crd=false and
// --list-pods-by-namespace does its whole job, pods listed by namespace, without a single
// Forbidden.
func TestOptionalComponentsApply(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	ctx := context.Background()
	overlay := t.TempDir()
	manifests, err := filepath.Abs("../../manifests")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(overlay, manifests)
	if err != nil {
		t.Fatal(err)
	}
	kustomization := fmt.Sprintf("resources: [%s]\ncomponents: [%s, %s, %s]\n", rel,
		filepath.Join(rel, "monitoring"), filepath.Join(rel, "without-crd-install"), filepath.Join(rel, "list-pods-by-namespace"))
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	objs, err := testenv.Kustomize(overlay)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, obj := range objs {
		names = append(names, obj.GetKind()+"/"+obj.GetName())
		if obj.GetKind() == "Deployment" {
			containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
			args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
			if !slices.Contains(args, "--install-crd=false") {
				t.Errorf("without-crd-install: Deployment args %v lack --install-crd=false", args)
			}
			if !slices.Contains(args, "--list-pods-by-namespace") {
				t.Errorf("list-pods-by-namespace: Deployment args %v lack --list-pods-by-namespace", args)
			}
		}
	}
	for _, want := range []string{"ServiceMonitor/gpu-inventory-operator", "PrometheusRule/gpu-inventory-operator", "ClusterRole/gpu-inventory-operator",
		"ClusterRole/gpu-inventory-operator-list-namespaces", "ClusterRoleBinding/gpu-inventory-operator-list-namespaces"} {
		if !slices.Contains(names, want) {
			t.Errorf("overlay renders %v, lacking %s", names, want)
		}
	}
	for _, unwanted := range []string{"ClusterRole/gpu-inventory-operator-crd-installer", "ClusterRoleBinding/gpu-inventory-operator-crd-installer"} {
		if slices.Contains(names, unwanted) {
			t.Errorf("without-crd-install still renders %s", unwanted)
		}
	}

	if _, err := testenv.ApplyManifests(ctx, c.env.Config, "integration-test", "testdata/prometheus-operator-crds"); err != nil {
		t.Fatalf("install the Prometheus Operator CRDs: %v", err)
	}
	if _, err := testenv.ApplyObjects(ctx, c.env.Config, "integration-test", objs); err != nil {
		t.Fatalf("apply the overlay: %v", err)
	}

	saConfig, err := c.env.ServiceAccountConfig(ctx, operatorNamespace, "gpu-inventory-operator")
	if err != nil {
		t.Fatal(err)
	}
	recorder := &forbiddenRecorder{}
	opts := testOptions()
	opts.InstallCRD, opts.ListPodsByNamespace = false, true
	op := startOperator(t, recorder.wrap(saConfig), opts)
	c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})
	if listed := grepLines(op.logs(), "Listed pods"); !strings.Contains(listed, "namespaces=") {
		t.Errorf("the operator did not list pods by namespace: %q", listed)
	}
	if err := op.stop(t); err != nil {
		t.Errorf("operator stopped with %v", err)
	}
	if forbidden := recorder.requests(); len(forbidden) != 0 {
		t.Errorf("without CRD rights the operator made forbidden requests:\n%v", forbidden)
	}
}
