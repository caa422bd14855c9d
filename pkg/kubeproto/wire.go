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

// Package kubeproto is the codec room of the caches that keep a small part of each object:
// Kubernetes protobuf read by hand with the rules of k8s.io/api's generated Unmarshal methods
// (the field walker Message, ReadObjectMeta, MapEntry, the envelope the API server wraps every
// object in, a list reader that hands over one item's message at a time, watch events read in
// place), the compact objects' metadata (Compact), and the serializer and client a cache
// decodes with (Codec, NewClient). docs/design/codec.md says how a cache is added.
package kubeproto

import (
	"errors"
	"fmt"
	"io"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
)

// The readers below follow the rules of the generated Unmarshal methods (varints of up to ten
// bytes, field numbers as int32, groups skipped by depth, map entries read as those methods
// read them), so that any bytes those accept are read alike here: FuzzMessageReadsLikeGenerated
// holds them to that.

// Errors of malformed messages; truncated ones give io.ErrUnexpectedEOF.
var (
	ErrOverflow   = errors.New("protobuf: integer overflow")
	ErrLength     = errors.New("protobuf: negative length")
	ErrGroupEnd   = errors.New("protobuf: end of a group that never started")
	ErrFieldNum   = errors.New("protobuf: illegal field number")
	ErrWireType   = errors.New("protobuf: illegal wire type")
	ErrEntryRange = errors.New("protobuf: map entry runs past its message")
)

// Field numbers shared by every Kubernetes message of their kind.
const (
	MapKey   = 1 // of a map entry
	MapValue = 2

	ListMetadata = 1 // of a list (PodList, NodeList, ...): its ListMeta
	ListItems    = 2 // its items
)

// varint reads a varint at the start of b and returns it and its length. It is small enough
// to be inlined.
func varint(b []byte) (uint64, int, error) {
	var v uint64
	for i, shift := 0, uint(0); ; shift += 7 {
		if shift >= 64 {
			return 0, 0, ErrOverflow
		}
		if i >= len(b) {
			return 0, 0, io.ErrUnexpectedEOF
		}
		c := b[i]
		i++
		v |= uint64(c&0x7F) << shift
		if c < 0x80 {
			return v, i, nil
		}
	}
}

// tag splits a field's tag as the generated decoders do: the number as an int32, which must
// be positive; an end of group outside a group is an error.
func tag(v uint64) (protowire.Number, protowire.Type, error) {
	num, typ := int32(v>>3), protowire.Type(v&7)
	if typ == protowire.EndGroupType {
		return 0, 0, ErrGroupEnd
	}
	if num <= 0 {
		return 0, 0, ErrFieldNum
	}
	return protowire.Number(num), typ, nil
}

// length reads a length prefix at b[i:] and returns where the value starts and ends; the end
// may lie beyond len(b) only when an error says so.
func length(b []byte, i int) (start, end int, err error) {
	size, n, err := varint(b[i:])
	if err != nil {
		return 0, 0, err
	}
	if int(size) < 0 {
		return 0, 0, ErrLength
	}
	start = i + n
	end = start + int(size)
	if end < 0 {
		return 0, 0, ErrLength
	}
	if end > len(b) {
		return 0, 0, io.ErrUnexpectedEOF
	}
	return start, end, nil
}

// SkipField returns the length of the field at the start of b, its tag included; a group
// runs to its matching end. The length may exceed len(b): the caller checks it.
func SkipField(b []byte) (int, error) {
	i, depth := 0, 0
	for i < len(b) {
		t, n, err := varint(b[i:])
		if err != nil {
			return 0, err
		}
		i += n
		switch typ := protowire.Type(t & 7); typ {
		case protowire.VarintType:
			_, n, err := varint(b[i:])
			if err != nil {
				return 0, err
			}
			i += n
		case protowire.Fixed64Type:
			i += 8
		case protowire.BytesType:
			size, n, err := varint(b[i:])
			if err != nil {
				return 0, err
			}
			if int(size) < 0 {
				return 0, ErrLength
			}
			i += n + int(size)
		case protowire.StartGroupType:
			depth++
		case protowire.EndGroupType:
			if depth == 0 {
				return 0, ErrGroupEnd
			}
			depth--
		case protowire.Fixed32Type:
			i += 4
		default:
			return 0, fmt.Errorf("%w %d", ErrWireType, typ)
		}
		if i < 0 {
			return 0, ErrLength
		}
		if depth == 0 {
			return i, nil
		}
	}
	return 0, io.ErrUnexpectedEOF
}

// MapEntry returns the key and the value bytes of a protobuf map entry e, a Message's
// Value. As the generated decoders do, it reads fields 1 and 2 as length-delimited whatever
// their wire type, and lets them run on past the entry into the rest of the enclosing
// message (e's capacity) but not past it.
func MapEntry(e []byte) (key, value []byte, err error) {
	b, end := e[:cap(e)], len(e)
	for i := 0; i < end; {
		t, n, err := varint(b[i:])
		if err != nil {
			return nil, nil, err
		}
		switch num := int32(t >> 3); num {
		case MapKey, MapValue:
			start, stop, err := length(b, i+n)
			if err != nil {
				return nil, nil, err
			}
			if num == MapKey {
				key = b[start:stop:stop]
			} else {
				value = b[start:stop:stop]
			}
			i = stop
		default:
			k, err := SkipField(b[i:])
			if err != nil {
				return nil, nil, err
			}
			if i+k > end {
				return nil, nil, ErrEntryRange
			}
			i += k
		}
	}
	return key, value, nil
}

// View returns b as a string without copying it, for lookups and for values that are copied
// when kept: b must not change while the string is in use.
func View(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}
