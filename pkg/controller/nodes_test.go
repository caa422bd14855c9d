package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// The trimmed node the cache holds gives exactly the entry the whole node gives, and keeps
// what selectors read.
func TestTrimmedNodesGiveTheSameInventory(t *testing.T) {
	nodes := fixtures.HomeLab()
	for i := range 20 {
		n, lbls := testenv.FleetNode(i)
		for k, v := range lbls {
			n.Labels[k] = v
		}
		n.Spec.Unschedulable = i%7 == 0
		if i%5 == 0 {
			n.Spec.Taints = []corev1.Taint{{Key: inventory.TaintUnreachable, Effect: corev1.TaintEffectNoExecute}}
		}
		nodes = append(nodes, n)
	}
	trimmer := NewNodeTrimmer([]string{"topology.kubernetes.io/zone"})
	var trimmed []*corev1.Node
	for _, n := range nodes {
		obj, err := trimmer.Trim(n)
		if err != nil {
			t.Fatal(err)
		}
		tn := obj.(*corev1.Node)
		if len(tn.Status.Images) != 0 || len(tn.ManagedFields) != 0 || len(tn.Status.Addresses) != 0 {
			t.Errorf("%s: trimmed node still carries images, managedFields or addresses", tn.Name)
		}
		if zone := n.Labels["topology.kubernetes.io/zone"]; tn.Labels["topology.kubernetes.io/zone"] != zone {
			t.Errorf("%s: selector label dropped", tn.Name)
		}
		sel := labels.SelectorFromSet(labels.Set{"topology.kubernetes.io/zone": "us-east-1a"})
		if sel.Matches(labels.Set(n.Labels)) != sel.Matches(labels.Set(tn.Labels)) {
			t.Errorf("%s: the selector matches differently after trimming", tn.Name)
		}
		trimmed = append(trimmed, tn)
	}
	full, _ := inventory.Compute(nodes, nil, time.Time{})
	fromTrimmed, _ := inventory.Compute(trimmed, nil, time.Time{})
	if diff := cmp.Diff(full.Nodes, fromTrimmed.Nodes); diff != "" {
		t.Errorf("entries differ after trimming (-full +trimmed):\n%s", diff)
	}
	if full.Hash != fromTrimmed.Hash {
		t.Error("hash differs after trimming")
	}
}
