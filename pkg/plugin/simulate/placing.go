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

package simulate

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
)

// placing is what a question's pods need of each Node, as keep-rules of the node cache's
// decoder (nodecache.Rules). Where one of them passes the node-only filters (a candidate)
// the node is kept for the filters (whole: its labels only those the pods' selectors name
// unless allLabels: the allocator reads the others; every taint; the allocatable
// resources). Elsewhere the node-only filters have said all there is to say: the node is
// kept as its name and the reason they give each pod (stub: the labels the selectors name,
// the taints that keep pods off).
type placing struct {
	pods        []*corev1.Pod
	stub, whole *nodecache.NodeTrimmer
	// every: every node is kept whole (Kueue counts the nodes the filters reject).
	every bool
	// required are the labels a node must carry to be read at all (Question.Within).
	required []string
}

// within reports a node that carries every required label.
func (p *placing) within(n *corev1.Node) bool {
	for _, k := range p.required {
		if _, ok := n.Labels[k]; !ok {
			return false
		}
	}
	return true
}

// newPlacing is the placing of q's pods; allLabels keeps every label of the kept nodes.
func newPlacing(q Question, allLabels bool) *placing {
	keys := map[string]bool{}
	for _, pod := range q.Pods {
		for _, k := range capacity.SelectorKeys(pod) {
			keys[k] = true
		}
	}
	for _, k := range append(slices.Clone(q.Labels), q.Within...) {
		keys[k] = true
	}
	selected := func(key string) bool { return keys[key] }
	labels := selected
	if allLabels {
		labels = func(string) bool { return true }
	}
	return &placing{pods: q.Pods, every: q.EveryNode, required: q.Within,
		stub: nodecache.NewTrimmer(nodecache.Rules{Label: selected, Taint: nodecache.KeepsPodsOff, WholeTaints: true}),
		whole: nodecache.NewTrimmer(nodecache.Rules{Label: labels, Taint: func(corev1.Taint) bool { return true }, WholeTaints: true,
			Allocatable: func(string) bool { return true }, Conditions: q.EveryNode}),
	}
}

// Rejection is a node where the node-only filters reject every pod of a question, with the
// reason they give each (by the pod's index).
type Rejection struct {
	Node    string
	Reasons []string
}

// trim returns what the question needs of n: the node kept for the filters, or, when it is
// no candidate, its Rejection. Trimming a node trim kept gives it back the same.
func (p *placing) trim(n *corev1.Node) (*corev1.Node, *Rejection) {
	reasons := make([]string, len(p.pods))
	candidate := p.every
	for i, pod := range p.pods {
		reasons[i] = capacity.NodeOnlyReason(pod, n)
		candidate = candidate || reasons[i] == ""
	}
	if !candidate {
		return nil, &Rejection{Node: n.Name, Reasons: reasons}
	}
	return p.whole.TrimNode(n), nil
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
	return p.stub.TrimNode(n)
}

// decodeNode decodes a protobuf Node for trim through the node cache's decoder: first by the
// stub's rules (what the node-only filters read), then, for a candidate, by the whole's.
// Images, conditions, addresses and the labels that are not kept are skipped unread.
func (p *placing) decodeNode(b []byte) (*corev1.Node, error) {
	if p.every {
		return p.whole.DecodeNode(b)
	}
	stub, err := p.stub.DecodeNode(b)
	if err != nil || !slices.ContainsFunc(p.pods, func(pod *corev1.Pod) bool { return capacity.NodeOnlyReason(pod, stub) == "" }) {
		return stub, err
	}
	return p.whole.DecodeNode(b)
}
