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
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// Codec is the Node client's codec: protobuf Nodes (list items and watch events alike) and
// NodeLists are decoded by DecodeNode, which reads only what is kept; Nodes and NodeLists in
// JSON are decoded in full and then trimmed. So no full Node reaches the informer.
func (t *NodeTrimmer) Codec() kubeproto.Codec[corev1.Node, corev1.NodeList] {
	return kubeproto.Codec[corev1.Node, corev1.NodeList]{
		GroupVersion: corev1.SchemeGroupVersion, Kind: "Node", ListKind: "NodeList",
		Object: t.DecodeNode,
		List:   t.decodeNodeList,
		Reduce: t.reduce,
	}
}

// decodeNodeList decodes a protobuf NodeList, each item by DecodeNode's rules, straight into
// the list's items.
func (t *NodeTrimmer) decodeNodeList(b []byte) (*corev1.NodeList, error) {
	list := &corev1.NodeList{}
	scratch := &nodeScratch{}
	err := kubeproto.DecodeList(b, &list.ListMeta, func(item []byte) error {
		list.Items = append(list.Items, corev1.Node{})
		return t.decodeNode(item, &list.Items[len(list.Items)-1], scratch)
	})
	return list, err
}

// reduce trims a Node or each item of a NodeList decoded in full (from JSON).
func (t *NodeTrimmer) reduce(obj runtime.Object) runtime.Object {
	switch o := obj.(type) {
	case *corev1.Node:
		return t.trim(o)
	case *corev1.NodeList:
		for i := range o.Items {
			o.Items[i] = *t.trim(&o.Items[i])
		}
	}
	return obj
}

// Field numbers of the Kubernetes protobuf messages that a node stream reads
// (k8s.io/api/core/v1/generated.proto); ObjectMeta is kubeproto.ReadObjectMeta's. They are
// part of the API's compatibility guarantee.
const (
	nodeMetadata = 1
	nodeSpec     = 2
	nodeStatus   = 3

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
//
// The node is decoded into scratch first, so that only a GPU node gets a Node of its own:
// any other is handed out from a chunk of passing Nodes (see nodeChunks), as the cache keeps
// of it its name and resourceVersion only.
func (t *NodeTrimmer) DecodeNode(b []byte) (*corev1.Node, error) {
	scratch, _ := scratchPool.Get().(*nodeScratch)
	if scratch == nil {
		scratch = &nodeScratch{}
	}
	defer scratchPool.Put(scratch)
	decoded := &scratch.node
	defer func() { *decoded = corev1.Node{} }() // the pool keeps nothing of it
	if err := t.decodeNode(b, decoded, scratch); err != nil {
		return nil, err
	}
	var node *corev1.Node
	if inventory.IsGPUNode(decoded) {
		node = &corev1.Node{}
	} else {
		node = t.passing.next()
	}
	*node = *decoded
	return node, nil
}

// scratchPool recycles the scratch of DecodeNode.
var scratchPool sync.Pool // of *nodeScratch

// decodeNode is DecodeNode into node, with scratch's room (reset first).
func (t *NodeTrimmer) decodeNode(b []byte, node *corev1.Node, scratch *nodeScratch) error {
	scratch.reset()
	meta := kubeproto.ObjectMeta{Labels: scratch.labelsBuf[:0]} // the kept labels' entries
	m := kubeproto.NewMessage(b)
	for m.Next() {
		var err error
		switch m.Tag() {
		case kubeproto.Bytes(nodeMetadata):
			err = kubeproto.ReadObjectMeta(m.Value(), t.rules.Label, &meta) // merges, if it comes twice
		case kubeproto.Bytes(nodeSpec):
			err = t.readSpec(m.Value(), &node.Spec)
		case kubeproto.Bytes(nodeStatus):
			err = t.readStatus(m.Value(), &node.Status, scratch)
		}
		if err != nil {
			return err
		}
	}
	if err := m.Err(); err != nil {
		return err
	}
	return t.setMeta(node, &meta, scratch)
}

// nodeScratch collects the raw map entries of one node before they are shared or decoded,
// and the node itself until it is known to be a GPU node.
type nodeScratch struct {
	node        corev1.Node
	key         []byte
	capacity    [][]byte
	allocatable [][]byte
	conditions  []rawCondition
	labelsBuf   [40][]byte // room for a GPU node's kept labels without growing labels
	levelsBuf   [8][]byte  // and for its levels kept apart
	condBuf     [16]rawCondition
}

// reset empties the scratch for the next node.
func (s *nodeScratch) reset() {
	s.capacity, s.allocatable = s.capacity[:0], s.allocatable[:0]
	s.conditions = s.condBuf[:0]
}

// nodeChunks hands out the Nodes the cache does not keep (no GPU node) from chunks of their
// own. They are garbage as soon as cacheForm has read them; in chunks they are collected as
// a whole and leave no holes between the GPU nodes the cache keeps, which the heap would
// otherwise hold on to.
type nodeChunks struct {
	mu   sync.Mutex
	free []corev1.Node
}

const nodeChunk = 32 // Nodes a chunk

func (c *nodeChunks) next() *corev1.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.free) == 0 {
		c.free = make([]corev1.Node, nodeChunk)
	}
	node := &c.free[0]
	c.free = c.free[1:]
	return node
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

