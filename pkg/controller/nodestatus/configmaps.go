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

package nodestatus

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
)

// ConfigMapListWatcher lists and watches the ConfigMaps of one namespace:
// kubeclient.ConfigMaps, or a clientset's CoreV1().ConfigMaps(namespace).
type ConfigMapListWatcher interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.ConfigMapList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// NewConfigMapSource is the informer of NewConfigMapInformer as a source.
func NewConfigMapSource(client ConfigMapListWatcher, name string) *source.InformerSource {
	return source.FromInformer("configmap", NewConfigMapInformer(client, name))
}

// NewConfigMapInformer returns the informer of the controller's ConfigMap: client's
// ConfigMaps limited to the one named name by a field selector, without resync, indexed by
// namespace. Run it with RunWithContext.
func NewConfigMapInformer(client ConfigMapListWatcher, name string) cache.SharedIndexInformer {
	only := func(opts *metav1.ListOptions) {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
	return cache.NewSharedIndexInformerWithOptions(kubeclient.ListWatch[*corev1.ConfigMapList](client, only), &corev1.ConfigMap{},
		cache.SharedIndexInformerOptions{Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}})
}
