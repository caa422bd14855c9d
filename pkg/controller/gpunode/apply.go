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

package gpunode

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// applyBody is the server-side apply request of the whole record of a node as this
// controller owns it: no labels, the identity hash annotation, the Node as owner (so that
// the garbage collector deletes the record with the node) and the spec. Empty fields are
// left out (every optional field of the spec is omitempty), so that an apply removes what
// this manager set before and the identity no longer has.
func applyBody(node *corev1.Node, spec homelabv1.GpuNodeSpec, hash string) ([]byte, error) {
	body, err := json.Marshal(&homelabv1.GpuNode{
		TypeMeta: metav1.TypeMeta{APIVersion: homelabv1.SchemeGroupVersion.String(), Kind: "GpuNode"},
		ObjectMeta: metav1.ObjectMeta{Name: node.Name,
			Annotations:     map[string]string{homelabv1.IdentityHashAnnotation: hash},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}},
		Spec: spec,
	})
	if err != nil {
		return nil, fmt.Errorf("encode GpuNode %s: %w", node.Name, err)
	}
	return body, nil
}
