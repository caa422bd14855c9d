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

package quotacache

import (
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// FlavorLabelKeys lists the node label keys Kueue's ResourceFlavors select by, so that the
// node cache keeps them from its first list on (rather than re-listing once a flavor names
// one). None, and no error, where Kueue is not served.
func FlavorLabelKeys(ctx context.Context, config *rest.Config) ([]string, error) {
	client, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	for _, version := range versions {
		gvr := schema.GroupVersionResource{Group: Group, Version: version, Resource: "resourceflavors"}
		list, err := client.Resource(gvr).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var keys []string
		for i := range list.Items {
			for key := range flavorOf(&list.Items[i]).NodeLabels {
				keys = append(keys, key)
			}
		}
		slices.Sort(keys)
		return slices.Compact(keys), nil
	}
	return nil, nil
}
