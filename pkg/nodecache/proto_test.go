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
	"errors"
	"fmt"
	"maps"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// A Node decoded from protobuf by the trimming decoder is exactly what Trim makes of the fully
// decoded Node, for realistic nodes with every field Trim keeps or drops.
func TestDecodeNodeEqualsTrim(t *testing.T) {
	nodes := fixtures.HomeLab()
	for i := range 20 {
		n, lbls := fixtures.FleetNode(i)
		for k, v := range lbls {
			n.Labels[k] = v
		}
		n.UID = types.UID("uid-" + n.Name)
		n.ResourceVersion = "42"
		n.Annotations = map[string]string{"node.alpha.kubernetes.io/ttl": "0"}
		n.Spec.Unschedulable = i%7 == 0
		if i%5 == 0 {
			n.Spec.Taints = []corev1.Taint{{Key: inventory.TaintUnreachable, Effect: corev1.TaintEffectNoExecute},
				{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
		}
		if i%6 == 0 {
			now := metav1.Unix(1800000000, 0) // the wire carries whole seconds
			n.DeletionTimestamp = &now
		}
		n.Status.Capacity["nvidia.com/mig-1g.5gb"] = resource.MustParse("7")
		if i%3 == 0 { // a GKE node, watched by NVSentinel, in a driver upgrade
			n.Labels[inventory.LabelGKEAccelerator] = "nvidia-tesla-a100"
			n.Labels[inventory.LabelGKEPartitionSize] = "1g.5gb"
			n.Labels[inventory.LabelGKESharingStrategy] = "time-sharing"
			n.Labels[inventory.LabelGKEMaxSharedClients] = "2"
			n.Labels["cloud.google.com/gke-nodepool"] = "gpu-pool"
			n.Labels[inventory.LabelNVSentinelState] = "draining"
			n.Labels[inventory.LabelDriverUpgradeState] = "pod-restart-required"
		}
		if i%4 == 2 {
			n.Labels[inventory.LabelAWSAccelerator] = "nvidia-tesla-t4"
		}
		if ready := &n.Status.Conditions[len(n.Status.Conditions)-1]; i%4 == 1 {
			ready.Status, ready.Reason, ready.Message = corev1.ConditionFalse, "KubeletNotReady", "PLEG is not healthy"
		} else if i%4 == 3 {
			ready.Status, ready.Reason, ready.Message = corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status."
		}
		// NVSentinel's conditions beside the kubelet's, with their heartbeats and messages
		heartbeat := metav1.Unix(1800000000+int64(i), 0)
		n.Status.Conditions = append(n.Status.Conditions,
			corev1.NodeCondition{Type: "GpuMemWatch", Status: corev1.ConditionFalse, Reason: "GpuMemWatchIsHealthy",
				Message: "No Health Failures", LastHeartbeatTime: heartbeat, LastTransitionTime: heartbeat},
			corev1.NodeCondition{Type: "SysLogsXIDError", Status: []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse}[i%2],
				Reason: "SysLogsXIDErrorIsNotHealthy", Message: "ErrorCode:79 GPU has fallen off the bus", LastHeartbeatTime: heartbeat},
			corev1.NodeCondition{Type: "KernelDeadlock", Status: corev1.ConditionFalse, Reason: "KernelHasNoDeadlock"},
			corev1.NodeCondition{Type: "GpuPowerWatch", Status: corev1.ConditionTrue, Message: "power"})
		nodes = append(nodes, n)
	}
	trimmer := NewNodeTrimmer([]string{"topology.kubernetes.io/zone"}).
		KeepLevels([]string{"topology.kubernetes.io/zone", "topology.kubernetes.io/rack", "topology.k8s.aws/network-node-layer-1"})
	proto := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	encoder := scheme.Codecs.EncoderForVersion(proto, corev1.SchemeGroupVersion)
	decoder := trimmer.Codec().Serializer(scheme.Codecs.WithoutConversion()).DecoderToVersion(proto, corev1.SchemeGroupVersion)
	for _, n := range nodes {
		data, err := runtime.Encode(encoder, n)
		if err != nil {
			t.Fatal(err)
		}
		got, err := runtime.Decode(decoder, data)
		if err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
		want, _ := trimmer.Trim(n)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: trimming decoder differs from Trim (-Trim +decoder):\n%s", n.Name, diff)
		}
		if wantUID := n.UID; inventory.IsGPUNode(n) && got.(*corev1.Node).UID != wantUID {
			t.Errorf("%s: UID %q not kept (a GpuNode record's owner reference needs it)", n.Name, got.(*corev1.Node).UID)
		} else if !inventory.IsGPUNode(n) && got.(*corev1.Node).UID != "" {
			t.Errorf("%s: UID %q kept of a node that is no GPU node (nothing reads it)", n.Name, got.(*corev1.Node).UID)
		}
		if health := inventory.ReadHealth(n); !cmp.Equal(health, inventory.ReadHealth(got.(*corev1.Node))) {
			t.Errorf("%s: the cached node says %+v of its health; the node %+v", n.Name, inventory.ReadHealth(got.(*corev1.Node)), health)
		}
		for k, v := range n.Labels {
			if (inventory.IsCloudGPULabel(k) || inventory.IsHealthLabel(k)) && got.(*corev1.Node).Labels[k] != v {
				t.Errorf("%s: label %s not kept", n.Name, k)
			}
		}
	}
}