// setMeta sets what Trim keeps of a Node's ObjectMeta from what was read of it, once the
// rest of the node is read: whether it is a GPU node decides whether its UID is kept.
func (t *NodeTrimmer) setMeta(node *corev1.Node, read *kubeproto.ObjectMeta, scratch *nodeScratch) error {
	meta := &node.ObjectMeta
	labels, levels, err := t.splitLevels(read.Labels, scratch)
	if err != nil {
		return err
	}
	if len(labels) > 0 {
		if meta.Labels, err = t.stringSet(&t.labelSets, labels, scratch); err != nil {
			return err
		}
	}
	uid := read.UID
	gpu := inventory.IsGPUNode(node)
	if !gpu {
		uid = nil
	}
	meta.Name, meta.UID, meta.ResourceVersion = identity(read.Name, uid, read.ResourceVersion)
	if err := kubeproto.SetObjectMeta(meta, read, nodeMeta); err != nil || !gpu || len(levels) == 0 || meta.Annotations != nil {
		return err
	}
	meta.Annotations, err = t.stringSet(&t.levelSets, levels, scratch)
	return err
}

// splitLevels moves the entries of the labels kept apart (KeepLevels) out of entries, into
// scratch's room for them.
func (t *NodeTrimmer) splitLevels(entries [][]byte, scratch *nodeScratch) (labels, levels [][]byte, err error) {
	if len(t.levelKeys) == 0 {
		return entries, nil, nil
	}
	labels, levels = entries[:0], scratch.levelsBuf[:0]
	for _, e := range entries {
		key, _, err := kubeproto.MapEntry(e)
		if err != nil {
			return nil, nil, err
		}
		if t.levelKeys[kubeproto.View(key)] {
			levels = append(levels, e)
		} else {
			labels = append(labels, e)
		}
	}
	return labels, levels, nil
}

// nodeMeta is what Trim keeps of a Node's metadata besides the labels and the identity,
// which setMeta makes its own way (shared label sets, one allocation for the identity).
const nodeMeta = kubeproto.MetaCreationTimestamp | kubeproto.MetaDeletionTimestamp | kubeproto.MetaInitialEventsEnd

// identity returns a node's name, UID and resourceVersion as parts of one string: one
// allocation a node, not three.
func identity(name, uid, resourceVersion []byte) (string, types.UID, string) {
	var b strings.Builder
	b.Grow(len(name) + len(uid) + len(resourceVersion))
	b.Write(name)
	b.Write(uid)
	b.Write(resourceVersion)
	s := b.String()
	n, u := len(name), len(name)+len(uid)
	return s[:n], types.UID(s[n:u]), s[u:]
}

