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

package testenv

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
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

// With a DRA share of one half, every other GPU node (never the probes' marker, node 0) runs
// NVIDIA's DRA driver: no GFD label, no nvidia.com/gpu capacity, and one ResourceSlice of its
// own pool with the eight H100s of the fixture, whose UUIDs and PCI bus IDs no other node has.
func TestCreateDRAFleetPublishesOneSlicePerDRANode(t *testing.T) {
	ctx := context.Background()
	kube := k8sfake.NewClientset()
	const n = 40
	if err := CreateDRAFleet(ctx, kube, 0, n, 4, 0.5); err != nil {
		t.Fatal(err)
	}
	slices, err := kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byNode := map[string]*resourcev1.ResourceSlice{}
	for k := range slices.Items {
		s := &slices.Items[k]
		if s.Spec.NodeName == nil {
			t.Fatalf("slice %s has no spec.nodeName", s.Name)
		}
		byNode[*s.Spec.NodeName] = s
	}
	seen := map[string]string{} // UUIDs and PCI bus IDs, to the node that has them
	draNodes := 0
	for i := range n {
		name := fixtures.FleetNodeName(i)
		node, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dra := fixtures.IsFleetDRANode(i, 0.5)
		if dra != (fixtures.IsFleetGPUNode(i) && i%4 == 2) {
			t.Errorf("node %d: DRA %v with a share of 0.5, want every other GPU node but node 0", i, dra)
		}
		slice := byNode[name]
		if !dra {
			if slice != nil {
				t.Errorf("node %s is no DRA node but has slice %s", name, slice.Name)
			}
			continue
		}
		draNodes++
		if !inventory.IsGPUNode(node) || inventory.HasGFDLabels(node) || node.Labels["nvidia.com/gpu.deploy.dra-driver"] != "true" {
			t.Errorf("DRA node %s: labels %v, want a GPU node with the DRA driver's deploy label and no GFD label", name, node.Labels)
		}
		if _, ok := node.Status.Capacity["nvidia.com/gpu"]; ok {
			t.Errorf("DRA node %s has nvidia.com/gpu capacity (no device plugin runs there)", name)
		}
		if slice == nil {
			t.Errorf("DRA node %s has no slice", name)
			continue
		}
		pool := slice.Spec.Pool
		if slice.Spec.Driver != inventory.DRADriver || pool.Name != name || pool.Generation != 1 || pool.ResourceSliceCount != 1 {
			t.Errorf("slice %s: driver %s, pool %+v, want %s, pool %s generation 1 of 1 slice", slice.Name, slice.Spec.Driver, pool, inventory.DRADriver, name)
		}
		facts := inventory.DeviceFactsOf([]*resourcev1.ResourceSlice{slice})
		if facts == nil || facts.Pending || facts.GpuCount != 8 || facts.Product != "NVIDIA-H100-80GB-HBM3" || len(facts.Warnings) > 0 {
			t.Errorf("slice %s reads as %+v, want 8 NVIDIA-H100-80GB-HBM3 and no warning", slice.Name, facts)
		}
		for _, d := range slice.Spec.Devices {
			for _, key := range []resourcev1.QualifiedName{"uuid", "resource.kubernetes.io/pciBusID"} {
				v := *d.Attributes[key].StringValue
				if other, dup := seen[v]; dup {
					t.Errorf("%s %s of node %s is also on node %s", key, v, name, other)
				}
				seen[v] = name
			}
		}
	}
	if want := n / 4; draNodes != want || len(byNode) != want {
		t.Errorf("%d DRA nodes, %d with a slice, want %d", draNodes, len(byNode), want)
	}
}

// A republish is the driver's restart: the same devices in the next generation; a taint on one
// device makes one GPU unhealthy, and the next republish without it heals it.
func TestRepublishSliceTogglesATaint(t *testing.T) {
	ctx := context.Background()
	kube := k8sfake.NewClientset()
	const i = 2
	if err := CreateDRAFleet(ctx, kube, i, 1, 1, 1); err != nil {
		t.Fatal(err)
	}
	before, err := kube.ResourceV1().ResourceSlices().Get(ctx, fixtures.FleetSliceName(i), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, tainted := range []bool{true, true, false} {
		if err := RepublishSlice(ctx, kube, i, tainted); err != nil {
			t.Fatal(err)
		}
		s, err := kube.ResourceV1().ResourceSlices().Get(ctx, fixtures.FleetSliceName(i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := before.Spec.Pool.Generation + int64(k) + 1; s.Spec.Pool.Generation != want {
			t.Errorf("republish %d: generation %d, want %d", k, s.Spec.Pool.Generation, want)
		}
		if len(s.Spec.Devices) != len(before.Spec.Devices) {
			t.Fatalf("republish %d: %d devices, want %d", k, len(s.Spec.Devices), len(before.Spec.Devices))
		}
		for j, d := range s.Spec.Devices {
			if d.Name != before.Spec.Devices[j].Name || *d.Attributes["uuid"].StringValue != *before.Spec.Devices[j].Attributes["uuid"].StringValue {
				t.Errorf("republish %d: device %d is %s, want %s with the same UUID", k, j, d.Name, before.Spec.Devices[j].Name)
			}
		}
		facts := inventory.DeviceFactsOf([]*resourcev1.ResourceSlice{s})
		if want := map[bool]int32{true: 1}[tainted]; facts.UnhealthyGpus != want || facts.Tainted != tainted || facts.GpuCount != 8 {
			t.Errorf("republish %d (tainted %v): %d of %d GPUs unhealthy, tainted %v; want %d unhealthy", k, tainted, facts.UnhealthyGpus, facts.GpuCount, facts.Tainted, want)
		}
	}
}
