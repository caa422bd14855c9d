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

// Package nodecache is where Nodes are cached: each Node is decoded straight into a trimmed
// form (what the keep-rules below name), GPU nodes are held as Nodes and the others as
// metadata, behind an informer, a lister and the event handlers the controllers share. The
// same decoder reads the node lists of `kubectl gpuinv scan`, and, with keep-rules of their
// own (Rules), the Nodes of `why` and `fit`. docs/design/node-cache.md says why.
package nodecache

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// The keep-rules: what the node cache holds of a Node. Both the typed trim (Trim) and the
// protobuf decoder (DecodeNode) use these, so the two forms cannot drift apart.
const (
	// lifecycleTaintPrefix: the node lifecycle controller's taints (unreachable, not-ready).
	lifecycleTaintPrefix = "node.kubernetes.io/"
	// resourcePrefix: the capacity and allocatable resources the inventory reads.
	resourcePrefix = "nvidia.com/"
)

// Keeps reports whether the cache holds label key in a node's Labels, where selectors see
// it: the labels the inventory reads and those that node selectors name.
func (t *NodeTrimmer) Keeps(key string) bool {
	return t.selectorKeys[key] || inventory.ReadsLabel(key)
}

// KeepsLevel reports whether the cache holds label key of a GPU node, in its Labels or with
// its levels (Levels).
func (t *NodeTrimmer) KeepsLevel(key string) bool {
	return t.levelKeys[key] || t.Keeps(key)
}

// keepsTaint reports whether the cache holds a taint: the node lifecycle controller's, and
// every taint that keeps pods off the node, which the inventory shows beside the node's free
// GPUs.
func keepsTaint(t corev1.Taint) bool {
	return strings.HasPrefix(t.Key, lifecycleTaintPrefix) || KeepsPodsOff(t)
}

// KeepsPodsOff reports a taint that keeps pods without its toleration off the node:
// NoSchedule or NoExecute (kube-scheduler's TaintToleration filter reads no other).
func KeepsPodsOff(t corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// keptTaint is the part of a kept taint the cache holds: not when it was added.
func keptTaint(t corev1.Taint) corev1.Taint {
	return corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect}
}

// Rules are a trimmer's keep-rules: what it keeps of a Node besides its name,
// resourceVersion, timestamps and unschedulable. The node cache's (NewNodeTrimmer) are the
// rules above; another reader of Nodes that needs other parts of them (the plugin's
// scheduler simulation) gives its own to NewTrimmer and decodes through the same decoder.
type Rules struct {
	// Label reports whether a label is kept.
	Label func(key string) bool
	// Taint reports whether a taint is kept; WholeTaints keeps it whole (with the time it was
	// added), else its key, value and effect.
	Taint       func(corev1.Taint) bool
	WholeTaints bool
	// Capacity and Allocatable report whether a resource of the capacity or the allocatable
	// resources is kept; nil keeps none.
	Capacity, Allocatable func(name string) bool
	// Conditions keeps the Ready and GPU health conditions (keepsCondition).
	Conditions bool
}

// cacheRules are the node cache's keep-rules; labels are t.KeepsLevel's.
func (t *NodeTrimmer) cacheRules() Rules {
	return Rules{Label: t.KeepsLevel, Taint: keepsTaint, Capacity: keepsResource, Allocatable: keepsResource, Conditions: true}
}

// keptTaintOf is the part of a kept taint the rules hold.
func (r *Rules) keptTaintOf(t corev1.Taint) corev1.Taint {
	if r.WholeTaints {
		return t
	}
	return keptTaint(t)
}

// keepsResource reports whether the cache holds a capacity or allocatable resource.
func keepsResource(name string) bool { return strings.HasPrefix(name, resourcePrefix) }

// maxHealthConditions bounds the health monitors' conditions the cache keeps of one node,
// so that a writer of ever-new condition types cannot grow it; Ready is always kept.
const maxHealthConditions = 32

// keepsCondition reports whether the cache holds a node condition of type t: Ready and the
// GPU health monitors' conditions that the inventory reads.
func keepsCondition(t corev1.NodeConditionType) bool {
	return t == corev1.NodeReady || inventory.IsHealthCondition(t)
}

// keptConditions collects the conditions the cache holds of one node, in the node's order:
// type and status only, as the inventory reads nothing else. Heartbeat, reason and message,
// which their writers rewrite, are dropped, so a heartbeat leaves the cached node unchanged.
type keptConditions struct {
	list   []corev1.NodeCondition
	health int
}

// add keeps a condition of type t (keepsCondition must be true) unless the health bound is
// reached.
func (k *keptConditions) add(t corev1.NodeConditionType, status corev1.ConditionStatus) {
	if t != corev1.NodeReady {
		if k.health == maxHealthConditions {
			return
		}
		k.health++
	}
	k.list = append(k.list, corev1.NodeCondition{Type: t, Status: status})
}