// stringSet builds (or shares, from sets) the map of a node's raw label entries.
func (t *NodeTrimmer) stringSet(sets *sharedSets[map[string]string], entries [][]byte, scratch *nodeScratch) (map[string]string, error) {
	return sets.get(scratch.setKey(entries), func() (map[string]string, error) {
		labels := make(map[string]string, len(entries))
		for _, e := range entries {
			key, value, err := kubeproto.MapEntry(e)
			if err != nil {
				return nil, err
			}
			labels[t.intern(kubeproto.View(key))] = t.intern(kubeproto.View(value))
		}
		return labels, nil
	})
}

// readSpec reads unschedulable and the kept taints (shared with the nodes that have the
// same).
func (t *NodeTrimmer) readSpec(b []byte, spec *corev1.NodeSpec) error {
	var taints []corev1.Taint
	var key []byte
	m := kubeproto.NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case kubeproto.Varint(specUnschedulable):
			spec.Unschedulable = m.Varint() != 0
		case kubeproto.Bytes(specTaints):
			var taint corev1.Taint
			if err := taint.Unmarshal(m.Value()); err != nil {
				return err
			}
			if t.rules.Taint(taint) {
				taint = t.rules.keptTaintOf(taint)
				taints = append(taints, taint)
				key = protowire.AppendString(protowire.AppendString(protowire.AppendString(key, taint.Key), taint.Value), string(taint.Effect))
				if taint.TimeAdded != nil {
					key = protowire.AppendVarint(key, uint64(taint.TimeAdded.UnixNano()))
				}
			}
		}
	}
	if err := m.Err(); err != nil || len(taints) == 0 {
		return err
	}
	var err error
	spec.Taints, err = t.taintLists.get(key, func() ([]corev1.Taint, error) { return taints, nil })
	return err
}

// readStatus reads the kept conditions and nvidia.com resources; their entries are collected
// in scratch first, to be shared with the nodes that have the same.
func (t *NodeTrimmer) readStatus(b []byte, status *corev1.NodeStatus, scratch *nodeScratch) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case kubeproto.Bytes(statusCapacity):
			keep, err := keepsResourceEntry(m.Value(), t.rules.Capacity)
			if err != nil {
				return err
			}
			if keep {
				scratch.capacity = append(scratch.capacity, m.Value())
			}
		case kubeproto.Bytes(statusAllocatable):
			keep, err := keepsResourceEntry(m.Value(), t.rules.Allocatable)
			if err != nil {
				return err
			}
			if keep {
				scratch.allocatable = append(scratch.allocatable, m.Value())
			}
		case kubeproto.Bytes(statusConditions):
			typ, condStatus, err := readCondition(m.Value())
			if err != nil {
				return err
			}
			if t.rules.Conditions && keepsCondition(corev1.NodeConditionType(kubeproto.View(typ))) {
				scratch.conditions = append(scratch.conditions, rawCondition{typ, condStatus})
			}
		}
	}
	if err := m.Err(); err != nil {
		return err
	}
	var err error
	if status.Conditions, err = t.conditionList(scratch); err != nil {
		return err
	}
	if status.Capacity, err = t.resourceList(scratch, scratch.capacity); err != nil {
		return err
	}
	status.Allocatable, err = t.resourceList(scratch, scratch.allocatable)
	return err
}

// keepsResourceEntry reports whether keeps accepts the resource of a capacity or allocatable
// map entry (none when it is nil).
func keepsResourceEntry(e []byte, keeps func(string) bool) (bool, error) {
	if keeps == nil {
		return false, nil
	}
	key, _, err := kubeproto.MapEntry(e)
	return err == nil && keeps(kubeproto.View(key)), err
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
			if err := kubeproto.Quantity(value, &q); err != nil { // too long to parse safely: refused
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
	m := kubeproto.NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case kubeproto.Bytes(conditionType):
			condType = m.Value()
		case kubeproto.Bytes(conditionStatus):
			status = conditionStatusOf(m.Value())
		}
	}
	return condType, status, m.Err()
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
