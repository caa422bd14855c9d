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
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// NotReadyNodeNames is how many nodes a condition message names before "and N more".
const NotReadyNodeNames = 5

// Limits on what a status lists, so that the object stays far below the API server's object
// size limit (about 1.5 MiB) at any cluster size.
const (
	DefaultMaxStatusNodes = 500
	// MaxNodeListBytes bounds the encoded node list; with the totals, models, conditions and
	// metadata the whole object stays under 256 KiB.
	MaxNodeListBytes = 192 << 10
)

// IsProblem reports whether a node needs a human's attention.
func IsProblem(n homelabv1.GpuNodeEntry) bool { return len(n.Conditions) > 0 || len(n.Warnings) > 0 }

// Truncate chooses the entries a status lists: all of them when they fit in maxNodes entries
// and maxBytes of JSON, otherwise problem nodes first, then the others, each group in name
// order, until either limit is reached. The result is sorted by name; omitted says how many
// were left out.
func Truncate(nodes []homelabv1.GpuNodeEntry, maxNodes, maxBytes int) (listed []homelabv1.GpuNodeEntry, omitted int) {
	sizes := make([]int, len(nodes))
	for i := range nodes {
		sizes[i] = len(encode(&nodes[i])) + 1
	}
	return truncate(nodes, sizes, maxNodes, maxBytes)
}

// Listed is Truncate for the inventory's own nodes, whose encoded sizes it already knows.
func (inv Inventory) Listed(maxNodes, maxBytes int) (listed []homelabv1.GpuNodeEntry, omitted int) {
	if len(inv.digests) != len(inv.Nodes) {
		return Truncate(inv.Nodes, maxNodes, maxBytes)
	}
	sizes := make([]int, len(inv.digests))
	for i, d := range inv.digests {
		sizes[i] = d.size + 1
	}
	return truncate(inv.Nodes, sizes, maxNodes, maxBytes)
}

func truncate(nodes []homelabv1.GpuNodeEntry, sizes []int, maxNodes, maxBytes int) (listed []homelabv1.GpuNodeEntry, omitted int) {
	if maxNodes <= 0 {
		maxNodes = DefaultMaxStatusNodes
	}
	total := 0
	for _, s := range sizes {
		total += s
	}
	if len(nodes) <= maxNodes && total <= maxBytes {
		return slices.Clone(nodes), 0
	}
	size := 0
	listed = make([]homelabv1.GpuNodeEntry, 0, min(maxNodes, len(nodes)))
	for _, problems := range []bool{true, false} {
		for i := 0; i < len(nodes) && len(listed) < maxNodes; i++ {
			if IsProblem(nodes[i]) != problems || size+sizes[i] > maxBytes {
				continue // an entry that does not fit is skipped, not the end of the list
			}
			listed = append(listed, nodes[i])
			size += sizes[i]
		}
	}
	slices.SortFunc(listed, func(a, b homelabv1.GpuNodeEntry) int { return strings.Compare(a.Name, b.Name) })
	return listed, len(nodes) - len(listed)
}

// Conditions returns the inventory's Degraded, LabelsMissing, Truncated and Fragmented
// conditions for an inventory whose spec leaves fragmentationGpus unset.
func Conditions(inv Inventory, omitted int, generation int64) []metav1.Condition {
	return ConditionsFor(inv, &homelabv1.GpuInventorySpec{}, omitted, generation)
}

// ConditionsFor is Conditions for an inventory with spec: Fragmented is judged for jobs of
// spec.fragmentationGpus.
func ConditionsFor(inv Inventory, spec *homelabv1.GpuInventorySpec, omitted int, generation int64) []metav1.Condition {
	return []metav1.Condition{
		DegradedCondition(inv, generation),
		labelsMissingCondition(inv, generation),
		truncatedCondition(inv, omitted, generation),
		FragmentedCondition(inv, spec.FragmentationThreshold(), generation),
	}
}

// DegradedCondition says whether any covered GPU node is not Ready, has unhealthy GPUs (a
// health monitor's GPU fault counts) or failed its driver upgrade, naming the first few.
func DegradedCondition(inv Inventory, generation int64) metav1.Condition {
	cond := metav1.Condition{Type: homelabv1.ConditionDegraded, ObservedGeneration: generation}
	var notReady, unhealthy, upgradeFailed []string
	for _, n := range inv.Nodes {
		if !n.Ready {
			notReady = append(notReady, n.Name)
		}
		if n.UnhealthyGpus > 0 {
			unhealthy = append(unhealthy, n.Name)
		}
		if slices.Contains(n.Conditions, NodeDriverUpgradeFailed) {
			upgradeFailed = append(upgradeFailed, n.Name)
		}
	}
	var problems []string
	if len(notReady) > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d GPU nodes are not Ready: %s",
			len(notReady), inv.TotalGpuNodes, nameList(notReady, NotReadyNodeNames)))
	}
	if len(unhealthy) > 0 {
		problems = append(problems, fmt.Sprintf("%d GPUs are unhealthy on %s",
			inv.UnhealthyGpus, nameList(unhealthy, NotReadyNodeNames)))
	}
	if len(upgradeFailed) > 0 {
		problems = append(problems, fmt.Sprintf("the GPU driver upgrade failed on %s", nameList(upgradeFailed, NotReadyNodeNames)))
	}
	switch {
	case inv.TotalGpuNodes == 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, homelabv1.ReasonNoGPUNodes
		cond.Message = "no GPU nodes are covered by this inventory"
	case len(problems) == 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, homelabv1.ReasonAllGPUNodesReady
		cond.Message = fmt.Sprintf("all %d GPU nodes are Ready", inv.TotalGpuNodes)
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, homelabv1.ReasonGPUNodesNotReady
		if len(notReady) == 0 {
			cond.Reason = homelabv1.ReasonGPUsUnhealthy
		}
		cond.Message = strings.Join(problems, "; ")
	}
	return cond
}

