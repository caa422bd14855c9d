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

package plugin

import (
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
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

// decode decodes a protobuf ResourceSlice: first where it is, then the whole of a kept one.
// The devices of the others are skipped unread.
func (s *slicing) decode(b []byte) (*resourcev1.ResourceSlice, error) {
	sl, err := readSliceHeader(b)
	if err != nil || !s.keeps(sl) {
		return sl, err
	}
	sl = &resourcev1.ResourceSlice{}
	return sl, sl.Unmarshal(b)
}

// Field numbers of the ResourceSlice messages (k8s.io/api/resource/v1/generated.proto),
// part of the API's compatibility guarantee.
const (
	sliceMetadata  = 1
	sliceSpec      = 2
	specDriver     = 1
	specPool       = 2
	specNodeName   = 3
	poolName       = 1
	poolGeneration = 2
	poolSlices     = 3
)

// readSliceHeader reads a slice's name, driver, pool and node name.
func readSliceHeader(b []byte) (*resourcev1.ResourceSlice, error) {
	sl := &resourcev1.ResourceSlice{}
	var meta kubeproto.ObjectMeta
	m := kubeproto.NewMessage(b)
	for m.Next() {
		var err error
		switch m.Tag() {
		case kubeproto.Bytes(sliceMetadata):
			err = kubeproto.ReadObjectMeta(m.Value(), nil, &meta)
		case kubeproto.Bytes(sliceSpec):
			err = readSliceSpec(m.Value(), &sl.Spec)
		}
		if err != nil {
			return nil, err
		}
	}
	sl.ObjectMeta = metav1.ObjectMeta{Name: string(meta.Name)}
	return sl, m.Err()
}

func readSliceSpec(b []byte, spec *resourcev1.ResourceSliceSpec) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case kubeproto.Bytes(specDriver):
			spec.Driver = string(m.Value())
		case kubeproto.Bytes(specNodeName):
			spec.NodeName = ptr.To(string(m.Value()))
		case kubeproto.Bytes(specPool):
			p := kubeproto.NewMessage(m.Value())
			for p.Next() {
				switch p.Tag() {
				case kubeproto.Bytes(poolName):
					spec.Pool.Name = string(p.Value())
				case kubeproto.Varint(poolGeneration):
					spec.Pool.Generation = int64(p.Varint())
				case kubeproto.Varint(poolSlices):
					spec.Pool.ResourceSliceCount = int64(p.Varint())
				}
			}
			if err := p.Err(); err != nil {
				return err
			}
		}
	}
	return m.Err()
}
