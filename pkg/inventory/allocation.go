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

package inventory

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/bits"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

// Bounds of the allocation summary, so that it stays small at any fleet size.
const (
	MaxNamespaces   = 10 // namespaces listed before the rest are folded
	OtherNamespaces = "<other namespaces>"
	MaxDemands      = 32 // requested models listed, the last one folding the rest
	MaxFitNodes     = 3  // nodes named per model in its fit summary
)

// Held returns what pods hold on a node (pkg/allocation's Tracker.Held).
type Held func(node string) *allocation.Held

// WithAllocation makes entries carry what pods hold on their node, and inventories an
// allocation summary; it returns c.
func (c *EntryCache) WithAllocation(held Held) *EntryCache {
	c.held = held
	return c
}

// ShapeOf is what converting held resources into GPUs needs of a node's entry.
func ShapeOf(e *homelabv1.GpuNodeEntry) allocation.Shape {
	s := allocation.Shape{GPUs: e.GpuCount, SlicesPerGPU: 7}
	if e.Sharing != nil {
		s.Replicas = e.Sharing.Replicas
	}
	if _, variant := BaseModel(e.Product); strings.HasPrefix(variant, "MIG-") {
		s.SingleMIGProfile = strings.TrimPrefix(variant, "MIG-")
	}
	if strings.Contains(e.Product, "A30") {
		s.SlicesPerGPU = 4
	}
	return s
}

// heldGPUs converts what is held on e's node. With MIG's single strategy GPU Feature Discovery
// counts MIG devices as the node's GPUs, so GPUs are counted in those units there too, while
// the exact share counts each device as its slices.
func heldGPUs(convert func(allocation.Shape) (int32, int64), e *homelabv1.GpuNodeEntry) (gpus int32, milli int64) {
	shape := ShapeOf(e)
	gpus, milli = convert(shape)
	if shape.SingleMIGProfile != "" {
		shape.SingleMIGProfile = ""
		gpus, _ = convert(shape)
	}
	return gpus, milli
}

// applyHeld sets what pods hold on the entry's node and what is free there, and returns the
// exact share held in thousandths of a GPU.
func applyHeld(e *homelabv1.GpuNodeEntry, held *allocation.Held, node *corev1.Node, facts *DeviceFacts) (milli int64) {
	e.AllocatedGpus, e.GpuPods = 0, 0
	if held != nil {
		e.AllocatedGpus, milli = heldGPUs(held.GPUs, e)
		e.GpuPods = held.Pods
	}
	var free int32
	free, e.Free = freeOf(e, held, node, facts)
	e.FreeGpus, e.UnschedulableFreeGpus = 0, 0
	if schedulable(e) {
		e.FreeGpus = free
	} else {
		e.UnschedulableFreeGpus = free
	}
	return milli
}

// maxFreeResources bounds GpuNodeEntry.Free.
const maxFreeResources = 16

// freeOf is what the scheduler could give a pod on the node now, its conditions aside: whole
// GPUs, and units of each device-plugin GPU resource. Device-plugin units are the node's
// allocatable minus what its bound pods request (NodeResourcesFit); whole DRA GPUs are the
// published gpu-<n> devices that are untainted, of which no device is allocated and whose
// shared counters (if any) are all left; DRA partitions are counted per profile
// (CounterFacts.free), and DRA devices allowing several allocations as shares (sharedFree).
func freeOf(e *homelabv1.GpuNodeEntry, held *allocation.Held, node *corev1.Node, facts *DeviceFacts) (whole int32, units []homelabv1.ResourceFree) {
	requested := map[string]int64{}
	if held != nil {
		for i := range held.Namespaces {
			addRequests(requested, held.Namespaces[i].Resources)
		}
	}
	if node != nil {
		for name, q := range node.Status.Allocatable {
			if !allocation.IsGPUResource(string(name)) {
				continue
			}
			f := clampInt32(max(0, q.Value()-requested[string(name)]))
			units = append(units, homelabv1.ResourceFree{Resource: string(name), Free: f})
			if name == allocation.ResourceGPU && wholeUnits(e) {
				whole = f
			}
		}
	}
	if facts != nil && !facts.Pending {
		blocked, partitions := facts.Counters.free(held)
		whole = saturating.Add(whole, int32(bits.OnesCount64(facts.WholeGPUs&^facts.TaintedGPUs&^held.HeldGPUs()&^blocked)))
		units = append(units, partitions...)
		units = append(units, sharedFree(facts.Shareable, held)...)
	}
	slices.SortFunc(units, func(a, b homelabv1.ResourceFree) int { return strings.Compare(a.Resource, b.Resource) })
	if len(units) > maxFreeResources {
		units = units[:maxFreeResources]
	}
	return whole, units
}

// heldDevices is the set of DRA devices held on the node; nil when none.
func heldDevices(held *allocation.Held) map[string]bool {
	if held == nil {
		return nil
	}
	var out map[string]bool
	for i := range held.Namespaces {
		for _, d := range held.Namespaces[i].Devices {
			if out == nil {
				out = map[string]bool{}
			}
			out[d] = true
		}
	}
	return out
}

