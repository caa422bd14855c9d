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

package plugin

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// placing is what a question's pods need of each Node. Where one of them passes the
// node-only filters (a candidate) the node is kept for the filters (capacity.KeepNode; its
// labels only those the pods' selectors name unless allLabels: the allocator reads the
// others). Elsewhere the node-only filters have said all there is to say: the node is kept
// as its name and the reason they give each pod.
type placing struct {
	pods      []*corev1.Pod
	keys      map[string]bool // the labels the pods' node selectors and node affinity name
	allLabels bool
}

func newPlacing(pods []*corev1.Pod, allLabels bool) *placing {
	p := &placing{pods: pods, keys: map[string]bool{}, allLabels: allLabels}
	for _, pod := range pods {
		for _, k := range capacity.SelectorKeys(pod) {
			p.keys[k] = true
		}
	}
	return p
}

// rejection is a node where the node-only filters reject every pod of a question, with the
// reason they give each (by the pod's index).
type rejection struct {
	node    string
	reasons []string
}

// trim returns what the question needs of n: the node kept for the filters, or, when it is
// no candidate, its rejection. Trimming a node trim kept gives it back the same.
func (p *placing) trim(n *corev1.Node) (*corev1.Node, *rejection) {
	reasons := make([]string, len(p.pods))
	candidate := false
	for i, pod := range p.pods {
		reasons[i] = capacity.NodeOnlyReason(pod, n)
		candidate = candidate || reasons[i] == ""
	}
	if !candidate {
		return nil, &rejection{node: n.Name, reasons: reasons}
	}
	kept := capacity.KeepNode(n)
	if !p.allLabels {
		kept.Labels = capacity.StubNode(n, p.pods).Labels // the labels the pods' selectors name
	}
	return kept, nil
}

// codec is the codec of a Node client for the question: protobuf Nodes decoded as
// decodeNode decodes them, Nodes in JSON decoded in full and then trimmed.
func (p *placing) codec() kubeproto.Codec[corev1.Node, corev1.NodeList] {
	return kubeproto.Codec[corev1.Node, corev1.NodeList]{
		GroupVersion: corev1.SchemeGroupVersion, Kind: "Node", ListKind: "NodeList",
		Object: p.decodeNode,
		List: func(b []byte) (*corev1.NodeList, error) {
			list := &corev1.NodeList{}
			err := kubeproto.DecodeList(b, &list.ListMeta, func(item []byte) error {
				n, err := p.decodeNode(item)
				if err == nil {
					list.Items = append(list.Items, *n)
				}
				return err
			})
			return list, err
		},
		Reduce: func(obj runtime.Object) runtime.Object {
			if n, ok := obj.(*corev1.Node); ok {
				return p.decoded(n)
			}
			if l, ok := obj.(*corev1.NodeList); ok {
				for i := range l.Items {
					l.Items[i] = *p.decoded(&l.Items[i])
				}
			}
			return obj
		},
	}
}

// decoded is n as decodeNode decodes it.
func (p *placing) decoded(n *corev1.Node) *corev1.Node {
	if kept, rejected := p.trim(n); rejected == nil {
		return kept
	}
	return capacity.StubNode(n, p.pods)
}

// decodeNode decodes a protobuf Node for trim: first what the node-only filters read, then,
// for a candidate, what the filters read. Images, conditions, addresses and the labels that
// are not kept are skipped unread.
func (p *placing) decodeNode(b []byte) (*corev1.Node, error) {
	selected := func(key string) bool { return p.keys[key] }
	view, err := readNode(b, selected, false)
	if err != nil || !slices.ContainsFunc(p.pods, func(pod *corev1.Pod) bool { return capacity.NodeOnlyReason(pod, view) == "" }) {
		return view, err
	}
	if p.allLabels {
		selected = func(string) bool { return true }
	}
	return readNode(b, selected, true)
}

// Field numbers of the Node messages (k8s.io/api/core/v1/generated.proto), part of the API's
// compatibility guarantee.
const (
	nodeMetadata      = 1
	nodeSpec          = 2
	nodeStatus        = 3
	specUnschedulable = 4
	specTaints        = 5
	statusAllocatable = 2
)

// readNode reads a Node message: its name, UID, the labels keepLabel accepts, unschedulable
// and taints; whole, all taints and the allocatable resources, else only the NoSchedule and
// NoExecute taints (as capacity.KeepNode and capacity.StubNode keep them). Fields given twice
// merge as the generated decoder merges them.
func readNode(b []byte, keepLabel func(string) bool, whole bool) (*corev1.Node, error) {
	n := &corev1.Node{}
	var meta kubeproto.ObjectMeta
	m := kubeproto.NewMessage(b)
	for m.Next() {
		var err error
		switch m.Tag() {
		case kubeproto.Bytes(nodeMetadata):
			err = kubeproto.ReadObjectMeta(m.Value(), keepLabel, &meta)
		case kubeproto.Bytes(nodeSpec):
			err = readNodeSpec(m.Value(), &n.Spec, whole)
		case kubeproto.Bytes(nodeStatus):
			if whole {
				err = readAllocatable(m.Value(), &n.Status)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if err := m.Err(); err != nil {
		return nil, err
	}
	n.Name, n.UID = string(meta.Name), types.UID(meta.UID)
	if meta.InitialEventsEnd != nil { // a watch's bookmark: the Nodes that exist have been sent
		n.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: string(meta.InitialEventsEnd)}
	}
	for _, e := range meta.Labels {
		key, value, err := kubeproto.MapEntry(e)
		if err != nil {
			return nil, err
		}
		if n.Labels == nil {
			n.Labels = make(map[string]string, len(meta.Labels))
		}
		n.Labels[string(key)] = string(value)
	}
	return n, nil
}

// readNodeSpec reads unschedulable and the taints (whole: all of them, else those that keep
// pods off: NoSchedule and NoExecute).
func readNodeSpec(b []byte, spec *corev1.NodeSpec, whole bool) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case kubeproto.Varint(specUnschedulable):
			spec.Unschedulable = m.Varint() != 0
		case kubeproto.Bytes(specTaints):
			var t corev1.Taint
			if err := t.Unmarshal(m.Value()); err != nil {
				return err
			}
			if whole || t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
				spec.Taints = append(spec.Taints, t)
			}
		}
	}
	return m.Err()
}

// readAllocatable reads the status's allocatable resources.
func readAllocatable(b []byte, status *corev1.NodeStatus) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		if m.Tag() != kubeproto.Bytes(statusAllocatable) {
			continue
		}
		key, value, err := kubeproto.MapEntry(m.Value())
		if err != nil {
			return err
		}
		var q resource.Quantity
		if err := kubeproto.Quantity(value, &q); err != nil {
			return fmt.Errorf("allocatable %s: %w", key, err)
		}
		if status.Allocatable == nil {
			status.Allocatable = corev1.ResourceList{}
		}
		status.Allocatable[corev1.ResourceName(key)] = q
	}
	return m.Err()
}
