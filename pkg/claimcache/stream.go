package claimcache

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
)

// StreamPageSize is how many claims StreamClaims asks for at a time.
const StreamPageSize = 500

// StreamClaims calls fn with each ResourceClaim of namespace ("" for all) that the
// allocation keeps (DecodeClaim), in pages of StreamPageSize, each read as a protobuf stream
// that holds one claim's bytes at a time. client is a REST client for resource.k8s.io/v1
// (a clientset's ResourceV1().RESTClient()). An error of fn ends the stream and is returned;
// so are the API server's (apierrors.IsNotFound: the server does not serve the API).
func StreamClaims(ctx context.Context, client rest.Interface, namespace string, fn func(*allocation.Claim) error) error {
	opts := metav1.ListOptions{Limit: StreamPageSize}
	for {
		body, err := claimsRequest(client, namespace, opts).
			SetHeader("Accept", "application/vnd.kubernetes.protobuf").Stream(ctx)
		if err != nil {
			return fmt.Errorf("list ResourceClaims: %w", err)
		}
		meta, err := decodeClaimStream(body, fn)
		body.Close()
		if err != nil {
			return err
		}
		if meta.Continue == "" {
			return nil
		}
		opts.Continue = meta.Continue
	}
}

// decodeClaimStream reads a protobuf ResourceClaimList response (the magic, a
// runtime.Unknown, the list in its raw field) one item at a time and returns the list's
// metadata.
func decodeClaimStream(r io.Reader, fn func(*allocation.Claim) error) (metav1.ListMeta, error) {
	var meta metav1.ListMeta
	br := bufio.NewReaderSize(r, 64<<10)
	magic := make([]byte, len(nodecache.ProtobufMagic))
	if _, err := io.ReadFull(br, magic); err != nil || !bytes.Equal(magic, nodecache.ProtobufMagic) {
		return meta, errors.New("the ResourceClaim list is not protobuf")
	}
	envelope := &streamReader{r: br, n: -1}
	var buf []byte
	count := 0
	for {
		num, typ, err := envelope.tag()
		if err == io.EOF {
			return meta, nil
		}
		if err != nil {
			return meta, fmt.Errorf("read the ResourceClaim list: %w", err)
		}
		if num != unknownRaw || typ != wireBytes {
			if err := envelope.skip(typ); err != nil {
				return meta, fmt.Errorf("read the ResourceClaim list: %w", err)
			}
			continue
		}
		size, err := envelope.varint()
		if err != nil {
			return meta, fmt.Errorf("read the ResourceClaim list: %w", err)
		}
		if size > 1<<62 {
			return meta, fmt.Errorf("the ResourceClaim list claims an impossible size of %d bytes", size)
		}
		list := &streamReader{r: br, n: int64(size)}
		envelope.consumed(int64(size))
		for {
			num, typ, err := list.tag()
			if err == io.EOF {
				break
			}
			if err == nil && (typ != wireBytes || num != listMetadata && num != listItems) {
				err = list.skip(typ)
				if err == nil {
					continue
				}
			}
			if err == nil {
				buf, err = list.bytes(buf)
			}
			if err != nil {
				return meta, fmt.Errorf("read the ResourceClaim list: %w", err)
			}
			if num == listMetadata {
				if err := meta.Unmarshal(buf); err != nil {
					return meta, fmt.Errorf("decode the ResourceClaim list's metadata: %w", err)
				}
				continue
			}
			count++
			claim, err := DecodeClaim(buf)
			if err != nil {
				return meta, fmt.Errorf("decode ResourceClaim %d of the list: %w", count, err)
			}
			if claim == nil {
				continue
			}
			if err := fn(claim); err != nil {
				return meta, err
			}
		}
	}
}

// MaxClaimBytes bounds one ResourceClaim's message in a stream: far above any claim etcd
// stores, far below what a size claimed by a broken server could make the reader allocate.
const MaxClaimBytes = 16 << 20

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
		return 0, io.ErrUnexpectedEOF
	}
	b, err := s.r.ReadByte()
	if err != nil {
		return 0, io.ErrUnexpectedEOF
	}
	s.consumed(1)
	return b, nil
}

func (s *streamReader) varint() (uint64, error) { return binary.ReadUvarint(s) }

// tag reads a field's tag; io.EOF at the end of the message.
func (s *streamReader) tag() (int32, int, error) {
	if s.n == 0 {
		return 0, 0, io.EOF
	}
	if _, err := s.r.Peek(1); s.n < 0 && err == io.EOF {
		return 0, 0, io.EOF
	}
	v, err := s.varint()
	if err != nil {
		return 0, 0, err
	}
	if num := v >> 3; num < 1 || num > 1<<29-1 {
		return 0, 0, fmt.Errorf("invalid protobuf field number %d", num)
	}
	return int32(v >> 3), int(v & 7), nil
}

// bytes reads a length-delimited field's value into buf (grown as needed).
func (s *streamReader) bytes(buf []byte) ([]byte, error) {
	size, err := s.varint()
	if err != nil {
		return buf, err
	}
	if size > MaxClaimBytes {
		return buf, fmt.Errorf("a field of %d bytes exceeds the %d-byte limit of one ResourceClaim", size, MaxClaimBytes)
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
func (s *streamReader) skip(typ int) error {
	var size uint64
	switch typ {
	case wireVarint:
		_, err := s.varint()
		return err
	case wireFixed64:
		size = 8
	case wireFixed32:
		size = 4
	case wireBytes:
		var err error
		if size, err = s.varint(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unsupported protobuf wire type %d", typ)
	}
	if size > 1<<62 || s.n >= 0 && int64(size) > s.n {
		return io.ErrUnexpectedEOF
	}
	if _, err := s.r.Discard(int(size)); err != nil {
		return io.ErrUnexpectedEOF
	}
	s.consumed(int64(size))
	return nil
}
