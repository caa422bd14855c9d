package controller

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// ProtobufMagic starts every protobuf object the API server sends (a runtime.Unknown follows).
var ProtobufMagic = []byte("k8s\x00")

// NewTrimmingSerializer wraps a client's serializer so that every Node it decodes (list
// items and watch events alike) comes out trimmed: protobuf Nodes are decoded by
// t.DecodeNode instead of in full (a realistic Node is about 20 KB, of which the inventory
// reads a few hundred bytes); Nodes and NodeLists in JSON are decoded by the wrapped
// serializer and then trimmed. Other objects pass through untouched.
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
	if _, isNode := into.(*corev1.Node); (into == nil || isNode) && bytes.HasPrefix(data, ProtobufMagic) {
		apiVersion, kind, raw, err := unknownEnvelope(data[len(ProtobufMagic):])
		if err == nil && apiVersion == "v1" && kind == "Node" {
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

// Field numbers of runtime.Unknown and runtime.TypeMeta.
const (
	unknownTypeMeta = 1
	unknownRaw      = 2
	typeMetaVersion = 1
	typeMetaKind    = 2
)

// unknownEnvelope reads a runtime.Unknown without copying its raw bytes.
func unknownEnvelope(b []byte) (apiVersion, kind string, raw []byte, err error) {
	err = protoFields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case unknownTypeMeta:
			return protoFields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				switch {
				case num == typeMetaVersion && typ == protowire.BytesType:
					apiVersion = string(v)
				case num == typeMetaKind && typ == protowire.BytesType:
					kind = string(v)
				}
				return nil
			})
		case unknownRaw:
			raw = v
		}
		return nil
	})
	if err == nil && raw == nil {
		err = errors.New("protobuf object without content")
	}
	return apiVersion, kind, raw, err
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

	mapKey   = 1
	mapValue = 2
)

// protoFields calls fn for each field of the message b: num, type, the value of a
// length-delimited field or the varint.
func protoFields(b []byte, fn func(num protowire.Number, typ protowire.Type, value []byte, varint uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var value []byte
		var varint uint64
		switch typ {
		case protowire.BytesType:
			value, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			varint, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, value, varint); err != nil {
			return err
		}
	}
	return nil
}

// mapEntry returns the key and the value bytes of a protobuf map entry.
func mapEntry(b []byte) (key string, value []byte, err error) {
	err = protoFields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch {
		case num == mapKey && typ == protowire.BytesType:
			key = string(v)
		case num == mapValue && typ == protowire.BytesType:
			value = v
		}
		return nil
	})
	return key, value, err
}

// DecodeNode decodes a protobuf Node (the message, without the envelope) straight into its
// trimmed form: only what Trim keeps is decoded (labels interned), and images, addresses,
// managed fields and the other labels are skipped unread. TestDecodeNodeEqualsTrim keeps it
// equal to Trim of the fully decoded Node.
func (t *NodeTrimmer) DecodeNode(b []byte) (*corev1.Node, error) {
	return decodeTrimmedNode(b, t.Keeps, t.intern)
}

func decodeTrimmedNode(b []byte, keep func(string) bool, intern func(string) string) (*corev1.Node, error) {
	node := &corev1.Node{}
	err := protoFields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case nodeMetadata:
			return trimmedMeta(v, &node.ObjectMeta, keep, intern)
		case nodeSpec:
			return trimmedSpec(v, &node.Spec)
		case nodeStatus:
			return trimmedStatus(v, &node.Status)
		}
		return nil
	})
	return node, err
}

func trimmedMeta(b []byte, meta *metav1.ObjectMeta, keep func(string) bool, intern func(string) string) error {
	return protoFields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
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
			key, value, err := mapEntry(v)
			if err != nil || !keep(key) {
				return err
			}
			if meta.Labels == nil {
				meta.Labels = map[string]string{}
			}
			meta.Labels[intern(key)] = intern(string(value))
		case metaAnnotations:
			// Only the watch-list bookmark's marker: the reflector waits for it.
			key, value, err := mapEntry(v)
			if err != nil || key != metav1.InitialEventsAnnotationKey {
				return err
			}
			meta.Annotations = map[string]string{key: string(value)}
		}
		return nil
	})
}

func trimmedSpec(b []byte, spec *corev1.NodeSpec) error {
	return protoFields(b, func(num protowire.Number, typ protowire.Type, v []byte, varint uint64) error {
		switch {
		case num == specUnschedulable && typ == protowire.VarintType:
			spec.Unschedulable = varint != 0
		case num == specTaints && typ == protowire.BytesType:
			var taint corev1.Taint
			if err := taint.Unmarshal(v); err != nil {
				return err
			}
			if strings.HasPrefix(taint.Key, "node.kubernetes.io/") { // the lifecycle taints, as NodeTrimmer keeps
				spec.Taints = append(spec.Taints, corev1.Taint{Key: taint.Key, Effect: taint.Effect})
			}
		}
		return nil
	})
}

func trimmedStatus(b []byte, status *corev1.NodeStatus) error {
	return protoFields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case statusCapacity, statusAllocatable:
			key, value, err := mapEntry(v)
			if err != nil || !strings.HasPrefix(key, "nvidia.com/") {
				return err
			}
			var q resource.Quantity
			if err := q.Unmarshal(value); err != nil {
				return fmt.Errorf("resource %s: %w", key, err)
			}
			list := &status.Capacity
			if num == statusAllocatable {
				list = &status.Allocatable
			}
			if *list == nil {
				*list = corev1.ResourceList{}
			}
			(*list)[corev1.ResourceName(key)] = q
		case statusConditions:
			var c corev1.NodeCondition
			if err := c.Unmarshal(v); err != nil {
				return err
			}
			if c.Type == corev1.NodeReady {
				status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason,
					Message: c.Message, LastTransitionTime: c.LastTransitionTime}}
			}
		}
		return nil
	})
}
