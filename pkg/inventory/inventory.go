package inventory

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Inventory is the content of a GpuInventory's status, without the bookkeeping fields
// (observedGeneration, observedAt) that depend on the object and the clock.
type Inventory struct {
	Nodes         []homelabv1.GpuNode
	TotalGpuNodes int32
	ReadyGpuNodes int32
	TotalGpus     int32
	ReadyGpus     int32
	// Hash identifies Nodes (and so everything else here, which derives from them).
	Hash string
}

// Compute builds the inventory of the GPU nodes among nodes. The order of nodes does not
// matter. Non-GPU nodes are skipped; every GPU node gets an entry, however malformed its labels.
func Compute(nodes []*corev1.Node) (Inventory, []Warning) {
	var inv Inventory
	var warnings []Warning
	for _, node := range nodes {
		if !IsGPUNode(node) {
			continue
		}
		entry, w := Entry(node)
		warnings = append(warnings, w...)
		inv.Nodes = append(inv.Nodes, entry)
	}
	return FromEntries(inv.Nodes), warnings
}

// FromEntries sorts entries by name and derives the totals and the hash from them.
func FromEntries(entries []homelabv1.GpuNode) Inventory {
	inv := Inventory{Nodes: slices.Clone(entries)}
	slices.SortFunc(inv.Nodes, func(a, b homelabv1.GpuNode) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range inv.Nodes {
		inv.TotalGpuNodes++
		inv.TotalGpus = addSaturating(inv.TotalGpus, n.GpuCount)
		if n.Ready {
			inv.ReadyGpuNodes++
			inv.ReadyGpus = addSaturating(inv.ReadyGpus, n.GpuCount)
		}
	}
	inv.Hash = Hash(inv.Nodes)
	return inv
}

// addSaturating adds two non-negative counts, stopping at the int32 maximum instead of
// wrapping to a negative total when labels claim absurd counts.
func addSaturating(a, b int32) int32 {
	if sum := int64(a) + int64(b); sum <= int64(^uint32(0)>>1) {
		return int32(sum)
	}
	return int32(^uint32(0) >> 1)
}

// Hash returns a deterministic digest of entries sorted by name. Entries are encoded as JSON:
// struct fields encode in declaration order and map keys sorted, so neither the order in
// which nodes were seen nor map iteration order can change the result.
func Hash(sortedEntries []homelabv1.GpuNode) string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	for i := range sortedEntries {
		// Encoding a struct of strings, bools and integers cannot fail.
		_ = enc.Encode(&sortedEntries[i])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// NotReadyNodeNames is how many not-ready nodes a condition message names before "and N more".
const NotReadyNodeNames = 5

// DegradedCondition says whether any covered GPU node is not Ready, naming the first few.
func DegradedCondition(inv Inventory, generation int64) metav1.Condition {
	cond := metav1.Condition{Type: homelabv1.ConditionDegraded, ObservedGeneration: generation}
	var notReady []string
	for _, n := range inv.Nodes {
		if !n.Ready {
			notReady = append(notReady, n.Name)
		}
	}
	switch {
	case inv.TotalGpuNodes == 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, homelabv1.ReasonNoGPUNodes
		cond.Message = "no GPU nodes are covered by this inventory"
	case len(notReady) == 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, homelabv1.ReasonAllGPUNodesReady
		cond.Message = fmt.Sprintf("all %d GPU nodes are Ready", inv.TotalGpuNodes)
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, homelabv1.ReasonGPUNodesNotReady
		cond.Message = fmt.Sprintf("%d of %d GPU nodes are not Ready: %s",
			len(notReady), inv.TotalGpuNodes, nameList(notReady, NotReadyNodeNames))
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

// Selector converts an inventory's node selector. Unlike metav1.LabelSelectorAsSelector, an
// absent selector selects every node, as the API documents.
func Selector(ls *metav1.LabelSelector) (labels.Selector, error) {
	if ls == nil {
		return labels.Everything(), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, fmt.Errorf("invalid node selector: %w", err)
	}
	return sel, nil
}
