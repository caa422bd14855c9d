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

package kubeproto

import (
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// A Tag is a field's number and wire type as the wire writes them (number<<3 | type), so
// that one switch on Message.Tag picks a field of the expected type.
type Tag uint64

// Bytes is the tag of a length-delimited field (a string, bytes, a message, a map entry).
func Bytes(num protowire.Number) Tag { return Tag(num)<<3 | Tag(protowire.BytesType) }

// Varint is the tag of a varint field (an integer, a bool, an enum).
func Varint(num protowire.Number) Tag { return Tag(num)<<3 | Tag(protowire.VarintType) }

// A Message reads the fields of one protobuf message in order, by the rules of the generated
// Unmarshal methods. A decoder is one flat function per message, as the generated code is:
//
//	m := kubeproto.NewMessage(b)
//	for m.Next() {
//		switch m.Tag() {
//		case kubeproto.Bytes(metaName):
//			name = string(m.Value())
//		case kubeproto.Varint(metaGeneration):
//			generation = int64(m.Varint())
//		}
//	}
//	return m.Err()
//
// Fixed-size fields and groups are skipped; Next stops at the end of the message or at the
// first malformed field, which Err then returns.
type Message struct {
	b      []byte
	i      int
	tag    Tag
	start  int // the current length-delimited field's value is b[start:end]; start < 0 for a varint
	end    int
	varint uint64
	err    error
}

// NewMessage reads the message b.
func NewMessage(b []byte) Message { return Message{b: b} }

// Next reads the next varint or length-delimited field, skipping the others; false at the
// end of the message or on an error.
func (m *Message) Next() bool {
	// The common field, inlined: a one-byte tag of a length-delimited field shorter than
	// 128 bytes.
	if i := m.i; i+1 < len(m.b) {
		if t, n := m.b[i], m.b[i+1]; t < 0x80 && t&7 == byte(protowire.BytesType) && t >= 8 && n < 0x80 {
			if end := i + 2 + int(n); end <= len(m.b) {
				m.tag, m.start, m.end, m.i = Tag(t), i+2, end, end
				return true
			}
		}
	}
	return m.next()
}

// next is Next for any field.
func (m *Message) next() bool {
	b, i := m.b, m.i
	for i < len(b) {
		t, n, err := varint(b[i:])
		if err != nil {
			return m.fail(err)
		}
		num, typ := protowire.Number(int32(t>>3)), protowire.Type(t&7) // tag's rules, written out for speed
		if typ == protowire.EndGroupType {
			return m.fail(ErrGroupEnd)
		}
		if num <= 0 {
			return m.fail(ErrFieldNum)
		}
		switch typ {
		case protowire.VarintType:
			v, k, err := varint(b[i+n:])
			if err != nil {
				return m.fail(err)
			}
			m.i = i + n + k
			m.tag, m.start, m.varint = Tag(num)<<3|Tag(typ), -1, v
			return true
		case protowire.BytesType:
			start, end, err := length(b, i+n)
			if err != nil {
				return m.fail(err)
			}
			m.i = end
			m.tag, m.start, m.end, m.varint = Tag(num)<<3|Tag(typ), start, end, 0
			return true
		}
		k, err := SkipField(b[i:])
		switch {
		case err != nil:
			return m.fail(err)
		case i+k > len(b):
			return m.fail(io.ErrUnexpectedEOF)
		}
		i += k
		m.i = i
	}
	return false
}

// fail stops the message at err: Next returns false from now on.
func (m *Message) fail(err error) bool {
	m.err, m.i = err, len(m.b)
	return false
}

// Tag is the current field's number and wire type.
func (m *Message) Tag() Tag { return m.tag }

// Num is the current field's number.
func (m *Message) Num() protowire.Number { return protowire.Number(m.tag >> 3) }

// Value is the current length-delimited field's value (nil for a varint), not copied. Its
// capacity ends with the message (see MapEntry): it must not be appended to.
func (m *Message) Value() []byte {
	if m.start < 0 {
		return nil
	}
	return m.b[m.start:m.end:len(m.b)]
}

// Varint is the current varint field's value.
func (m *Message) Varint() uint64 { return m.varint }

// Err is the error that stopped Next, nil at the end of a well-formed message.
func (m *Message) Err() error { return m.err }
