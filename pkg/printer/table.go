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

package printer

import (
	"io"
	"unicode/utf8"
)

// ANSI colours, used only when the caller asks for colour (a terminal, NO_COLOR unset).
const (
	red    = "\x1b[31m"
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	bold   = "\x1b[1m"
	reset  = "\x1b[0m"
)

// cell is a table cell: its text, and the same text with colour codes (empty: no colour).
type cell struct {
	text   string
	styled string
}

func plain(s string) cell { return cell{text: s} }

// colored is a cell in one colour.
func colored(s, code string) cell {
	if s == "" || code == "" {
		return cell{text: s}
	}
	return cell{text: s, styled: code + s + reset}
}

// table aligns columns like text/tabwriter (two spaces between columns, the last column not
// padded), but measures the text without its colour codes so that coloured tables stay
// aligned.
type table struct {
	rows [][]cell
}

func (t *table) header(names ...string) {
	row := make([]cell, len(names))
	for i, n := range names {
		row[i] = cell{text: n}
	}
	t.rows = append(t.rows, row)
}

func (t *table) row(cells ...cell) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer, color bool) error {
	var widths []int
	size := 0
	for _, r := range t.rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c.text))
			size += len(c.styled) + len(c.text)
		}
	}
	for _, width := range widths {
		size += (width + 2) * len(t.rows)
	}
	// One buffer for the whole table: a fleet's node table has thousands of rows.
	out := make([]byte, 0, size+len(t.rows))
	for _, r := range t.rows {
		start := len(out)
		for i, c := range r {
			text := c.text
			if color && c.styled != "" {
				text = c.styled
			}
			out = append(out, text...)
			if i < len(r)-1 {
				for pad := widths[i] - utf8.RuneCountInString(c.text) + 2; pad > 0; pad-- {
					out = append(out, ' ')
				}
			}
		}
		for len(out) > start && out[len(out)-1] == ' ' {
			out = out[:len(out)-1]
		}
		out = append(out, '\n')
	}
	_, err := w.Write(out)
	return err
}
