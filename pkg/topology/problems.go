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

package topology

import (
	"fmt"
	"strings"
)

// ProblemKind names what a level's labels get wrong.
type ProblemKind string

const (
	// NoNodeCarries: no node has the level's label, so the tree is empty.
	NoNodeCarries ProblemKind = "NoNodeCarries"
	// MissingLabel: some nodes lack the level's label and belong to no domain.
	MissingLabel ProblemKind = "MissingLabel"
	// NotNested: a value of the level lies under two domains of the level above. Kueue
	// sees two domains, kube-scheduler (which groups nodes by one label's value) one.
	NotNested ProblemKind = "NotNested"
	// DistinctPerNode: every node has its own value, so every domain is one node and no
	// gang of two nodes fits in one.
	DistinctPerNode ProblemKind = "DistinctPerNode"
)

// Problem is one thing a level's labels get wrong, with exact totals and a few examples.
type Problem struct {
	Kind  ProblemKind
	Level string
	// Count is how many nodes (NoNodeCarries, MissingLabel, DistinctPerNode) or values
	// (NotNested) it concerns.
	Count    int
	Examples []string
	Message  string
}

// perNodeKeys are labels every node is expected to have its own value of.
var perNodeKeys = map[string]bool{Hostname: true, GKEHost: true}

// problems finds what the levels' labels get wrong.
func (b *builder) problems() []Problem {
	var out []Problem
	placed := make([]int, len(b.levels)) // per level: the nodes in one of its domains
	for _, d := range b.depth {
		for l := 0; l <= int(d); l++ {
			placed[l]++
		}
	}
	where := "belong to no domain"
	if b.partial {
		where = "count only in the levels above"
	}
	for l, key := range b.levels {
		switch {
		case len(b.nodes) > 0 && b.missing[l] == len(b.nodes):
			out = append(out, Problem{Kind: NoNodeCarries, Level: key, Count: len(b.nodes),
				Message: fmt.Sprintf("topology level %q: none of the %d nodes carries this label", key, len(b.nodes))})
		case b.missing[l] > 0:
			out = append(out, Problem{Kind: MissingLabel, Level: key, Count: b.missing[l], Examples: b.examples[l],
				Message: fmt.Sprintf("topology level %q: %d of %d nodes lack this label and %s (%s)",
					key, b.missing[l], len(b.nodes), where, examples(b.examples[l], b.missing[l]))})
		}
		values := map[string]int{}
		var split []string
		splitCount := 0
		for d := range b.doms[l] {
			v := b.doms[l][d].Value
			values[v]++
			if values[v] == 2 {
				splitCount++
				if len(split) < maxExamples {
					split = append(split, b.splitExample(l, v))
				}
			}
		}
		if splitCount > 0 {
			out = append(out, Problem{Kind: NotNested, Level: key, Count: splitCount, Examples: split,
				Message: fmt.Sprintf("topology level %q does not nest in %q: %d values lie in more than one domain above (%s)",
					key, b.levels[l-1], splitCount, examples(split, splitCount))})
		}
		if placed[l] >= 2 && len(values) == placed[l] && !perNodeKeys[key] {
			out = append(out, Problem{Kind: DistinctPerNode, Level: key, Count: placed[l],
				Message: fmt.Sprintf("topology level %q has a distinct value on each of its %d nodes: every domain is one node", key, placed[l])})
		}
	}
	return out
}

// splitExample names a value of level l and the first two domains above holding it.
func (b *builder) splitExample(l int, value string) string {
	var parents []string
	for d := range b.doms[l] {
		if b.doms[l][d].Value == value {
			parents = append(parents, fmt.Sprintf("%q", b.doms[l-1][b.doms[l][d].Parent].Value))
			if len(parents) == 2 {
				break
			}
		}
	}
	return fmt.Sprintf("%q in %s", value, strings.Join(parents, " and "))
}

// examples lists a few of total names.
func examples(names []string, total int) string {
	s := "e.g. " + strings.Join(names, ", ")
	if total > len(names) {
		s += fmt.Sprintf(" and %d more", total-len(names))
	}
	return s
}
