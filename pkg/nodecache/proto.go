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

package nodecache

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// ProtobufMagic starts every protobuf object the API server sends (kubeproto.ProtobufMagic).
var ProtobufMagic = kubeproto.ProtobufMagic

// NewTrimmingSerializer wraps a client's serializer so that every Node it decodes (list
// items and watch events alike) comes out trimmed: protobuf Nodes are decoded by
// t.DecodeNode, which reads only what is kept; Nodes and NodeLists in JSON are decoded by the
// wrapped serializer and then trimmed. Other objects pass through untouched.
func NewTrimmingSerializer(ns runtime.NegotiatedSerializer, t *NodeTrimmer) runtime.NegotiatedSerializer {
	return trimmingSerializer{NegotiatedSerializer: ns, trimmer: t}
}

type trimmingSerializer struct {
	runtime.NegotiatedSerializer
	trimmer *NodeTrimmer
}

func (s trimmingSerializer) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return trimmingDecoder{next: s.NegotiatedSerializer.DecoderToVersion(d, gv), trimmer: s.trimmer}
}

type trimmingDecoder struct {
	next    runtime.Decoder
	trimmer *NodeTrimmer
}

var nodeGVK = corev1.SchemeGroupVersion.WithKind("Node")

func (d trimmingDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if _, isNode := into.(*corev1.Node); into == nil || isNode {
		apiVersion, kind, raw, err := kubeproto.Envelope(data)
		if err == nil && string(apiVersion) == "v1" && string(kind) == "Node" {
			node, err := d.trimmer.DecodeNode(raw)
			if err != nil {
				return nil, nil, fmt.Errorf("decode Node: %w", err)
			}
			gvk := nodeGVK
			if into != nil {
				*into.(*corev1.Node) = *node
				return into, &gvk, nil
			}
			return node, &gvk, nil
		}
	}
	obj, gvk, err := d.next.Decode(data, defaults, into)
	switch o := obj.(type) {
	case *corev1.Node:
		*o = *d.trimmer.trim(o)
	case *corev1.NodeList:
		for i := range o.Items {
			o.Items[i] = *d.trimmer.trim(&o.Items[i])
		}
	}
	return obj, gvk, err
}

// Field numbers of the Kubernetes protobuf messages that a node stream reads
// (k8s.io/api/core/v1/generated.proto, k8s.io/apimachinery/.../generated.proto). They are part
// of the API's compatibility guarantee.
const (
	nodeMetadata = 1
	nodeSpec     = 2
	nodeStatus   = 3

	metaName              = 1
	metaUID               = 5
	metaResourceVersion   = 6
	metaCreationTimestamp = 8
	metaDeletionTimestamp = 9
	metaLabels            = 11
	metaAnnotations       = 12

	specUnschedulable = 4
	specTaints        = 5

	statusCapacity    = 1
	statusAllocatable = 2
	statusConditions  = 4

	conditionType   = 1
	conditionStatus = 2
)

// DecodeNode decodes a protobuf Node (the message, without the envelope) straight into its
// trimmed form: only what Trim keeps is decoded, and images, addresses, managed fields and
// the other labels are skipped unread. Label sets, resource lists and taint lists that other
// nodes already have are shared with them (see sharedSets); label strings are interned.
// TestDecodeNodeEqualsTrim keeps the result equal to Trim of the fully decoded Node.
func (t *NodeTrimmer) DecodeNode(b []byte) (*corev1.Node, error) {
	scratch := &nodeScratch{}
	scratch.labels = scratch.labelsBuf[:0]
	scratch.conditions = scratch.condBuf[:0]
	node := &corev1.Node{}
	err := kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case nodeMetadata:
			return t.trimmedMeta(v, &node.ObjectMeta, scratch)
		case nodeSpec:
			return t.trimmedSpec(v, &node.Spec)
		case nodeStatus:
			return t.trimmedStatus(v, &node.Status, scratch)
		}
		return nil
	})
	return node, err
}

// nodeScratch collects the raw map entries of one node before they are shared or decoded.
type nodeScratch struct {
	key         []byte
	labels      [][]byte
	capacity    [][]byte
	allocatable [][]byte
	conditions  []rawCondition
	labelsBuf   [40][]byte // room for a GPU node's kept labels without growing labels
	condBuf     [16]rawCondition
}

// setKey is the identity of a list of raw protobuf entries: each length-prefixed, so that
// different lists never have the same key.
func (s *nodeScratch) setKey(entries [][]byte) []byte {
	size := 0
	for _, e := range entries {
		size += protowire.SizeBytes(len(e))
	}
	if cap(s.key) < size {
		s.key = make([]byte, 0, size)
	}
	s.key = s.key[:0]
	for _, e := range entries {
		s.key = protowire.AppendBytes(s.key, e)
	}
	return s.key
}

