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
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
)

// IsGFDLabel reports whether GPU Feature Discovery writes a label: every nvidia.com/ label
// but the ones NFD and the GPU Operator write (gpu.present, gpu.deploy.*, the upgrade state).
func IsGFDLabel(key string) bool {
	return strings.HasPrefix(key, "nvidia.com/") && key != "nvidia.com/gpu.present" &&
		!strings.HasPrefix(key, "nvidia.com/gpu.deploy.") && key != "nvidia.com/gpu-driver-upgrade-state"
}

// SetGFDLabels removes (present=false) or puts back GPU Feature Discovery's labels on fleet
// node i, as deleting and re-creating GFD's DaemonSet does.
func SetGFDLabels(ctx context.Context, kube kubernetes.Interface, i int, present bool) error {
	_, fleetLabels := fixtures.FleetNode(i)
	labels := map[string]any{}
	for k, v := range fleetLabels {
		if IsGFDLabel(k) {
			if present {
				labels[k] = v
			} else {
				labels[k] = nil
			}
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	name := fixtures.FleetNodeName(i)
	if _, err := kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "gpu-feature-discovery"}); err != nil {
		return fmt.Errorf("set GFD labels of node %s present=%t: %w", name, present, err)
	}
	return nil
}
