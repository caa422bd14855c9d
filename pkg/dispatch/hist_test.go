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

package dispatch

import (
	"slices"
	"testing"
)

func TestPlaceIsBestFit(t *testing.T) {
	cases := []struct {
		name       string
		h          hist
		pods       int64
		gpus       int
		wantPlaced int64
		wantLeft   int64
		wantAfter  hist
	}{
		{"the smallest node that takes a pod", hist{0, 0, 0, 0, 1, 0, 0, 0, 1}, 1, 4, 1, 0, hist{0, 0, 0, 0, 0, 0, 0, 0, 1}},
		{"a node takes as many pods as it holds", hist{0, 0, 0, 0, 0, 0, 0, 0, 2}, 3, 2, 3, 2, hist{0, 0, 1, 0, 0, 0, 0, 0, 1}},
		{"a full node keeps its remainder", hist{0, 0, 0, 0, 0, 0, 0, 3}, 3, 2, 3, 1, hist{0, 1, 0, 0, 0, 0, 0, 2}},
		{"two pods of 8 need two nodes with 8", hist{0, 0, 0, 0, 3, 0, 0, 0, 1}, 2, 8, 1, 0, hist{0, 0, 0, 0, 3, 0, 0, 0, 1}},
		{"a pod larger than the count's cap", hist{0, 1, 1}, 1, 3, 0, 0, hist{0, 1, 1}},
		{"no pods", hist{0, 1}, 0, 1, 0, 0, hist{0, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := c.h.clone()
			placed, left, _ := h.place(c.pods, c.gpus)
			if placed != c.wantPlaced || left != c.wantLeft {
				t.Errorf("placed %d leaving %d free, want %d leaving %d", placed, left, c.wantPlaced, c.wantLeft)
			}
			if !slices.Equal(h, c.wantAfter) {
				t.Errorf("after: %v, want %v", h, c.wantAfter)
			}
		})
	}
}

// Placing pods one by one on the node with the fewest free that takes them, as fit -f does,
// gives what the bulk placement gives.
func TestPlaceMatchesOneByOne(t *testing.T) {
	for seed := range 200 {
		h := hist{0, 0, 0, 0, 0, 0, 0, 0, 0}
		for k := 1; k < len(h); k++ {
			h[k] = int32((seed*7 + k*13) % 4)
		}
		g := 1 + seed%5
		pods := int64(1 + seed%11)
		want := h.clone()
		var wantPlaced int64
		for range pods {
			k := g
			for k < len(want) && want[k] == 0 {
				k++
			}
			if k == len(want) {
				break
			}
			want[k]--
			want.add(k-g, 1)
			wantPlaced++
		}
		got := h.clone()
		placed, _, _ := got.place(pods, g)
		if placed != wantPlaced {
			t.Fatalf("%v: %d pods of %d: placed %d, one by one %d", h, pods, g, placed, wantPlaced)
		}
		if placed == pods && !slices.Equal(got, want) {
			t.Fatalf("%v: %d pods of %d: left %v, one by one %v", h, pods, g, got, want)
		}
	}
}

func TestApplyFollowsMovesAcrossCaps(t *testing.T) {
	model := hist{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1} // one node with 20 free
	model.apply([]move{{from: 16, used: 8, count: 1}})                           // a domain counted it as 16
	if model[12] != 1 || model[20] != 0 {
		t.Errorf("after a pod of 8: %v, want the node at 12 free", model)
	}
}

func TestHistString(t *testing.T) {
	if got, want := (hist{0, 1, 0, 0, 3, 0, 0, 0, 2}).String(), "2 with 8, 3 with 4, 1 with 1 free"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := (hist{0}).String(), "no node has a free GPU"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
