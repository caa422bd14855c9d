//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Someone with rights on the operator's namespace filled its ConfigMap: foreign keys, a
// forged entry and 900 KiB of binaryData (with which no update of the 1 MiB object could
// add the home lab's entries). The operator drops what it did not write and says so.
func TestConfigMapFilledBySomeoneElse(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	ctx := context.Background()
	_, err := c.kube.CoreV1().ConfigMaps(operatorNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: homelabv1.NodeStatusConfigMapName, Namespace: operatorNamespace},
		Data: map[string]string{"hello": "world",
			"nuc9": `{"name":"nuc9","ready":true,"gpuCount":8,"product":"NVIDIA-H100","forged":true}`},
		BinaryData: map[string][]byte{"blob": make([]byte, 900<<10)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startOperator(t, c.env.Config, testOptions())
	eventually(t, 20*time.Second, "the ConfigMap holds the home lab only", func() error {
		cm, err := c.kube.CoreV1().ConfigMaps(operatorNamespace).Get(ctx, homelabv1.NodeStatusConfigMapName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(cm.Data) != 4 || len(cm.BinaryData) != 0 || cm.Data["nuc1"] == "" {
			return fmt.Errorf("%d data keys, %d binaryData keys", len(cm.Data), len(cm.BinaryData))
		}
		return nil
	})
	eventually(t, 20*time.Second, "an event about the dropped content", func() error {
		events, err := c.kube.CoreV1().Events(operatorNamespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("reason", "ForeignContentDropped").String()})
		if err != nil {
			return err
		}
		for _, ev := range events.Items {
			if ev.InvolvedObject.Kind == "ConfigMap" && strings.Contains(ev.Message, "hello") && strings.Contains(ev.Message, "1 binaryData keys") {
				return nil
			}
		}
		return fmt.Errorf("%d ForeignContentDropped events, none on the ConfigMap naming the dropped key", len(events.Items))
	})
}

// A 1.3 MB note would push the object past etcd's limit once the status is added; the CRD
// refuses it with a validation error that says why.
func TestHugeNoteIsRefusedClearly(t *testing.T) {
	c := startCluster(t)
	startOperator(t, c.env.Config, testOptions())
	c.waitTotals(t, "cluster", totals{}) // the CRD is installed and the default inventory synced
	_, err := c.gpu.HomelabV1().GpuInventories().Create(context.Background(), &homelabv1.GpuInventory{
		ObjectMeta: metav1.ObjectMeta{Name: "noted"},
		Spec:       homelabv1.GpuInventorySpec{Note: strings.Repeat("n", 1300<<10)},
	}, metav1.CreateOptions{})
	if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.note") || !strings.Contains(err.Error(), "4096") {
		t.Fatalf("create with a 1.3 MB note: %v; want a validation error naming spec.note and its 4096 limit", err)
	}
}

// A sync that panics (injected through the test hook) is recovered and retried: the
// operator keeps running, counts the panic, and the inventory gets its status.
func TestPanickingSyncIsRecovered(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	opts := testOptions()
	var panicked atomic.Bool
	opts.BeforeInventorySync = func(name string) {
		if name == "cluster" && panicked.CompareAndSwap(false, true) {
			panic("injected by the test")
		}
	}
	op := startOperator(t, c.env.Config, opts)
	c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})
	if got := counted(op.Metrics().SyncPanics, nil); got != 1 {
		t.Errorf("sync_panics_total = %d, want 1", got)
	}
	select {
	case err := <-op.done:
		t.Fatalf("the operator stopped: %v", err)
	default:
	}
}
