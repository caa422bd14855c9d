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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Field numbers of ObjectMeta (k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto): part of
// the API's compatibility guarantee.
const (
	metaName              = 1
	metaNamespace         = 3
	metaUID               = 5
	metaResourceVersion   = 6
	metaCreationTimestamp = 8
	metaDeletionTimestamp = 9
	metaLabels            = 11
	metaAnnotations       = 12
)

// ObjectMeta is what ReadObjectMeta reads of an ObjectMeta message. Every value is a view
// into the message, to be copied (or interned) by what keeps it.
type ObjectMeta struct {
	Name, Namespace, UID, ResourceVersion []byte
	// CreationTimestamp and DeletionTimestamp are the Time messages, nil when absent
	// (metav1.Time's Unmarshal reads them).
	CreationTimestamp, DeletionTimestamp []byte
	// InitialEventsEnd is the value of the watch-list bookmark's annotation
	// (metav1.InitialEventsAnnotationKey), nil on any other object; the reflector waits for it.
	InitialEventsEnd []byte
	// Labels holds the label map entries (MapEntry reads them) whose key the reader's keep
	// function accepts, in the message's order.
	Labels [][]byte
}

// ReadObjectMeta reads the ObjectMeta message b into meta: the identity, the timestamps,
// the labels keepLabel accepts (none when it is nil) and the bookmark's annotation; the other
// annotations, owner references and managed fields are skipped unread. It merges, as the
// generated decoder merges an object's metadata given twice: each field b has replaces
// meta's, and kept labels are appended (to the room meta.Labels may be given). A decoder
// starts from an empty ObjectMeta and reads every metadata field of its object into it.
func ReadObjectMeta(b []byte, keepLabel func(key string) bool, meta *ObjectMeta) error {
	m := NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case Bytes(metaName):
			meta.Name = m.Value()
		case Bytes(metaNamespace):
			meta.Namespace = m.Value()
		case Bytes(metaUID):
			meta.UID = m.Value()
		case Bytes(metaResourceVersion):
			meta.ResourceVersion = m.Value()
		case Bytes(metaCreationTimestamp):
			if err := replaceTime(&meta.CreationTimestamp, m.Value()); err != nil {
				return err
			}
		case Bytes(metaDeletionTimestamp):
			if err := replaceTime(&meta.DeletionTimestamp, m.Value()); err != nil {
				return err
			}
		case Bytes(metaLabels):
			if keepLabel == nil {
				continue
			}
			key, _, err := MapEntry(m.Value())
			if err != nil {
				return err
			}
			if keepLabel(View(key)) {
				meta.Labels = append(meta.Labels, m.Value())
			}
		case Bytes(metaAnnotations):
			key, value, err := MapEntry(m.Value())
			if err != nil {
				return err
			}
			if View(key) == metav1.InitialEventsAnnotationKey {
				meta.InitialEventsEnd = value
				if value == nil {
					meta.InitialEventsEnd = []byte{} // present, empty
				}
			}
		}
	}
	return m.Err()
}

// MetaFields names the fields of a metav1.ObjectMeta that SetObjectMeta sets: a cache keeps
// only what its readers use, and each cache's set is its own.
type MetaFields uint8

const (
	MetaName MetaFields = 1 << iota
	MetaNamespace
	MetaUID
	MetaResourceVersion
	MetaCreationTimestamp
	MetaDeletionTimestamp
	// MetaInitialEventsEnd is the watch-list bookmark's annotation, which the reflector waits
	// for; set, it is out's only annotation.
	MetaInitialEventsEnd
)

// SetObjectMeta sets the fields of out that fields names from what ReadObjectMeta read into
// meta, each as the generated decoder sets it: the strings copied, a timestamp present only
// when meta has it, and a malformed one an error. Fields it does not name are left as they
// are, for a cache that makes them its own way (interned, or sharing one allocation).
func SetObjectMeta(out *metav1.ObjectMeta, meta *ObjectMeta, fields MetaFields) error {
	if fields&MetaName != 0 {
		out.Name = string(meta.Name)
	}
	if fields&MetaNamespace != 0 {
		out.Namespace = string(meta.Namespace)
	}
	if fields&MetaUID != 0 {
		out.UID = types.UID(meta.UID)
	}
	if fields&MetaResourceVersion != 0 {
		out.ResourceVersion = string(meta.ResourceVersion)
	}
	if fields&MetaInitialEventsEnd != 0 && meta.InitialEventsEnd != nil {
		out.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: string(meta.InitialEventsEnd)}
	}
	if fields&MetaCreationTimestamp != 0 && meta.CreationTimestamp != nil {
		if err := out.CreationTimestamp.Unmarshal(meta.CreationTimestamp); err != nil {
			return err
		}
	}
	if fields&MetaDeletionTimestamp != 0 && meta.DeletionTimestamp != nil {
		out.DeletionTimestamp = &metav1.Time{}
		return out.DeletionTimestamp.Unmarshal(meta.DeletionTimestamp)
	}
	return nil
}

// replaceTime keeps the later of two occurrences of a Time field, as the generated decoder
// does, after checking the earlier one, which that decoder would have read and rejected.
func replaceTime(field *[]byte, value []byte) error {
	if *field != nil {
		var t metav1.Time
		if err := t.Unmarshal(*field); err != nil {
			return err
		}
	}
	*field = value
	return nil
}

// Compact is the metadata a cache's compact object keeps, embedded in it: what the reflector
// and client-go's stores read of an object (meta.Accessor, through GetObjectMeta), and no
// more. The object adds what its cache keeps and a DeepCopyObject.
type Compact struct {
	Namespace, Name, ResourceVersion string
	// InitialEventsEnd is the watch-list bookmark's annotation, empty on anything else.
	InitialEventsEnd string
}

// CompactOf copies what Compact keeps of meta.
func CompactOf(meta *ObjectMeta) Compact {
	c := Compact{Name: string(meta.Name), ResourceVersion: string(meta.ResourceVersion)}
	if len(meta.Namespace) > 0 {
		c.Namespace = string(meta.Namespace)
	}
	if meta.InitialEventsEnd != nil {
		c.InitialEventsEnd = string(meta.InitialEventsEnd)
	}
	return c
}

// CompactOfMeta is CompactOf for an object decoded in full (JSON).
func CompactOfMeta(meta *metav1.ObjectMeta) Compact {
	return Compact{Namespace: meta.Namespace, Name: meta.Name, ResourceVersion: meta.ResourceVersion,
		InitialEventsEnd: meta.Annotations[metav1.InitialEventsAnnotationKey]}
}

// GetObjectMeta is the metadata the reflector and client-go's stores read.
func (c *Compact) GetObjectMeta() metav1.Object {
	meta := &metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name, ResourceVersion: c.ResourceVersion}
	if c.InitialEventsEnd != "" {
		meta.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: c.InitialEventsEnd}
	}
	return meta
}

// GetObjectKind is empty: a cache's objects have no kind of their own.
func (c *Compact) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
