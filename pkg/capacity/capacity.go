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

// Package capacity answers "does this pod fit on that node now" by kube-scheduler's own rules:
// the filters that decide GPU placement (node name, unschedulable, taints, node affinity,
// resources, DRA claims) in the scheduler's order and words, with DRA claims allocated by
// the scheduler's allocator library (k8s.io/dynamic-resource-allocation/structured) and
// extended resources mapped to DRA by its DeviceClass resolver. It makes no API calls: it
// reads a Cluster of objects, whole or trimmed by its keep-rules (keep.go).
package capacity

import (
	"cmp"
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
)

// Cluster is the state the scheduler decides on.
type Cluster struct {
	Nodes []*corev1.Node
	// Pods are the cluster's pods; those that finished are ignored, as the scheduler's pod
	// informer never sees them, and those bound to a node hold their requests there, even
	// while they terminate.
	Pods []*corev1.Pod
	// Usage is what more pods bound to each node hold, by node name: counted rather than
	// listed, for pods no answer names (PodsOn does not return them).
	Usage   map[string]*Usage
	Slices  []*resourcev1.ResourceSlice
	Claims  []*resourcev1.ResourceClaim
	Classes []*resourcev1.DeviceClass
	// TaintRules taint the devices they select, as if their slices listed the taint.
	TaintRules []*resourcev1.DeviceTaintRule
}

// Features are the DRA features kube-scheduler v1.37 enables by default.
var Features = structured.Features{
	AdminAccess:             true,
	DeviceTaints:            true,
	PrioritizedList:         true,
	PartitionableDevices:    true,
	DeviceBindingAndStatus:  true,
	ConsumableCapacity:      true,
	FractionalCapacityRange: true,
}

// Snapshot is a Cluster indexed for questions. It is not safe for concurrent use.
type Snapshot struct {
	nodes    map[string]*nodeInfo
	names    []string // node names, sorted
	slices   []*resourcev1.ResourceSlice
	claims   map[types.NamespacedName]*resourcev1.ResourceClaim
	classes  classLister
	resolver *extendedresourcecache.ExtendedResourceCache
	state    structured.AllocatedState
	celCache *cel.Cache
	memo     requestsMemo // requestsOf
}

// nodeInfo is what the scheduler's NodeInfo holds of a node for the filters here.
type nodeInfo struct {
	node *corev1.Node
	pods []*corev1.Pod
	Usage
}

// Usage is what bound pods hold on a node, as the scheduler's NodeInfo counts them: how
// many, and the sum of their requests.
type Usage struct {
	count int64
	// requested sums the pods' requests: CPU in millicores, the rest in their unit.
	requested map[corev1.ResourceName]int64
}

// NewSnapshot indexes c.
func NewSnapshot(c Cluster) *Snapshot {
	s := &Snapshot{
		nodes:    make(map[string]*nodeInfo, len(c.Nodes)),
		slices:   withTaintRules(c.Slices, c.TaintRules),
		claims:   make(map[types.NamespacedName]*resourcev1.ResourceClaim, len(c.Claims)),
		classes:  newClassLister(c.Classes),
		resolver: extendedresourcecache.NewExtendedResourceCache(klog.Background()),
		state:    allocatedState(c.Claims),
		celCache: cel.NewCache(64, cel.Features{EnableConsumableCapacity: Features.ConsumableCapacity}),
	}
	for _, n := range c.Nodes {
		s.nodes[n.Name] = &nodeInfo{node: n}
		s.names = append(s.names, n.Name)
	}
	slices.Sort(s.names)
	for _, p := range c.Pods {
		if n := s.nodes[p.Spec.NodeName]; n != nil && !finished(p) {
			n.add(p)
		}
	}
	for name, u := range c.Usage {
		if n := s.nodes[name]; n != nil {
			n.merge(u)
		}
	}
	for _, cl := range c.Claims {
		s.claims[types.NamespacedName{Namespace: cl.Namespace, Name: cl.Name}] = cl
	}
	// Oldest first, so that the resolver's tie-break between classes naming the same
	// extended resource sees them in the order the scheduler's informer would.
	classes := slices.Clone(c.Classes)
	slices.SortStableFunc(classes, func(a, b *resourcev1.DeviceClass) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	for _, cl := range classes {
		s.resolver.OnAdd(cl, true)
	}
	return s
}

// Nodes returns the names of the snapshot's nodes, sorted.
func (s *Snapshot) Nodes() []string { return s.names }

// Node returns the named node, or nil.
func (s *Snapshot) Node(name string) *corev1.Node {
	if n := s.nodes[name]; n != nil {
		return n.node
	}
	return nil
}

func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// add counts a bound pod on the node as the scheduler's NodeInfo does.
func (n *nodeInfo) add(p *corev1.Pod) {
	n.pods = append(n.pods, p)
	n.Add(p)
}

// Add counts a bound pod, as the scheduler's NodeInfo counts it (finished pods are not
// bound pods: the caller leaves them out).
func (u *Usage) Add(p *corev1.Pod) { u.AddRequests(podRequests(p)) }

// AddRequests counts a bound pod whose effective request (Requests) is requests.
func (u *Usage) AddRequests(requests corev1.ResourceList) {
	u.count++
	if u.requested == nil {
		u.requested = map[corev1.ResourceName]int64{}
	}
	for name, q := range requests {
		if name == corev1.ResourceCPU {
			u.requested[name] += q.MilliValue()
			continue
		}
		u.requested[name] += q.Value()
	}
}

// merge adds what o counts.
func (u *Usage) merge(o *Usage) {
	u.count += o.count
	if u.requested == nil && len(o.requested) > 0 {
		u.requested = map[corev1.ResourceName]int64{}
	}
	for name, v := range o.requested {
		u.requested[name] += v
	}
}

// podRequests is the pod's effective request, computed as the scheduler's PodInfo does with
// v1.37's default features.
func podRequests(p *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{UseStatusResources: true})
}

// allocated returns the value of a resource on the node's allocatable, in the unit requests
// are summed in.
func (n *nodeInfo) allocatable(name corev1.ResourceName) (int64, bool) {
	q, ok := n.node.Status.Allocatable[name]
	if !ok {
		return 0, false
	}
	if name == corev1.ResourceCPU {
		return q.MilliValue(), true
	}
	return q.Value(), true
}

// podsOn returns the pods bound to the node that are not finished, by name.
func (s *Snapshot) podsOn(node string) []*corev1.Pod {
	n := s.nodes[node]
	if n == nil {
		return nil
	}
	out := slices.Clone(n.pods)
	slices.SortFunc(out, func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

var background = context.Background()
