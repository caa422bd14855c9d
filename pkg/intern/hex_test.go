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

import "testing"

func TestPackHexRoundTrips(t *testing.T) {
	const uuid = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
	for _, tc := range []struct {
		layout, s string
		packed    bool
	}{
		{uuid, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", true},
		{uuid, "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0", false}, // upper case would not come back
		{uuid, "0f1e2d3c4b5a69788796a5b4c3d2e1f0", false},
		{uuid, "uid-dgx-1", false},
		{"xxx", "abc", true}, // an odd count of digits
		{"GPU-xxxx", "GPU-00ff", true},
		{"GPU-xxxx", "MIG-00ff", false},
	} {
		var digits [16]byte
		if got := PackHex(tc.layout, tc.s, digits[:]); got != tc.packed {
			t.Errorf("PackHex(%q, %q) = %t, want %t", tc.layout, tc.s, got, tc.packed)
			continue
		}
		if tc.packed {
			if back := UnpackHex(tc.layout, digits[:]); back != tc.s {
				t.Errorf("UnpackHex(%q) = %q, want %q", tc.layout, back, tc.s)
			}
		}
	}
}

func FuzzPackHex(f *testing.F) {
	f.Add("xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
	f.Add("xx:x", "ab:c")
	f.Fuzz(func(t *testing.T, layout, s string) {
		digits := make([]byte, (len(layout)+1)/2)
		if PackHex(layout, s, digits) && UnpackHex(layout, digits) != s {
			t.Errorf("%q packed as %q comes back as %q", s, layout, UnpackHex(layout, digits))
		}
	})
}
