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

// Package inventorycache is where GpuInventories are cached: the informer's client decodes
// them without their node lists, which the inventory controller remembers instead.
package inventorycache

import (
	"bytes"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	sigsjson "sigs.k8s.io/json"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned/scheme"
)

// NewInformerClient returns a clientset whose decoder leaves status.nodes out of every
// GpuInventory it reads (such an object has ListedNodes > 0 and no Nodes; see NodesOmitted);
// anything else is decoded as usual. docs/design/status-write.md says why.
func NewInformerClient(config *rest.Config) (versioned.Interface, error) {
	cfg := rest.CopyConfig(config)
	gv := homelabv1.SchemeGroupVersion
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = withoutNodeLists{
		NegotiatedSerializer: rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion(),
	}
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("create GpuInventory informer client: %w", err)
	}
	return versioned.New(rc), nil
}

type withoutNodeLists struct {
	runtime.NegotiatedSerializer
}

func (s withoutNodeLists) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return nodeListSkippingDecoder{next: s.NegotiatedSerializer.DecoderToVersion(d, gv)}
}

type nodeListSkippingDecoder struct {
	next runtime.Decoder
}

var (
	inventoryGVK     = homelabv1.SchemeGroupVersion.WithKind("GpuInventory")
	inventoryListGVK = homelabv1.SchemeGroupVersion.WithKind("GpuInventoryList")
)

// Decode reads a GpuInventory or a GpuInventoryList in JSON without its node lists; any
// other object (a Status with an error, say), or one the shadow types cannot read, goes to
// the wrapped decoder.
func (d nodeListSkippingDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		switch target := into.(type) {
		case nil:
			if gi, ok := decodeWithoutNodes(data); ok {
				gvk := inventoryGVK
				return gi, &gvk, nil
			}
		case *homelabv1.GpuInventory:
			if gi, ok := decodeWithoutNodes(data); ok {
				*target = *gi
				gvk := inventoryGVK
				return target, &gvk, nil
			}
		case *homelabv1.GpuInventoryList:
			if list, ok := decodeListWithoutNodes(data); ok {
				*target = *list
				gvk := inventoryListGVK
				return target, &gvk, nil
			}
		}
	}
	return d.next.Decode(data, defaults, into)
}

// skipped reads any JSON value and keeps nothing of it.
type skipped struct{}

func (*skipped) UnmarshalJSON([]byte) error { return nil }

// The shadow types: a "nodes" field at a shallower depth hides the embedded one.
type statusWithoutNodes struct {
	homelabv1.GpuInventoryStatus
	Nodes skipped `json:"nodes"`
}

type inventoryWithoutNodes struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              homelabv1.GpuInventorySpec `json:"spec"`
	Status            statusWithoutNodes         `json:"status"`
}

func (s *inventoryWithoutNodes) inventory() *homelabv1.GpuInventory {
	// TypeMeta stays empty, as the generated client's own decoder leaves it.
	return &homelabv1.GpuInventory{ObjectMeta: s.ObjectMeta, Spec: s.Spec, Status: s.Status.GpuInventoryStatus}
}

type listWithoutNodes struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []inventoryWithoutNodes `json:"items"`
}

func decodeWithoutNodes(data []byte) (*homelabv1.GpuInventory, bool) {
	var shadow inventoryWithoutNodes
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &shadow); err != nil ||
		shadow.GroupVersionKind() != inventoryGVK {
		return nil, false
	}
	return shadow.inventory(), true
}

func decodeListWithoutNodes(data []byte) (*homelabv1.GpuInventoryList, bool) {
	var shadow listWithoutNodes
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &shadow); err != nil ||
		shadow.GroupVersionKind() != inventoryListGVK {
		return nil, false
	}
	list := &homelabv1.GpuInventoryList{ListMeta: shadow.ListMeta, Items: make([]homelabv1.GpuInventory, len(shadow.Items))}
	for i := range shadow.Items {
		list.Items[i] = *shadow.Items[i].inventory()
	}
	return list, true
}

// NodesOmitted reports whether gi came through the informer client without its node list.
func NodesOmitted(gi *homelabv1.GpuInventory) bool {
	return len(gi.Status.Nodes) == 0 && gi.Status.ListedNodes > 0
}
