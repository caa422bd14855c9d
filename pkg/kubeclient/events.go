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

package kubeclient

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// EventSink writes an event broadcaster's Events (record.EventSink) on a core/v1 client, each
// in its own namespace, as client-go's typed EventSinkImpl does.
type EventSink struct{ Client rest.Interface }

// Create creates event.
func (s EventSink) Create(event *corev1.Event) (*corev1.Event, error) {
	return Events(s.Client, event.Namespace).Create(context.TODO(), event, metav1.CreateOptions{})
}

// Update replaces event.
func (s EventSink) Update(event *corev1.Event) (*corev1.Event, error) {
	return Events(s.Client, event.Namespace).Update(context.TODO(), event, metav1.UpdateOptions{})
}

// Patch applies a strategic merge patch to event.
func (s EventSink) Patch(event *corev1.Event, data []byte) (*corev1.Event, error) {
	return Events(s.Client, event.Namespace).Patch(context.TODO(), event.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
}
