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

package saturating_test

import (
	"math"
	"math/big"
	"testing"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

// clamp is the exact result held within [lo, hi].
func clamp(exact *big.Int, lo, hi int64) int64 {
	switch {
	case exact.Cmp(big.NewInt(hi)) > 0:
		return hi
	case exact.Cmp(big.NewInt(lo)) < 0:
		return lo
	}
	return exact.Int64()
}

type op struct {
	name  string
	exact func(z, a, b *big.Int) *big.Int
}

var ops = []op{{"Add", (*big.Int).Add}, {"Sub", (*big.Int).Sub}, {"Mul", (*big.Int).Mul}}

// check compares the three operations on a and b of one type with the exact result clamped.
func check[T saturating.Signed](t *testing.T, a, b T, lo, hi int64) {
	t.Helper()
	got := []T{saturating.Add(a, b), saturating.Sub(a, b), saturating.Mul(a, b)}
	for i, o := range ops {
		want := clamp(o.exact(new(big.Int), big.NewInt(int64(a)), big.NewInt(int64(b))), lo, hi)
		if int64(got[i]) != want {
			t.Errorf("%s[%T](%d, %d) = %d; want %d", o.name, a, a, b, got[i], want)
		}
	}
}

// Every pair of int8s: the exact result, or the bound it passes.
func TestEveryInt8(t *testing.T) {
	for a := math.MinInt8; a <= math.MaxInt8; a++ {
		for b := math.MinInt8; b <= math.MaxInt8; b++ {
			check(t, int8(a), int8(b), math.MinInt8, math.MaxInt8)
		}
	}
}

var edges = []int64{math.MinInt64, math.MinInt64 + 1, math.MinInt32 - 1, math.MinInt32, math.MinInt32 + 1, -3037000500, -3037000499, -65536, -46341, -46340, -2, -1,
	0, 1, 2, 1000, 46340, 46341, 65536, 3037000499, 3037000500, math.MaxInt32 - 1, math.MaxInt32, math.MaxInt32 + 1, math.MaxInt64 - 1, math.MaxInt64}

// The bounds of int32 and int64 and the products around them.
func TestEdges(t *testing.T) {
	for _, a := range edges {
		for _, b := range edges {
			check(t, a, b, math.MinInt64, math.MaxInt64)
			if a == int64(int32(a)) && b == int64(int32(b)) {
				check(t, int32(a), int32(b), math.MinInt32, math.MaxInt32)
			}
		}
	}
}

func FuzzSaturating(f *testing.F) {
	for _, a := range edges {
		f.Add(a, a)
		f.Add(a, -a)
	}
	f.Fuzz(func(t *testing.T, a, b int64) {
		check(t, a, b, math.MinInt64, math.MaxInt64)
		check(t, int32(a), int32(b), math.MinInt32, math.MaxInt32)
	})
}
