package claimcache

import (
	"errors"
	"fmt"
	"io"
)

// The readers below follow the rules of k8s.io/api's generated Unmarshal methods (varints
// of up to ten bytes, groups skipped by depth), so that any bytes those accept are read alike
// here: FuzzDecodeClaim holds the decoder to that.

// Wire types.
const (
	wireVarint     = 0
	wireFixed64    = 1
	wireBytes      = 2
	wireStartGroup = 3
	wireEndGroup   = 4
	wireFixed32    = 5
)

var (
	errOverflow = errors.New("protobuf: integer overflow")
	errLength   = errors.New("protobuf: negative length")
)

// varint reads a varint at the start of b and returns it and its length.
func varint(b []byte) (uint64, int, error) {
	var v uint64
	i := 0
	for shift := uint(0); ; shift += 7 {
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

// fields calls fn for each field of the message b with its number, wire type and either the
// value of a length-delimited field or the varint. Other fields are skipped.
func fields(b []byte, fn func(num int32, typ int, value []byte, v uint64) error) error {
	for i := 0; i < len(b); {
		tag, n, err := varint(b[i:])
		if err != nil {
			return err
		}
		num, typ := int32(tag>>3), int(tag&7)
		if typ == wireEndGroup {
			return errors.New("protobuf: end of a group that never started")
		}
		if num <= 0 {
			return fmt.Errorf("protobuf: illegal field number %d", num)
		}
		switch typ {
		case wireVarint:
			v, m, err := varint(b[i+n:])
			if err != nil {
				return err
			}
			i += n + m
			if err := fn(num, typ, nil, v); err != nil {
				return err
			}
		case wireBytes:
			size, m, err := varint(b[i+n:])
			if err != nil {
				return err
			}
			start := i + n + m
			end := start + int(size)
			if int(size) < 0 || end < 0 {
				return errLength
			}
			if end > len(b) {
				return io.ErrUnexpectedEOF
			}
			i = end
			if err := fn(num, typ, b[start:end], 0); err != nil {
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
		switch typ := int(tag & 7); typ {
		case wireVarint:
			_, n, err := varint(b[i:])
			if err != nil {
				return 0, err
			}
			i += n
		case wireFixed64:
			i += 8
		case wireBytes:
			size, n, err := varint(b[i:])
			if err != nil {
				return 0, err
			}
			if int(size) < 0 {
				return 0, errLength
			}
			i += n + int(size)
		case wireStartGroup:
			depth++
		case wireEndGroup:
			if depth == 0 {
				return 0, errors.New("protobuf: end of a group that never started")
			}
			depth--
		case wireFixed32:
			i += 4
		default:
			return 0, fmt.Errorf("protobuf: illegal wire type %d", typ)
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
