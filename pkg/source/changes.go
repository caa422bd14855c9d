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

package source

import "k8s.io/client-go/tools/cache"

// Merge is one Changes of several, leaving out nil ones: f is registered with each in the
// order given, and it has synced when every one has. Of none, it never calls f and has
// always synced.
func Merge(sources ...Changes) Changes {
	var m merged
	for _, s := range sources {
		if s != nil {
			m = append(m, s)
		}
	}
	return m
}

type merged []Changes

func (m merged) OnChange(f func(key string)) {
	for _, s := range m {
		s.OnChange(f)
	}
}

func (m merged) HasSynced() bool {
	for _, s := range m {
		if !s.HasSynced() {
			return false
		}
	}
	return true
}

// Only is source (nil: nil) telling only of the keys keep accepts when the change comes.
func Only(source Changes, keep func(key string) bool) Changes {
	if source == nil {
		return nil
	}
	return only{source, keep}
}

type only struct {
	Changes
	keep func(key string) bool
}

func (o only) OnChange(f func(key string)) {
	o.Changes.OnChange(func(key string) {
		if o.keep(key) {
			f(key)
		}
	})
}

// Of is the Changes of an OnChange registration (such as the allocation Tracker's), synced
// when every one of synced is.
func Of(onChange func(f func(key string)), synced ...cache.InformerSynced) Changes {
	return registration{onChange: onChange, synced: synced}
}

type registration struct {
	onChange func(f func(key string))
	synced   []cache.InformerSynced
}

func (r registration) OnChange(f func(key string)) { r.onChange(f) }

func (r registration) HasSynced() bool {
	for _, synced := range r.synced {
		if !synced() {
			return false
		}
	}
	return true
}
