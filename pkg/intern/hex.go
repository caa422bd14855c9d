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

package intern

import "strings"

// An ID in a fixed spelling of hex digits (a UUID, a hash) packed two digits to a byte is a
// third of its string and its header, and needs no table: caches keep such IDs packed.

const hexDigits = "0123456789abcdef"

// PackHex packs the digits of s into dst, two to a byte, if s is spelled as layout (an 'x'
// is a lower-case hex digit, anything else is itself): only then does UnpackHex give s back
// exactly. dst holds at least half of layout's x's, rounded up.
func PackHex(layout, s string, dst []byte) bool {
	if len(s) != len(layout) {
		return false
	}
	n := 0
	for i := range len(s) {
		if layout[i] != 'x' {
			if s[i] != layout[i] {
				return false
			}
			continue
		}
		v := strings.IndexByte(hexDigits, s[i])
		if v < 0 {
			return false
		}
		if n%2 == 0 {
			dst[n/2] = byte(v) << 4
		} else {
			dst[n/2] |= byte(v)
		}
		n++
	}
	return true
}

// UnpackHex is the string of layout that PackHex packed into digits.
func UnpackHex(layout string, digits []byte) string {
	var buf [64]byte
	b := buf[:0]
	if len(layout) > len(buf) {
		b = make([]byte, 0, len(layout))
	}
	n := 0
	for i := range len(layout) {
		if layout[i] != 'x' {
			b = append(b, layout[i])
			continue
		}
		v := digits[n/2]
		if n%2 == 0 {
			v >>= 4
		}
		b = append(b, hexDigits[v&0xf])
		n++
	}
	return string(b)
}
