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

// Object is a ResourceClaim as the claim codec decodes it: what the reflector reads
// (namespace, name, resourceVersion, a bookmark's initial-events-end marker) and what the
// allocation keeps of the claim, nil when it keeps nothing.
type Object struct {
	kubeproto.Compact
	Claim *allocation.Claim
}

// DeepCopyObject copies o; the Claim is shared (it is never modified).
func (o *Object) DeepCopyObject() runtime.Object {
	c := *o
	return &c
}

// ObjectList is a ResourceClaimList as the claim codec decodes it.
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
	return Object{Compact: kubeproto.CompactOfMeta(&claim.ObjectMeta), Claim: allocation.FromClaim(claim)}
}

// claimCodec decodes ResourceClaims into Objects and ResourceClaimLists into ObjectLists:
// protobuf ones by decodeMinimal, which reads only what the allocation keeps; JSON ones in
// full by the client's serializer, then reduced with allocation.FromClaim.
var claimCodec = kubeproto.Codec[Object, ObjectList]{
	GroupVersion: resourcev1.SchemeGroupVersion, Kind: "ResourceClaim", ListKind: "ResourceClaimList",
	Object: decodeObject,
	List:   decodeList,
	Reduce: reduce,
}

// decodeObject decodes a protobuf ResourceClaim as DecodeClaim does.
func decodeObject(raw []byte) (*Object, error) {
	claim, err := decodeMinimal(raw)
	if err != nil {
		return nil, err
	}
	obj := objectOf(claim)
	return &obj, nil
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

// reduce makes an Object or an ObjectList of a claim or a list decoded in full.
func reduce(obj runtime.Object) runtime.Object {
	switch o := obj.(type) {
	case *resourcev1.ResourceClaim:
		kept := objectOf(o)
		return &kept
	case *resourcev1.ResourceClaimList:
		list := &ObjectList{ListMeta: o.ListMeta, Items: make([]Object, len(o.Items))}
		for i := range o.Items {
			list.Items[i] = objectOf(&o.Items[i])
		}
		return list
	}
	return obj
}