// Nodes and NodeLists that arrive as JSON come out trimmed too, exactly as Trim makes them.
func TestTrimmingDecoderTrimsJSONNodes(t *testing.T) {
	trimmer := NewNodeTrimmer(nil)
	js := jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, jsonserializer.SerializerOptions{})
	encoder := scheme.Codecs.EncoderForVersion(js, corev1.SchemeGroupVersion)
	decoder := trimmer.Codec().Serializer(scheme.Codecs.WithoutConversion()).DecoderToVersion(js, corev1.SchemeGroupVersion)
	list := &corev1.NodeList{}
	for i := range 3 {
		n, lbls := fixtures.FleetNode(i)
		for k, v := range lbls {
			n.Labels[k] = v
		}
		list.Items = append(list.Items, *n)
	}
	data, err := runtime.Encode(encoder, &list.Items[0])
	if err != nil {
		t.Fatal(err)
	}
	got, err := runtime.Decode(decoder, data)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := trimmer.Trim(&list.Items[0])
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(corev1.Node{}, "TypeMeta")); diff != "" {
		t.Errorf("JSON Node (-Trim +decoder):\n%s", diff)
	}
	if data, err = runtime.Encode(encoder, list); err != nil {
		t.Fatal(err)
	}
	gotList, err := runtime.Decode(decoder, data)
	if err != nil {
		t.Fatal(err)
	}
	for i, item := range gotList.(*corev1.NodeList).Items {
		want, _ := trimmer.Trim(&list.Items[i])
		if diff := cmp.Diff(want, &item, cmpopts.IgnoreFields(corev1.Node{}, "TypeMeta")); diff != "" {
			t.Errorf("JSON NodeList item %d (-Trim +decoder):\n%s", i, diff)
		}
	}
}

// The reflector's streaming list ends with a bookmark carrying the initial-events-end
// annotation; the decoder must keep it, or the informer would never sync. Objects other than
// Nodes are decoded in full.
func TestTrimmingDecoderKeepsTheBookmarkAndPassesOthers(t *testing.T) {
	proto := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	encoder := scheme.Codecs.EncoderForVersion(proto, corev1.SchemeGroupVersion)
	decoder := NewNodeTrimmer(nil).Codec().Serializer(scheme.Codecs.WithoutConversion()).DecoderToVersion(proto, corev1.SchemeGroupVersion)

	bookmark := &corev1.Node{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "77",
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	data, err := runtime.Encode(encoder, bookmark)
	if err != nil {
		t.Fatal(err)
	}
	got, err := runtime.Decode(decoder, data)
	if err != nil {
		t.Fatal(err)
	}
	if meta := got.(*corev1.Node).ObjectMeta; meta.ResourceVersion != "77" || meta.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
		t.Errorf("bookmark decoded as %+v", meta)
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "y"}, Data: map[string]string{"a": "b"}}
	if data, err = runtime.Encode(encoder, cm); err != nil {
		t.Fatal(err)
	}
	other, err := runtime.Decode(decoder, data)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := other.(*corev1.ConfigMap); !ok || got.Data["a"] != "b" {
		t.Errorf("a ConfigMap through the trimming decoder came out as %#v", other)
	}
}

