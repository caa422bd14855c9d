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
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// View is a cluster snapshot with its claims by name, for why and fit.
type View struct {
	snap   *capacity.Snapshot
	claims map[types.NamespacedName]*resourcev1.ResourceClaim
	// rejected are the nodes outside the snapshot: those where the node-only filters reject
	// every pod of the question, by name.
	rejected []Rejection
	// empty is the cluster with nothing held (no pods, no claims), made on first use: a node
	// where a pod does not fit even then is not made room on by freeing GPUs.
	empty   *capacity.Snapshot
	cluster capacity.Cluster
	// Preempt: replicas that fit nowhere are placed by the scheduler's preemption (fit).
	Preempt bool
}

func NewView(l Loaded) *View {
	cl := l.Cluster
	v := &View{snap: capacity.NewSnapshot(cl), cluster: cl, rejected: l.Rejected, claims: make(map[types.NamespacedName]*resourcev1.ResourceClaim, len(cl.Claims))}
	for _, c := range cl.Claims {
		v.claims[nsName(c.Namespace, c.Name)] = c
	}
	return v
}

// PodClaims are the pod's claims as the scheduler finds them: in the snapshot, or made from
// templates (by name).
func (v *View) PodClaims(pod *corev1.Pod, templates map[string]*resourcev1.ResourceClaimTemplate) ([]*resourcev1.ResourceClaim, error) {
	return v.snap.PodClaims(pod, templates)
}

// FitAll is the scheduler's verdict on the pod on every node, in name order: the snapshot's
// filters on its nodes, and the reason the node-only filters gave pod k of the question on
// the rejected ones (the pod is pod k, or a replica of it).
func (v *View) FitAll(pod *corev1.Pod, claims []*resourcev1.ResourceClaim, k int) ([]capacity.Result, error) {
	results, err := v.snap.FitAll(pod, claims)
	if err != nil || len(v.rejected) == 0 {
		return results, err
	}
	out := make([]capacity.Result, 0, len(results)+len(v.rejected))
	rejected := v.rejected
	for _, r := range results {
		for len(rejected) > 0 && rejected[0].Node < r.Node {
			out = append(out, capacity.Result{Node: rejected[0].Node, Reasons: []string{rejected[0].Reasons[k]}})
			rejected = rejected[1:]
		}
		out = append(out, r)
	}
	for _, n := range rejected {
		out = append(out, capacity.Result{Node: n.Node, Reasons: []string{n.Reasons[k]}})
	}
	return out, nil
}

// Diagnose explains results in which no node fits the pod.
func (v *View) Diagnose(pod *corev1.Pod, claims []*resourcev1.ResourceClaim, results []capacity.Result) (*printer.Diagnosis, error) {
	d := &printer.Diagnosis{Message: capacity.Message(results), Reasons: []printer.ReasonCount{}, Nodes: []printer.NodeReasons{}, Nearest: []printer.NearNode{}}
	byReason := map[string][]string{}
	for _, r := range results {
		d.Nodes = append(d.Nodes, printer.NodeReasons{Node: r.Node, Reasons: r.Reasons})
		for _, reason := range r.Reasons {
			byReason[reason] = append(byReason[reason], r.Node)
		}
	}
	for reason, nodes := range byReason {
		d.Reasons = append(d.Reasons, printer.ReasonCount{Reason: reason, Count: len(nodes), Nodes: nodes})
	}
	// As the scheduler sorts them: as the strings "COUNT REASON".
	sort.Slice(d.Reasons, func(i, j int) bool {
		return fmt.Sprintf("%v %v", d.Reasons[i].Count, d.Reasons[i].Reason) < fmt.Sprintf("%v %v", d.Reasons[j].Count, d.Reasons[j].Reason)
	})
	for _, r := range results {
		if r.Fits() || !roomOnly(r.Reasons) {
			continue
		}
		if fits, err := v.fitsEmpty(pod, claims, r.Node); err != nil || !fits {
			if err != nil {
				return nil, err
			}
			continue
		}
		n := printer.NearNode{Node: r.Node, Reasons: r.Reasons}
		var err error
		if n.Room, err = v.room(pod, claims, r.Node); err != nil {
			return nil, err
		}
		for _, rm := range n.Room {
			n.Missing += rm.Requested - rm.Free
		}
		d.Nearest = append(d.Nearest, n)
	}
	slices.SortStableFunc(d.Nearest, func(a, b printer.NearNode) int {
		return cmp.Or(cmp.Compare(a.Missing, b.Missing), cmp.Compare(len(a.Reasons), len(b.Reasons)), cmp.Compare(a.Node, b.Node))
	})
	d.NearNodes = len(d.Nearest)
	d.Nearest = d.Nearest[:min(len(d.Nearest), printer.NearestShown)]
	for i := range d.Nearest {
		d.Nearest[i].Holders = v.holders(d.Nearest[i].Node)
	}
	return d, nil
}

