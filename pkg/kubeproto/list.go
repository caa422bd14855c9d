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
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
)

// ErrTooLarge is the error for a list's item (or metadata) beyond List.MaxItemBytes.
var ErrTooLarge = errors.New("list item too large")

// A List reads the lists of one resource as protobuf streams, one item's message at a time.
type List struct {
	// Resource is the resource's name in the list's path ("pods").
	Resource string
	// MaxItemBytes bounds one item's message (and the list's metadata): a larger one is an
	// error, not an allocation of the size a broken or hostile server claims. Required.
	MaxItemBytes int
	// ReadBufferBytes is the size of the read buffer of each list (64 KiB when 0): many
	// small lists read with a small one.
	ReadBufferBytes int
}

// Stream lists the objects of namespace ("" for all namespaces, or for a cluster-scoped
// resource) through client, opts.Limit at a time, following the continue tokens, and reads
// each page with Read. opts may select objects (label and field selectors); its Continue is
// set by Stream. An error of item ends the listing and is returned as it is; the other errors
// name the resource (apierrors.IsNotFound: the server does not serve it).
func (l List) Stream(ctx context.Context, client rest.Interface, namespace string, opts metav1.ListOptions, item func(raw []byte) error) error {
	_, err := l.StreamVersion(ctx, client, namespace, opts, item)
	return err
}

// StreamVersion is Stream returning the list's resourceVersion (its first page's: the
// pages that follow are of the same snapshot). opts.ResourceVersion and
// ResourceVersionMatch apply to the first page; the continue token holds them after it.
func (l List) StreamVersion(ctx context.Context, client rest.Interface, namespace string, opts metav1.ListOptions, item func(raw []byte) error) (string, error) {
	opts.Continue = ""
	resourceVersion := ""
	for {
		body, err := client.Get().Namespace(namespace).Resource(l.Resource).VersionedParams(&opts, kubeclient.ParameterCodec).
			SetHeader("Accept", ContentType).Stream(ctx)
		if err != nil {
			return "", fmt.Errorf("list %s: %w", l.Resource, err)
		}
		itemFailed := false
		meta, err := l.Read(body, func(raw []byte) error {
			err := item(raw)
			itemFailed = err != nil
			return err
		})
		body.Close()
		if err != nil && !itemFailed {
			err = fmt.Errorf("list %s: %w", l.Resource, err)
		}
		if err != nil {
			return "", err
		}
		if opts.Continue == "" {
			resourceVersion = meta.ResourceVersion
		}
		if meta.Continue == "" {
			return resourceVersion, nil
		}
		// The API server refuses a continue token beside a resourceVersion.
		opts.Continue, opts.ResourceVersion, opts.ResourceVersionMatch = meta.Continue, "", ""
	}
}

