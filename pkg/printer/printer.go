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

// Package printer renders a GpuInventory's status for people: what `kubectl gpuinv` and
// `make demo` print.
package printer

import (
	"fmt"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Unlabeled stands for a product that no label names.
const Unlabeled = "<unlabeled>"

// Summary is one line with the totals, e.g. "4 GPU nodes, 0 ready; 1 GPU, 0 ready".
func Summary(s homelabv1.GpuInventoryStatus) string {
	return fmt.Sprintf("%d GPU %s, %d ready; %d %s, %d ready",
		s.TotalGpuNodes, plural(int(s.TotalGpuNodes), "node", "nodes"), s.ReadyGpuNodes,
		s.TotalGpus, plural(int(s.TotalGpus), "GPU", "GPUs"), s.ReadyGpus)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// count64 is count of an int64.
func count64(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
