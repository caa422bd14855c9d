package podcache

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
)

// PageSize is how many pods StreamPods asks for at a time.
const PageSize = 500

// StreamPods lists the pods of namespace ("" for all) through client (the core group's REST
// client), PageSize at a time, and calls fn with what allocation keeps of each GPU pod
// (DecodePod), finished ones included. Each page is read as a protobuf stream holding one
// Pod's bytes at a time; pods without GPU resources cost their bytes' reading only. An
// error from fn stops the listing and is returned.
func StreamPods(ctx context.Context, client rest.Interface, namespace string, fn func(*allocation.Pod) error) error {
	opts := metav1.ListOptions{Limit: PageSize}
	for {
		meta, err := streamPage(ctx, client, namespace, opts, fn)
		if err != nil {
			return err
		}
		if meta.Continue == "" {
			return nil
		}
		opts.Continue = meta.Continue
	}
}

// streamPage reads one page of the pod list.
func streamPage(ctx context.Context, client rest.Interface, namespace string, opts metav1.ListOptions, fn func(*allocation.Pod) error) (metav1.ListMeta, error) {
	body, err := client.Get().Namespace(namespace).Resource("pods").VersionedParams(&opts, scheme.ParameterCodec).
		SetHeader("Accept", "application/vnd.kubernetes.protobuf").Stream(ctx)
	if err != nil {
		return metav1.ListMeta{}, fmt.Errorf("list pods: %w", err)
	}
	defer body.Close()
	n := 0
	meta, err := decodePodStream(body, func(raw []byte) error {
		n++
		pod, err := DecodePod(raw)
		if err != nil {
			return fmt.Errorf("decode pod %d of the list: %w", n, err)
		}
		if pod == nil {
			return nil
		}
		return fn(pod)
	})
	if err != nil {
		return meta, fmt.Errorf("read the pod list: %w", err)
	}
	return meta, nil
}

// decodePodStream reads a protobuf PodList response one Pod at a time: it hands each Pod's
// message to item (which must not keep it: the buffer is reused) and returns the list's
// metadata (for the continue token). At most one Pod's bytes are held at a time.
func decodePodStream(r io.Reader, item func(raw []byte) error) (metav1.ListMeta, error) {
	var meta metav1.ListMeta
	br := bufio.NewReaderSize(r, 64<<10)
	magic := make([]byte, len(nodecache.ProtobufMagic))
	if _, err := io.ReadFull(br, magic); err != nil || !bytes.Equal(magic, nodecache.ProtobufMagic) {
		return meta, errors.New("the pod list is not protobuf")
	}
	envelope := &streamReader{r: br, n: -1}
	var buf []byte
	for {
		num, typ, err := envelope.tag()
		if err == io.EOF {
			return meta, nil
		}
		if err != nil {
			return meta, err
		}
		if num != unknownRaw || typ != protowire.BytesType {
			if err := envelope.skip(typ); err != nil {
				return meta, err
			}
			continue
		}
		size, err := envelope.varint()
		if err != nil {
			return meta, err
		}
		if size > math.MaxInt64 {
			return meta, fmt.Errorf("the pod list claims an impossible size of %d bytes", size)
		}
		list := &streamReader{r: br, n: int64(size)}
		envelope.consumed(int64(size))
		for {
			num, typ, err := list.tag()
			if err == io.EOF {
				break
			}
			if err != nil {
				return meta, err
			}
			if typ != protowire.BytesType || (num != listMetadata && num != listItems) {
				if err := list.skip(typ); err != nil {
					return meta, err
				}
				continue
			}
			if buf, err = list.bytes(buf); err != nil {
				return meta, err
			}
			if num == listMetadata {
				if err := meta.Unmarshal(buf); err != nil {
					return meta, fmt.Errorf("decode list metadata: %w", err)
				}
				continue
			}
			if err := item(buf); err != nil {
				return meta, err
			}
		}
	}
}

// MaxPodBytes bounds one Pod's message in a stream: far above any Pod etcd stores, far below
// what a claimed size from a broken or hostile server could make the reader allocate.
const MaxPodBytes = 16 << 20

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
	if size > MaxPodBytes {
		return buf, fmt.Errorf("a field of %d bytes in the pod list exceeds the %d-byte limit of one Pod", size, MaxPodBytes)
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
