package controller

import (
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
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// A Node decoded from protobuf by the trimming decoder is exactly what Trim makes of the fully
// decoded Node, for realistic nodes with every field Trim keeps or drops.
func TestDecodeNodeEqualsTrim(t *testing.T) {
	nodes := fixtures.HomeLab()
	for i := range 20 {
		n, lbls := testenv.FleetNode(i)
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
		nodes = append(nodes, n)
	}
	trimmer := NewNodeTrimmer([]string{"topology.kubernetes.io/zone"})
	proto := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	encoder := scheme.Codecs.EncoderForVersion(proto, corev1.SchemeGroupVersion)
	decoder := NewTrimmingSerializer(scheme.Codecs.WithoutConversion(), trimmer).DecoderToVersion(proto, corev1.SchemeGroupVersion)
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
	}
}

// Nodes and NodeLists that arrive as JSON come out trimmed too, exactly as Trim makes them.
func TestTrimmingDecoderTrimsJSONNodes(t *testing.T) {
	trimmer := NewNodeTrimmer(nil)
	js := jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, jsonserializer.SerializerOptions{})
	encoder := scheme.Codecs.EncoderForVersion(js, corev1.SchemeGroupVersion)
	decoder := NewTrimmingSerializer(scheme.Codecs.WithoutConversion(), trimmer).DecoderToVersion(js, corev1.SchemeGroupVersion)
	list := &corev1.NodeList{}
	for i := range 3 {
		n, lbls := testenv.FleetNode(i)
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
	decoder := NewTrimmingSerializer(scheme.Codecs.WithoutConversion(), NewNodeTrimmer(nil)).DecoderToVersion(proto, corev1.SchemeGroupVersion)

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

// Whatever bytes arrive, the decoder returns a node or an error; it never panics.
func FuzzDecodeNode(f *testing.F) {
	proto := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	encoder := scheme.Codecs.EncoderForVersion(proto, corev1.SchemeGroupVersion)
	for i := range 6 {
		n, lbls := testenv.FleetNode(i)
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
	decoder := NewTrimmingSerializer(scheme.Codecs.WithoutConversion(), NewNodeTrimmer(nil)).DecoderToVersion(proto, corev1.SchemeGroupVersion)
	trimmer := NewNodeTrimmer(nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = runtime.Decode(decoder, data)
		_, _ = trimmer.DecodeNode(data)
	})
}
