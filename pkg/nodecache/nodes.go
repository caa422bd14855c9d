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
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/intern"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// NodeTrimmer is an informer transform and the decoder of the same form: it keeps what its
// keep-rules (Rules) name. The node cache's (NewNodeTrimmer) keep only what the inventory and
// the node selectors read (name, the labels the inventory reads and those that selectors name, the
// status of the Ready condition and of the GPU health monitors' conditions, unschedulable,
// lifecycle taints, nvidia.com resources) so that kubelet status such as images, addresses,
// volumes, managedFields and the dozens of other feature labels never enter the cache. The
// kept conditions' heartbeat, reason and message are dropped too: a status update that
// leaves every condition's status as it was leaves the cached node unchanged. Objects other
// than Nodes pass through untouched.
type NodeTrimmer struct {
	rules        Rules
	selectorKeys map[string]bool
	// levelKeys are the topology levels' keys that no selector names and the inventory does
	// not read: a GPU node keeps them apart from its Labels (see Levels).
	levelKeys map[string]bool
	interned  intern.Strings // label keys and values repeat across nodes

	// GPU nodes of one model and configuration keep identical label sets and resource
	// lists, and most nodes have the same taints (or none) and conditions: the decoder
	// gives them one shared copy each.
	labelSets      sharedSets[map[string]string]
	levelSets      sharedSets[map[string]string]
	resourceLists  sharedSets[corev1.ResourceList]
	taintLists     sharedSets[[]corev1.Taint]
	conditionLists sharedSets[[]corev1.NodeCondition]

	passing nodeChunks // DecodeNode's Nodes that are no GPU nodes
}

// NewNodeTrimmer returns a trimmer that also keeps the given label keys (those that node
// selectors name). A selector naming any other key needs a new trimmer and a re-list.
func NewNodeTrimmer(selectorKeys []string) *NodeTrimmer {
	t := &NodeTrimmer{selectorKeys: map[string]bool{}}
	for _, k := range selectorKeys {
		t.selectorKeys[k] = true
	}
	t.rules = t.cacheRules()
	return t
}

// KeepLevels makes t keep the label keys of topology levels too, before t decodes anything.
// A GPU node's levels that no selector names and the inventory does not read are held apart
// from its Labels, in a set of their own (Levels): label sets are shared by the nodes of one
// model and configuration, and a rack or host label in them would make a set per domain.
func (t *NodeTrimmer) KeepLevels(keys []string) *NodeTrimmer {
	for _, k := range keys {
		if !t.selectorKeys[k] && !inventory.ReadsLabel(k) {
			if t.levelKeys == nil {
				t.levelKeys = map[string]bool{}
			}
			t.levelKeys[k] = true
		}
	}
	return t
}

// Levels are the topology labels a cached GPU node holds apart from its Labels (see
// KeepLevels). They live in the cached Node's Annotations, of which the cache keeps nothing
// else (the watch-list bookmark's marker is on bookmarks, which the cache never holds); the
// labels of a level a selector names are in its Labels.
func Levels(node *corev1.Node) map[string]string { return node.Annotations }

// NewTrimmer returns a trimmer that keeps what rules say, decoding as the node cache's does.
func NewTrimmer(rules Rules) *NodeTrimmer {
	return &NodeTrimmer{rules: rules}
}

// Bounds of the tables of sets shared by all nodes, so that ever-changing values cannot
// grow them forever: a full table starts over (nodes keep what they have; what no node uses
// is freed). A fleet needs little of them (its label values and sets repeat across nodes),
// so what a kubelet writing ever-new values leaves behind stays small.
const (
	maxShared         = 4096    // sets per table
	maxSharedBytes    = 1 << 20 // what the sets of one table cost
	maxSharedSetBytes = 64 << 10
)

// setCost is what a table's set costs: its key (the encoded set) and the set built from it,
// about twice as large.
func setCost(key []byte) int { return 3 * len(key) }

// sharedSets hands out one copy of each distinct set, built on first sight. The sets are
// shared by the cached nodes like everything in an informer's cache: read-only. When the
// table is full it starts over: nodes keep the sets they have, sets that no node uses any
// more are freed, and sets seen from then on are shared again.
type sharedSets[T any] struct {
	mu    sync.Mutex
	sets  map[string]T
	bytes int // the sets' cost (setCost)
}

