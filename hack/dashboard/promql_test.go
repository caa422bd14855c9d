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

package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// selector is a series a PromQL expression reads: its metric name and the labels its
// matchers name.
type selector struct {
	metric string
	labels []string
}

// Words of PromQL that are not metric names: aggregations, set and vector-matching keywords.
var promqlWords = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"inf": true, "nan": true,
}

// Keywords followed by a parenthesised list of label names.
var labelListWords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// The PromQL functions the dashboard may call; another one is likely a typo.
var promqlFunctions = map[string]bool{
	"abs": true, "absent": true, "avg_over_time": true, "ceil": true, "clamp_min": true, "clamp_max": true,
	"delta": true, "floor": true, "increase": true, "label_replace": true, "label_join": true,
	"max_over_time": true, "min_over_time": true, "rate": true, "round": true, "scalar": true,
	"sort": true, "sort_desc": true, "time": true, "timestamp": true, "vector": true,
	"label_values": true, // Grafana's, in a variable's query
}

// selectors lists the series expr reads. It reads the subset of PromQL the dashboard writes
// (no bare {__name__=...} selectors) and Grafana's $variables, and fails on what it cannot read.
func selectors(expr string) ([]selector, error) {
	var out []selector
	r := []rune(expr)
	for i := 0; i < len(r); {
		c := r[i]
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(r, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '[': // a range or subquery: durations and $__rate_interval
			end := slices.Index(r[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("unclosed [ at %d", i)
			}
			i += end + 1
		case c == '{':
			return nil, fmt.Errorf("label matchers without a metric name at %d", i)
		case c == '$': // a Grafana variable: $name or ${name}
			i++
			if i < len(r) && r[i] == '{' {
				i += slices.Index(r[i:], '}') + 1
			} else {
				i = skipWord(r, i)
			}
		case unicode.IsDigit(c) || c == '.':
			for i < len(r) && (unicode.IsLetter(r[i]) || unicode.IsDigit(r[i]) || r[i] == '.') {
				i++
			}
		case isWordStart(c):
			sel, end, err := word(r, i)
			if err != nil {
				return nil, err
			}
			if sel != nil {
				out = append(out, *sel)
			}
			i = end
		default: // operators, parentheses, commas
			i++
		}
	}
	return out, nil
}

// word reads the identifier at i: a keyword, a function, or a metric with its matchers.
func word(r []rune, i int) (*selector, int, error) {
	end := skipWord(r, i)
	name := string(r[i:end])
	next := end
	for next < len(r) && unicode.IsSpace(r[next]) {
		next++
	}
	nextIs := func(c rune) bool { return next < len(r) && r[next] == c }
	switch {
	case labelListWords[name]:
		if nextIs('(') {
			close := slices.Index(r[next:], ')')
			if close < 0 {
				return nil, 0, fmt.Errorf("unclosed label list after %s", name)
			}
			return nil, next + close + 1, nil
		}
		return nil, end, nil
	case promqlWords[name]:
		return nil, end, nil
	case nextIs('('):
		if !promqlFunctions[name] {
			return nil, 0, fmt.Errorf("unknown function %s", name)
		}
		return nil, end, nil
	}
	sel := &selector{metric: name}
	if !nextIs('{') {
		return sel, end, nil
	}
	i = next + 1
	for i < len(r) && r[i] != '}' {
		switch c := r[i]; {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(r, i)
			if err != nil {
				return nil, 0, err
			}
			i = end
		case isWordStart(c):
			end := skipWord(r, i)
			sel.labels = append(sel.labels, string(r[i:end]))
			i = end
		default: // =, !=, =~, !~, commas, spaces
			i++
		}
	}
	if i == len(r) {
		return nil, 0, fmt.Errorf("unclosed { after %s", name)
	}
	return sel, i + 1, nil
}

func isWordStart(c rune) bool { return c == '_' || c == ':' || unicode.IsLetter(c) }

func skipWord(r []rune, i int) int {
	for i < len(r) && (isWordStart(r[i]) || unicode.IsDigit(r[i])) {
		i++
	}
	return i
}

// skipString returns the index after the string literal starting at i.
func skipString(r []rune, i int) (int, error) {
	quote := r[i]
	for j := i + 1; j < len(r); j++ {
		switch {
		case r[j] == '\\' && quote != '`':
			j++
		case r[j] == quote:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unclosed string at %d", i)
}

func TestSelectors(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want string // metric{labels};... as found
	}{
		{`gpu_inventory_gpus`, "gpu_inventory_gpus{}"},
		{`max by (product) (gpu_inventory_free_gpus{inventory="$inventory",product!="<other models>"})`,
			"gpu_inventory_free_gpus{inventory,product}"},
		{`sum(max by (ready) (gpu_inventory_gpus{inventory="$inventory"})) > 0`, "gpu_inventory_gpus{inventory}"},
		{`label_replace(max by (product) (x{a="b, c{d}"}), "product", "any model", "product", "")`, "x{a}"},
		{`(a >= on () group_left () max(b)) and on (product) (c < bool 8)`, "a{};b{};c{}"},
		{`time() - min(gpu_inventory_pending_oldest_timestamp_seconds{inventory=~"$inventory|x"})`,
			"gpu_inventory_pending_oldest_timestamp_seconds{inventory}"},
		{`rate(workqueue_adds_total{name='gpunode'}[$__rate_interval]) * 1e3 offset 5m`, "workqueue_adds_total{name}"},
		{`avg by (modelName) (DCGM_FI_DEV_GPU_UTIL{Hostname=~"${node}"})`, "DCGM_FI_DEV_GPU_UTIL{Hostname}"},
		{`label_values(gpu_inventory_gpus, inventory)`, "gpu_inventory_gpus{};inventory{}"},
	} {
		sels, err := selectors(tc.expr)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		var got []string
		for _, s := range sels {
			got = append(got, s.metric+"{"+strings.Join(s.labels, ",")+"}")
		}
		if strings.Join(got, ";") != tc.want {
			t.Errorf("%s: read %q, want %q", tc.expr, strings.Join(got, ";"), tc.want)
		}
	}
	for _, expr := range []string{`sum(x{a="b)`, `{__name__="x"}`, `summ(x)`, `x{a="b"`, `x[5m`} {
		if sels, err := selectors(expr); err == nil {
			t.Errorf("%s: read %v, want an error", expr, sels)
		}
	}
}