// StreamEach is StreamVersion over several namespaces, workers lists at a time: the API
// server encodes each list on a core of its own. items gives each namespace's list its item
// function; the item functions of different namespaces run at once. It returns each
// namespace's resourceVersion. The first error stops every list and is returned, naming
// its namespace ("" lists all namespaces at once).
func (l List) StreamEach(ctx context.Context, client rest.Interface, namespaces []string, workers int, opts metav1.ListOptions, items func(namespace string) func(raw []byte) error) (map[string]string, error) {
	todo := make(chan string, len(namespaces))
	for _, ns := range namespaces {
		todo <- ns
	}
	close(todo)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu       sync.Mutex
		versions = make(map[string]string, len(namespaces))
		wg       sync.WaitGroup
	)
	for range max(workers, 1) {
		wg.Go(func() {
			for ns := range todo {
				rv, err := l.StreamVersion(ctx, client, ns, opts, items(ns))
				if err != nil && ns != "" {
					err = fmt.Errorf("namespace %s: %w", ns, err)
				}
				if err != nil {
					cancel(err)
					return
				}
				mu.Lock()
				versions[ns] = rv
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return versions, nil
}

// Decoded is an item function for Read and Stream that hands each item's message to decode
// and what it returns, unless nil, to fn. A decode error names the item's kind and place in
// the list; fn's error is returned as it is.
func Decoded[T any](kind string, decode func(raw []byte) (*T, error), fn func(*T) error) func(raw []byte) error {
	n := 0
	return func(raw []byte) error {
		n++
		v, err := decode(raw)
		if err != nil {
			return fmt.Errorf("decode %s %d of the list: %w", kind, n, err)
		}
		if v == nil {
			return nil
		}
		return fn(v)
	}
}

// Read reads a protobuf list response (ProtobufMagic, then a runtime.Unknown whose raw field
// holds the list) from r and hands each item's message to item, which must not keep it: the
// buffer is reused, so at most one item's bytes are held at a time. It returns the list's
// metadata (for the continue token). An error of item stops the reading and is returned as
// it is. Fields are skipped by the rules of Message.
func (l List) Read(r io.Reader, item func(raw []byte) error) (metav1.ListMeta, error) {
	var meta metav1.ListMeta
	br := bufio.NewReaderSize(r, cmp.Or(l.ReadBufferBytes, 64<<10))
	magic := make([]byte, len(ProtobufMagic))
	if _, err := io.ReadFull(br, magic); err != nil || !bytes.Equal(magic, ProtobufMagic) {
		return meta, errNotProtobuf
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
		size, err := envelope.size()
		if err != nil {
			return meta, err
		}
		list := &streamReader{r: br, n: size}
		envelope.consumed(size)
		for {
			num, typ, err := list.tag()
			if err == io.EOF {
				break
			}
			if err != nil {
				return meta, err
			}
			if typ != protowire.BytesType || (num != ListMetadata && num != ListItems) {
				if err := list.skip(typ); err != nil {
					return meta, err
				}
				continue
			}
			if buf, err = list.bytes(buf, l.MaxItemBytes); err != nil {
				return meta, err
			}
			if num == ListMetadata {
				if err := meta.Unmarshal(buf); err != nil {
					return meta, fmt.Errorf("decode the list's metadata: %w", err)
				}
				continue
			}
			if err := item(buf); err != nil {
				return meta, err
			}
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

// varint reads a varint by the rules of varint; the end of the message in it is
// io.ErrUnexpectedEOF.
func (s *streamReader) varint() (uint64, error) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if shift >= 64 {
			return 0, ErrOverflow
		}
		if s.n == 0 {
			return 0, io.ErrUnexpectedEOF
		}
		c, err := s.r.ReadByte()
		if err != nil {
			return 0, io.ErrUnexpectedEOF
		}
		s.consumed(1)
		v |= uint64(c&0x7F) << shift
		if c < 0x80 {
			return v, nil
		}
	}
}

// size reads a length prefix that the rest of the message can hold.
func (s *streamReader) size() (int64, error) {
	size, err := s.varint()
	if err != nil {
		return 0, err
	}
	if size > math.MaxInt64 {
		return 0, ErrLength
	}
	if s.n >= 0 && int64(size) > s.n {
		return 0, io.ErrUnexpectedEOF
	}
	return int64(size), nil
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
	return tag(v)
}

// bytes reads a length-delimited field's value of at most limit bytes into buf (grown as
// needed).
func (s *streamReader) bytes(buf []byte, limit int) ([]byte, error) {
	size, err := s.varint()
	if err != nil {
		return buf, err
	}
	if size > uint64(limit) {
		return buf, fmt.Errorf("a field of %d bytes in the list exceeds the %d-byte limit of one item: %w", size, limit, ErrTooLarge)
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

// discard skips size bytes.
func (s *streamReader) discard(size int64) error {
	if s.n >= 0 && size > s.n {
		return io.ErrUnexpectedEOF
	}
	for size > 0 { // Discard takes an int
		k := int(min(size, math.MaxInt32))
		if _, err := s.r.Discard(k); err != nil {
			return io.ErrUnexpectedEOF
		}
		s.consumed(int64(k))
		size -= int64(k)
	}
	return nil
}

// skip skips a field's value, as SkipField does: a group runs to its matching end.
func (s *streamReader) skip(typ protowire.Type) error {
	depth := 0
	for {
		var err error
		switch typ {
		case protowire.VarintType:
			_, err = s.varint()
		case protowire.Fixed64Type:
			err = s.discard(8)
		case protowire.BytesType:
			var size int64
			if size, err = s.size(); err == nil {
				err = s.discard(size)
			}
		case protowire.StartGroupType:
			depth++
		case protowire.EndGroupType:
			if depth == 0 {
				return ErrGroupEnd
			}
			depth--
		case protowire.Fixed32Type:
			err = s.discard(4)
		default:
			return fmt.Errorf("%w %d", ErrWireType, typ)
		}
		if err != nil || depth == 0 {
			return err
		}
		t, err := s.varint() // the next field of the group
		if err != nil {
			return err
		}
		typ = protowire.Type(t & 7)
	}
}

// DecodeList walks a list message held whole (a list's raw bytes from Envelope): its
// metadata into meta, each item's message to item. An error of item stops the walk and is
// returned.
func DecodeList(b []byte, meta *metav1.ListMeta, item func(raw []byte) error) error {
	m := NewMessage(b)
	for m.Next() {
		var err error
		switch m.Tag() {
		case Bytes(ListMetadata):
			err = meta.Unmarshal(m.Value())
		case Bytes(ListItems):
			err = item(m.Value())
		}
		if err != nil {
			return err
		}
	}
	return m.Err()
}
