package podcache

import (
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// The readers below follow the rules of k8s.io/api's generated Unmarshal methods (varints of
// up to ten bytes, field numbers as int32, groups skipped by depth, map entries read as those
// methods read them), so that any bytes those accept are read alike here: FuzzDecodePod
// holds the decoder to that.

var (
	errOverflow   = errors.New("protobuf: integer overflow")
	errLength     = errors.New("protobuf: negative length")
	errGroupEnd   = errors.New("protobuf: end of a group that never started")
	errFieldNum   = errors.New("protobuf: illegal field number")
	errWireType   = errors.New("protobuf: illegal wire type")
	errEntryRange = errors.New("protobuf: map entry runs past its message")
)

// varint reads a varint at the start of b and returns it and its length.
func varint(b []byte) (uint64, int, error) {
	var v uint64
	for i, shift := 0, uint(0); ; shift += 7 {
		if shift >= 64 {
			return 0, 0, errOverflow
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

// length reads a length prefix at b[i:] and returns where the value starts and ends; the end
// may lie beyond len(b) only when an error says so.
func length(b []byte, i int) (start, end int, err error) {
	size, n, err := varint(b[i:])
	if err != nil {
		return 0, 0, err
	}
	if int(size) < 0 {
		return 0, 0, errLength
	}
	start = i + n
	end = start + int(size)
	if end < 0 {
		return 0, 0, errLength
	}
	if end > len(b) {
		return 0, 0, io.ErrUnexpectedEOF
	}
	return start, end, nil
}

// protoFields calls fn for each field of the message b: num, type, and the value of a
// length-delimited field (whose capacity ends with b, see mapEntry) or the varint. Other
// fields are skipped.
func protoFields(b []byte, fn func(num protowire.Number, typ protowire.Type, value []byte, varint uint64) error) error {
	for i := 0; i < len(b); {
		tag, n, err := varint(b[i:])
		if err != nil {
			return err
		}
		num, typ := int32(tag>>3), protowire.Type(tag&7)
		if typ == protowire.EndGroupType {
			return errGroupEnd
		}
		if num <= 0 {
			return errFieldNum
		}
		switch typ {
		case protowire.VarintType:
			v, m, err := varint(b[i+n:])
			if err != nil {
				return err
			}
			i += n + m
			if err := fn(protowire.Number(num), typ, nil, v); err != nil {
				return err
			}
		case protowire.BytesType:
			start, end, err := length(b, i+n)
			if err != nil {
				return err
			}
			i = end
			if err := fn(protowire.Number(num), typ, b[start:end:len(b)], 0); err != nil {
				return err
			}
		default:
			k, err := skipField(b[i:])
			if err != nil {
				return err
			}
			if i+k > len(b) {
				return io.ErrUnexpectedEOF
			}
			i += k
		}
	}
	return nil
}

// skipField returns the length of the field at the start of b, its tag included; a group
// runs to its matching end.
func skipField(b []byte) (int, error) {
	i, depth := 0, 0
	for i < len(b) {
		tag, n, err := varint(b[i:])
		if err != nil {
			return 0, err
		}
		i += n
		switch typ := protowire.Type(tag & 7); typ {
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
				return 0, errLength
			}
			i += n + int(size)
		case protowire.StartGroupType:
			depth++
		case protowire.EndGroupType:
			if depth == 0 {
				return 0, errGroupEnd
			}
			depth--
		case protowire.Fixed32Type:
			i += 4
		default:
			return 0, fmt.Errorf("%w %d", errWireType, typ)
		}
		if i < 0 {
			return 0, errLength
		}
		if depth == 0 {
			return i, nil
		}
	}
	return 0, io.ErrUnexpectedEOF
}

// mapEntry returns the key and the value bytes of a protobuf map entry e, a value from
// protoFields. As the generated decoders do, it reads fields 1 and 2 as length-delimited
// whatever their wire type, and lets them run on past the entry into the rest of the
// enclosing message (e's capacity) but not past it.
func mapEntry(e []byte) (key, value []byte, err error) {
	b, end := e[:cap(e)], len(e)
	for i := 0; i < end; {
		tag, n, err := varint(b[i:])
		if err != nil {
			return nil, nil, err
		}
		switch num := int32(tag >> 3); num {
		case mapKey, mapValue:
			start, stop, err := length(b, i+n)
			if err != nil {
				return nil, nil, err
			}
			if num == mapKey {
				key = b[start:stop:stop]
			} else {
				value = b[start:stop:stop]
			}
			i = stop
		default:
			k, err := skipField(b[i:])
			if err != nil {
				return nil, nil, err
			}
			if i+k > end {
				return nil, nil, errEntryRange
			}
			i += k
		}
	}
	return key, value, nil
}
