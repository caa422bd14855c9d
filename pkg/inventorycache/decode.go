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
// them without their node lists, which the inventory controller remembers instead, and
// without status.topology, which it never reads back.
package inventorycache

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	sigsjson "sigs.k8s.io/json"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// NewInformerClient returns a homelab.youngju.dev/v1 REST client whose decoder leaves
// status.nodes and status.topology out of every GpuInventory it reads (such an object has
// ListedNodes > 0 and no Nodes; see NodesOmitted); anything else (GpuNode records, say) is
// decoded as usual. Its
// watches read each JSON event in place. Read through kubeclient.GpuInventories and
// kubeclient.GpuNodes. docs/design/status-write.md says why.
func NewInformerClient(config *rest.Config) (rest.Interface, error) {
	// JSON watch events are cut from the stream by a structural scan (jsonFramer) and read in
	// place: the event's object is the frame's own bytes, which client-go's watch decoder
	// decodes before it reads the next frame.
	framed := kubeproto.WithStreamSerializer(withoutNodeLists{
		NegotiatedSerializer: rest.CodecFactoryForGeneratedClient(kubeclient.Scheme, kubeclient.Codecs).WithoutConversion(),
	}, runtime.ContentTypeJSON, func(stream *runtime.StreamSerializerInfo) { stream.Framer = jsonFramer{} })
	ns := kubeproto.WithWatchEventReader(framed, runtime.ContentTypeJSON, func(frame []byte) (string, []byte, bool, error) {
		typ, object, ok := watchEvent(frame)
		return typ, object, ok, nil
	})
	rc, err := kubeclient.New(config, homelabv1.SchemeGroupVersion, ns)
	if err != nil {
		return nil, fmt.Errorf("create GpuInventory informer client: %w", err)
	}
	return rc, nil
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
// other object (a Status with an error, say), or one that cannot be read so, goes to the
// wrapped decoder.
func (d nodeListSkippingDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
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
	return d.next.Decode(data, defaults, into)
}

// decodeWithoutNodes decodes a GpuInventory with status.nodes cut out first, so that the
// decoder never reads the node list. TypeMeta stays empty, as the generated client's own
// decoder leaves it.
func decodeWithoutNodes(data []byte) (*homelabv1.GpuInventory, bool) {
	cut, ok := cutNodeLists(data, false)
	if !ok {
		return nil, false
	}
	gi := &homelabv1.GpuInventory{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(cut, gi); err != nil || gi.GroupVersionKind() != inventoryGVK {
		return nil, false
	}
	gi.TypeMeta = metav1.TypeMeta{}
	return gi, true
}

func decodeListWithoutNodes(data []byte) (*homelabv1.GpuInventoryList, bool) {
	cut, ok := cutNodeLists(data, true)
	if !ok {
		return nil, false
	}
	list := &homelabv1.GpuInventoryList{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(cut, list); err != nil || list.GroupVersionKind() != inventoryListGVK {
		return nil, false
	}
	list.TypeMeta = metav1.TypeMeta{}
	for i := range list.Items {
		list.Items[i].TypeMeta = metav1.TypeMeta{}
	}
	return list, true
}

// NodesOmitted reports whether gi came through the informer client without its node list.
func NodesOmitted(gi *homelabv1.GpuInventory) bool {
	return len(gi.Status.Nodes) == 0 && gi.Status.ListedNodes > 0
}
