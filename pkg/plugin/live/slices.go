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

package live

import (
	"context"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
)

// Slices returns the ResourceSlices' client, in protobuf.
func sliceLister(c *factory.Factory) (factory.Lister[*resourcev1.ResourceSliceList], error) {
	resource, err := c.Resource()
	if err != nil {
		return nil, err
	}
	return kubeclient.ResourceSlices(resource), nil
}

// deviceFacts reads every gpu.nvidia.com ResourceSlice, chunkSize at a time, and returns what
// each node's slices say. Without the API (a cluster before 1.34, or DRA off) or the
// permission to list slices, it returns no facts and a note saying so.
func deviceFacts(ctx context.Context, slices factory.Lister[*resourcev1.ResourceSliceList], chunkSize int64) (inventory.Devices, string, error) {
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector(resourcev1.ResourceSliceSelectorDriver, inventory.DRADriver).String(), Limit: chunkSize}
	byNode := map[string][]*resourcev1.ResourceSlice{}
	for {
		list, err := slices.List(ctx, opts)
		switch {
		case apierrors.IsNotFound(err):
			return nil, "", nil // no DRA on this cluster
		case apierrors.IsForbidden(err):
			return nil, "cannot list resourceslices (forbidden): nodes are read from their labels only", nil
		case err != nil:
			return nil, "", fmt.Errorf("list ResourceSlices: %w", err)
		}
		for i := range list.Items {
			s := &list.Items[i]
			if s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
				byNode[*s.Spec.NodeName] = append(byNode[*s.Spec.NodeName], s)
			}
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	facts := make(map[string]*inventory.DeviceFacts, len(byNode))
	for node, s := range byNode {
		facts[node] = inventory.DeviceFactsOf(s)
	}
	return func(node string) *inventory.DeviceFacts { return facts[node] }, "", nil
}
