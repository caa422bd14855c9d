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

package gpuinventory

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// The index finds exactly the inventories whose selector matches, for every selector shape.
func TestSelectorIndexFindsWhatMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"pool", "zone", "nvidia.com/gpu.present", "rack"}
	values := []string{"a", "b", "c", "1", "7"}
	ops := []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn,
		metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}
	randomSelector := func() *metav1.LabelSelector {
		if rng.IntN(8) == 0 {
			return nil // every node
		}
		ls := &metav1.LabelSelector{}
		for range rng.IntN(3) {
			ls.MatchLabels = map[string]string{keys[rng.IntN(len(keys))]: values[rng.IntN(len(values))]}
		}
		for range rng.IntN(3) {
			r := metav1.LabelSelectorRequirement{Key: keys[rng.IntN(len(keys))], Operator: ops[rng.IntN(len(ops))]}
			if r.Operator == metav1.LabelSelectorOpIn || r.Operator == metav1.LabelSelectorOpNotIn {
				r.Values = []string{values[rng.IntN(len(values))], values[rng.IntN(len(values))]}
			}
			ls.MatchExpressions = append(ls.MatchExpressions, r)
		}
		return ls
	}
	randomLabels := func() labels.Set {
		set := labels.Set{}
		for _, k := range keys {
			if rng.IntN(2) == 0 {
				set[k] = values[rng.IntN(len(values))]
			}
		}
		return set
	}

	s := newSelectors()
	inventories := map[string]*homelabv1.GpuInventory{}
	for i := range 200 {
		gi := &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("inv-%d", i), Generation: 1}}
		gi.Spec.NodeSelector = randomSelector()
		inventories[gi.Name] = gi
		if _, err := s.get(gi); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 300 {
		// Specs change and inventories go, as they do in a cluster.
		name := fmt.Sprintf("inv-%d", rng.IntN(200))
		if gi, ok := inventories[name]; ok && round%3 == 0 {
			if rng.IntN(4) == 0 {
				s.forget(cache.MetaObjectToName(gi))
				delete(inventories, name)
			} else {
				gi.Spec.NodeSelector = randomSelector()
				gi.Generation++
				if _, err := s.get(gi); err != nil {
					t.Fatal(err)
				}
			}
		}
		sets := []labels.Set{randomLabels()}
		if rng.IntN(2) == 0 {
			sets = append(sets, randomLabels()) // an update: the node before and after
		}
		var want []string
		for _, gi := range inventories {
			sel, _ := s.get(gi)
			for _, set := range sets {
				if sel.Matches(set) {
					want = append(want, gi.Name)
					break
				}
			}
		}
		var got []string
		for _, key := range s.matching(sets) {
			got = append(got, key.Name)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d, labels %v: index found %v, want %v", round, sets, got, want)
		}
	}
}

// A node event looks only at the inventories that may select it, not at every inventory.
func TestSelectorIndexChecksOnlyCandidates(t *testing.T) {
	s := newSelectors()
	for i := range 1000 {
		gi := &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("rack-%d", i), Generation: 1}}
		gi.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"rack": fmt.Sprint(i)},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "cordoned", Operator: metav1.LabelSelectorOpDoesNotExist}}}
		if _, err := s.get(gi); err != nil {
			t.Fatal(err)
		}
	}
	if s.rest.Len() != 0 || len(s.byValue["rack"]) != 1000 {
		t.Fatalf("%d selectors always checked, %d indexed by rack; want 0 and 1000", s.rest.Len(), len(s.byValue["rack"]))
	}
	got := s.matching([]labels.Set{{"rack": "7", "zone": "a"}})
	if len(got) != 1 || got[0].Name != "rack-7" {
		t.Errorf("a node in rack 7 matched %v, want rack-7", got)
	}
}
