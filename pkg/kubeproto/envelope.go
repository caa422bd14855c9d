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
	"bytes"
	"errors"
)

// ContentType is the media type of Kubernetes protobuf, for a request's Accept header.
const ContentType = "application/vnd.kubernetes.protobuf"

// ProtobufMagic starts every protobuf object the API server sends (a runtime.Unknown follows).
var ProtobufMagic = []byte("k8s\x00")

// Field numbers of runtime.Unknown and runtime.TypeMeta.
const (
	unknownTypeMeta = 1
	unknownRaw      = 2
	typeMetaVersion = 1
	typeMetaKind    = 2
)

var (
	errNotProtobuf = errors.New("not Kubernetes protobuf")
	errNoContent   = errors.New("protobuf object without content")
)

// Envelope reads an object as the API server sends it in protobuf (ProtobufMagic, then a
// runtime.Unknown) and returns its apiVersion, its kind and its message (raw), none of them
// copied. Data without the magic (JSON, YAML) or without a message is an error.
func Envelope(data []byte) (apiVersion, kind, raw []byte, err error) {
	if !bytes.HasPrefix(data, ProtobufMagic) {
		return nil, nil, nil, errNotProtobuf
	}
	m := NewMessage(data[len(ProtobufMagic):])
	for m.Next() {
		switch m.Tag() {
		case Bytes(unknownTypeMeta):
			if err = typeMeta(m.Value(), &apiVersion, &kind); err != nil {
				return nil, nil, nil, err
			}
		case Bytes(unknownRaw):
			raw = m.Value()
		}
	}
	if err = m.Err(); err == nil && raw == nil {
		err = errNoContent
	}
	return apiVersion, kind, raw, err
}

// typeMeta reads a runtime.TypeMeta message; a later one merges into an earlier, as in the
// generated decoder.
func typeMeta(b []byte, apiVersion, kind *[]byte) error {
	m := NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case Bytes(typeMetaVersion):
			*apiVersion = m.Value()
		case Bytes(typeMetaKind):
			*kind = m.Value()
		}
	}
	return m.Err()
}
