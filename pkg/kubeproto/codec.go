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

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
)

// A Codec is a cache's hand decoder of one resource: what a client's serializer
// (Serializer) decodes that resource's objects and lists into. O is the cache's compact
// object (or the trimmed generated type), L its list.
type Codec[O, L any] struct {
	// GroupVersion and Kind name the resource's objects; ListKind its lists.
	GroupVersion   schema.GroupVersion
	Kind, ListKind string
	// Object decodes one object's protobuf message (without the envelope).
	Object func(raw []byte) (*O, error)
	// List decodes a list's protobuf message.
	List func(raw []byte) (*L, error)
	// Reduce makes an *O or an *L of what the wrapped serializer decoded in full (JSON, from a
	// server that does not speak protobuf). Anything else (a watch's error Status) it returns
	// as it is.
	Reduce func(runtime.Object) runtime.Object
}

// Serializer wraps a client's serializer so that the resource's objects and lists come out
// as *O and *L, and its watch events are read in place (WithWatchEvents). The one rule for a
// decode into a given object: into an *O or an *L (or none), the codec decodes (protobuf by
// hand, JSON in full then Reduce) and copies the result into it; into anything else, the
// wrapped serializer decodes as it would without the codec.
func (c Codec[O, L]) Serializer(ns runtime.NegotiatedSerializer) runtime.NegotiatedSerializer {
	return codecSerializer[O, L]{NegotiatedSerializer: WithWatchEvents(ns), codec: c}
}

type codecSerializer[O, L any] struct {
	runtime.NegotiatedSerializer
	codec Codec[O, L]
}

func (s codecSerializer[O, L]) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return codecDecoder[O, L]{next: s.NegotiatedSerializer.DecoderToVersion(d, gv), codec: s.codec}
}

type codecDecoder[O, L any] struct {
	next  runtime.Decoder
	codec Codec[O, L]
}

func (d codecDecoder[O, L]) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	switch any(into).(type) {
	case nil, *O, *L:
	default:
		return d.next.Decode(data, defaults, into)
	}
	obj, gvk, err := d.decode(data, defaults)
	if err != nil || into == nil {
		return obj, gvk, err
	}
	switch dst := any(into).(type) {
	case *O:
		if src, ok := any(obj).(*O); ok {
			*dst = *src
			return into, gvk, nil
		}
	case *L:
		if src, ok := any(obj).(*L); ok {
			*dst = *src
			return into, gvk, nil
		}
	}
	return nil, nil, fmt.Errorf("cannot decode %T into %T", obj, into)
}

// decode decodes data without a target: the resource by the codec, anything else by the
// wrapped serializer.
func (d codecDecoder[O, L]) decode(data []byte, defaults *schema.GroupVersionKind) (runtime.Object, *schema.GroupVersionKind, error) {
	c := d.codec
	if apiVersion, kind, raw, err := Envelope(data); err == nil && string(apiVersion) == c.GroupVersion.String() {
		switch string(kind) {
		case c.Kind:
			obj, err := c.Object(raw)
			if err != nil {
				return nil, nil, fmt.Errorf("decode %s: %w", c.Kind, err)
			}
			gvk := c.GroupVersion.WithKind(c.Kind)
			return any(obj).(runtime.Object), &gvk, nil
		case c.ListKind:
			list, err := c.List(raw)
			if err != nil {
				return nil, nil, fmt.Errorf("decode %s: %w", c.ListKind, err)
			}
			gvk := c.GroupVersion.WithKind(c.ListKind)
			return any(list).(runtime.Object), &gvk, nil
		}
	}
	obj, gvk, err := d.next.Decode(data, defaults, nil)
	if err != nil {
		return obj, gvk, err
	}
	return c.Reduce(obj), gvk, nil
}

// NewClient is the REST client of a cache that reads c's resource in bulk: on a copy of
// config (StreamConfig: protobuf over HTTP/1.1 on a connection of its own), decoding through
// c's Serializer, with config's User-Agent or else client-go's default, as the generated
// clients set it.
func NewClient[O, L any](config *rest.Config, c Codec[O, L]) (*rest.RESTClient, error) {
	ns := c.Serializer(rest.CodecFactoryForGeneratedClient(kubeclient.Scheme, kubeclient.Codecs).WithoutConversion())
	client, err := kubeclient.New(StreamConfig(config), c.GroupVersion, ns)
	if err != nil {
		return nil, fmt.Errorf("create %s client: %w", c.Kind, err)
	}
	return client, nil
}
