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
	"io"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// MaxNodeBytes bounds one Node's message in a stream: far above any Node etcd stores, far
// below what a claimed size from a broken or hostile server could make the reader allocate.
const MaxNodeBytes = 64 << 20

// nodeList reads node lists one Node at a time.
var nodeList = kubeproto.List{Resource: "nodes", MaxItemBytes: MaxNodeBytes}

// DecodeNodeStream reads a protobuf NodeList response one Node at a time: it hands each
// Node's message to decode (NodeTrimmer.DecodeNode, the operator's informer decoder, which
// reads only what the inventory needs and skips images, addresses, managed fields and the
// other labels unread) and the result to visit. At most one Node's bytes are held at a time.
// It returns the list's metadata (for the continue token) and how many nodes it read.
func DecodeNodeStream(r io.Reader, decode func([]byte) (*corev1.Node, error), visit func(*corev1.Node)) (metav1.ListMeta, int, error) {
	count := 0
	meta, err := nodeList.Read(r, kubeproto.Decoded("node", decode, func(node *corev1.Node) error {
		count++
		visit(node)
		return nil
	}))
	return meta, count, err
}
