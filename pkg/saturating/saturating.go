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

// Package saturating is integer arithmetic that stops at its type's bounds instead of
// wrapping: counts read from objects (labels, quantities, quotas) can be absurd, and a total
// must then stay the largest, never turn negative.
package saturating

import "unsafe"

// Signed is the integers the arithmetic takes.
type Signed interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64
}

// Add is a + b, held within T's bounds.
func Add[T Signed](a, b T) T {
	if s := a + b; (s > a) == (b > 0) {
		return s
	}
	return bound[T](b > 0)
}

// Sub is a - b, held within T's bounds.
func Sub[T Signed](a, b T) T {
	if s := a - b; (s < a) == (b > 0) {
		return s
	}
	return bound[T](b < 0)
}

// Mul is a * b, held within T's bounds.
func Mul[T Signed](a, b T) T {
	p := a * b
	if b == 0 || p/b == a && (b != -1 || a >= 0 || p >= 0) { // min * -1 wraps to min, and divides back
		return p
	}
	return bound[T]((a > 0) == (b > 0))
}

// bound is T's largest value (upper) or its smallest.
func bound[T Signed](upper bool) T {
	var zero T
	smallest := T(1) << (8*unsafe.Sizeof(zero) - 1)
	if upper {
		return ^smallest
	}
	return smallest
}
