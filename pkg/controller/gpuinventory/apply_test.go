package gpuinventory

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	applyv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/applyconfiguration/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// The operator sends statusApplyBody to the API server; the unit tests' fake clientset gets
// the typed apply configuration. Both must be the same request, or the tests would prove the
// wrong thing.
func TestApplyBodiesAgree(t *testing.T) {
	nodes := fixtures.HomeLab()
	for i := range 40 { // MIG single and mixed, shared, several models
		node, labels := fixtures.FleetNode(i)
		for k, v := range labels {
			node.Labels[k] = v
		}
		nodes = append(nodes, node)
	}
	nodes[0].Status.Allocatable = corev1.ResourceList{} // unhealthy GPUs
	content, _ := inventory.Compute(nodes, nil, time.Unix(1800000000, 0))
	observedAt := metav1.NewTime(time.Unix(1800000000, 0).UTC())
	status := homelabv1.GpuInventoryStatus{
		ObservedGeneration: 3, ObservedAt: &observedAt, InventoryHash: content.Hash,
		TotalGpuNodes: content.TotalGpuNodes, ReadyGpuNodes: content.ReadyGpuNodes, TotalGpus: content.TotalGpus,
		Models: content.Models, Nodes: content.Nodes, ListedNodes: int32(len(content.Nodes)),
		Conditions: inventory.Conditions(content, 0, 3),
	}
	for i := range status.Conditions {
		status.Conditions[i].LastTransitionTime = observedAt // as syncHandler sets it
	}
	if len(status.Nodes) < 20 || len(status.Models) < 3 {
		t.Fatalf("fixture too thin: %d nodes, %d models", len(status.Nodes), len(status.Models))
	}

	raw, err := statusApplyBody("cluster", status)
	if err != nil {
		t.Fatal(err)
	}
	applyStatus, err := statusApplyConfiguration(status)
	if err != nil {
		t.Fatal(err)
	}
	typed, err := json.Marshal(applyv1.GpuInventory("cluster").WithStatus(applyStatus))
	if err != nil {
		t.Fatal(err)
	}
	var a, b map[string]any
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(typed, &b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(b, a); diff != "" {
		t.Errorf("raw apply body differs from the typed apply configuration (-typed +raw):\n%s", diff)
	}
	if a["apiVersion"] != "homelab.youngju.dev/v1" || a["kind"] != "GpuInventory" {
		t.Errorf("apply body lacks apiVersion/kind: %v %v", a["apiVersion"], a["kind"])
	}
}
