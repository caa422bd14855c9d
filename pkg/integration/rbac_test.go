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
