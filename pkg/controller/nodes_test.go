package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

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

// A node that comes alone (a watch event) is cached as a Node when it is a GPU node and as
// its name and resourceVersion otherwise; the lister and the event handlers see only the
// Nodes, and a node that stops being a GPU node reaches the handlers once.
func TestNodeCacheKeepsOtherNodesAsMetadata(t *testing.T) {
	proto := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	encoder := scheme.Codecs.EncoderForVersion(proto, corev1.SchemeGroupVersion)
	decoder := NewTrimmingSerializer(scheme.Codecs.WithoutConversion(), NewNodeTrimmer([]string{"topology.kubernetes.io/zone"})).
		DecoderToVersion(proto, corev1.SchemeGroupVersion)
	decode := func(n *corev1.Node) runtime.Object {
		t.Helper()
		data, err := runtime.Encode(encoder, n)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := runtime.Decode(decoder, data)
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	gpuNode, gpuLabels := testenv.FleetNode(0)
	for k, v := range gpuLabels {
		gpuNode.Labels[k] = v
	}
	cpuNode, _ := testenv.FleetNode(1)
	gpuNode.ResourceVersion, cpuNode.ResourceVersion = "10", "11"

	gpu, ok := decode(gpuNode).(*corev1.Node)
	if !ok || gpu.Name != gpuNode.Name {
		t.Fatalf("GPU node cached as %#v; want a Node", gpu)
	}
	cpu := decode(cpuNode)
	want := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: cpuNode.Name, ResourceVersion: "11"}}
	if diff := cmp.Diff(want, cpu); diff != "" {
		t.Errorf("CPU node cached as (-want +got):\n%s", diff)
	}

	informer := cache.NewSharedIndexInformer(nil, nil, 0, cache.Indexers{})
	for _, obj := range []any{gpu, cpu} {
		if err := informer.GetIndexer().Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	listed, err := NewNodeLister(informer).List(labels.Everything())
	if err != nil || len(listed) != 1 || listed[0] != gpu {
		t.Errorf("NodeLister.List = %v, %v; want only the GPU node", listed, err)
	}

	var calls [][2]any
	handler := NodeHandler(inventory.NewEntryCache(), func(old, cur any) { calls = append(calls, [2]any{old, cur}) })
	cpuNode.ResourceVersion = "12" // a heartbeat
	handler.OnUpdate(cpu, decode(cpuNode))
	if len(calls) != 0 {
		t.Errorf("an update of a node that is no GPU node reached the handler: %v", calls)
	}
	gpuNode.ResourceVersion = "13"
	for k := range gpuLabels {
		delete(gpuNode.Labels, k) // every GPU label gone, and no GPU capacity
	}
	delete(gpuNode.Status.Capacity, inventory.ResourceGPU)
	lost := decode(gpuNode)
	if _, isNode := lost.(*corev1.Node); isNode {
		t.Fatalf("a node without any GPU sign is cached as a Node: %+v", lost)
	}
	handler.OnUpdate(gpu, lost)
	if len(calls) != 1 || calls[0][0] != gpu || calls[0][1] != lost {
		t.Errorf("a GPU node that lost its GPU signs reached the handler as %v; want once, old and new", calls)
	}
}
