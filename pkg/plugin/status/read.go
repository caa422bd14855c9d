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

package status

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
)

// readStatus reads the inventory name, failing with what to do when it cannot be read or
// the operator has written no status into it yet.
func readStatus(ctx context.Context, c *factory.Factory, name string) (*homelabv1.GpuInventory, error) {
	gpu, err := c.GPU()
	if err != nil {
		return nil, err
	}
	gi, err := gpu.GpuInventories().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, c.Explain(err, factory.GetInventory(name))
	}
	if gi.Status.InventoryHash == "" && gi.Status.ObservedAt == nil {
		return nil, fmt.Errorf("GpuInventory %q has no status yet: is the operator running?", name)
	}
	return gi, nil
}
