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
	"cmp"
	"slices"
	"strings"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

// Bounds of a model's free-GPU histogram and taint counts.
const (
	MaxFreeNodes  = 32 // the most free GPUs a node counts with in freeNodes
	MaxModelTaint = 8  // taints listed per model
)

// freeCounter counts a model's schedulable nodes by their free whole GPUs, and their taints.
type freeCounter struct {
	free   []int32
	taints map[string]int32
}

// add counts an entry: its free GPUs (freeGpus is 0 on a node no pod can land on) and, on
// a node a pod can land on, its taints.
func (c *freeCounter) add(e *homelabv1.GpuNodeEntry) {
	if e.FreeGpus > 0 {
		k := int(min(e.FreeGpus, MaxFreeNodes))
		for len(c.free) < k {
			c.free = append(c.free, 0)
		}
		c.free[k-1] = saturating.Add(c.free[k-1], 1)
	}
	if !e.Ready || slices.Contains(e.Conditions, NodeCordoned) {
		return
	}
	for _, t := range e.Taints {
		c.count(t, 1)
	}
}

// merge adds another model's counts.
func (c *freeCounter) merge(free []int32, taints []homelabv1.TaintCount) {
	for len(c.free) < len(free) {
		c.free = append(c.free, 0)
	}
	for k, n := range free {
		c.free[k] = saturating.Add(c.free[k], n)
	}
	for _, t := range taints {
		c.count(t.Taint, t.Nodes)
	}
}

func (c *freeCounter) count(taint string, n int32) {
	if c.taints == nil {
		c.taints = map[string]int32{}
	}
	c.taints[taint] = saturating.Add(c.taints[taint], n)
}

// result is the histogram and the most common taints, nil where there are none.
func (c *freeCounter) result() ([]int32, []homelabv1.TaintCount) {
	var taints []homelabv1.TaintCount
	for t, n := range c.taints {
		taints = append(taints, homelabv1.TaintCount{Taint: t, Nodes: n})
	}
	slices.SortFunc(taints, func(a, b homelabv1.TaintCount) int {
		return cmp.Or(cmp.Compare(b.Nodes, a.Nodes), strings.Compare(a.Taint, b.Taint))
	})
	if len(taints) > MaxModelTaint {
		taints = taints[:MaxModelTaint]
	}
	return slices.Clone(c.free), taints
}
