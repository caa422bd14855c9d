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

package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// allocationTotals are the figures of the cluster inventory's status.allocation that the
// pods determine, computed here from the pods as created, by docs/api.md's rules.
type allocationTotals struct {
	Gpus, Free, Pods, PendingPods, PendingGpus int32
	Milli                                      int64
	Pending                                    map[string]int32 // GPUs asked for per pinned base model ("": any)
}

// expectAllocation computes what pods hold on fleet and what waiting pods ask for, every
// node Ready and healthy.
func expectAllocation(fleet []fleetNode, pods []*podPlan) allocationTotals {
	t := allocationTotals{Pending: map[string]int32{}}
	held := map[int]map[string]int64{} // fleet index -> resource -> units
	for _, p := range pods {
		switch {
		case p.gpu == "" || p.finished:
		case !p.bound():
			t.PendingPods++
			t.PendingGpus += int32(p.count) // whole GPUs only
			t.Pending[baseProduct(p.pinned)] += int32(p.count)
		default:
			t.Pods++
			if held[p.slot.fleet] == nil {
				held[p.slot.fleet] = map[string]int64{}
			}
			held[p.slot.fleet][p.gpu] += p.count
		}
	}
	for k, n := range fleet {
		gpus, milli := heldOn(n, held[k])
		t.Gpus += gpus
		t.Milli += milli
		t.Free += wholeFree(n, held[k])
	}
	return t
}

// wholeFree is what node n has free of whole GPUs, as docs/api.md's "what is free" counts
// it once pods hold units there: a DRA node's published GPUs (no claim holds any in this
// phase); the device plugin's nvidia.com/gpu less what pods request, when its unit is a whole
// GPU (not time-sliced, not MIG's single strategy); none on a node whose GPUs are all in
// MIG's mixed strategy.
func wholeFree(n fleetNode, units map[string]int64) int32 {
	replicas, _ := strconv.ParseInt(n.labels["nvidia.com/gpu.replicas"], 10, 64)
	switch {
	case n.dra:
		return n.gpus
	case replicas > 1, strings.Contains(n.product, "-MIG-"), n.labels["nvidia.com/mig.strategy"] == "mixed":
		return 0
	}
	return max(0, n.gpus-int32(units[resourceGPU]))
}

// heldOn is what units of GPU resources held on node n are as GPUs touched and thousandths
// of a GPU: a whole GPU 1000, a time-sliced replica 1000/replicas, a MIG device its compute
// slices out of 7 (the sum per resource rounded down); parts rounded up to whole GPUs, except
// under MIG's single strategy, where GPUs count MIG devices as the node's count does; both at
// most the node's GPUs.
func heldOn(n fleetNode, units map[string]int64) (int32, int64) {
	replicas, _ := strconv.ParseInt(n.labels["nvidia.com/gpu.replicas"], 10, 64)
	_, singleProfile, single := strings.Cut(n.product, "-MIG-")
	var whole, partial, milli int64
	for resource, u := range units {
		var m int64
		switch {
		case resource == resourceGPU && single:
			whole += u
			m = u * migSlices(singleProfile) * 1000 / 7
		case resource == resourceGPU && replicas > 1:
			m = u * 1000 / replicas
			partial += m
		case resource == resourceGPU:
			whole += u
			m = u * 1000
		case strings.HasPrefix(resource, "nvidia.com/mig-"):
			m = u * migSlices(strings.TrimPrefix(resource, "nvidia.com/mig-")) * 1000 / 7
			partial += m
		}
		milli += m
	}
	gpus := min(whole+(partial+999)/1000, int64(n.gpus))
	return int32(gpus), min(milli, int64(n.gpus)*1000)
}

// migSlices is the compute slices of a MIG profile: the number before its "g".
func migSlices(profile string) int64 {
	g, _, _ := strings.Cut(profile, "g")
	v, err := strconv.ParseInt(g, 10, 64)
	if err != nil || v <= 0 {
		return 1
	}
	return v
}

// allocationOf reads the same figures from a status (nil without an allocation).
func allocationOf(st homelabv1.GpuInventoryStatus) *allocationTotals {
	a := st.Allocation
	if a == nil {
		return nil
	}
	t := &allocationTotals{Gpus: a.AllocatedGpus, Free: a.FreeGpus, Pods: a.GpuPods, PendingPods: a.PendingPods, PendingGpus: a.PendingGpus,
		Milli: a.AllocatedMilliGpus, Pending: map[string]int32{}}
	for _, d := range a.Pending {
		t.Pending[d.Model] = d.Gpus
	}
	return t
}

func (t *allocationTotals) equal(o *allocationTotals) bool {
	return t != nil && o != nil && t.Gpus == o.Gpus && t.Free == o.Free && t.Pods == o.Pods && t.PendingPods == o.PendingPods &&
		t.PendingGpus == o.PendingGpus && t.Milli == o.Milli && maps.Equal(t.Pending, o.Pending)
}

func (t *allocationTotals) String() string {
	if t == nil {
		return "no allocation"
	}
	models := slices.Sorted(maps.Keys(t.Pending))
	for i, m := range models {
		name := m
		if m == "" {
			name = "any"
		}
		models[i] = fmt.Sprintf("%s:%d", name, t.Pending[m])
	}
	return fmt.Sprintf("%d GPUs allocated (%d milli) to %d pods, %d free; %d pods wait for %d GPUs [%s]",
		t.Gpus, t.Milli, t.Pods, t.Free, t.PendingPods, t.PendingGpus, strings.Join(models, " "))
}
