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

package fleet

import (
	"cmp"
	"slices"
	"strings"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

// Totals is, per GPU model, what the members' inventories hold: how many members have it,
// GPUs, Ready and free GPUs, the largest fit on one node and on which member. The most
// GPUs first, at most 64: the smallest models counted together under OtherModels.
func Totals(members []Member) []homelabv1.FleetModel {
	byModel := map[string]*homelabv1.FleetModel{}
	for _, m := range members {
		if m.Inventory == nil {
			continue
		}
		for _, im := range m.Inventory.Status.Models {
			name := clip(modelName(im.Product), 128)
			t := byModel[name]
			if t == nil {
				t = &homelabv1.FleetModel{Model: name}
				byModel[name] = t
			}
			t.Members++
			add(t, homelabv1.FleetModel{Gpus: im.Gpus, ReadyGpus: im.ReadyGpus, FreeGpus: im.FreeGpus,
				LargestFit: im.LargestFit, LargestFitMember: m.Name})
		}
	}
	out := make([]homelabv1.FleetModel, 0, len(byModel))
	for _, t := range byModel {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b homelabv1.FleetModel) int {
		return cmp.Or(cmp.Compare(b.Gpus, a.Gpus), strings.Compare(a.Model, b.Model))
	})
	if len(out) <= maxModels {
		return out
	}
	other := homelabv1.FleetModel{Model: OtherModels}
	for _, t := range out[maxModels-1:] {
		other.Members = max(other.Members, t.Members)
		add(&other, t)
	}
	return append(out[:maxModels-1], other)
}

// add adds b's GPUs to t and keeps the larger fit (the first member's on a tie).
func add(t *homelabv1.FleetModel, b homelabv1.FleetModel) {
	t.Gpus = saturating.Add(t.Gpus, b.Gpus)
	t.ReadyGpus = saturating.Add(t.ReadyGpus, b.ReadyGpus)
	t.FreeGpus = saturating.Add(t.FreeGpus, b.FreeGpus)
	if b.LargestFit > t.LargestFit {
		t.LargestFit, t.LargestFitMember = b.LargestFit, b.LargestFitMember
	}
}