func labelsMissingCondition(inv Inventory, generation int64) metav1.Condition {
	cond := metav1.Condition{Type: homelabv1.ConditionLabelsMissing, ObservedGeneration: generation,
		Status: metav1.ConditionFalse, Reason: homelabv1.ReasonAllLabelsPresent,
		Message: "no GPU node that was labelled has lost its GPU Feature Discovery labels"}
	var missing []string
	for _, n := range inv.Nodes {
		if n.LabelsMissing {
			missing = append(missing, n.Name)
		}
	}
	if len(missing) > 0 {
		cond.Status, cond.Reason = metav1.ConditionTrue, homelabv1.ReasonLabelsMissing
		cond.Message = fmt.Sprintf("%d GPU nodes lost their GPU Feature Discovery labels and are reported from last-known values (%d GPUs): %s",
			len(missing), inv.UnlabeledGpus, nameList(missing, NotReadyNodeNames))
	}
	return cond
}

func truncatedCondition(inv Inventory, omitted int, generation int64) metav1.Condition {
	cond := metav1.Condition{Type: homelabv1.ConditionTruncated, ObservedGeneration: generation,
		Status: metav1.ConditionFalse, Reason: homelabv1.ReasonAllNodesListed,
		Message: fmt.Sprintf("status.nodes lists all %d GPU nodes", inv.TotalGpuNodes)}
	if omitted > 0 {
		cond.Status, cond.Reason = metav1.ConditionTrue, homelabv1.ReasonNodesOmitted
		cond.Message = fmt.Sprintf("status.nodes lists %d of %d GPU nodes (problem nodes first); %d were left out to bound the object's size. Totals and models count every node.",
			int(inv.TotalGpuNodes)-omitted, inv.TotalGpuNodes, omitted)
	}
	return cond
}

// FragmentedCondition says whether a job of jobGpus whole GPUs waits although a model has
// that many free: True when some model's freeGpus reach jobGpus but its largestFit does not,
// naming the first few such models. OtherModels is not judged: its GPUs are of several models.
func FragmentedCondition(inv Inventory, jobGpus int32, generation int64) metav1.Condition {
	cond := metav1.Condition{Type: homelabv1.ConditionFragmented, ObservedGeneration: generation,
		Status: metav1.ConditionFalse, Reason: homelabv1.ReasonNotFragmented,
		Message: fmt.Sprintf("every model with %d or more free GPUs has a node with %d free", jobGpus, jobGpus)}
	if inv.Allocation == nil {
		cond.Reason, cond.Message = homelabv1.ReasonAllocationUnknown, "free GPUs are unknown: pods are not read"
		return cond
	}
	var scattered []string
	for _, m := range inv.Models {
		if m.Product != OtherModels && m.FreeGpus >= jobGpus && m.LargestFit < jobGpus {
			scattered = append(scattered, fmt.Sprintf("%s has %d free, at most %d on one node",
				cmp.Or(m.Product, "unknown model"), m.FreeGpus, m.LargestFit))
		}
	}
	if len(scattered) > 0 {
		cond.Status, cond.Reason = metav1.ConditionTrue, homelabv1.ReasonFreeGPUsFragmented
		more := ""
		if len(scattered) > NotReadyNodeNames {
			more = fmt.Sprintf("; and %d more models", len(scattered)-NotReadyNodeNames)
			scattered = scattered[:NotReadyNodeNames]
		}
		cond.Message = fmt.Sprintf("no node can take a job of %d GPUs although the GPUs are free: %s%s",
			jobGpus, strings.Join(scattered, "; "), more)
	}
	return cond
}

// InvalidSelectorCondition reports a node selector that cannot be used.
func InvalidSelectorCondition(err error, generation int64) metav1.Condition {
	return metav1.Condition{
		Type:               homelabv1.ConditionDegraded,
		Status:             metav1.ConditionTrue,
		Reason:             homelabv1.ReasonInvalidNodeSelector,
		Message:            fmt.Sprintf("spec.nodeSelector is invalid, no nodes are inventoried: %v", err),
		ObservedGeneration: generation,
	}
}

// nameList joins the first max names and says how many more there are.
func nameList(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
}

// Status is the GpuInventory status that reports inv: its exact totals and models, the listed
// nodes (see Listed) and the conditions. The operator writes it; `kubectl gpuinv scan`
// prints it, so the two cannot disagree on what a status holds.
func (inv Inventory) Status(listed []homelabv1.GpuNodeEntry, conditions []metav1.Condition, generation int64, observedAt metav1.Time) homelabv1.GpuInventoryStatus {
	return homelabv1.GpuInventoryStatus{
		ObservedGeneration: generation,
		ObservedAt:         &observedAt,
		InventoryHash:      inv.Hash,
		TotalGpuNodes:      inv.TotalGpuNodes,
		ReadyGpuNodes:      inv.ReadyGpuNodes,
		TotalGpus:          inv.TotalGpus,
		ReadyGpus:          inv.ReadyGpus,
		UnlabeledGpus:      inv.UnlabeledGpus,
		UnhealthyGpus:      inv.UnhealthyGpus,
		LabelsMissingNodes: inv.LabelsMissingNodes,
		TotalModels:        int32(inv.ModelCount),
		ListedNodes:        int32(len(listed)),
		Models:             inv.Models,
		Cliques:            inv.Cliques,
		Allocation:         inv.Allocation,
		Nodes:              listed,
		Conditions:         conditions,
	}
}
