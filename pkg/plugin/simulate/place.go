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
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// place places every object's replicas, one at a time, on the snapshot.

func (v *View) Place(in *Workload) (*printer.Fit, error) {
	a := &printer.Fit{Objects: []printer.FitCount{}, Pods: []printer.FitPod{}}
	for k, o := range in.objects {
		templates := in.templatesIn(o.namespace)
		fc := printer.FitCount{Object: o.kind + "/" + o.name, Namespace: o.namespace, Replicas: o.replicas}
		for i := int64(0); i < o.replicas; i++ {
			pod := o.pod(i)
			claims, err := v.snap.PodClaims(pod, templates)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", o, err)
			}
			results, err := v.FitAll(pod, claims, k)
			if err != nil {
				return nil, fmt.Errorf("%s: replica %s: %w", o, pod.Name, err)
			}
			fp := printer.FitPod{Object: fc.Object, Namespace: o.namespace, Pod: pod.Name}
			r, ok := v.bestFit(pod, results)
			var miss *printer.Preemption
			if !ok && v.Preempt {
				if r, fp.Preempts, miss, err = v.preemptFor(pod, claims, results); err != nil {
					return nil, fmt.Errorf("%s: replica %s: %w", o, pod.Name, err)
				}
				ok = miss == nil
			}
			if !ok {
				a.Pods = append(a.Pods, fp)
				if a.FirstMiss == nil {
					d, err := v.Diagnose(pod, claims, results)
					if err != nil {
						return nil, fmt.Errorf("%s: replica %s: %w", o, pod.Name, err)
					}
					a.FirstMiss = &printer.FitMiss{Object: o.String(), Namespace: o.namespace, Pod: pod.Name, Diagnosis: d, Preemption: miss}
				}
				fc.NotTried = o.replicas - i - 1 // the same pod: it would not fit either
				break
			}
			a.Preempted += int64(len(fp.Preempts))
			fp.Node, fp.Resources, fp.Claims = r.Node, v.devicePluginGPUs(pod, r.Node), v.assume(pod, claims, r)
			a.Pods = append(a.Pods, fp)
			fc.Placed++
		}
		a.Objects = append(a.Objects, fc)
		a.Replicas += fc.Replicas
		a.Placed += fc.Placed
	}
	a.Fits = a.Placed == a.Replicas && a.Preempted == 0
	a.FitsByPreemption = a.Placed == a.Replicas && a.Preempted > 0
	return a, nil
}

// preemptFor runs the scheduler's preemption for a replica no node takes: on the node it
// picks, the victims are evicted and the replica fits there. miss is what preemption says
// when it finds no such node.
func (v *View) preemptFor(pod *corev1.Pod, claims []*resourcev1.ResourceClaim, results []capacity.Result) (capacity.Result, []printer.Victim, *printer.Preemption, error) {
	p, err := v.snap.Preempt(pod, claims, results)
	if err != nil {
		return capacity.Result{}, nil, nil, err
	}
	answer := v.answerOf(pod, p)
	if len(p.Candidates) == 0 {
		return capacity.Result{}, nil, answer, nil
	}
	best := p.Candidates[0]
	v.snap.Evict(best.Node, best.Victims)
	r, err := v.snap.Fit(pod, claims, best.Node)
	if err != nil || !r.Fits() {
		return r, nil, answer, err
	}
	return r, answer.Candidates[0].Victims, nil, nil
}

// bestFit picks, of the nodes that fit, the one with the fewest free GPU units left once the
// pod is there (the first by name on a tie).
func (v *View) bestFit(pod *corev1.Pod, results []capacity.Result) (capacity.Result, bool) {
	var best capacity.Result
	var bestLeft int64
	found := false
	for _, r := range results {
		if !r.Fits() {
			continue
		}
		left := v.gpuUnits(r.Node) - v.taken(pod, r)
		if !found || left < bestLeft {
			best, bestLeft, found = r, left, true
		}
	}
	return best, found
}