// wholeUnits reports whether a unit of the node's nvidia.com/gpu is a whole GPU: neither a
// shared replica nor, with MIG's single strategy, a MIG device.
func wholeUnits(e *homelabv1.GpuNodeEntry) bool {
	s := ShapeOf(e)
	return s.Replicas <= 1 && s.SingleMIGProfile == ""
}

func addRequests(sum map[string]int64, rs []allocation.ResourceCount) {
	for _, r := range rs {
		sum[r.Name] = saturating.Add(sum[r.Name], r.Count)
	}
}

// allocationOf sums the nodes' allocation and the namespaces' usage.
func allocationOf(refs []entryRef) *homelabv1.GpuAllocation {
	a := &homelabv1.GpuAllocation{}
	byNamespace := map[string]*homelabv1.NamespaceUsage{}
	for _, r := range refs {
		e := r.entry
		a.AllocatedGpus = saturating.Add(a.AllocatedGpus, e.AllocatedGpus)
		a.FreeGpus = saturating.Add(a.FreeGpus, e.FreeGpus)
		a.GpuPods = saturating.Add(a.GpuPods, e.GpuPods)
		a.AllocatedMilliGpus += r.milli
		held := r.held()
		if held == nil {
			continue
		}
		usage := make([]*homelabv1.NamespaceUsage, len(held.Namespaces))
		parts := make([]int64, len(held.Namespaces))
		for i := range held.Namespaces {
			ns := &held.Namespaces[i]
			u := byNamespace[ns.Namespace]
			if u == nil {
				u = &homelabv1.NamespaceUsage{Namespace: ns.Namespace}
				byNamespace[ns.Namespace] = u
			}
			var gpus int32
			gpus, parts[i] = heldGPUs(ns.GPUs, e)
			u.Pods = saturating.Add(u.Pods, ns.Pods)
			u.Gpus = saturating.Add(u.Gpus, gpus)
			usage[i] = u
		}
		// The node's thousandths round once; its namespaces' shares add up to them.
		for i, milli := range allocation.Apportion(r.milli, parts) {
			usage[i].MilliGpus += milli
		}
	}
	a.Namespaces = topNamespaces(byNamespace)
	return a
}

// topNamespaces keeps the MaxNamespaces namespaces holding the most and folds the rest.
func topNamespaces(byNamespace map[string]*homelabv1.NamespaceUsage) []homelabv1.NamespaceUsage {
	all := make([]homelabv1.NamespaceUsage, 0, len(byNamespace))
	for _, u := range byNamespace {
		all = append(all, *u)
	}
	slices.SortFunc(all, func(a, b homelabv1.NamespaceUsage) int {
		return cmp.Or(cmp.Compare(b.MilliGpus, a.MilliGpus), cmp.Compare(b.Gpus, a.Gpus), strings.Compare(a.Namespace, b.Namespace))
	})
	if len(all) <= MaxNamespaces {
		return all
	}
	other := homelabv1.NamespaceUsage{Namespace: OtherNamespaces}
	for _, u := range all[MaxNamespaces:] {
		other.Pods = saturating.Add(other.Pods, u.Pods)
		other.Gpus = saturating.Add(other.Gpus, u.Gpus)
		other.MilliGpus += u.MilliGpus
	}
	return append(all[:MaxNamespaces:MaxNamespaces], other)
}

// fitter summarises where a job of a model fits: nodes by free GPUs, and the ones with most.
type fitter struct {
	fit  homelabv1.GpuFit
	most []homelabv1.NodeFree
}

func (f *fitter) add(e *homelabv1.GpuNodeEntry) {
	free := e.FreeGpus
	if free <= 0 {
		return
	}
	for _, step := range []struct {
		min   int32
		count *int32
	}{{1, &f.fit.NodesWith1Free}, {2, &f.fit.NodesWith2Free}, {4, &f.fit.NodesWith4Free}, {8, &f.fit.NodesWith8Free}} {
		if free >= step.min {
			*step.count = saturating.Add(*step.count, 1)
		}
	}
	f.most = append(f.most, homelabv1.NodeFree{Name: e.Name, FreeGpus: free})
	f.sortMost()
}

// merge adds another model's fit summary.
func (f *fitter) merge(g *homelabv1.GpuFit) {
	if g == nil {
		return
	}
	f.fit.NodesWith1Free = saturating.Add(f.fit.NodesWith1Free, g.NodesWith1Free)
	f.fit.NodesWith2Free = saturating.Add(f.fit.NodesWith2Free, g.NodesWith2Free)
	f.fit.NodesWith4Free = saturating.Add(f.fit.NodesWith4Free, g.NodesWith4Free)
	f.fit.NodesWith8Free = saturating.Add(f.fit.NodesWith8Free, g.NodesWith8Free)
	f.most = append(f.most, g.Most...)
	f.sortMost()
}

