package plugin

import (
	"context"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// fleet returns the first n generated fleet nodes with their NFD and GFD labels, as the API
// server holds them.
func fleet(n int) []*corev1.Node {
	var nodes []*corev1.Node
	for i := range n {
		node, extra := fixtures.FleetNode(i)
		for k, v := range extra {
			node.Labels[k] = v
		}
		node.ResourceVersion = strconv.Itoa(i + 1)
		nodes = append(nodes, node)
	}
	return nodes
}

// pagedNodes serves nodes as the API server does with limit and continue.
func pagedNodes(nodes []*corev1.Node, limits *[]int64) *kubefake.Clientset {
	kube := kubefake.NewClientset()
	kube.PrependReactor("list", "nodes", func(action clienttesting.Action) (bool, runtime.Object, error) {
		opts := action.(clienttesting.ListActionImpl).ListOptions
		*limits = append(*limits, opts.Limit)
		start := 0
		if opts.Continue != "" {
			start, _ = strconv.Atoi(opts.Continue)
		}
		end := len(nodes)
		if opts.Limit > 0 {
			end = min(end, start+int(opts.Limit))
		}
		list := &corev1.NodeList{}
		for _, n := range nodes[start:end] {
			list.Items = append(list.Items, *n.DeepCopy())
		}
		if end < len(nodes) {
			list.Continue = strconv.Itoa(end)
		}
		return true, list, nil
	})
	return kube
}

func TestScanReadsTheNodeListPageByPageAndKeepsOnlyWhatTheInventoryReads(t *testing.T) {
	nodes := fixtures.Fleet(25)
	var limits []int64
	kept, read, err := gpuNodes(context.Background(), pagedNodes(nodes, &limits), labels.Everything(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{10, 10, 10}; !cmp.Equal(limits, want) || read != 25 {
		t.Errorf("list requests with limits %v reading %d nodes, want %v reading 25", limits, read, want)
	}
	if len(kept) != 13 {
		t.Fatalf("kept %d nodes, want the 13 GPU nodes", len(kept))
	}
	for _, n := range kept {
		if len(n.Status.Images) > 0 || len(n.ManagedFields) > 0 || len(n.Status.Addresses) > 0 {
			t.Errorf("node %s kept kubelet status or managed fields", n.Name)
		}
		for k := range n.Labels {
			if !inventory.ReadsLabel(k) {
				t.Errorf("node %s kept label %s, which the inventory does not read", n.Name, k)
			}
		}
	}
	// Trimming changes nothing the inventory reports.
	full, _ := inventory.Compute(nodes, nil, now)
	trimmed, _ := inventory.Compute(kept, nil, now)
	if diff := cmp.Diff(full.Nodes, trimmed.Nodes); diff != "" || full.Hash != trimmed.Hash {
		t.Errorf("entries from trimmed nodes differ (-full +trimmed):\n%s", diff)
	}
}

func TestScanSendsTheSelectorAndEqualsAnUnpagedUntrimmedCompute(t *testing.T) {
	nodes := fixtures.Fleet(40)
	for _, selector := range []string{"", "topology.kubernetes.io/zone=us-east-1a", "nvidia.com/gpu.family in (hopper,ampere)"} {
		var ls *metav1.LabelSelector
		if selector != "" {
			ls, _ = metav1.ParseToLabelSelector(selector)
		}
		sel, err := inventory.Selector(ls) // as the operator reads spec.nodeSelector
		if err != nil {
			t.Fatal(err)
		}
		var matching []*corev1.Node
		for _, n := range nodes {
			if sel.Matches(labels.Set(n.Labels)) {
				matching = append(matching, n)
			}
		}
		var limits []int64
		kube := pagedNodes(matching, &limits) // the API server applies the selector
		var sent []string
		kube.PrependReactor("list", "nodes", func(action clienttesting.Action) (bool, runtime.Object, error) {
			sent = append(sent, action.(clienttesting.ListActionImpl).ListOptions.LabelSelector)
			return false, nil, nil
		})
		gi, read, err := scan(context.Background(), kube, selector, 7, 5, now)
		if err != nil {
			t.Fatal(err)
		}
		if read != len(matching) || len(sent) != (len(matching)+6)/7 || sent[0] != sel.String() {
			t.Errorf("selector %q: read %d nodes in requests with selectors %q, want %d nodes in pages of 7 with %q", selector, read, sent, len(matching), sel.String())
		}
		if !cmp.Equal(gi.Spec.NodeSelector, ls) {
			t.Errorf("selector %q: spec.nodeSelector %v, want %v", selector, gi.Spec.NodeSelector, ls)
		}
		want := inventoryStatus(matching, nil, 5, 0, now)
		if diff := cmp.Diff(want, gi.Status); diff != "" {
			t.Errorf("selector %q: scan differs from a compute over the whole, untrimmed list (-want +scan):\n%s", selector, diff)
		}
		if gi.Status.ListedNodes != 5 || gi.Status.TotalGpuNodes <= 5 {
			t.Errorf("selector %q: listed %d of %d, want the size bound applied", selector, gi.Status.ListedNodes, gi.Status.TotalGpuNodes)
		}
	}
}
