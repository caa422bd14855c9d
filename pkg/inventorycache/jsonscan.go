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

package inventorycache

import (
	"bytes"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// A structural JSON scanner: it finds where values begin and end without decoding them, so
// that the large parts of an object can be cut out before the real decoder runs. It checks
// only what it needs to find the ends (brackets, strings); the decoder checks the rest of
// whatever it is given.

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index past the string whose opening quote is at data[i].
func skipString(data []byte, i int) (int, bool) {
	open := i
	for i++; i < len(data); i++ {
		q := bytes.IndexByte(data[i:], '"')
		if q < 0 {
			return 0, false
		}
		i += q
		if !escaped(data, open, i) {
			return i + 1, true
		}
	}
	return 0, false
}

// escaped reports whether the quote at data[i] follows an odd number of backslashes (after
// data[from]).
func escaped(data []byte, from, i int) bool {
	n := 0
	for j := i - 1; j > from && data[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

// skipValue returns the index past the value that starts at data[i].
func skipValue(data []byte, i int) (int, bool) {
	if i >= len(data) {
		return 0, false
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for ; i < len(data); i++ {
			switch data[i] {
			case '"':
				end, ok := skipString(data, i)
				if !ok {
					return 0, false
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1, true
				}
			}
		}
		return 0, false
	default: // a number or a literal: up to the next delimiter
		start := i
		for ; i < len(data); i++ {
			switch data[i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return i, i > start
			}
		}
		return i, i > start
	}
}

// members calls fn with the raw key (quotes removed, escapes kept) and the value's span of
// each member of the object that starts at data[i], and returns the index past the object.
func members(data []byte, i int, fn func(key []byte, start, end int)) (int, bool) {
	if i >= len(data) || data[i] != '{' {
		return 0, false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return i + 1, true
	}
	for i < len(data) {
		if data[i] != '"' {
			return 0, false
		}
		keyEnd, ok := skipString(data, i)
		if !ok {
			return 0, false
		}
		key := data[i+1 : keyEnd-1]
		i = skipSpace(data, keyEnd)
		if i >= len(data) || data[i] != ':' {
			return 0, false
		}
		start := skipSpace(data, i+1)
		end, ok := skipValue(data, start)
		if !ok {
			return 0, false
		}
		fn(key, start, end)
		i = skipSpace(data, end)
		if i >= len(data) {
			return 0, false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
	return 0, false
}

// elements calls fn with the span of each element of the array that starts at data[i].
func elements(data []byte, i int, fn func(start, end int)) bool {
	if i >= len(data) || data[i] != '[' {
		return false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return true
	}
	for i < len(data) {
		end, ok := skipValue(data, i)
		if !ok {
			return false
		}
		fn(i, end)
		i = skipSpace(data, end)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case ']':
			return true
		default:
			return false
		}
	}
	return false
}

// span is a part of a document: [start, end).
type span struct{ start, end int }

// nodeLists returns the spans of the values of status.nodes and status.topology in the
// object at data[i], and with items also in each element of its items array (a list).
func nodeLists(data []byte, i int, items bool, out []span) ([]span, bool) {
	ok := true
	_, whole := members(data, i, func(key []byte, start, end int) {
		switch {
		case string(key) == "status" && data[start] == '{':
			_, found := members(data, start, func(key []byte, start, end int) {
				if string(key) == "nodes" || string(key) == "topology" {
					out = append(out, span{start, end})
				}
			})
			ok = ok && found
		case items && string(key) == "items" && data[start] == '[':
			ok = ok && elements(data, start, func(start, _ int) {
				var found bool
				out, found = nodeLists(data, start, false, out)
				ok = ok && found
			})
		}
	})
	return out, ok && whole
}

// cutNodeLists returns data with every value of status.nodes and status.topology (also in
// items[*] with items) replaced by null, or false when data is not a well-formed JSON object.
func cutNodeLists(data []byte, items bool) ([]byte, bool) {
	start := skipSpace(data, 0)
	cuts, ok := nodeLists(data, start, items, nil)
	if !ok {
		return nil, false
	}
	if len(cuts) == 0 {
		return data, true
	}
	out := make([]byte, 0, len(data)-cuts[0].end+cuts[0].start+8*len(cuts))
	at := 0
	for _, c := range cuts {
		out = append(out, data[at:c.start]...)
		out = append(out, "null"...)
		at = c.end
	}
	return append(out, data[at:]...), true
}

// watchEvent reads a JSON watch event, {"type":"...","object":...}, and returns its type and
// its object's bytes (which alias data), or false for anything else.
func watchEvent(data []byte) (typ string, object []byte, ok bool) {
	var typeSpan, objectSpan span
	seen := 0
	end, whole := members(data, skipSpace(data, 0), func(key []byte, start, end int) {
		seen++
		switch string(key) {
		case "type":
			typeSpan = span{start, end}
		case "object":
			objectSpan = span{start, end}
		}
	})
	if !whole || seen != 2 || skipSpace(data, end) != len(data) || typeSpan.end == 0 || objectSpan.end == 0 {
		return "", nil, false
	}
	quoted := data[typeSpan.start:typeSpan.end]
	if len(quoted) < 2 || quoted[0] != '"' {
		return "", nil, false
	}
	for _, b := range quoted[1 : len(quoted)-1] {
		if b == '\\' || b < 0x20 || b >= 0x80 { // left to the decoder: escapes, UTF-8
			return "", nil, false
		}
	}
	return kubeproto.EventType(quoted[1 : len(quoted)-1]), data[objectSpan.start:objectSpan.end], true
}