func (s *sharedSets[T]) get(key []byte, build func() (T, error)) (T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if set, ok := s.sets[string(key)]; ok {
		return set, nil
	}
	set, err := build()
	if err != nil || len(key) > maxSharedSetBytes {
		return set, err // a huge set is not kept for others
	}
	if s.sets == nil || len(s.sets) >= maxShared || s.bytes+setCost(key) > maxSharedBytes {
		s.sets, s.bytes = map[string]T{}, 0
	}
	s.sets[string(key)] = set
	s.bytes += setCost(key)
	return set, nil
}

// intern returns the one copy of s that the cached nodes share (s may be a view).
func (t *NodeTrimmer) intern(s string) string { return t.interned.Intern(s) }

// Trim is the transform function.
func (t *NodeTrimmer) Trim(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return t.trim(node), nil
}

// TrimNode returns what t keeps of node (a trimmed node gives back the same).
func (t *NodeTrimmer) TrimNode(node *corev1.Node) *corev1.Node { return t.trim(node) }

func (t *NodeTrimmer) trim(node *corev1.Node) *corev1.Node {
	var kept, levels map[string]string
	for k, v := range node.Labels {
		switch {
		case t.levelKeys[k]:
			if levels == nil {
				levels = map[string]string{}
			}
			levels[t.intern(k)] = t.intern(v)
		case t.rules.Label(k):
			if kept == nil {
				kept = map[string]string{}
			}
			kept[t.intern(k)] = t.intern(v)
		}
	}
	trimmed := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:              node.Name,
			ResourceVersion:   node.ResourceVersion,
			Labels:            kept,
			CreationTimestamp: node.CreationTimestamp,
			DeletionTimestamp: node.DeletionTimestamp,
		},
		Spec: corev1.NodeSpec{Unschedulable: node.Spec.Unschedulable, Taints: t.keptTaints(node.Spec.Taints)},
		Status: corev1.NodeStatus{
			Capacity:    keptResources(node.Status.Capacity, t.rules.Capacity),
			Allocatable: keptResources(node.Status.Allocatable, t.rules.Allocatable),
		},
	}
	var conditions keptConditions
	for _, c := range node.Status.Conditions {
		if t.rules.Conditions && keepsCondition(c.Type) {
			conditions.add(corev1.NodeConditionType(t.intern(string(c.Type))), c.Status)
		}
	}
	trimmed.Status.Conditions = conditions.list
	if inventory.IsGPUNode(trimmed) {
		trimmed.UID = node.UID // a GpuNode record's owner reference names it
		trimmed.Annotations = levels
	}
	if v, ok := node.Annotations[metav1.InitialEventsAnnotationKey]; ok {
		// The watch-list bookmark's marker: the reflector waits for it.
		trimmed.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: v}
	}
	return trimmed
}

// cacheForm is the node informer's transform: the cache keeps a GPU node as the trimmed Node
// it comes as, and any other node as its name and resourceVersion only (an otherNode: no
// inventory counts it). Anything else passes untouched, so it may run twice.
func cacheForm(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok || inventory.IsGPUNode(node) {
		return obj, nil
	}
	return &otherNode{Compact: kubeproto.CompactOfMeta(&node.ObjectMeta)}, nil
}

// otherNode is what the cache holds of a node that is no GPU node: what the informer reads
// (name, resourceVersion) and no more.
type otherNode struct {
	kubeproto.Compact
}

func (n *otherNode) DeepCopyObject() runtime.Object {
	c := *n
	return &c
}

// NodesClient lists and watches Nodes: kubeclient.Nodes on a client whose decoder trims them
// (NodeTrimmer.Codec), or a fake clientset's in tests. A client that cannot serve watch-lists
// says so with IsWatchListSemanticsUnSupported, as client-go's fake clientsets do.
type NodesClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// NewNodeInformer returns the node cache's informer on nodes. The cache holds a *corev1.Node
// for each GPU node and the name and resourceVersion of every other (see cacheForm), so the
// informer has no example object (it would drop events of any other type than its
// example's); read it with a NodeLister, as client-go's NodeLister fails on the metadata. No
// namespace index: nodes have none.
func NewNodeInformer(nodes NodesClient, resync time.Duration) cache.SharedIndexInformer {
	informer := cache.NewSharedIndexInformerWithOptions(kubeclient.ListWatch[*corev1.NodeList](nodes, nil), nil, cache.SharedIndexInformerOptions{
		ResyncPeriod:      resync,
		Indexers:          cache.Indexers{},
		ObjectDescription: "*v1.Node", // in the reflector's log lines
	})
	_ = informer.SetTransform(cacheForm) // fails only once the informer has started
	return informer
}

