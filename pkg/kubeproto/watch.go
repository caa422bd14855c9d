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
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// Field numbers of metav1.WatchEvent and runtime.RawExtension.
const (
	watchEventType   = 1
	watchEventObject = 2
	rawExtensionRaw  = 1
)

// WithWatchEvents wraps a client's serializer so that a protobuf watch stream's events are
// read without copying: the event's object is the frame's own bytes, which client-go's watch
// decoder hands to the object decoder before it reads the next frame (the generated decoder
// copies each object, the largest allocation of a watch). Everything else is ns's.
func WithWatchEvents(ns runtime.NegotiatedSerializer) runtime.NegotiatedSerializer {
	return WithWatchEventReader(ns, ContentType, func(frame []byte) (string, []byte, bool, error) {
		typ, raw, err := DecodeWatchEvent(frame)
		return typ, raw, err == nil, err
	})
}

// EventReader reads one watch frame of its media type: the event's type and its object's
// bytes, which alias the frame. ok false (with no error) leaves the frame to the client's own
// decoder.
type EventReader func(frame []byte) (typ string, object []byte, ok bool, err error)

// WithWatchEventReader wraps a client's serializer so that the watch streams of one media
// type read their events with read, in place; everything else is ns's, its own methods
// included.
func WithWatchEventReader(ns runtime.NegotiatedSerializer, mediaType string, read EventReader) runtime.NegotiatedSerializer {
	return WithStreamSerializer(ns, mediaType, func(stream *runtime.StreamSerializerInfo) {
		stream.Serializer = eventDecoder{stream.Serializer, read}
	})
}

// WithStreamSerializer wraps a client's serializer so that the stream serializer of one
// media type is a copy that edit changed (its framer, its decoder); everything else is ns's,
// its own methods included.
func WithStreamSerializer(ns runtime.NegotiatedSerializer, mediaType string, edit func(*runtime.StreamSerializerInfo)) runtime.NegotiatedSerializer {
	return streamSerializer{ns, mediaType, edit}
}

type streamSerializer struct {
	runtime.NegotiatedSerializer
	mediaType string
	edit      func(*runtime.StreamSerializerInfo)
}

func (s streamSerializer) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := s.NegotiatedSerializer.SupportedMediaTypes()
	out := make([]runtime.SerializerInfo, len(infos))
	for i, info := range infos {
		out[i] = info
		if info.MediaType == s.mediaType && info.StreamSerializer != nil {
			stream := *info.StreamSerializer
			s.edit(&stream)
			out[i].StreamSerializer = &stream
		}
	}
	return out
}

// eventDecoder decodes WatchEvents (the raw message of a watch frame) in place with read;
// anything else, and what read leaves, goes to the wrapped serializer.
type eventDecoder struct {
	runtime.Serializer
	read EventReader
}

func (d eventDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if event, ok := into.(*metav1.WatchEvent); ok {
		typ, raw, read, err := d.read(data)
		if err != nil {
			return nil, nil, err
		}
		if read {
			event.Type, event.Object = typ, runtime.RawExtension{Raw: raw}
			gvk := metav1.SchemeGroupVersion.WithKind("WatchEvent")
			return event, &gvk, nil
		}
	}
	return d.Serializer.Decode(data, defaults, into)
}

// DecodeWatchEvent reads a protobuf WatchEvent message as its generated decoder does (the last
// of a repeated field wins, unknown fields are skipped) and returns its type and its object's
// bytes, which alias data. The usual event types are returned without allocating.
func DecodeWatchEvent(data []byte) (typ string, raw []byte, err error) {
	var typeBytes, object []byte
	err = bytesFields(data, watchEventObject, func(num protowire.Number, v []byte) error {
		if num == watchEventType {
			typeBytes = v
			return nil
		}
		// Repeated, the embedded message merges: its raw field is still the last one seen.
		return bytesFields(v, rawExtensionRaw, func(_ protowire.Number, v []byte) error {
			object = v
			return nil
		})
	})
	if err != nil {
		return "", nil, err
	}
	return EventType(typeBytes), object, nil
}

// bytesFields walks the message b by the rules of Message and calls fn with the value of each
// field numbered up to last; those must be length-delimited, as the generated decoders
// require of a string or message field (any other wire type, a group too, is an error).
func bytesFields(b []byte, last protowire.Number, fn func(num protowire.Number, value []byte) error) error {
	for i := 0; i < len(b); {
		t, n, err := varint(b[i:])
		if err != nil {
			return err
		}
		num, typ := protowire.Number(int32(t>>3)), protowire.Type(t&7)
		switch {
		case typ == protowire.EndGroupType:
			return ErrGroupEnd
		case num <= 0:
			return ErrFieldNum
		case num <= last && typ != protowire.BytesType:
			return fmt.Errorf("%w %d for field %d", ErrWireType, typ, num)
		case typ == protowire.BytesType:
			start, end, err := length(b, i+n)
			if err != nil {
				return err
			}
			i = end
			if num <= last {
				if err := fn(num, b[start:end:end]); err != nil {
					return err
				}
			}
			continue
		}
		k, err := SkipField(b[i:])
		if err != nil {
			return err
		}
		if i+k > len(b) {
			return io.ErrUnexpectedEOF
		}
		i += k
	}
	return nil
}

// EventType returns a watch event's type; the usual ones without allocating.
func EventType(b []byte) string {
	for _, t := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted, watch.Bookmark, watch.Error} {
		if string(b) == string(t) {
			return string(t)
		}
	}
	return string(b)
}
