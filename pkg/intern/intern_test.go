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

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"
)

// Equal strings come back as one copy, and that copy does not change with the bytes it was
// read from.
func TestInternSharesOneCopy(t *testing.T) {
	var table Strings
	buf := []byte("nvidia.com/gpu.product")
	view := unsafe.String(&buf[0], len(buf))
	first := table.Intern(view)
	second := table.Intern(strings.Clone("nvidia.com/gpu.product"))
	if unsafe.StringData(first) != unsafe.StringData(second) {
		t.Error("two equal strings were given two copies")
	}
	if unsafe.StringData(first) == &buf[0] {
		t.Error("the table keeps the caller's bytes")
	}
	copy(buf, "xxxxxx")
	if first != "nvidia.com/gpu.product" || !table.holds("nvidia.com/gpu.product") {
		t.Errorf("the kept string changed with the bytes it was read from: %q", first)
	}
	if table.Intern("") != "" {
		t.Error("the empty string changed")
	}
}

// Ever-new values cannot grow a table past its bound, and a long string is returned as a
// copy without being kept.
func TestInternIsBounded(t *testing.T) {
	var table Strings
	for i := range 100_000 { // 6 MB of distinct values
		if s := fmt.Sprintf("%063d", i); table.Intern(s) != s {
			t.Fatalf("value %d changed", i)
		}
		if got := table.Bytes(); got > MaxBytes {
			t.Fatalf("the table holds %d bytes; want at most %d", got, MaxBytes)
		}
	}
	buf := []byte(strings.Repeat("x", MaxString+1))
	view := unsafe.String(&buf[0], len(buf))
	long := table.Intern(view)
	if table.holds(long) {
		t.Error("a string longer than MaxString was kept")
	}
	if unsafe.StringData(long) == &buf[0] {
		t.Error("a long string was returned as the caller's view, not a copy")
	}
}

func BenchmarkIntern(b *testing.B) {
	var table Strings
	keys := []byte("nvidia.com/gpu.productnvidia.com/gpu.count")
	for b.Loop() {
		table.Intern(unsafe.String(&keys[0], 22))
		table.Intern(unsafe.String(&keys[22], 20))
	}
}