// NodeLister lists the Nodes of a node cache, leaving out the nodes it keeps as metadata.
type NodeLister struct{ indexer cache.Indexer }

// NewNodeLister returns a NodeLister for the cache of a node informer.
func NewNodeLister(informer cache.SharedIndexInformer) NodeLister {
	return NodeLister{indexer: informer.GetIndexer()}
}

// List returns the cached Nodes whose labels selector matches.
func (l NodeLister) List(selector labels.Selector) ([]*corev1.Node, error) {
	var nodes []*corev1.Node
	err := cache.ListAll(l.indexer, selector, func(obj any) {
		if node, ok := obj.(*corev1.Node); ok {
			nodes = append(nodes, node)
		}
	})
	return nodes, err
}

// Get returns the cached GPU node of that name; false when there is none (deleted, or no GPU
// node: those are cached as metadata only).
func (l NodeLister) Get(name string) (*corev1.Node, bool) {
	obj, ok, err := l.indexer.GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	node, ok := obj.(*corev1.Node)
	return node, ok
}

// keptTaints returns the taints the rules keep.
func (t *NodeTrimmer) keptTaints(taints []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, taint := range taints {
		if t.rules.Taint(taint) {
			out = append(out, t.rules.keptTaintOf(taint))
		}
	}
	return out
}

// keptResources returns the resources keeps accepts (none when it is nil).
func keptResources(list corev1.ResourceList, keeps func(string) bool) corev1.ResourceList {
	var out corev1.ResourceList
	for name, q := range list {
		if keeps != nil && keeps(string(name)) {
			if out == nil {
				out = corev1.ResourceList{}
			}
			out[name] = q
		}
	}
	return out
}

// NodeChanged reports whether anything the operator reads differs between two cached
// (trimmed) versions of a node, so that update events that change nothing of interest, such
// as resyncs and heartbeats, are dropped before they reach a queue.
func NodeChanged(old, cur *corev1.Node) bool {
	return old.Spec.Unschedulable != cur.Spec.Unschedulable ||
		!slices.Equal(old.Spec.Taints, cur.Spec.Taints) || // key, value and effect only
		!maps.Equal(old.Labels, cur.Labels) || !maps.Equal(Levels(old), Levels(cur)) ||
		!slices.Equal(old.Status.Conditions, cur.Status.Conditions) || // type and status only
		!sameResources(old.Status.Capacity, cur.Status.Capacity) ||
		!sameResources(old.Status.Allocatable, cur.Status.Allocatable)
}

func sameResources(a, b corev1.ResourceList) bool {
	return maps.EqualFunc(a, b, func(x, y resource.Quantity) bool { return x.Cmp(y) == 0 })
}

// NodeFromObj returns the Node inside an informer event object, including the final state of
// a node whose deletion the informer missed.
func NodeFromObj(obj any) (*corev1.Node, bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	node, ok := obj.(*corev1.Node)
	return node, ok
}

// NodeHandler returns the Node event handlers both controllers use: onNode(old, cur) for
// adds (old nil), deletes (old nil, cur the last state) and the updates that change
// something the operator reads (NodeChanged); updates of a node that is kept as metadata
// before and after (no GPU node) are dropped. forget is called with the name of a deleted
// node and of one that is no longer cached as a Node (no GPU node any more).
func NodeHandler(forget func(name string), onNode func(old, cur any)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { onNode(nil, obj) },
		UpdateFunc: func(old, cur any) {
			oldNode, ok1 := NodeFromObj(old)
			curNode, ok2 := NodeFromObj(cur)
			switch {
			case !ok1 && !ok2:
				return // no GPU node before or after: nothing an inventory reads
			case ok1 && ok2 && !NodeChanged(oldNode, curNode):
				return
			case ok1 && !ok2:
				forget(oldNode.Name) // no GPU node any more: NodeLister leaves it out
			}
			onNode(old, cur)
		},
		DeleteFunc: func(obj any) {
			if node, ok := NodeFromObj(obj); ok {
				forget(node.Name)
			}
			onNode(nil, obj)
		},
	}
}
