package nodecache

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Field numbers of NodeList (k8s.io/api core/v1); the envelope's are in proto.go.
const (
	listMetadata = 1 // NodeList.metadata (ListMeta)
	listItems    = 2 // NodeList.items
)

// DecodeNodeStream reads a protobuf NodeList response one Node at a time: it hands each
// Node's message to decode (NodeTrimmer.DecodeNode, the operator's informer decoder, which
// reads only what the inventory needs and skips images, addresses, managed fields and the
// other labels unread) and the result to visit. At most one Node's bytes are held at a time.
// It returns the list's metadata (for the continue token) and how many nodes it read.
// It is one loop over the envelope and one over the list, kept together so that no more
// than one Node's bytes are held at a time.
func DecodeNodeStream(r io.Reader, decode func([]byte) (*corev1.Node, error), visit func(*corev1.Node)) (metav1.ListMeta, int, error) {
	var meta metav1.ListMeta
	br := bufio.NewReaderSize(r, 64<<10)
	magic := make([]byte, len(ProtobufMagic))
	if _, err := io.ReadFull(br, magic); err != nil || !bytes.Equal(magic, ProtobufMagic) {
		return meta, 0, errors.New("the node list is not protobuf")
	}
	envelope := &streamReader{r: br, n: -1}
	count := 0
	var buf []byte
	for {
		num, typ, err := envelope.tag()
		if err == io.EOF {
			return meta, count, nil
		}
		if err != nil {
			return meta, count, err
		}
		if num != unknownRaw || typ != protowire.BytesType {
			if err := envelope.skip(typ); err != nil {
				return meta, count, err
			}
			continue
		}
		size, err := envelope.varint()
		if err != nil {
			return meta, count, err
		}
		if size > math.MaxInt64 {
			return meta, count, fmt.Errorf("the node list claims an impossible size of %d bytes", size)
		}
		list := &streamReader{r: br, n: int64(size)}
		envelope.consumed(int64(size))
		for {
			num, typ, err := list.tag()
			if err == io.EOF {
				break
			}
			if err != nil {
				return meta, count, err
			}
			if typ != protowire.BytesType || (num != listMetadata && num != listItems) {
				if err := list.skip(typ); err != nil {
					return meta, count, err
				}
				continue
			}
			if buf, err = list.bytes(buf); err != nil {
				return meta, count, err
			}
			if num == listMetadata {
				if err := meta.Unmarshal(buf); err != nil {
					return meta, count, fmt.Errorf("decode list metadata: %w", err)
				}
				continue
			}
			node, err := decode(buf)
			if err != nil {
				return meta, count, fmt.Errorf("decode node %d of the list: %w", count+1, err)
			}
			count++
			visit(node)
		}
	}
}

// streamReader reads protobuf fields from r, at most n bytes (n < 0: until EOF).
type streamReader struct {
	r *bufio.Reader
	n int64
}

func (s *streamReader) consumed(k int64) {
	if s.n >= 0 {
		s.n -= k
	}
}

func (s *streamReader) ReadByte() (byte, error) {
	if s.n == 0 {
		return 0, io.EOF
	}
	b, err := s.r.ReadByte()
	if err == nil {
		s.consumed(1)
	}
	return b, err
}

func (s *streamReader) varint() (uint64, error) {
	v, err := binary.ReadUvarint(s)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return v, err
}

// tag reads a field's tag; io.EOF at the end of the message.
func (s *streamReader) tag() (protowire.Number, protowire.Type, error) {
	if s.n == 0 {
		return 0, 0, io.EOF
	}
	if s.n < 0 {
		if _, err := s.r.Peek(1); err == io.EOF {
			return 0, 0, io.EOF
		}
	}
	v, err := s.varint()
	if err != nil {
		return 0, 0, err
	}
	num, typ := protowire.DecodeTag(v)
	if num < protowire.MinValidNumber {
		return 0, 0, errors.New("invalid protobuf field number")
	}
	return num, typ, nil
}

// MaxNodeBytes bounds one Node's message in a stream: far above any Node etcd stores, far
// below what a claimed size from a broken or hostile server could make the reader allocate.
const MaxNodeBytes = 64 << 20

// bytes reads a length-delimited field's value into buf (grown as needed).
func (s *streamReader) bytes(buf []byte) ([]byte, error) {
	size, err := s.varint()
	if err != nil {
		return buf, err
	}
	if size > MaxNodeBytes {
		return buf, fmt.Errorf("a field of %d bytes in the node list exceeds the %d-byte limit of one Node", size, MaxNodeBytes)
	}
	if s.n >= 0 && int64(size) > s.n {
		return buf, io.ErrUnexpectedEOF
	}
	if uint64(cap(buf)) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	if _, err := io.ReadFull(s.r, buf); err != nil {
		return buf, io.ErrUnexpectedEOF
	}
	s.consumed(int64(size))
	return buf, nil
}

// skip skips a field's value.
func (s *streamReader) skip(typ protowire.Type) error {
	var size uint64
	switch typ {
	case protowire.VarintType:
		_, err := s.varint()
		return err
	case protowire.Fixed32Type:
		size = 4
	case protowire.Fixed64Type:
		size = 8
	case protowire.BytesType:
		var err error
		if size, err = s.varint(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unsupported protobuf wire type %d", typ)
	}
	if s.n >= 0 && int64(size) > s.n {
		return io.ErrUnexpectedEOF
	}
	if _, err := s.r.Discard(int(size)); err != nil {
		return io.ErrUnexpectedEOF
	}
	s.consumed(int64(size))
	return nil
}
