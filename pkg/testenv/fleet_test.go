package testenv

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
)

// A Ready flip rewrites what a kubelet's status update rewrites: every condition's heartbeat,
// and Ready's status, reason, message and transition time; the other conditions keep their
// status, reason and message.
func TestSetNodeReadyWritesAsAKubelet(t *testing.T) {
	ctx := context.Background()
	node, _ := fixtures.FleetNode(2)
	before := map[corev1.NodeConditionType]corev1.NodeCondition{}
	for _, c := range node.Status.Conditions {
		before[c.Type] = c
	}
	kube := k8sfake.NewClientset(node)
	for _, tc := range []struct {
		ready           bool
		status          corev1.ConditionStatus
		reason, message string
	}{
		{false, corev1.ConditionFalse, notReadyReason, notReadyMessage},
		{true, corev1.ConditionTrue, readyReason, readyMessage},
	} {
		start := time.Now().Add(-time.Second) // heartbeats have whole seconds
		if err := SetNodeReady(ctx, kube, node.Name, tc.ready); err != nil {
			t.Fatal(err)
		}
		got, err := kube.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Status.Conditions) != len(before) {
			t.Fatalf("ready=%v: %d conditions after the flip, want %d", tc.ready, len(got.Status.Conditions), len(before))
		}
		for _, c := range got.Status.Conditions {
			if c.LastHeartbeatTime.Time.Before(start) {
				t.Errorf("ready=%v: %s heartbeat %s not rewritten", tc.ready, c.Type, c.LastHeartbeatTime)
			}
			want := before[c.Type]
			if c.Type == corev1.NodeReady {
				want.Status, want.Reason, want.Message = tc.status, tc.reason, tc.message
				if c.LastTransitionTime.Time.Before(start) {
					t.Errorf("ready=%v: Ready transition time %s not rewritten", tc.ready, c.LastTransitionTime)
				}
			}
			if c.Status != want.Status || c.Reason != want.Reason || c.Message != want.Message {
				t.Errorf("ready=%v: %s is %s/%s/%q, want %s/%s/%q", tc.ready, c.Type, c.Status, c.Reason, c.Message, want.Status, want.Reason, want.Message)
			}
		}
	}
}
