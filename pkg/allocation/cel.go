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

package allocation

import "strings"

// maxCELLength bounds the selector text CELProduct reads (the API server allows 10 KiB).
const maxCELLength = 64 << 10

// CELProduct is the productName a DRA CEL selector requires of gpu.nvidia.com devices:
// the string compared with device.attributes["gpu.nvidia.com"].productName by ==, in either
// operand order, alone or as one operand of &&. It is "" when the selector requires no single
// product: none compared, several different ones, or an expression with ||, ! or ?: (where
// the comparison may not be required). It reads the text only; it does not evaluate CEL.
func CELProduct(expr string) string {
	if len(expr) > maxCELLength {
		return ""
	}
	toks, ok := celTokens(expr)
	if !ok {
		return ""
	}
	for _, t := range toks {
		if t.kind == tokPunct && (t.text == "||" || t.text == "!" || t.text == "?") {
			return ""
		}
	}
	product := ""
	for i := range toks {
		end, ok := productRef(toks, i)
		if !ok {
			continue
		}
		var value string
		switch {
		// ref == "value"
		case end+1 < len(toks) && toks[end].isPunct("==") && toks[end+1].kind == tokString &&
			conjBoundaryBefore(toks, i) && conjBoundaryAfter(toks, end+2):
			value = toks[end+1].text
		// "value" == ref
		case i >= 2 && toks[i-1].isPunct("==") && toks[i-2].kind == tokString &&
			conjBoundaryBefore(toks, i-2) && conjBoundaryAfter(toks, end):
			value = toks[i-2].text
		default:
			continue
		}
		if product != "" && value != product {
			return ""
		}
		product = value
	}
	return product
}

// productRef matches device.attributes["gpu.nvidia.com"].productName (or
// ["productName"]) starting at toks[i]; end is the index after it.
func productRef(toks []celToken, i int) (end int, ok bool) {
	want := []func(celToken) bool{
		func(t celToken) bool { return t.kind == tokIdent && t.text == "device" },
		func(t celToken) bool { return t.isPunct(".") },
		func(t celToken) bool { return t.kind == tokIdent && t.text == "attributes" },
		func(t celToken) bool { return t.isPunct("[") },
		func(t celToken) bool { return t.kind == tokString && t.text == DRADriver },
		func(t celToken) bool { return t.isPunct("]") },
	}
	if i+len(want) > len(toks) {
		return 0, false
	}
	for k, f := range want {
		if !f(toks[i+k]) {
			return 0, false
		}
	}
	j := i + len(want)
	switch {
	case j+1 < len(toks) && toks[j].isPunct(".") && toks[j+1].kind == tokIdent && toks[j+1].text == "productName":
		return j + 2, true
	case j+2 < len(toks) && toks[j].isPunct("[") && toks[j+1].kind == tokString && toks[j+1].text == "productName" && toks[j+2].isPunct("]"):
		return j + 3, true
	}
	return 0, false
}

// conjBoundaryBefore reports whether the operand starting at toks[i] begins a conjunct.
func conjBoundaryBefore(toks []celToken, i int) bool {
	return i == 0 || toks[i-1].isPunct("&&") || toks[i-1].isPunct("(")
}

// conjBoundaryAfter reports whether the operand ending before toks[i] ends a conjunct.
func conjBoundaryAfter(toks []celToken, i int) bool {
	return i == len(toks) || toks[i].isPunct("&&") || toks[i].isPunct(")")
}

type tokKind uint8

const (
	tokIdent  tokKind = iota // identifiers and numbers
	tokString                // a string literal, text unquoted
	tokPunct
)

type celToken struct {
	kind tokKind
	text string
}

func (t celToken) isPunct(s string) bool { return t.kind == tokPunct && t.text == s }

// celTokens splits a CEL expression into tokens; false on an unterminated string or an
// escape it does not decode.
func celTokens(s string) ([]celToken, bool) {
	var toks []celToken
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '/' && i+1 < len(s) && s[i+1] == '/':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case isQuote(c) || (c == 'r' || c == 'R' || c == 'b' || c == 'B') && i+1 < len(s) && (isQuote(s[i+1]) || isRawBytesPrefix(s[i:])):
			text, next, ok := celString(s, i)
			if !ok {
				return nil, false
			}
			toks = append(toks, celToken{kind: tokString, text: text})
			i = next
		case isIdentByte(c):
			j := i
			for j < len(s) && isIdentByte(s[j]) {
				j++
			}
			toks = append(toks, celToken{kind: tokIdent, text: s[i:j]})
			i = j
		default:
			if i+1 < len(s) {
				switch two := s[i : i+2]; two {
				case "==", "!=", "&&", "||", "<=", ">=":
					toks = append(toks, celToken{kind: tokPunct, text: two})
					i += 2
					continue
				}
			}
			toks = append(toks, celToken{kind: tokPunct, text: s[i : i+1]})
			i++
		}
	}
	return toks, true
}

func isQuote(c byte) bool { return c == '"' || c == '\'' }

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// isRawBytesPrefix reports whether s starts with a two-letter string prefix (rb, br, ...)
// followed by a quote.
func isRawBytesPrefix(s string) bool {
	if len(s) < 3 || !isQuote(s[2]) {
		return false
	}
	p := strings.ToLower(s[:2])
	return p == "rb" || p == "br"
}

// celString reads the string literal at s[i:] (optional r/b prefixes, single, double or
// triple quotes) and returns its value and the index after it.
func celString(s string, i int) (string, int, bool) {
	raw := false
	for i < len(s) && !isQuote(s[i]) {
		if s[i] == 'r' || s[i] == 'R' {
			raw = true
		}
		i++
	}
	if i >= len(s) {
		return "", 0, false
	}
	delim := s[i : i+1]
	if strings.HasPrefix(s[i:], strings.Repeat(delim, 3)) {
		delim = strings.Repeat(delim, 3)
	}
	i += len(delim)
	var b strings.Builder
	for i < len(s) {
		if strings.HasPrefix(s[i:], delim) {
			return b.String(), i + len(delim), true
		}
		c := s[i]
		if len(delim) == 1 && (c == '\n' || c == '\r') {
			return "", 0, false
		}
		if c != '\\' || raw {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			return "", 0, false
		}
		switch e := s[i+1]; e {
		case '\\', '"', '\'', '`', '?':
			b.WriteByte(e)
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		default:
			// Numeric and unicode escapes never appear in product names.
			return "", 0, false
		}
		i += 2
	}
	return "", 0, false
}
