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

package inventory

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
)

// Malformed MIG labels give the same warnings in the same order on every parse, so the
// entry's hash does not change while the node does not.
func TestMalformedMIGLabelsParseTheSameEveryTime(t *testing.T) {
	node := fixtures.HomeLab()[0]
	node.Labels[LabelMIGStrategy] = "mixed"
	for i := range 20 {
		node.Labels[fmt.Sprintf("nvidia.com/mig-%dg.10gb.count", i)] = "abc"
		node.Labels[fmt.Sprintf("nvidia.com/mig-%dg.10gb.memory", i)] = "1.5"
	}
	first, _ := Compute([]*corev1.Node{node}, nil, t1)
	for range 50 {
		again, _ := Compute([]*corev1.Node{node}, nil, t1)
		if again.Hash != first.Hash {
			t.Fatalf("the same node parsed twice: warnings %q, then %q", first.Nodes[0].Warnings, again.Nodes[0].Warnings)
		}
	}
}