// A protobuf NodeList is decoded by hand, each item as DecodeNode decodes it, with or without
// a NodeList to decode into; into a Node it is an error.
func TestCodecDecodesNodeListsByHand(t *testing.T) {
	nodes := append(fixtures.Fleet(12), oddNodes()...)
	trimmer := NewNodeTrimmer(nil)
	proto := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	decoder := trimmer.Codec().Serializer(scheme.Codecs.WithoutConversion()).DecoderToVersion(proto, corev1.SchemeGroupVersion)
	data := protobufNodeList(t, nodes, "next")
	check := func(how string, list *corev1.NodeList) {
		t.Helper()
		if list.Continue != "next" || list.ResourceVersion != "42" || len(list.Items) != len(nodes) {
			t.Fatalf("%s: list metadata %+v and %d items; want continue next, resourceVersion 42, %d items", how, list.ListMeta, len(list.Items), len(nodes))
		}
		for i, n := range nodes {
			want, _ := trimmer.Trim(n)
			if diff := cmp.Diff(want, &list.Items[i]); diff != "" {
				t.Errorf("%s: item %s (-Trim +codec):\n%s", how, n.Name, diff)
			}
		}
	}
	got, err := runtime.Decode(decoder, data)
	if err != nil {
		t.Fatal(err)
	}
	check("without a target", got.(*corev1.NodeList))
	var into corev1.NodeList
	if _, _, err := decoder.Decode(data, nil, &into); err != nil {
		t.Fatal(err)
	}
	check("into a NodeList", &into)
	var node corev1.Node
	if _, _, err := decoder.Decode(data, nil, &node); err == nil {
		t.Error("a NodeList into a Node: no error")
	}
}

// Whatever bytes arrive, the decoder returns a node or an error; it never panics.
func FuzzDecodeNode(f *testing.F) {
	proto := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	encoder := scheme.Codecs.EncoderForVersion(proto, corev1.SchemeGroupVersion)
	for i := range 6 {
		n, lbls := fixtures.FleetNode(i)
		for k, v := range lbls {
			n.Labels[k] = v
		}
		data, err := runtime.Encode(encoder, n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("k8s\x00"))
	f.Add(protobufNodeList(f, fixtures.HomeLab(), "next")) // a list, decoded by hand too
	decoder := NewNodeTrimmer(nil).Codec().Serializer(scheme.Codecs.WithoutConversion()).DecoderToVersion(proto, corev1.SchemeGroupVersion)
	trimmer := NewNodeTrimmer(nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = runtime.Decode(decoder, data)
		_, _ = trimmer.DecodeNode(data)
	})
}

// Nodes with the same kept labels, nvidia.com resources and taints get one shared copy of
// each (the point: 2,500 GPU nodes of a handful of models hold a handful of sets), and
// sharing never changes what a node says, also after the table of sets starts over.
func TestDecodedNodesShareIdenticalSets(t *testing.T) {
	trimmer := NewNodeTrimmer(nil)
	node := func(name, product string) *corev1.Node {
		n, lbls := fixtures.FleetNode(0)
		for k, v := range lbls {
			n.Labels[k] = v
		}
		n.Name, n.Labels["kubernetes.io/hostname"] = name, name
		n.Labels[inventory.LabelProduct] = product
		n.Spec.Taints = []corev1.Taint{{Key: inventory.TaintUnreachable, Effect: corev1.TaintEffectNoExecute}}
		return n
	}
	decode := func(n *corev1.Node) *corev1.Node { t.Helper(); return decodeAsTrim(t, trimmer, n) }

	a, b, c := decode(node("a", "NVIDIA-H100-80GB-HBM3")), decode(node("b", "NVIDIA-H100-80GB-HBM3")), decode(node("c", "NVIDIA-A100-SXM4-80GB"))
	if !same(a.Labels, b.Labels) || !same(a.Status.Capacity, b.Status.Capacity) || !same(a.Status.Allocatable, b.Status.Allocatable) || !same(a.Spec.Taints, b.Spec.Taints) {
		t.Error("two nodes with identical kept labels, resources and taints do not share them")
	}
	if same(a.Labels, c.Labels) {
		t.Error("nodes with different products share one label set")
	}
	if !same(a.Status.Capacity, c.Status.Capacity) {
		t.Error("nodes with the same resources but other labels do not share the resource list")
	}

	for i := range maxShared + 10 { // the label table fills and starts over
		decode(node(fmt.Sprintf("n%d", i), fmt.Sprintf("MODEL-%d", i)))
	}
	d, e := decode(node("d", "NVIDIA-H100-80GB-HBM3")), decode(node("e", "NVIDIA-H100-80GB-HBM3"))
	if !same(d.Labels, e.Labels) {
		t.Error("after the table started over, identical label sets are no longer shared")
	}
	if a.Labels[inventory.LabelProduct] != "NVIDIA-H100-80GB-HBM3" || c.Labels[inventory.LabelProduct] != "NVIDIA-A100-SXM4-80GB" {
		t.Error("a node decoded earlier changed when the table started over")
	}
}

