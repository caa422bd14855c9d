//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// Every manifest applies to a real API server (so a typo or an unknown API fails here), and
// the ClusterRoles grant exactly the documented verbs.
func TestManifestsApplyAndGrantOnlyWhatIsDocumented(t *testing.T) {
	c := startCluster(t)
	applied, err := testenv.ApplyManifests(context.Background(), c.env.Config, "integration-test", "../../manifests")
	if err != nil {
		t.Fatalf("apply manifests/: %v", err)
	}
	kinds := map[string]int{}
	for _, obj := range applied {
		kinds[obj.GetKind()]++
	}
	for kind, n := range map[string]int{"Namespace": 1, "CustomResourceDefinition": 1, "ServiceAccount": 1, "ClusterRole": 2,
		"ClusterRoleBinding": 2, "Role": 1, "RoleBinding": 1, "Deployment": 1, "PodDisruptionBudget": 1, "Service": 1} {
		if kinds[kind] != n {
			t.Errorf("applied %d %s, want %d (all: %v)", kinds[kind], kind, n, kinds)
		}
	}

	documented := map[string][]string{
		"gpu-inventory-operator": {
			"/nodes: get,list,watch",
			"homelab.youngju.dev/gpuinventories: get,list,watch,create",
			"homelab.youngju.dev/gpuinventories/status: get,patch",
			"/events: create,patch",
		},
		"gpu-inventory-operator-crd-installer": {
			"apiextensions.k8s.io/customresourcedefinitions: create",
			"apiextensions.k8s.io/customresourcedefinitions[gpuinventories.homelab.youngju.dev]: get,update",
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
