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
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
)

// The hand decoder (DecodeNode) against what client-go's protobuf serializer does (the
// generated Unmarshal) followed by the trim the cache then needs: per-decode CPU and garbage,
// and what the cache holds per node afterwards.

// decodeBenchNodeCount is how many nodes each input set has: a list of a mid-sized fleet.
const decodeBenchNodeCount = 1000

// decodeBenchSet is one set of protobuf Nodes (Marshal of the generated type, the message
// inside the API server's envelope) and the Nodes they encode.
type decodeBenchSet struct {
	name  string
	nodes []*corev1.Node
	data  [][]byte
}

// decodeBenchSets are the fleet generator's GPU nodes and the GPU nodes published by real
// GFD and NVSentinel installations (testdata), each on a kubelet status of the fleet.
func decodeBenchSets(tb testing.TB) []decodeBenchSet {
	realNodes := decodeBenchRealNodes(tb)
	fleet := decodeBenchSet{name: "fleet"}
	realSet := decodeBenchSet{name: "real"}
	for i := range decodeBenchNodeCount {
		fleet.nodes = append(fleet.nodes, decodeBenchFleetNode(i))
		realSet.nodes = append(realSet.nodes, decodeBenchRealNode(realNodes[i%len(realNodes)], i))
	}
	sets := []decodeBenchSet{fleet, realSet}
	for s := range sets {
		for _, n := range sets[s].nodes {
			data, err := n.Marshal()
			if err != nil {
				tb.Fatal(err)
			}
			sets[s].data = append(sets[s].data, data)
		}
	}
	return sets
}

// decodeBenchFleetNode is the fleet's i-th GPU node as the API server holds it: kubelet
// status, NFD and GFD labels, server metadata and managed fields.
func decodeBenchFleetNode(i int) *corev1.Node {
	n, labels := fixtures.FleetNode(2 * i)
	maps.Copy(n.Labels, labels)
	n.UID = types.UID(fmt.Sprintf("6a1f0c2e-4b3d-4e8f-9a7b-%012d", i))
	n.ResourceVersion = fmt.Sprint(5000000 + i)
	n.CreationTimestamp = metav1.NewTime(time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second))
	n.ManagedFields = decodeBenchManagedFields(n)
	return n
}

// decodeBenchRealNode is a real node's labels, taints, nvidia.com resources and conditions on
// the kubelet status of the fleet's i-th GPU node, named apart.
func decodeBenchRealNode(real *corev1.Node, i int) *corev1.Node {
	n := decodeBenchFleetNode(i)
	for k := range n.Labels {
		if strings.HasPrefix(k, "nvidia.com/") {
			delete(n.Labels, k)
		}
	}
	maps.Copy(n.Labels, real.Labels)
	n.Name = fmt.Sprintf("%s-%04d", real.Name, i)
	n.Labels["kubernetes.io/hostname"] = n.Name
	n.Spec.Taints = append(n.Spec.Taints, real.Spec.Taints...)
	for _, list := range []struct{ from, to corev1.ResourceList }{
		{real.Status.Capacity, n.Status.Capacity}, {real.Status.Allocatable, n.Status.Allocatable}} {
		for name := range list.to {
			if strings.HasPrefix(string(name), "nvidia.com/") {
				delete(list.to, name)
			}
		}
		for name, q := range list.from {
			if strings.HasPrefix(string(name), "nvidia.com/") {
				list.to[name] = q
			}
		}
	}
	for _, c := range real.Status.Conditions {
		if c.Type != corev1.NodeReady && !decodeBenchHasCondition(n, c.Type) {
			n.Status.Conditions = append(n.Status.Conditions, c)
		}
	}
	n.ManagedFields = decodeBenchManagedFields(n)
	return n
}

func decodeBenchHasCondition(n *corev1.Node, t corev1.NodeConditionType) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return true
		}
	}
	return false
}

