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

// Package prototest is the cache tests' fake API server and encoder: protobuf lists and
// watches of the k8s.io/api types, as kube-apiserver sends them. Only tests import it.
//
// A test serves the resources it reads, stores what the server starts with, points the code
// under test at Config and changes what is stored:
//
//	server := prototest.NewServer(t, prototest.Options{}, prototest.Pods)
//	server.Set(pod)                          // stored, no event
//	c, err := podcache.New(server.Config(), tracker, podcache.Options{})
//	server.Apply(watch.Modified, changedPod) // an event to every open watch
//	server.Expire()                          // 410 Gone to every open watch
//
// EncodeList encodes a list as one page of the API server's answer, for decoder tests.
package prototest

import (
	"bytes"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// Resource is a collection the server serves: its items' kind and the plural in its path.
type Resource struct {
	schema.GroupVersionKind // of one item
	Name                    string
	Namespaced              bool
}

// The resources the caches read.
var (
	Pods           = Resource{corev1.SchemeGroupVersion.WithKind("Pod"), "pods", true}
	Nodes          = Resource{corev1.SchemeGroupVersion.WithKind("Node"), "nodes", false}
	Namespaces     = Resource{corev1.SchemeGroupVersion.WithKind("Namespace"), "namespaces", false}
	ConfigMaps     = Resource{corev1.SchemeGroupVersion.WithKind("ConfigMap"), "configmaps", true}
	ResourceClaims = Resource{resourcev1.SchemeGroupVersion.WithKind("ResourceClaim"), "resourceclaims", true}
	ResourceSlices = Resource{resourcev1.SchemeGroupVersion.WithKind("ResourceSlice"), "resourceslices", false}
)

// Path is the path of the resource's list in namespace ("" for all namespaces, or for a
// cluster-scoped resource).
func (r Resource) Path(namespace string) string {
	prefix := "/apis/" + r.GroupVersion().String()
	if r.Group == "" {
		prefix = "/api/" + r.Version
	}
	if namespace == "" {
		return prefix + "/" + r.Name
	}
	return prefix + "/namespaces/" + namespace + "/" + r.Name
}

// EncodeList encodes items as one list, as the API server answers a protobuf list request:
// ProtobufMagic, then a runtime.Unknown holding the list's apiVersion, kind and message.
// It fails t if the items are not of a k8s.io/api kind.
func EncodeList[T any, PT interface {
	*T
	runtime.Object
}](t testing.TB, listMeta metav1.ListMeta, items ...PT) []byte {
	t.Helper()
	objs := make([]runtime.Object, len(items))
	for i, item := range items {
		objs[i] = item
	}
	gvk, err := kindOf(PT(new(T)))
	if err == nil {
		var data []byte
		if data, err = encodeList(gvk, listMeta, objs, false); err == nil {
			return data
		}
	}
	t.Fatalf("encode a list of %T: %v", items, err)
	return nil
}

// Encode encodes obj (one object, a list or a Status) as the API server answers a protobuf
// request; it fails t if obj is not of a k8s.io/api kind.
func Encode(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	data, err := encode(obj, false)
	if err != nil {
		t.Fatalf("encode %T: %v", obj, err)
	}
	return data
}

// kindOf is obj's kind in the client-go scheme.
func kindOf(obj runtime.Object) (schema.GroupVersionKind, error) {
	kinds, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	return kinds[0], nil
}

// encodeList builds the list of items' kind gvk and encodes it.
func encodeList(gvk schema.GroupVersionKind, listMeta metav1.ListMeta, items []runtime.Object, json bool) ([]byte, error) {
	list, err := scheme.Scheme.New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err != nil {
		return nil, err
	}
	if err := meta.SetList(list, items); err != nil {
		return nil, err
	}
	accessor, err := meta.ListAccessor(list)
	if err != nil {
		return nil, err
	}
	accessor.SetResourceVersion(listMeta.ResourceVersion)
	accessor.SetContinue(listMeta.Continue)
	accessor.SetRemainingItemCount(listMeta.RemainingItemCount)
	return encode(list, json)
}

// encode encodes obj in protobuf, or in JSON, at its kind's group version.
func encode(obj runtime.Object, json bool) ([]byte, error) {
	gvk, err := kindOf(obj)
	if err != nil {
		return nil, err
	}
	var serializer runtime.Serializer = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	if json {
		serializer = jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, jsonserializer.SerializerOptions{})
	}
	var buf bytes.Buffer
	if err := scheme.Codecs.EncoderForVersion(serializer, gvk.GroupVersion()).Encode(obj, &buf); err != nil {
		return nil, fmt.Errorf("encode %s: %w", gvk.Kind, err)
	}
	return buf.Bytes(), nil
}
