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

package simulate

import (
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/slicecache"
)

// slicing is what a question needs of each ResourceSlice: whole, a slice of a candidate
// node or of no one node (network-attached, or a node per device), the only ones the
// allocator and FreeDevices read for a candidate; of the others only the newest generation
// of the kept slices' pools (FreeDevices counts a pool's newest generation only).
type slicing struct {
	candidates map[string]bool
	kept       []*resourcev1.ResourceSlice
	others     map[pool]*resourcev1.ResourceSlice // a stub per pool, of its newest generation
}

type pool struct{ driver, name string }

func (s *slicing) keeps(sl *resourcev1.ResourceSlice) bool {
	return sl.Spec.NodeName == nil || s.candidates[*sl.Spec.NodeName]
}

// add adds a slice as read: whole when kept, else as its pool's stub.
func (s *slicing) add(sl *resourcev1.ResourceSlice) {
	if s.keeps(sl) {
		sl.ManagedFields = nil
		s.kept = append(s.kept, sl)
		return
	}
	key := pool{sl.Spec.Driver, sl.Spec.Pool.Name}
	if o := s.others[key]; o == nil || o.Spec.Pool.Generation < sl.Spec.Pool.Generation {
		if s.others == nil {
			s.others = map[pool]*resourcev1.ResourceSlice{}
		}
		s.others[key] = capacity.StubSlice(sl)
	}
}

// slices are the kept slices, and the stubs of their pools' other slices.
func (s *slicing) slices() []*resourcev1.ResourceSlice {
	out := s.kept
	for _, sl := range s.kept {
		key := pool{sl.Spec.Driver, sl.Spec.Pool.Name}
		if o := s.others[key]; o != nil {
			out = append(out, o)
			delete(s.others, key)
		}
	}
	return out
}

// decode decodes a protobuf ResourceSlice: first where it is (the slice cache's header
// decoder), then the whole of a kept one. The devices of the others are skipped unread.
func (s *slicing) decode(b []byte) (*resourcev1.ResourceSlice, error) {
	sl, err := slicecache.DecodeSliceHeader(b)
	if err != nil || !s.keeps(sl) {
		return sl, err
	}
	sl = &resourcev1.ResourceSlice{}
	return sl, sl.Unmarshal(b)
}