// gpuUnits are the node's free GPU units: device-plugin GPU resources and DRA GPUs.
func (v *View) gpuUnits(node string) int64 {
	var n int64
	for name, q := range v.snap.Node(node).Status.Allocatable {
		if allocation.IsGPUResource(string(name)) && !q.IsZero() {
			n += v.snap.DevicePluginFree(node, name)
		}
	}
	return n + v.snap.FreeDevices(node, allocation.DRADriver)
}

// taken are the GPU units the pod takes on r's node: its device-plugin GPUs and the GPUs
// allocated to its claims.
func (v *View) taken(pod *corev1.Pod, r capacity.Result) int64 {
	var n int64
	for _, q := range v.devicePluginGPUs(pod, r.Node) {
		n += q
	}
	for i := range r.Allocations {
		for _, d := range resultDevices(&r.Allocations[i]) {
			if !d.AdminAccess && d.Driver == allocation.DRADriver {
				n++
			}
		}
	}
	return n
}

// devicePluginGPUs are the GPU resources the pod requests that the node's device plugins
// serve (the others are served through DRA there, if at all).
func (v *View) devicePluginGPUs(pod *corev1.Pod, node string) map[string]int64 {
	out := map[string]int64{}
	for name, n := range GPURequests(pod) {
		if q, ok := v.snap.Node(node).Status.Allocatable[corev1.ResourceName(name)]; ok && !q.IsZero() {
			out[name] = n
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// assume places the pod on r's node for the questions that follow, as the scheduler's cache
// would: its new claims allocated as r says and named in its status, a shared claim (named by
// resourceClaimName) allocated once for every replica. It returns what the pod's claims hold.
func (v *View) assume(pod *corev1.Pod, claims []*resourcev1.ResourceClaim, r capacity.Result) []printer.PodClaim {
	var out []printer.PodClaim
	mine := map[*resourcev1.ResourceClaim]bool{} // the claims PodClaims gave: the others are for extended resources
	for _, c := range claims {
		mine[c] = true
	}
	made := map[*resourcev1.ResourceClaim]bool{}
	for i, c := range r.Claims {
		made[c] = true
		out = append(out, printer.PodClaim{Name: c.Name, Allocated: true, Devices: resultDevices(&r.Allocations[i])})
		if v.claims[nsName(c.Namespace, c.Name)] == c {
			c.Status.Allocation = r.Allocations[i].DeepCopy() // the snapshot's own, shared claim
			continue
		}
		allocated := c.DeepCopy()
		allocated.Status.Allocation = r.Allocations[i].DeepCopy()
		v.claims[nsName(c.Namespace, c.Name)] = allocated
		if mine[c] {
			pod.Status.ResourceClaimStatuses = append(pod.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{
				Name: strings.TrimPrefix(c.Name, pod.Name+"-"), ResourceClaimName: &allocated.Name})
			continue
		}
		st := &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: c.Name}
		for name := range GPURequests(pod) {
			if _, viaPlugin := v.devicePluginGPUs(pod, r.Node)[name]; !viaPlugin {
				st.RequestMappings = append(st.RequestMappings, corev1.ContainerExtendedResourceRequest{ResourceName: name})
			}
		}
		pod.Status.ExtendedResourceClaimStatus = st
	}
	for _, c := range claims {
		if !made[c] && c.Status.Allocation != nil {
			out = append(out, printer.PodClaim{Name: c.Name, Allocated: true, Devices: AllocatedDevices(c)})
		}
	}
	v.snap.Assume(pod, r)
	return out
}

// GPURequests are the pod's GPU resource requests, as the scheduler computes them.
func GPURequests(pod *corev1.Pod) map[string]int64 {
	requests := capacity.Requests(pod)
	var out map[string]int64
	for _, name := range gpuResourceNames(requests) {
		if out == nil {
			out = map[string]int64{}
		}
		q := requests[name]
		out[string(name)] = q.Value()
	}
	return out
}

// ClaimLookup finds claims in the snapshot.
func (v *View) ClaimLookup() func(ns, name string) (*resourcev1.ResourceClaim, error) {
	return func(ns, name string) (*resourcev1.ResourceClaim, error) {
		return v.claims[nsName(ns, name)], nil
	}
}