// decodeBenchRealNodes reads the GPU nodes of testdata (copied from real publishers' objects).
func decodeBenchRealNodes(tb testing.TB) []*corev1.Node {
	var nodes []*corev1.Node
	for _, doc := range prototest.YAMLDocuments(tb, "testdata/*.yaml") {
		n := &corev1.Node{}
		if err := yaml.UnmarshalStrict(doc.YAML, n); err != nil {
			tb.Fatalf("%s: %v", doc.File, err)
		}
		if n.Kind == "Node" {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// decodeBenchManagedFields are the managed fields the API server keeps of a node: the
// kubelet's (metadata and the status subresource), the controller manager's and NFD's
// (the feature and GPU labels).
func decodeBenchManagedFields(n *corev1.Node) []metav1.ManagedFieldsEntry {
	at := metav1.NewTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	set := func(keys ...string) map[string]any {
		m := map[string]any{}
		for _, k := range keys {
			m["f:"+k] = map[string]any{}
		}
		return m
	}
	var labels, capacity, allocatable []string
	for k := range n.Labels {
		labels = append(labels, k)
	}
	for k := range n.Status.Capacity {
		capacity = append(capacity, string(k))
	}
	for k := range n.Status.Allocatable {
		allocatable = append(allocatable, string(k))
	}
	conditions := map[string]any{".": map[string]any{}}
	for _, c := range n.Status.Conditions {
		conditions[fmt.Sprintf(`k:{"type":%q}`, c.Type)] = set("lastHeartbeatTime", "lastTransitionTime", "message", "reason", "status", "type")
	}
	addresses := map[string]any{".": map[string]any{}}
	for _, a := range n.Status.Addresses {
		addresses[fmt.Sprintf(`k:{"type":%q}`, a.Type)] = set("address", "type")
	}
	status := map[string]any{"f:status": map[string]any{
		"f:addresses": addresses, "f:allocatable": set(allocatable...), "f:capacity": set(capacity...),
		"f:conditions": conditions, "f:daemonEndpoints": map[string]any{"f:kubeletEndpoint": set("Port")},
		"f:images": map[string]any{}, "f:nodeInfo": set("architecture", "bootID", "containerRuntimeVersion",
			"kernelVersion", "kubeProxyVersion", "kubeletVersion", "machineID", "operatingSystem", "osImage", "systemUUID"),
	}}
	entry := func(manager string, fields map[string]any, subresource string) metav1.ManagedFieldsEntry {
		raw, err := json.Marshal(fields)
		if err != nil {
			panic(err)
		}
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			Time: &at, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(string(raw)), Subresource: subresource}
	}
	return []metav1.ManagedFieldsEntry{
		entry("kubelet", map[string]any{"f:metadata": map[string]any{
			"f:annotations": set("volumes.kubernetes.io/controller-managed-attach-detach"),
			"f:labels":      set("beta.kubernetes.io/arch", "beta.kubernetes.io/os", "kubernetes.io/arch", "kubernetes.io/hostname", "kubernetes.io/os"),
		}, "f:spec": set("providerID")}, ""),
		entry("kube-controller-manager", map[string]any{"f:metadata": map[string]any{"f:annotations": set("node.alpha.kubernetes.io/ttl")},
			"f:spec": set("podCIDR", "podCIDRs")}, ""),
		entry("nfd-master", map[string]any{"f:metadata": map[string]any{"f:labels": set(labels...)}}, ""),
		entry("kubelet", status, "status"),
	}
}

// decodeBenchDecoders are the two ways to a cached node: each call of a maker returns a
// decoder with a fresh trimmer, as a cache starts with.
var decodeBenchDecoders = []prototest.Decoder[*corev1.Node]{
	{Name: "hand", Make: func() func([]byte) (*corev1.Node, error) { return NewNodeTrimmer(nil).DecodeNode }},
	{Name: "generated+trim", Make: func() func([]byte) (*corev1.Node, error) {
		t := NewNodeTrimmer(nil)
		return func(b []byte) (*corev1.Node, error) {
			n := &corev1.Node{}
			if err := n.Unmarshal(b); err != nil {
				return nil, err
			}
			return t.trim(n), nil
		}
	}},
}

// The two decoders of the benchmark give the same cached node for every input, so that the
// benchmark compares equal work.
func TestDecodeBenchDecodersAgree(t *testing.T) {
	for _, set := range decodeBenchSets(t) {
		hand, generated := decodeBenchDecoders[0].Make(), decodeBenchDecoders[1].Make()
		for i, data := range set.data {
			want, err := generated(data)
			if err != nil {
				t.Fatal(err)
			}
			got, err := hand(data)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("%s %s: the hand decoder differs from the generated one and trim (-generated +hand):\n%s", set.name, set.nodes[i].Name, diff)
			}
		}
		if len(set.nodes[0].ManagedFields) == 0 || len(set.nodes[0].Status.Images) == 0 || len(set.nodes[0].Labels) < 60 {
			t.Errorf("%s: the inputs lack managed fields, images or the NFD labels", set.name)
		}
	}
}

// BenchmarkDecodeBenchNode decodes one node per op, cycling through a set of a thousand;
// held-B/obj is the heap the cache holds per node after decoding the whole set with a fresh
// trimmer (its shared tables included), once the garbage is collected.
func BenchmarkDecodeBenchNode(b *testing.B) {
	var sets []prototest.Inputs
	for _, set := range decodeBenchSets(b) {
		sets = append(sets, prototest.Inputs{Name: set.name, Data: set.data})
	}
	prototest.DecodeBench(b, sets, decodeBenchDecoders, false)
}
