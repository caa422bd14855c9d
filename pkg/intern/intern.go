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

// Package intern hands out one copy of the short strings that cached objects repeat
// (label keys and values, namespaces, node names, models, device names), so that a cache
// of thousands of objects holds each of them once.
package intern

import (
	"strings"
	"sync"
)

// Bounds of a table, so that ever-new values cannot grow it forever: a full table starts
// over (objects keep the strings they have; what none uses any more is freed).
const (
	MaxBytes  = 1 << 20 // the strings with their table's overhead
	Overhead  = 64      // a table entry besides the string's bytes
	MaxString = 256     // longer strings are not kept
)

// Strings is a bounded table of shared strings, safe for concurrent use. The zero value is
// an empty table.
type Strings struct {
	mu    sync.Mutex
	table map[string]string
	bytes int
}

// Intern returns the one copy of s. s may be a view of bytes that change later: what is
// kept, and a string too long to keep, is returned as a copy.
func (t *Strings) Intern(s string) string {
	if s == "" {
		return ""
	}
	if len(s) > MaxString {
		return strings.Clone(s)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if kept, ok := t.table[s]; ok {
		return kept
	}
	cost := len(s) + Overhead
	if t.table == nil || t.bytes+cost > MaxBytes {
		t.table, t.bytes = map[string]string{}, 0
	}
	s = strings.Clone(s)
	t.table[s] = s
	t.bytes += cost
	return s
}

// Bytes is what the table's strings cost now, their entries' overhead included.
func (t *Strings) Bytes() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bytes
}

// holds reports whether the table keeps s.
func (t *Strings) holds(s string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.table[s]
	return ok
}