func (t *NodeTrimmer) trimmedMeta(b []byte, meta *metav1.ObjectMeta, scratch *nodeScratch) error {
	err := kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case metaName:
			meta.Name = string(v)
		case metaUID:
			meta.UID = types.UID(v)
		case metaResourceVersion:
			meta.ResourceVersion = string(v)
		case metaCreationTimestamp:
			return meta.CreationTimestamp.Unmarshal(v)
		case metaDeletionTimestamp:
			meta.DeletionTimestamp = &metav1.Time{}
			return meta.DeletionTimestamp.Unmarshal(v)
		case metaLabels:
			key, _, err := kubeproto.MapEntry(v)
			if err == nil && t.Keeps(kubeproto.View(key)) {
				scratch.labels = append(scratch.labels, v)
			}
			return err
		case metaAnnotations:
			// Only the watch-list bookmark's marker: the reflector waits for it.
			key, value, err := kubeproto.MapEntry(v)
			if err != nil || string(key) != metav1.InitialEventsAnnotationKey {
				return err
			}
			meta.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: string(value)}
		}
		return nil
	})
	if err != nil || len(scratch.labels) == 0 {
		return err
	}
	meta.Labels, err = t.labelSets.get(scratch.setKey(scratch.labels), func() (map[string]string, error) {
		labels := make(map[string]string, len(scratch.labels))
		for _, e := range scratch.labels {
			key, value, err := kubeproto.MapEntry(e)
			if err != nil {
				return nil, err
			}
			labels[t.intern(kubeproto.View(key))] = t.intern(kubeproto.View(value))
		}
		return labels, nil
	})
	return err
}

func (t *NodeTrimmer) trimmedSpec(b []byte, spec *corev1.NodeSpec) error {
	var taints []corev1.Taint
	var key []byte
	err := kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, varint uint64) error {
		switch {
		case num == specUnschedulable && typ == protowire.VarintType:
			spec.Unschedulable = varint != 0
		case num == specTaints && typ == protowire.BytesType:
			var taint corev1.Taint
			if err := taint.Unmarshal(v); err != nil {
				return err
			}
			if keepsTaint(taint.Key) {
				taints = append(taints, keptTaint(taint))
				key = protowire.AppendString(protowire.AppendString(key, taint.Key), string(taint.Effect))
			}
		}
		return nil
	})
	if err != nil || len(taints) == 0 {
		return err
	}
	spec.Taints, err = t.taintLists.get(key, func() ([]corev1.Taint, error) { return taints, nil })
	return err
}

func (t *NodeTrimmer) trimmedStatus(b []byte, status *corev1.NodeStatus, scratch *nodeScratch) error {
	err := kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case statusCapacity, statusAllocatable:
			key, _, err := kubeproto.MapEntry(v)
			if err != nil || !keepsResourceBytes(key) {
				return err
			}
			if num == statusCapacity {
				scratch.capacity = append(scratch.capacity, v)
			} else {
				scratch.allocatable = append(scratch.allocatable, v)
			}
		case statusConditions:
			typ, condStatus, err := readCondition(v)
			if err == nil && keepsCondition(corev1.NodeConditionType(kubeproto.View(typ))) {
				scratch.conditions = append(scratch.conditions, rawCondition{typ, condStatus})
			}
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	if status.Conditions, err = t.conditionList(scratch); err != nil {
		return err
	}
	if status.Capacity, err = t.resourceList(scratch, scratch.capacity); err != nil {
		return err
	}
	status.Allocatable, err = t.resourceList(scratch, scratch.allocatable)
	return err
}

// resourceList decodes (or shares) the nvidia.com resources among a node's raw entries.
func (t *NodeTrimmer) resourceList(scratch *nodeScratch, entries [][]byte) (corev1.ResourceList, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	return t.resourceLists.get(scratch.setKey(entries), func() (corev1.ResourceList, error) {
		list := make(corev1.ResourceList, len(entries))
		for _, e := range entries {
			key, value, err := kubeproto.MapEntry(e)
			if err != nil {
				return nil, err
			}
			var q resource.Quantity
			if err := q.Unmarshal(value); err != nil {
				return nil, fmt.Errorf("resource %s: %w", key, err)
			}
			list[corev1.ResourceName(t.intern(kubeproto.View(key)))] = q
		}
		return list, nil
	})
}

// readCondition reads a NodeCondition's type and status only (the type's bytes are not
// copied). Heartbeat, reason and message, which a kubelet or monitor rewrites, are skipped
// unread.
func readCondition(b []byte) (condType []byte, status corev1.ConditionStatus, err error) {
	err = kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch {
		case num == conditionType && typ == protowire.BytesType:
			condType = v
		case num == conditionStatus && typ == protowire.BytesType:
			status = conditionStatusOf(v)
		}
		return nil
	})
	return condType, status, err
}

// rawCondition is a kept condition's type (bytes of the message) and status.
type rawCondition struct {
	typ    []byte
	status corev1.ConditionStatus
}

// conditionList builds (or shares) the conditions the cache keeps of a node, as Trim keeps
// them (keptConditions).
func (t *NodeTrimmer) conditionList(scratch *nodeScratch) ([]corev1.NodeCondition, error) {
	if len(scratch.conditions) == 0 {
		return nil, nil
	}
	key := scratch.key[:0]
	for _, c := range scratch.conditions {
		key = protowire.AppendString(protowire.AppendBytes(key, c.typ), string(c.status))
	}
	scratch.key = key
	return t.conditionLists.get(key, func() ([]corev1.NodeCondition, error) {
		var kept keptConditions
		for _, c := range scratch.conditions {
			condType := corev1.NodeReady
			if kubeproto.View(c.typ) != string(corev1.NodeReady) {
				condType = corev1.NodeConditionType(t.intern(kubeproto.View(c.typ)))
			}
			kept.add(condType, c.status)
		}
		return kept.list, nil
	})
}

// conditionStatusOf returns the status named by v, without allocating for the three that
// the API defines.
func conditionStatusOf(v []byte) corev1.ConditionStatus {
	switch string(v) {
	case string(corev1.ConditionTrue):
		return corev1.ConditionTrue
	case string(corev1.ConditionFalse):
		return corev1.ConditionFalse
	case string(corev1.ConditionUnknown):
		return corev1.ConditionUnknown
	}
	return corev1.ConditionStatus(v)
}
