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

package gpuinventory

import (
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// selectors caches each inventory's parsed node selector for its spec generation, and
// indexes the selectors by one of their requirements, so that a node event finds the
// inventories that may select the node without matching every selector.
type selectors struct {
	mu     sync.Mutex
	byName map[cache.ObjectName]parsedSelector
	// Each valid selector is in exactly one of these, under its anchor: a requirement that
	// any node it matches must satisfy.
	byValue map[string]map[string]sets.Set[cache.ObjectName] // key=value and key in (values)
	byKey   map[string]sets.Set[cache.ObjectName]            // key exists
	rest    sets.Set[cache.ObjectName]                       // no such requirement: always checked
}

type parsedSelector struct {
	generation int64
	selector   labels.Selector
	err        error
	anchor     anchor
}

// anchor is the requirement a selector is indexed under; no key: the rest set.
type anchor struct {
	key    string
	values []string // nil: the key's existence
}

func newSelectors() *selectors {
	return &selectors{
		byName:  map[cache.ObjectName]parsedSelector{},
		byValue: map[string]map[string]sets.Set[cache.ObjectName]{},
		byKey:   map[string]sets.Set[cache.ObjectName]{},
		rest:    sets.New[cache.ObjectName](),
	}
}

// get returns gi's selector, parsing and indexing it only when its spec changed.
func (s *selectors) get(gi *homelabv1.GpuInventory) (labels.Selector, error) {
	key := cache.MetaObjectToName(gi)
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.byName[key]; ok && p.generation == gi.Generation {
		return p.selector, p.err
	}
	s.unindexLocked(key)
	sel, err := inventory.Selector(gi.Spec.NodeSelector)
	p := parsedSelector{generation: gi.Generation, selector: sel, err: err}
	if err == nil {
		p.anchor = anchorOf(sel)
		s.indexLocked(key, p.anchor)
	}
	s.byName[key] = p
	return sel, err
}

// anchorOf picks the requirement that narrows a node event's candidates most: an equality or
// a set of values before a bare key.
func anchorOf(sel labels.Selector) anchor {
	reqs, selectable := sel.Requirements()
	if !selectable {
		return anchor{}
	}
	best := anchor{}
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			values := r.Values().UnsortedList()
			if best.key == "" || best.values == nil || len(values) < len(best.values) {
				best = anchor{key: r.Key(), values: values}
			}
		case selection.Exists, selection.GreaterThan, selection.LessThan:
			if best.key == "" {
				best = anchor{key: r.Key()}
			}
		}
	}
	return best
}

func (s *selectors) indexLocked(name cache.ObjectName, a anchor) {
	switch {
	case a.key == "":
		s.rest.Insert(name)
	case a.values == nil:
		if s.byKey[a.key] == nil {
			s.byKey[a.key] = sets.New[cache.ObjectName]()
		}
		s.byKey[a.key].Insert(name)
	default:
		if s.byValue[a.key] == nil {
			s.byValue[a.key] = map[string]sets.Set[cache.ObjectName]{}
		}
		for _, v := range a.values {
			if s.byValue[a.key][v] == nil {
				s.byValue[a.key][v] = sets.New[cache.ObjectName]()
			}
			s.byValue[a.key][v].Insert(name)
		}
	}
}

func (s *selectors) unindexLocked(name cache.ObjectName) {
	p, ok := s.byName[name]
	if !ok || p.err != nil {
		return
	}
	a := p.anchor
	switch {
	case a.key == "":
		s.rest.Delete(name)
	case a.values == nil:
		s.byKey[a.key].Delete(name)
		if s.byKey[a.key].Len() == 0 {
			delete(s.byKey, a.key)
		}
	default:
		for _, v := range a.values {
			s.byValue[a.key][v].Delete(name)
			if s.byValue[a.key][v].Len() == 0 {
				delete(s.byValue[a.key], v)
			}
		}
		if len(s.byValue[a.key]) == 0 {
			delete(s.byValue, a.key)
		}
	}
}

// matching returns the inventories whose selector matches any of the label sets.
func (s *selectors) matching(labelSets []labels.Set) []cache.ObjectName {
	s.mu.Lock()
	defer s.mu.Unlock()
	var found []cache.ObjectName
	seen := sets.New[cache.ObjectName]() // checked already
	try := func(candidates sets.Set[cache.ObjectName]) {
		for name := range candidates {
			if seen.Has(name) {
				continue
			}
			seen.Insert(name)
			sel := s.byName[name].selector
			for _, set := range labelSets {
				if sel.Matches(set) {
					found = append(found, name)
					break
				}
			}
		}
	}
	try(s.rest)
	for _, set := range labelSets {
		for k, v := range set {
			if byValue, ok := s.byValue[k]; ok {
				try(byValue[v])
			}
			try(s.byKey[k])
		}
	}
	return found
}

func (s *selectors) forget(key cache.ObjectName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unindexLocked(key)
	delete(s.byName, key)
}
