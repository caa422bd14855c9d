package plugin

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// protobufMagic starts every protobuf response of the API server (a runtime.Unknown follows).
var protobufMagic = []byte("k8s\x00")

// Field numbers of the Kubernetes protobuf messages that a node stream reads
// (k8s.io/api/core/v1/generated.proto, k8s.io/apimachinery/.../generated.proto). They are part
// of the API's compatibility guarantee.
const (
	unknownRaw = 2 // runtime.Unknown.raw: the NodeList

	listMetadata = 1 // NodeList.metadata (ListMeta)
	listItems    = 2 // NodeList.items

	nodeMetadata = 1
	nodeSpec     = 2
	nodeStatus   = 3

	metaName              = 1
	metaUID               = 5
	metaResourceVersion   = 6
	metaCreationTimestamp = 8
	metaDeletionTimestamp = 9
	metaLabels            = 11

	specUnschedulable = 4
	specTaints        = 5

	statusCapacity    = 1
	statusAllocatable = 2
	statusConditions  = 4

	mapKey   = 1
	mapValue = 2
)

// decodeNodeStream reads a protobuf NodeList response one Node at a time and hands visit
// each Node reduced to what controller.NodeTrimmer keeps (name, uid, resourceVersion,
// timestamps, the labels keep accepts, unschedulable, the node lifecycle taints, the
// nvidia.com resources and the Ready condition). Images, addresses, managed fields and the
// other labels are skipped without being decoded, and at most one Node's bytes are held at a
// time. It returns the list's metadata (for the continue token) and how many nodes it read.
// TestNodeStreamEqualsTrimmedNodes keeps it equal to NodeTrimmer.Trim.
func decodeNodeStream(r io.Reader, keep func(string) bool, visit func(*corev1.Node)) (metav1.ListMeta, int, error) {
	var meta metav1.ListMeta
	br := bufio.NewReaderSize(r, 64<<10)
	magic := make([]byte, len(protobufMagic))
	if _, err := io.ReadFull(br, magic); err != nil || !bytes.Equal(magic, protobufMagic) {
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
			node, err := trimmedNode(buf, keep)
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

// bytes reads a length-delimited field's value into buf (grown as needed).
func (s *streamReader) bytes(buf []byte) ([]byte, error) {
	size, err := s.varint()
	if err != nil {
		return buf, err
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

// protoFields calls fn for each field of the message b: num, type, the value of a
// length-delimited field or the varint.
func protoFields(b []byte, fn func(num protowire.Number, typ protowire.Type, value []byte, varint uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var value []byte
		var varint uint64
		switch typ {
		case protowire.BytesType:
			value, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			varint, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, value, varint); err != nil {
			return err
		}
	}
	return nil
}

// mapEntry returns the key and the value bytes of a protobuf map entry.
func mapEntry(b []byte) (key string, value []byte, err error) {
	err = protoFields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch {
		case num == mapKey && typ == protowire.BytesType:
			key = string(v)
		case num == mapValue && typ == protowire.BytesType:
			value = v
		}
		return nil
	})
	return key, value, err
}

// trimmedNode decodes the parts of a protobuf Node that NodeTrimmer keeps.
func trimmedNode(b []byte, keep func(string) bool) (*corev1.Node, error) {
	node := &corev1.Node{}
	err := protoFields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case nodeMetadata:
			return trimmedMeta(v, &node.ObjectMeta, keep)
		case nodeSpec:
			return trimmedSpec(v, &node.Spec)
		case nodeStatus:
			return trimmedStatus(v, &node.Status)
		}
		return nil
	})
	return node, err
}

func trimmedMeta(b []byte, meta *metav1.ObjectMeta, keep func(string) bool) error {
	return protoFields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case metaName:
			meta.Name = string(v)
		case metaUID:
			meta.UID = types.UID(v)
		case metaResourceVersion:
			meta.ResourceVersion = string(v)
		case metaCreationTimestamp:
			return meta.CreationTimestamp.Unmarshal(v)
		case metaDeletionTimestamp:
			meta.DeletionTimestamp = &metav1.Time{}
			return meta.DeletionTimestamp.Unmarshal(v)
		case metaLabels:
			key, value, err := mapEntry(v)
			if err != nil || !keep(key) {
				return err
			}
			if meta.Labels == nil {
				meta.Labels = map[string]string{}
			}
			meta.Labels[key] = string(value)
		}
		return nil
	})
}

func trimmedSpec(b []byte, spec *corev1.NodeSpec) error {
	return protoFields(b, func(num protowire.Number, typ protowire.Type, v []byte, varint uint64) error {
		switch {
		case num == specUnschedulable && typ == protowire.VarintType:
			spec.Unschedulable = varint != 0
		case num == specTaints && typ == protowire.BytesType:
			var taint corev1.Taint
			if err := taint.Unmarshal(v); err != nil {
				return err
			}
			if strings.HasPrefix(taint.Key, "node.kubernetes.io/") { // the lifecycle taints, as NodeTrimmer keeps
				spec.Taints = append(spec.Taints, corev1.Taint{Key: taint.Key, Effect: taint.Effect})
			}
		}
		return nil
	})
}

func trimmedStatus(b []byte, status *corev1.NodeStatus) error {
	return protoFields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case statusCapacity, statusAllocatable:
			key, value, err := mapEntry(v)
			if err != nil || !strings.HasPrefix(key, "nvidia.com/") {
				return err
			}
			var q resource.Quantity
			if err := q.Unmarshal(value); err != nil {
				return fmt.Errorf("resource %s: %w", key, err)
			}
			list := &status.Capacity
			if num == statusAllocatable {
				list = &status.Allocatable
			}
			if *list == nil {
				*list = corev1.ResourceList{}
			}
			(*list)[corev1.ResourceName(key)] = q
		case statusConditions:
			var c corev1.NodeCondition
			if err := c.Unmarshal(v); err != nil {
				return err
			}
			if c.Type == corev1.NodeReady {
				status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason,
					Message: c.Message, LastTransitionTime: c.LastTransitionTime}}
			}
		}
		return nil
	})
}
