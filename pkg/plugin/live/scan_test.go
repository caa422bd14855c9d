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

package live

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/plugintest"
)

func TestScanReadsTheNodeListPageByPageAndKeepsOnlyWhatTheInventoryReads(t *testing.T) {
	nodes := fixtures.Fleet(25)
	server := &plugintest.NodeServer{Nodes: nodes}
	kept, read, err := gpuNodes(context.Background(), server.Core(t), labels.Everything(), 10)
	if err != nil {
		t.Fatal(err)
	}
	var limits []int64
	for _, r := range server.ListRequests() {
		limits = append(limits, r.Limit)
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
	for _, selector := range []string{"", "kubernetes.io/hostname notin (ip-10-0-0-0.ec2.internal,ip-10-0-0-2.ec2.internal)", "nvidia.com/gpu.family in (hopper,ampere)"} {
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
		server := &plugintest.NodeServer{Nodes: nodes} // the API server applies the selector
		gi, read, err := scan(context.Background(), server.Core(t), nil, selector, 7, 5, now)
		if err != nil {
			t.Fatal(err)
		}
		var sent []string
		for _, r := range server.ListRequests() {
			sent = append(sent, r.Selector)
		}
		if read != len(matching) || len(sent) != (len(matching)+6)/7 || sent[0] != sel.String() {
			t.Errorf("selector %q: read %d nodes in requests with selectors %q, want %d nodes in pages of 7 with %q", selector, read, sent, len(matching), sel.String())
		}
		if !cmp.Equal(gi.Spec.NodeSelector, ls) {
			t.Errorf("selector %q: spec.nodeSelector %v, want %v", selector, gi.Spec.NodeSelector, ls)
		}
		want := InventoryStatus(matching, nil, nil, 5, 0, now)
		if diff := cmp.Diff(want, gi.Status); diff != "" {
			t.Errorf("selector %q: scan differs from a compute over the whole, untrimmed list (-want +scan):\n%s", selector, diff)
		}
		if gi.Status.ListedNodes != 5 || gi.Status.TotalGpuNodes <= 5 {
			t.Errorf("selector %q: listed %d of %d, want the size bound applied", selector, gi.Status.ListedNodes, gi.Status.TotalGpuNodes)
		}
	}
}

// now is the clock of the scans.
var now = time.Date(2026, 11, 30, 0, 50, 38, 0, time.UTC)
