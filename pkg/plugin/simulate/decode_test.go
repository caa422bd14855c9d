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

package simulate

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
)

// equalObjects compares decoded objects: quantities by value, nil and empty alike, without
// the type (a list's items do not carry it).
var equalObjects = cmp.Options{cmpopts.EquateEmpty(), cmpopts.IgnoreTypes(metav1.TypeMeta{}),
	cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })}

// fleetNodes are nodes of the fleet fixture with their labels, some cordoned, some tainted.
func fleetNodes() []*corev1.Node {
	var out []*corev1.Node
	for i := range 12 {
		n, labels := fixtures.FleetNode(i)
		maps.Copy(n.Labels, labels)
		n.UID = "uid-" + n.UID
		n.Spec.Unschedulable = i%5 == 1
		if i%3 == 0 {
			n.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule},
				{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}, {Key: "maintenance", Value: "x", Effect: corev1.TaintEffectNoExecute}}
		}
		out = append(out, n)
	}
	return out
}

// The node cache's decoder, by the question's keep-rules, gives what trim keeps of the whole Node: a candidate's filters'
// fields, a rejected node's reasons.
func TestDecodeNodeEqualsTrim(t *testing.T) {
	pinned := pendingPod("pinned", "nvidia.com/gpu", 2)
	pinned.Spec.NodeSelector = map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
	tolerant := pinned.DeepCopy()
	tolerant.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	byName := pendingPod("by-name")
	byName.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn,
			Values: []string{fixtures.FleetNodeName(2), fixtures.FleetNodeName(4)}}}}}}}}
	for name, pods := range map[string][]*corev1.Pod{"pinned": {pinned}, "tolerant": {tolerant}, "by name": {byName}, "all": {pinned, tolerant, byName}} {
		for _, allLabels := range []bool{false, true} {
			p := newPlacing(Question{Pods: pods}, allLabels)
			for _, n := range fleetNodes() {
				raw, err := n.Marshal()
				if err != nil {
					t.Fatal(err)
				}
				decoded, err := p.decodeNode(raw)
				if err != nil {
					t.Fatalf("%s: %s: %v", name, n.Name, err)
				}
				gotNode, gotRejected := p.trim(decoded)
				wantNode, wantRejected := p.trim(n)
				if diff := cmp.Diff(wantNode, gotNode, equalObjects); diff != "" {
					t.Errorf("%s, all labels %t: %s kept (-trimmed +decoded):\n%s", name, allLabels, n.Name, diff)
				}
				if diff := cmp.Diff(wantRejected, gotRejected, cmp.AllowUnexported(Rejection{})); diff != "" {
					t.Errorf("%s: %s rejected (-trimmed +decoded):\n%s", name, n.Name, diff)
				}
			}
		}
	}
}

// The slice decoder reads a kept slice whole, and of the others where they are.
func TestDecodeSliceKeepsCandidatesSlices(t *testing.T) {
	onNode := h100Slice(t)
	elsewhere := onNode.DeepCopy()
	elsewhere.Spec.NodeName, elsewhere.Spec.Pool.Name, elsewhere.Spec.Pool.Generation = ptr.To("elsewhere"), "elsewhere", 3
	network := h100Slice(t)
	network.Name, network.Spec.NodeName, network.Spec.Pool.Name = "fabric-gpu.nvidia.com", nil, "fabric"
	network.Spec.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"train"}}}}}}
	s := &slicing{candidates: map[string]bool{"dra-h100-1": true}}
	for _, want := range []*resourcev1.ResourceSlice{onNode, elsewhere, network} {
		raw, err := want.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		if !s.keeps(want) {
			want = &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: want.Name}, Spec: resourcev1.ResourceSliceSpec{
				Driver: want.Spec.Driver, Pool: want.Spec.Pool, NodeName: want.Spec.NodeName}}
		}
		if diff := cmp.Diff(want, got, equalObjects); diff != "" {
			t.Errorf("%s (-want +decoded):\n%s", want.Name, diff)
		}
	}
}

// pendingPod is a pod of namespace ml that waits, asking for resources (name, count pairs).
func pendingPod(name string, resources ...any) *corev1.Pod {
	requests := corev1.ResourceList{}
	for i := 0; i+1 < len(resources); i += 2 {
		requests[corev1.ResourceName(resources[i].(string))] = *resource.NewQuantity(int64(resources[i+1].(int)), resource.DecimalSI)
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: requests, Limits: requests}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
}

// h100Slice is the first ResourceSlice of NVIDIA's DRA driver on an H100 node.
func h100Slice(t *testing.T) *resourcev1.ResourceSlice {
	t.Helper()
	slices, err := dra.Slices(dra.H100)
	if err != nil {
		t.Fatal(err)
	}
	return slices[0].DeepCopy()
}