func (f *fitter) sortMost() {
	slices.SortFunc(f.most, func(a, b homelabv1.NodeFree) int {
		return cmp.Or(cmp.Compare(b.FreeGpus, a.FreeGpus), strings.Compare(a.Name, b.Name))
	})
	if len(f.most) > MaxFitNodes {
		f.most = f.most[:MaxFitNodes]
	}
}

func (f *fitter) result() *homelabv1.GpuFit {
	if len(f.most) == 0 {
		return nil
	}
	fit := f.fit
	fit.Most = slices.Clone(f.most)
	return &fit
}

// DemandModel is the base model a waiting pod or claim pins, in the form the inventory's
// models have.
func DemandModel(d allocation.Demand) string {
	if d.Model == "" {
		return ""
	}
	if d.DRA {
		d.Model = NormalizeProduct(d.Model)
	}
	model, _ := BaseModel(d.Model)
	return model
}

// AddDemand adds what waiting pods ask for to an inventory that has an allocation summary:
// demand for any model and for the models it covers, and with allModels (an inventory of
// the whole cluster) for every model, so that a pod pinning a model no node has shows.
func (inv *Inventory) AddDemand(demand []allocation.Demand, allModels bool) {
	if inv.Allocation == nil {
		return
	}
	covered := map[string]bool{"": true}
	for i := range inv.Nodes {
		model, _ := BaseModel(inv.Nodes[i].Product)
		covered[model] = true
	}
	byModel := map[string]*homelabv1.GpuDemand{}
	a := inv.Allocation
	a.QueuedPods, a.QueuedGpus = 0, 0
	for _, d := range demand {
		model := DemandModel(d)
		if !allModels && !covered[model] {
			continue
		}
		if d.Queued {
			a.QueuedPods = saturating.Add(a.QueuedPods, d.Pods)
			a.QueuedGpus = saturating.Add(a.QueuedGpus, clampInt32((d.Milli+999)/1000))
			continue
		}
		g := byModel[model]
		if g == nil {
			g = &homelabv1.GpuDemand{Model: model}
			byModel[model] = g
		}
		g.Pods = saturating.Add(g.Pods, d.Pods)
		g.Gpus = saturating.Add(g.Gpus, clampInt32((d.Milli+999)/1000))
		since := metav1.NewTime(time.Unix(d.Since, 0).UTC())
		if g.Since == nil || since.Before(g.Since) {
			g.Since = &since
		}
	}
	a.PendingPods, a.PendingGpus = 0, 0
	for _, g := range byModel {
		a.PendingPods = saturating.Add(a.PendingPods, g.Pods)
		a.PendingGpus = saturating.Add(a.PendingGpus, g.Gpus)
	}
	for i := range inv.Models {
		if g := byModel[inv.Models[i].Product]; g != nil {
			inv.Models[i].PendingGpus = g.Gpus
		}
	}
	a.Pending = foldDemand(byModel)
	inv.Hash = inv.hashWithAllocation()
}

// foldDemand keeps the MaxDemands-1 models asked for most and counts the rest under
// OtherModels, sorted by model.
func foldDemand(byModel map[string]*homelabv1.GpuDemand) []homelabv1.GpuDemand {
	all := make([]homelabv1.GpuDemand, 0, len(byModel))
	for _, g := range byModel {
		all = append(all, *g)
	}
	slices.SortFunc(all, func(a, b homelabv1.GpuDemand) int {
		return cmp.Or(cmp.Compare(b.Gpus, a.Gpus), strings.Compare(a.Model, b.Model))
	})
	if len(all) > MaxDemands {
		other := homelabv1.GpuDemand{Model: OtherModels}
		for _, g := range all[MaxDemands-1:] {
			other.Pods = saturating.Add(other.Pods, g.Pods)
			other.Gpus = saturating.Add(other.Gpus, g.Gpus)
			if other.Since == nil || g.Since.Before(other.Since) {
				other.Since = g.Since
			}
		}
		all = append(all[:MaxDemands-1:MaxDemands-1], other)
	}
	slices.SortFunc(all, func(a, b homelabv1.GpuDemand) int { return strings.Compare(a.Model, b.Model) })
	return all
}

// statusShape is part of every inventory hash. It changes when the status says more of the
// same nodes (model pools and largest fit, the Fragmented condition, the models' free-GPU
// histograms and taints), so that an upgraded operator writes each status once instead of
// skipping it until the nodes change.
const statusShape = "pools-fragmented-freenodes"

// hashWithAllocation is the nodes' hash, extended by the allocation summary when there is
// one (the namespaces' usage and the demand are not in the nodes' entries) and by
// statusShape.
func (inv *Inventory) hashWithAllocation() string {
	h := sha256.New()
	h.Write([]byte(statusShape))
	h.Write([]byte(hashDigests(inv.digests)))
	if inv.Allocation != nil {
		b, _ := json.Marshal(inv.Allocation) // integers, strings and times: cannot fail
		h.Write(b)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
