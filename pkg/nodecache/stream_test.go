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

package nodecache

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
)

// protobufNodeList encodes nodes as the API server answers a protobuf list request.
func protobufNodeList(t testing.TB, nodes []*corev1.Node, cont string) []byte {
	t.Helper()
	return prototest.EncodeList(t, metav1.ListMeta{ResourceVersion: "42", Continue: cont}, nodes...)
}

// oddNodes exercise what fleets rarely have: managed fields, foreign taints, a node being
// deleted, two Ready conditions, MIG resources, no labels at all.
func oddNodes() []*corev1.Node {
	at := metav1.NewTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	return []*corev1.Node{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "going", UID: "u-1", ResourceVersion: "7", CreationTimestamp: at, DeletionTimestamp: &at,
				Labels:        map[string]string{"nvidia.com/gpu.product": "NVIDIA-L4", "team": "ml", "nvidia.com/mig-1g.5gb.count": "7", "nvidia.com/mig-1g.5gb.engines.copy": "1"},
				Annotations:   map[string]string{"a": "b"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, Time: &at}}},
			Spec: corev1.NodeSpec{Unschedulable: true, PodCIDR: "10.0.0.0/24", Taints: []corev1.Taint{
				{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute, TimeAdded: &at},
				{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{
				Capacity:    corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), "nvidia.com/mig-1g.5gb": resource.MustParse("7"), corev1.ResourceCPU: resource.MustParse("64")},
				Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("6"), corev1.ResourceMemory: resource.MustParse("1Gi")},
				Conditions: []corev1.NodeCondition{
					{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "old", LastHeartbeatTime: at},
					{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
					{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status.", LastTransitionTime: at},
				},
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
			},
		},
		{ObjectMeta: metav1.ObjectMeta{Name: "bare"}},
	}
}

func TestNodeStreamEqualsTrimmedNodes(t *testing.T) {
	var nodes []*corev1.Node
	nodes = append(nodes, fixtures.Fleet(30)...)
	nodes = append(nodes, fixtures.HomeLab()...)
	nodes = append(nodes, fixtures.HealthyNodes()...)
	nodes = append(nodes, fixtures.MixedFleet()...)
	nodes = append(nodes, oddNodes()...)
	trimmer := NewNodeTrimmer(nil)
	var got []*corev1.Node
	meta, count, err := DecodeNodeStream(bytes.NewReader(protobufNodeList(t, nodes, "next-page")), trimmer.DecodeNode,
		func(n *corev1.Node) { got = append(got, n) })
	if err != nil {
		t.Fatal(err)
	}
	if meta.Continue != "next-page" || meta.ResourceVersion != "42" || count != len(nodes) || len(got) != len(nodes) {
		t.Fatalf("list metadata %+v, %d nodes counted and %d visited; want continue next-page, resourceVersion 42, %d nodes", meta, count, len(got), len(nodes))
	}
	for i, n := range nodes {
		want, _ := trimmer.Trim(n)
		if !equality.Semantic.DeepEqual(want, got[i]) {
			t.Errorf("node %s from the stream differs from NodeTrimmer.Trim (-trim +stream):\n%s", n.Name, cmp.Diff(want, got[i]))
		}
	}
}

func TestNodeStreamRejectsWhatIsNotACompleteProtobufList(t *testing.T) {
	full := protobufNodeList(t, fixtures.Fleet(3), "")
	decode := NewNodeTrimmer(nil).DecodeNode
	for name, data := range map[string][]byte{
		"JSON":      []byte(`{"kind":"NodeList","apiVersion":"v1","items":[]}`),
		"truncated": full[:len(full)-100],
		"empty":     nil,
	} {
		if _, _, err := DecodeNodeStream(bytes.NewReader(data), decode, func(*corev1.Node) {}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// An empty list is fine.
	if _, n, err := DecodeNodeStream(bytes.NewReader(protobufNodeList(t, nil, "")), decode, func(*corev1.Node) {}); err != nil || n != 0 {
		t.Errorf("empty list: %d nodes, %v", n, err)
	}
	if !strings.HasPrefix(string(full), "k8s\x00") {
		t.Errorf("the encoder does not write the API server's protobuf envelope")
	}
}

// A Node's message may be as large as MaxNodeBytes: a size claimed beyond it is refused
// before anything is read (kubeproto's tests cover the other claimed sizes).
func TestNodeStreamRefusesNodesBeyondMaxNodeBytes(t *testing.T) {
	decode := NewNodeTrimmer(nil).DecodeNode
	claimed := func(size uint64) []byte {
		item := protowire.AppendVarint(protowire.AppendTag(nil, kubeproto.ListItems, protowire.BytesType), size)
		b := protowire.AppendTag(slices.Clone(kubeproto.ProtobufMagic), 2, protowire.BytesType) // runtime.Unknown's raw
		return protowire.AppendBytes(b, item)
	}
	if _, _, err := DecodeNodeStream(bytes.NewReader(claimed(MaxNodeBytes+1)), decode, func(*corev1.Node) {}); !errors.Is(err, kubeproto.ErrTooLarge) {
		t.Errorf("a node of MaxNodeBytes+1: %v; want kubeproto.ErrTooLarge", err)
	}
	if _, _, err := DecodeNodeStream(bytes.NewReader(claimed(MaxNodeBytes)), decode, func(*corev1.Node) {}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a node of MaxNodeBytes with nothing behind: %v; want io.ErrUnexpectedEOF", err)
	}
}

func FuzzDecodeNodeStream(f *testing.F) {
	f.Add(protobufNodeList(f, fixtures.HomeLab(), "next"))
	f.Add([]byte("k8s\x00\x12\xff\xff\xff\xff\xff\xff\xff\xff\x7f"))
	decode := NewNodeTrimmer(nil).DecodeNode
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _, _ = DecodeNodeStream(bytes.NewReader(data), decode, func(*corev1.Node) {})
	})
}

// BenchmarkDecodeNodeStream reads a page of 500 nodes of a fleet, as `kubectl gpuinv scan`
// reads each page.
func BenchmarkDecodeNodeStream(b *testing.B) {
	data := protobufNodeList(b, fixtures.Fleet(500), "next")
	decode := NewNodeTrimmer(nil).DecodeNode
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, _, err := DecodeNodeStream(bytes.NewReader(data), decode, func(*corev1.Node) {}); err != nil {
			b.Fatal(err)
		}
	}
}
