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
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CreateNodes creates nodes with their status as given: the API server keeps .status on
// create, so NotReady conditions and GPU capacity need no kubelet.
func CreateNodes(ctx context.Context, kube kubernetes.Interface, nodes []*corev1.Node) error {
	for _, n := range nodes {
		n = n.DeepCopy()
		n.ResourceVersion = ""
		if _, err := kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{FieldManager: "kubelet"}); err != nil {
			return fmt.Errorf("create node %s: %w", n.Name, err)
		}
	}
	return nil
}
