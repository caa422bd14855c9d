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

package gang

import (
	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
)

// prefilter rejects, without running the scheduler's filters, the nodes where
// NodeResourcesFit must fail: a resource the node has and the pod asks more of than is left,
// or no pod left. It never rejects a node the filters would accept (a resource the node's
// allocatable lacks may be served by DRA, so it is left to the filters), so the nodes it
// passes go through Snapshot.Fit as before and only the answer's cost changes.
type prefilter struct {
	s     *capacity.Snapshot
	nodes map[string]*room
	pods  map[int]requests // by template: the scheduled resources the pod asks for
}

// room is what is left on a node: pods, and the resources its allocatable has.
type room struct {
	pods int64
	left requests
}

func newPrefilter(s *capacity.Snapshot) *prefilter {
	return &prefilter{s: s, nodes: map[string]*room{}, pods: map[int]requests{}}
}

func (f *prefilter) room(node string) *room {
	if r := f.nodes[node]; r != nil {
		return r
	}
	count, used := f.s.Requested(node)
	a := f.s.Node(node).Status.Allocatable
	r := &room{pods: a.Pods().Value() - count, left: requests{}}
	for name, q := range a {
		if v := value(name, q); v > 0 && capacity.ScheduledResource(name) {
			r.left[name] = v - used[name]
		}
	}
	f.nodes[node] = r
	return r
}

func (f *prefilter) need(m member) requests {
	if n := f.pods[m.template]; n != nil {
		return n
	}
	n := requests{}
	for name, q := range capacity.Requests(m.pod) {
		if v := value(name, q); v > 0 && capacity.ScheduledResource(name) {
			n[name] = v
		}
	}
	f.pods[m.template] = n
	return n
}

// mayFit is false when NodeResourcesFit must reject the pod on the node.
func (f *prefilter) mayFit(node string, m member) bool {
	r := f.room(node)
	if r.pods < 1 {
		return false
	}
	for name, want := range f.need(m) {
		if left, ok := r.left[name]; ok && want > left {
			return false
		}
	}
	return true
}

// assume takes (sign 1) or gives back (-1) a gang pod's requests on the node.
func (f *prefilter) assume(node string, m member, sign int64) {
	r := f.room(node)
	r.pods -= sign
	for name, want := range f.need(m) {
		if _, ok := r.left[name]; ok {
			r.left[name] -= sign * want
		}
	}
}