// The labels of topology levels that no selector names are kept apart from a GPU node's
// Labels, so that the nodes of one model share their label set across racks; the levels are
// shared by the nodes of one domain, and a change of them is a change of the node.
func TestLevelsAreKeptApart(t *testing.T) {
	const zone, rack, block, clique = "topology.kubernetes.io/zone", "topology.kubernetes.io/rack", "topology.k8s.aws/network-node-layer-1", "nvidia.com/gpu.clique"
	trimmer := NewNodeTrimmer([]string{zone}).KeepLevels([]string{zone, rack, clique})
	node := func(name, r string) *corev1.Node {
		n, lbls := fixtures.FleetNode(0)
		maps.Copy(n.Labels, lbls)
		n.Name, n.Labels["kubernetes.io/hostname"], n.Labels[rack] = name, name, r
		n.Labels[clique] = "uuid.1"
		return n
	}
	decode := func(n *corev1.Node) *corev1.Node { t.Helper(); return decodeAsTrim(t, trimmer, n) }

	a, b, c := decode(node("a", "rack-1")), decode(node("b", "rack-1")), decode(node("c", "rack-2"))
	if _, ok := a.Labels[rack]; ok || Levels(a)[rack] != "rack-1" {
		t.Errorf("rack: Labels %v, Levels %v; want it in Levels only", a.Labels[rack], Levels(a))
	}
	if a.Labels[zone] == "" || Levels(a)[zone] != "" || a.Labels[clique] != "uuid.1" {
		t.Errorf("the zone (a selector's) and the clique (the inventory's) must stay in Labels: Labels %v, Levels %v", a.Labels, Levels(a))
	}
	if _, ok := Levels(a)[block]; ok {
		t.Errorf("a key no level names is kept: %v", Levels(a))
	}
	if !same(a.Labels, c.Labels) || !same(Levels(a), Levels(b)) || same(Levels(a), Levels(c)) {
		t.Error("want one label set for the model across racks and one level set per rack")
	}
	if !trimmer.Keeps(zone) || trimmer.Keeps(rack) || !trimmer.KeepsLevel(rack) || trimmer.KeepsLevel(block) {
		t.Error("Keeps is true of the keys in Labels only, KeepsLevel of those and the levels")
	}
	if !NodeChanged(a, c) || NodeChanged(a, b) {
		t.Error("a node moved to another rack must be a change, and only that")
	}
	cpu, lbls := fixtures.FleetNode(1)
	maps.Copy(cpu.Labels, lbls)
	if got := decode(cpu); got.Annotations != nil {
		t.Errorf("a node that is no GPU node keeps levels %v", got.Annotations)
	}
}

// decodeAsTrim decodes n as protobuf with trimmer, failing t unless it equals Trim of n.
func decodeAsTrim(t *testing.T, trimmer *NodeTrimmer, n *corev1.Node) *corev1.Node {
	t.Helper()
	got := decodeProtobuf(t, trimmer, n)
	want, _ := trimmer.Trim(n)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%s: decoded node differs from Trim (-Trim +decoder):\n%s", n.Name, diff)
	}
	return got
}