// fitsEmpty reports whether the pod fits on the node with nothing held in the cluster.
func (v *View) fitsEmpty(pod *corev1.Pod, claims []*resourcev1.ResourceClaim, node string) (bool, error) {
	if v.empty == nil {
		v.empty = capacity.NewSnapshot(capacity.Cluster{Nodes: v.cluster.Nodes, Slices: v.cluster.Slices, Classes: v.cluster.Classes})
	}
	r, err := v.empty.Fit(pod, claims, node)
	return r.Fits(), err
}

// roomOnly reports reasons that more room would cure: resources, pod slots, claims to
// allocate.
func roomOnly(reasons []string) bool {
	for _, r := range reasons {
		if !strings.HasPrefix(r, "Insufficient ") && r != capacity.ReasonTooManyPods && r != capacity.ReasonClaimsNotFit {
			return false
		}
	}
	return len(reasons) > 0
}

// Room is what the pod could get on the node now of each GPU resource it requests and of
// each device request of its unallocated claims (counted alone, without the claim's other
// requests and constraints).
func (v *View) room(pod *corev1.Pod, claims []*resourcev1.ResourceClaim, node string) ([]printer.Room, error) {
	var out []printer.Room
	requests := capacity.Requests(pod)
	for _, name := range gpuResourceNames(requests) {
		q := requests[name]
		want := q.Value()
		var free int64
		if q, ok := v.snap.Node(node).Status.Allocatable[name]; ok && !q.IsZero() {
			free = min(want, v.snap.DevicePluginFree(node, name))
		} else {
			// Served through DRA, if at all: ask the scheduler's filters.
			var err error
			if free, err = v.snap.MaxFit(node, want, resourceProbe(pod, name)); err != nil {
				return nil, err
			}
		}
		out = append(out, printer.Room{What: string(name), Free: free, Requested: want})
	}
	for _, c := range claims {
		if c.Status.Allocation != nil {
			continue
		}
		for _, r := range c.Spec.Devices.Requests {
			if r.Exactly == nil || (r.Exactly.AllocationMode != "" && r.Exactly.AllocationMode != resourcev1.DeviceAllocationModeExactCount) {
				continue
			}
			want := max(r.Exactly.Count, 1)
			free, err := v.snap.MaxFit(node, want, requestProbe(pod, c, r))
			if err != nil {
				return nil, err
			}
			out = append(out, printer.Room{What: fmt.Sprintf("claim %s request %s", c.Name, r.Name), Free: free, Requested: want})
		}
	}
	return out, nil
}

