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
	"encoding/json"
	"fmt"
	"path"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// Serves reports whether the API server serves resource in group version gv, asking on c
// (a REST client of any group version). A server without the group version answers
// NotFound: false, with no error. Other errors are returned.
func Serves(ctx context.Context, c rest.Interface, gv schema.GroupVersion, resource string) (bool, error) {
	resources, err := Resources(ctx, c, gv)
	for _, r := range resources {
		if r.Name == resource {
			return true, nil
		}
	}
	return false, err
}

// Resources are the resources the API server serves in group version gv (subresources as
// "name/subresource"), asked on c (a REST client of any group version): none, with no error,
// when it does not serve gv.
func Resources(ctx context.Context, c rest.Interface, gv schema.GroupVersion) ([]metav1.APIResource, error) {
	p := path.Join("/apis", gv.Group, gv.Version)
	if gv.Group == "" {
		p = path.Join("/api", gv.Version)
	}
	body, err := c.Get().AbsPath(p).SetHeader("Accept", "application/json").Do(ctx).Raw()
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("discover %s: %w", gv, err)
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("discover %s: decode the resource list: %w", gv, err)
	}
	return list.APIResources, nil
}