// same reports whether two maps or slices are one.
func same(a, b any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// A set that fails to build is not remembered: the next node with the same bytes gets the
// error too, not an empty set.
func TestSharedSetsDoNotKeepFailures(t *testing.T) {
	var sets sharedSets[map[string]string]
	fail := func() (map[string]string, error) { return nil, errors.New("bad quantity") }
	for range 2 {
		if _, err := sets.get([]byte("k"), fail); err == nil {
			t.Fatal("want the build error")
		}
	}
	got, err := sets.get([]byte("k"), func() (map[string]string, error) { return map[string]string{"x": "y"}, nil })
	if err != nil || got["x"] != "y" {
		t.Errorf("get = %v, %v; want the built set", got, err)
	}
}

// Of a node that is no GPU node the cache keeps its name and resourceVersion only: its Ready
// flips and taints change nothing cached, while a node that gains GPU labels is cached whole
// (trimmed), with its Ready condition and taint.
func TestNonGPUNodesKeepOnlyWhatMakesThemSo(t *testing.T) {
	trimmer := NewNodeTrimmer([]string{"topology.kubernetes.io/zone"})
	cached := func(n *corev1.Node) any {
		t.Helper()
		obj, err := cacheForm(decodeProtobuf(t, trimmer, n))
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	cpu, _ := fixtures.FleetNode(1)
	if inventory.IsGPUNode(cpu) {
		t.Fatal("fleet node 1 is expected to be a CPU node")
	}
	cpu.ResourceVersion = "5"
	cpu.Labels["topology.kubernetes.io/zone"] = "zone-a"
	cpu.Spec.Taints = []corev1.Taint{{Key: inventory.TaintUnreachable, Effect: corev1.TaintEffectNoExecute}}
	before := cached(cpu)
	want := &otherNode{kubeproto.Compact{Name: cpu.Name, ResourceVersion: "5"}}
	if diff := cmp.Diff(want, before); diff != "" {
		t.Errorf("CPU node cached as (-want +got):\n%s", diff)
	}
	cpu.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	if after := cached(cpu); !cmp.Equal(before, after) {
		t.Errorf("a CPU node's Ready flip changed its cached form to %+v", after)
	}

	cpu.Labels[inventory.LabelProduct] = "NVIDIA-H100-80GB-HBM3" // GPU Feature Discovery labelled it
	if gpu, ok := cached(cpu).(*corev1.Node); !ok || len(gpu.Status.Conditions) != 1 || len(gpu.Spec.Taints) != 1 {
		t.Errorf("a node that became a GPU node cached as %+v; want the Node with its Ready condition and taint", gpu)
	}
}

// decodeProtobuf encodes n as the API server does and decodes it with trimmer.
func decodeProtobuf(t *testing.T, trimmer *NodeTrimmer, n *corev1.Node) *corev1.Node {
	t.Helper()
	data, err := n.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := trimmer.DecodeNode(data)
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	return got
}

// BenchmarkDecodeNode is the decoder's work for one watch event of a realistic GPU node.
func BenchmarkDecodeNode(b *testing.B) {
	n, lbls := fixtures.FleetNode(2)
	for k, v := range lbls {
		n.Labels[k] = v
	}
	n.ResourceVersion = "123456"
	data, err := n.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	trimmer := NewNodeTrimmer(nil)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		node, err := trimmer.DecodeNode(data)
		if err != nil {
			b.Fatal(err)
		}
		decodedNode = node // kept, as the cache keeps it (else an inlined DecodeNode's node stays on the stack)
	}
}

var decodedNode *corev1.Node

// A managed-cloud node whose only GPU sign is its accelerator label (the device plugin has
// not advertised nvidia.com/gpu yet) is cached whole, with that label.
func TestCloudAcceleratorNodesAreCachedWhole(t *testing.T) {
	trimmer := NewNodeTrimmer(nil)
	for _, label := range []string{inventory.LabelGKEAccelerator, inventory.LabelAWSAccelerator} {
		node, _ := fixtures.FleetNode(1) // a CPU node
		node.Labels[label] = "nvidia-tesla-t4"
		obj, err := cacheForm(decodeProtobuf(t, trimmer, node))
		if err != nil {
			t.Fatal(err)
		}
		if cached, ok := obj.(*corev1.Node); !ok || cached.Labels[label] != "nvidia-tesla-t4" {
			t.Errorf("a node labelled %s cached as %#v; want the Node with the label", label, obj)
		}
	}
}

// Another reader's keep-rules (the plugin's scheduler simulation keeps every taint whole and
// every allocatable resource, or the labels a selector names and the taints that keep pods
// off) decode as they trim.
func TestDecodeNodeEqualsTrimByOtherRules(t *testing.T) {
	added := metav1.Unix(1800000000, 0) // the wire carries whole seconds
	var nodes []*corev1.Node
	for i := range 8 {
		n, lbls := fixtures.FleetNode(i)
		maps.Copy(n.Labels, lbls)
		n.Spec.Taints = []corev1.Taint{{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule},
			{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &added}}
		n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("64")
		nodes = append(nodes, n)
	}
	all := func(string) bool { return true }
	for name, rules := range map[string]Rules{
		"whole": {Label: all, Taint: func(corev1.Taint) bool { return true }, WholeTaints: true, Allocatable: all},
		"stub":  {Label: func(k string) bool { return k == "nvidia.com/gpu.product" }, Taint: KeepsPodsOff, WholeTaints: true},
	} {
		trimmer := NewTrimmer(rules)
		for _, n := range nodes {
			data, err := n.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			got, err := trimmer.DecodeNode(data)
			if err != nil {
				t.Fatalf("%s: %s: %v", name, n.Name, err)
			}
			want := trimmer.TrimNode(n)
			if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("%s: %s (-trimmed +decoded):\n%s", name, n.Name, diff)
			}
		}
	}
}
