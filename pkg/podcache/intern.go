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

package podcache

import (
	"slices"
	"sync"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/intern"
)

// maxRequests bounds the table of shared requests: a full table starts over (kept pods
// keep theirs).
const maxRequests = 4096

// interner hands out one copy of the strings that repeat across pods (namespaces, node
// names, resource names, models) and of the requests most pods make (one GPU resource).
type interner struct {
	strings intern.Strings

	mu       sync.Mutex
	requests map[allocation.ResourceCount][]allocation.ResourceCount
}

// interned is the table DecodePod interns into, shared by every decoder of the process.
var interned = &interner{}

// intern returns the one copy of s; s may be a view of bytes that change later (it is
// copied when kept).
func (t *interner) intern(s string) string { return t.strings.Intern(s) }

// requestsOf returns the one copy of requests of a single resource (N whole GPUs, one MIG
// profile: most pods), else rs. Kept pods never modify their requests, so they may share
// them. The resource's name must be interned already.
func (t *interner) requestsOf(rs []allocation.ResourceCount) []allocation.ResourceCount {
	if len(rs) != 1 {
		return rs
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if kept, ok := t.requests[rs[0]]; ok {
		return kept
	}
	if t.requests == nil || len(t.requests) >= maxRequests {
		t.requests = map[allocation.ResourceCount][]allocation.ResourceCount{}
	}
	rs = slices.Clip(rs)
	t.requests[rs[0]] = rs
	return rs
}

// internPod makes p share the strings that repeat across pods (p decoded from JSON).
func internPod(p *allocation.Pod) {
	p.Namespace, p.Node, p.Model = interned.intern(p.Namespace), interned.intern(p.Node), interned.intern(p.Model)
	for i := range p.Requests {
		p.Requests[i].Name = resourceName(p.Requests[i].Name)
	}
	p.Requests = interned.requestsOf(p.Requests)
}

// resourceName returns a GPU resource's name: the constant for the two plain ones, else
// the interned copy.
func resourceName(s string) string {
	switch s {
	case allocation.ResourceGPU:
		return allocation.ResourceGPU
	case allocation.ResourceGPUShared:
		return allocation.ResourceGPUShared
	}
	return interned.intern(s)
}
