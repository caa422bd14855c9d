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

package printer

import (
	"testing"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

func TestSummaryPlurals(t *testing.T) {
	got := Summary(homelabv1.GpuInventoryStatus{TotalGpuNodes: 1, ReadyGpuNodes: 1, TotalGpus: 8, ReadyGpus: 8})
	if want := "1 GPU node, 1 ready; 8 GPUs, 8 ready"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
}
