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

package kubeproto

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Bounds of a quantity's string that Quantity and every other reader of quantities parse:
// ParseQuantity's work grows with the power of ten a string names (a long fraction or a large
// exponent), without limit.
const (
	maxQuantityBytes  = 64
	maxExponentDigits = 3
	quantityString    = 1 // resource.Quantity.string
)

// ErrAbsurdQuantity: a quantity's string is beyond the bounds Quantity parses.
var ErrAbsurdQuantity = errors.New("absurd quantity")

// Quantity decodes a resource.Quantity message into q as its Unmarshal does (every string
// parsed, the last kept; without one q is left as it is), refusing strings beyond the bounds
// instead of parsing them.
func Quantity(b []byte, q *resource.Quantity) error {
	m := NewMessage(b)
	for m.Next() {
		if m.Tag() != Bytes(quantityString) {
			continue
		}
		v := m.Value()
		if AbsurdQuantity(v) {
			return fmt.Errorf("%w of %d bytes", ErrAbsurdQuantity, len(v))
		}
		parsed, err := resource.ParseQuantity(string(v))
		if err != nil {
			return err
		}
		*q = parsed
	}
	return m.Err()
}

// AbsurdQuantity reports whether a quantity's string is beyond the bounds this project
// parses: longer than maxQuantityBytes, or with more than maxExponentDigits digits after its
// exponent's e. Whoever parses a quantity string from the API asks it first.
func AbsurdQuantity[S string | []byte](s S) bool {
	if len(s) > maxQuantityBytes {
		return true
	}
	digits := -1 // of the exponent, once an e or E is seen
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == 'e' || c == 'E':
			digits = 0
		case digits >= 0 && c >= '0' && c <= '9':
			digits++
		}
	}
	return digits > maxExponentDigits
}