// gpuResourceNames are the GPU resources of requests, sorted.
func gpuResourceNames(requests corev1.ResourceList) []corev1.ResourceName {
	var names []corev1.ResourceName
	for name, q := range requests {
		if allocation.IsGPUResource(string(name)) && q.Value() > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// barePod is the pod without requests or claims, for probes: the node filters still see it
// as the pod.
func barePod(pod *corev1.Pod) *corev1.Pod {
	p := pod.DeepCopy()
	p.Name += "-probe"
	p.UID += "-probe"
	p.Spec.Overhead, p.Spec.Resources, p.Spec.ResourceClaims = nil, nil, nil
	p.Status.ExtendedResourceClaimStatus = nil
	for i := range p.Spec.InitContainers {
		p.Spec.InitContainers[i].Resources = corev1.ResourceRequirements{}
	}
	for i := range p.Spec.Containers {
		p.Spec.Containers[i].Resources = corev1.ResourceRequirements{}
	}
	if len(p.Spec.Containers) == 0 {
		p.Spec.Containers = []corev1.Container{{Name: "probe"}}
	}
	return p
}

// resourceProbe asks for n of the resource alone.
func resourceProbe(pod *corev1.Pod, name corev1.ResourceName) capacity.Probe {
	return func(n int64) (*corev1.Pod, []*resourcev1.ResourceClaim) {
		p := barePod(pod)
		q := *resource.NewQuantity(n, resource.DecimalSI)
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{name: q}, Limits: corev1.ResourceList{name: q}}
		return p, nil
	}
}

// requestProbe asks for n devices of the claim's request alone.
func requestProbe(pod *corev1.Pod, claim *resourcev1.ResourceClaim, r resourcev1.DeviceRequest) capacity.Probe {
	return func(n int64) (*corev1.Pod, []*resourcev1.ResourceClaim) {
		c := claim.DeepCopy()
		c.Name += "-probe"
		c.UID += "-probe"
		req := *r.DeepCopy()
		req.Exactly.AllocationMode, req.Exactly.Count = resourcev1.DeviceAllocationModeExactCount, n
		c.Spec.Devices = resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{req}}
		return barePod(pod), []*resourcev1.ResourceClaim{c}
	}
}

// holders are the pods bound to the node that hold GPUs there, by namespace and name.
func (v *View) holders(node string) []printer.GPUHolder {
	out := []printer.GPUHolder{}
	for _, p := range v.snap.PodsOn(node) {
		h := printer.GPUHolder{Namespace: p.Namespace, Pod: p.Name, Terminating: p.DeletionTimestamp != nil}
		viaClaim := map[string]bool{} // resources a DRA claim serves (KEP-5004)
		if st := p.Status.ExtendedResourceClaimStatus; st != nil {
			for _, m := range st.RequestMappings {
				viaClaim[m.ResourceName] = true
			}
		}
		requests := capacity.Requests(p)
		for _, name := range gpuResourceNames(requests) {
			if !viaClaim[string(name)] {
				if h.Resources == nil {
					h.Resources = map[string]int64{}
				}
				q := requests[name]
				h.Resources[string(name)] = q.Value()
			}
		}
		for _, c := range v.podClaims(p) {
			for _, d := range AllocatedDevices(c) {
				if !d.AdminAccess {
					h.Devices = append(h.Devices, d.Pool+"/"+d.Device)
				}
			}
		}
		if len(h.Resources) > 0 || len(h.Devices) > 0 {
			out = append(out, h)
		}
	}
	return out
}

// podClaims are the claims of a bound pod that exist: those its spec names, made from
// templates, or made by the scheduler for its extended resources.
func (v *View) podClaims(p *corev1.Pod) []*resourcev1.ResourceClaim {
	var out []*resourcev1.ResourceClaim
	for _, name := range claimNames(p) {
		if c := v.claims[nsName(p.Namespace, name)]; c != nil {
			out = append(out, c)
		}
	}
	return out
}

// claimNames names the pod's claims that exist or should: by name, made from a template
// (once the pod's status names it), made for extended resources.
func claimNames(p *corev1.Pod) []string {
	var names []string
	for _, pc := range p.Spec.ResourceClaims {
		if pc.ResourceClaimName != nil {
			names = append(names, *pc.ResourceClaimName)
			continue
		}
		for _, st := range p.Status.ResourceClaimStatuses {
			if st.Name == pc.Name && st.ResourceClaimName != nil {
				names = append(names, *st.ResourceClaimName)
			}
		}
	}
	if st := p.Status.ExtendedResourceClaimStatus; st != nil && st.ResourceClaimName != "" {
		names = append(names, st.ResourceClaimName)
	}
	return names
}

func AllocatedDevices(c *resourcev1.ResourceClaim) []printer.AllocatedDevice {
	if c.Status.Allocation == nil {
		return nil
	}
	return resultDevices(c.Status.Allocation)
}

func resultDevices(a *resourcev1.AllocationResult) []printer.AllocatedDevice {
	var out []printer.AllocatedDevice
	for _, r := range a.Devices.Results {
		out = append(out, printer.AllocatedDevice{Request: r.Request, Driver: r.Driver, Pool: r.Pool, Device: r.Device, AdminAccess: ptr.Deref(r.AdminAccess, false)})
	}
	return out
}

func nsName(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}
