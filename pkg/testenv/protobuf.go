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
	"bytes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// ProtobufNodeList encodes nodes as the API server answers a protobuf list request, with
// the continue token cont.
func ProtobufNodeList(nodes []*corev1.Node, cont string) ([]byte, error) {
	list := &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: cont}}
	for _, n := range nodes {
		list.Items = append(list.Items, *n)
	}
	encoder := scheme.Codecs.EncoderForVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), corev1.SchemeGroupVersion)
	var buf bytes.Buffer
	if err := encoder.Encode(list, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
