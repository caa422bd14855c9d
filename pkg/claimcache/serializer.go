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

package claimcache

import (
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// Object is a ResourceClaim as the claim serializer decodes it: what the reflector reads
// (namespace, name, resourceVersion, a bookmark's initial-events-end marker) and what the
// allocation keeps of the claim, nil when it keeps nothing.
type Object struct {
	Namespace, Name, ResourceVersion string
	// InitialEventsEnd is the value of a watch-list bookmark's k8s.io/initial-events-end
	// annotation; empty on anything else.
	InitialEventsEnd string
	Claim            *allocation.Claim
}

// GetObjectMeta is the metadata the reflector and client-go's stores read (meta.Accessor).
func (o *Object) GetObjectMeta() metav1.Object {
	meta := &metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name, ResourceVersion: o.ResourceVersion}
	if o.InitialEventsEnd != "" {
		meta.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: o.InitialEventsEnd}
	}
	return meta
}

func (o *Object) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies o; the Claim is shared (it is never modified).
func (o *Object) DeepCopyObject() runtime.Object {
	c := *o
	return &c
}

// ObjectList is a ResourceClaimList as the claim serializer decodes it.
type ObjectList struct {
	metav1.ListMeta
	Items []Object
}

func (l *ObjectList) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (l *ObjectList) DeepCopyObject() runtime.Object {
	c := &ObjectList{Items: append([]Object(nil), l.Items...)}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	return c
}

// objectOf is what the cache keeps of a claim decoded in full or in part.
func objectOf(claim *resourcev1.ResourceClaim) Object {
	return Object{
		Namespace: claim.Namespace, Name: claim.Name, ResourceVersion: claim.ResourceVersion,
		InitialEventsEnd: claim.Annotations[metav1.InitialEventsAnnotationKey],
		Claim:            allocation.FromClaim(claim),
	}
}

// NewSerializer wraps a client's serializer so that every ResourceClaim it decodes without
// a target object (list items, watch events, Result.Get) comes out as an *Object and every
// ResourceClaimList as an *ObjectList: protobuf claims are decoded by DecodeClaim's field
// walk, which reads only what the allocation keeps; JSON ones are decoded by the wrapped
// serializer and reduced with allocation.FromClaim. Other objects (a watch's Status) and
// decoding into a given object pass through untouched.
func NewSerializer(ns runtime.NegotiatedSerializer) runtime.NegotiatedSerializer {
	return claimSerializer{NegotiatedSerializer: ns}
}

type claimSerializer struct {
	runtime.NegotiatedSerializer
}

func (s claimSerializer) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return claimDecoder{next: s.NegotiatedSerializer.DecoderToVersion(d, gv)}
}

type claimDecoder struct {
	next runtime.Decoder
}

var (
	claimGVK     = resourcev1.SchemeGroupVersion.WithKind("ResourceClaim")
	claimListGVK = resourcev1.SchemeGroupVersion.WithKind("ResourceClaimList")
)

func (d claimDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if into != nil {
		return d.next.Decode(data, defaults, into)
	}
	if apiVersion, kind, raw, err := kubeproto.Envelope(data); err == nil && string(apiVersion) == GroupVersion {
		switch string(kind) {
		case claimGVK.Kind:
			claim, err := decodeMinimal(raw)
			if err != nil {
				return nil, nil, fmt.Errorf("decode ResourceClaim: %w", err)
			}
			obj := objectOf(claim)
			gvk := claimGVK
			return &obj, &gvk, nil
		case claimListGVK.Kind:
			list, err := decodeList(raw)
			if err != nil {
				return nil, nil, fmt.Errorf("decode ResourceClaimList: %w", err)
			}
			gvk := claimListGVK
			return list, &gvk, nil
		}
	}
	obj, gvk, err := d.next.Decode(data, defaults, nil)
	switch o := obj.(type) {
	case *resourcev1.ResourceClaim:
		kept := objectOf(o)
		return &kept, gvk, err
	case *resourcev1.ResourceClaimList:
		list := &ObjectList{ListMeta: o.ListMeta, Items: make([]Object, len(o.Items))}
		for i := range o.Items {
			list.Items[i] = objectOf(&o.Items[i])
		}
		return list, gvk, err
	}
	return obj, gvk, err
}

// decodeList decodes a protobuf ResourceClaimList, each item as DecodeClaim does.
func decodeList(b []byte) (*ObjectList, error) {
	list := &ObjectList{}
	err := kubeproto.DecodeList(b, &list.ListMeta, func(item []byte) error {
		claim, err := decodeMinimal(item)
		if err != nil {
			return fmt.Errorf("item %d: %w", len(list.Items)+1, err)
		}
		list.Items = append(list.Items, objectOf(claim))
		return nil
	})
	return list, err
}
