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
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
)

var t0 = time.Date(2026, 7, 10, 15, 50, 0, 0, time.UTC)

func node(name string, ready corev1.ConditionStatus, lbls map[string]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
	if ready != "" {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
	}
	return n
}

// The first version's report for the home lab, which the Go operator must reproduce exactly.
func TestComputeHomeLabMatchesFirstVersionReport(t *testing.T) {
	inv, warnings := Compute(fixtures.HomeLab(), nil, t0)
	if len(warnings) != 0 {
		t.Errorf("home lab labels are well formed, got warnings %v", warnings)
	}
	want := []homelabv1.GpuNodeEntry{
		{Name: "nuc1", Ready: false, Product: "NVIDIA-GeForce-RTX-4070-Laptop-GPU-SHARED", GpuCount: 1, GpuMemoryMiB: 8188, WorkloadConfig: "vm-passthrough"},
		{Name: "nuc2", Ready: false, WorkloadConfig: "vm-passthrough"},
		{Name: "omen", Ready: false, WorkloadConfig: "vm-passthrough"},
		{Name: "omen2", Ready: false, WorkloadConfig: "container"},
	}
	if diff := cmp.Diff(want, ReportFields(inv.Nodes)); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if inv.TotalGpuNodes != 4 || inv.ReadyGpuNodes != 0 || inv.TotalGpus != 1 || inv.ReadyGpus != 0 {
		t.Errorf("totals = %d nodes, %d ready, %d GPUs, %d ready GPUs; want 4, 0, 1, 0",
			inv.TotalGpuNodes, inv.ReadyGpuNodes, inv.TotalGpus, inv.ReadyGpus)
	}
	cond := DegradedCondition(inv, 3)
	if cond.Status != metav1.ConditionTrue || cond.Reason != homelabv1.ReasonGPUNodesNotReady || cond.ObservedGeneration != 3 {
		t.Errorf("Degraded = %s/%s gen %d, want True/%s gen 3", cond.Status, cond.Reason, cond.ObservedGeneration, homelabv1.ReasonGPUNodesNotReady)
	}
	if wantMsg := "4 of 4 GPU nodes are not Ready: nuc1, nuc2, omen, omen2"; cond.Message != wantMsg {
		t.Errorf("Degraded message = %q, want %q", cond.Message, wantMsg)
	}
}

func TestIsGPUNode(t *testing.T) {
	withCapacity := func(q string) *corev1.Node {
		n := node("n", corev1.ConditionTrue, nil)
		n.Status.Capacity = corev1.ResourceList{ResourceGPU: resource.MustParse(q)}
		return n
	}
	cases := []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{"gpu.present", node("n", "", map[string]string{"nvidia.com/gpu.present": "true"}), true},
		{"only a deploy label survives", node("n", "", map[string]string{"nvidia.com/gpu.deploy.driver": "true"}), true},
		{"only workload config", node("n", "", map[string]string{"nvidia.com/gpu.workload.config": "container"}), true},
		{"NFD pci-10de", node("n", "", map[string]string{"feature.node.kubernetes.io/pci-10de.present": "true"}), true},
		{"NFD pci-0300_10de", node("n", "", map[string]string{"feature.node.kubernetes.io/pci-0300_10de.present": "true"}), true},
		{"NFD pci-0302_10de", node("n", "", map[string]string{"feature.node.kubernetes.io/pci-0302_10de.present": "true"}), true},
		{"NFD pci-10de false", node("n", "", map[string]string{"feature.node.kubernetes.io/pci-10de.present": "false"}), false},
		{"other vendor's PCI device", node("n", "", map[string]string{"feature.node.kubernetes.io/pci-1002.present": "true"}), false},
		{"nvidia.com/gpu capacity", withCapacity("8"), true},
		{"zero nvidia.com/gpu capacity", withCapacity("0"), false},
		{"nvidia.com label outside gpu.", node("n", "", map[string]string{"nvidia.com/mig.capable": "true"}), false},
		{"plain node", node("n", corev1.ConditionTrue, map[string]string{"kubernetes.io/os": "linux"}), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsGPUNode(tc.node); got != tc.want {
				t.Errorf("IsGPUNode = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIsReady(t *testing.T) {
	for status, want := range map[corev1.ConditionStatus]bool{
		corev1.ConditionTrue: true, corev1.ConditionFalse: false, corev1.ConditionUnknown: false, "": false,
	} {
		if got := IsReady(node("n", status, nil)); got != want {
			t.Errorf("Ready condition %q: IsReady = %v, want %v", status, got, want)
		}
	}
}

func TestEntryMalformedValuesKeepTheNode(t *testing.T) {
	cases := []struct {
		label, value string
		reason       string
	}{
		{LabelCount, "abc", "not a whole number"},
		{LabelCount, "-1", "negative"},
		{LabelCount, "1.5", "not a whole number"},
		{LabelCount, "0x1F", "not a whole number"},
		{LabelCount, "1e400", "not a whole number"},
		{LabelCount, "99999999999999999999", "out of range"},
		{LabelCount, "2147483648", "out of range"},
		{LabelMemory, "8188MiB", "not a whole number"},
		{LabelMemory, "99999999999999999999", "out of range"},
		{LabelMemory, "-5", "negative"},
		{LabelMemory, "", "not a whole number"},
	}
	for _, tc := range cases {
		t.Run(tc.label+"="+tc.value, func(t *testing.T) {
			n := node("gpu1", corev1.ConditionTrue, map[string]string{
				LabelGPUPresent: "true", LabelProduct: "NVIDIA-A100-SXM4-40GB",
				LabelCount: "4", LabelMemory: "40960", tc.label: tc.value,
			})
			entry, warnings := Entry(n)
			if entry.Name != "gpu1" || !entry.Ready || entry.Product != "NVIDIA-A100-SXM4-40GB" {
				t.Errorf("entry lost well-formed fields: %+v", entry)
			}
			if tc.label == LabelCount && (entry.GpuCount != 0 || entry.GpuMemoryMiB != 40960) {
				t.Errorf("count=%q: entry %+v, want count 0 and memory 40960", tc.value, entry)
			}
			if tc.label == LabelMemory && (entry.GpuMemoryMiB != 0 || entry.GpuCount != 4) {
				t.Errorf("memory=%q: entry %+v, want memory 0 and count 4", tc.value, entry)
			}
			if len(warnings) != 1 {
				t.Fatalf("want one warning, got %v", warnings)
			}
			w := warnings[0]
			if w.Node != "gpu1" || w.Label != tc.label || w.Value != tc.value || !strings.Contains(w.Reason, tc.reason) {
				t.Errorf("warning = %+v, want node gpu1, label %s, value %q, reason containing %q", w, tc.label, tc.value, tc.reason)
			}
			if s := w.String(); !strings.Contains(s, "gpu1") || !strings.Contains(s, tc.label) {
				t.Errorf("warning text %q does not name node and label", s)
			}
		})
	}
}

// A node that claims 2,147,483,647 GPUs must not saturate the fleet's totals.
func TestEntryCapsImplausibleCounts(t *testing.T) {
	liar := node("liar", corev1.ConditionTrue, map[string]string{
		LabelGPUPresent: "true", LabelProduct: "NVIDIA-H100-80GB-HBM3", LabelCount: "2147483647"})
	honest := node("honest", corev1.ConditionTrue, map[string]string{
		LabelGPUPresent: "true", LabelProduct: "NVIDIA-H100-80GB-HBM3", LabelCount: "8"})
	entry, warnings := Entry(liar)
	if entry.GpuCount != MaxGpusPerNode || len(warnings) != 1 || !strings.Contains(warnings[0].Reason, "not physical") {
		t.Errorf("entry count %d, warnings %v; want %d and one warning that says why", entry.GpuCount, warnings, MaxGpusPerNode)
	}
	content, _ := Compute([]*corev1.Node{liar, honest}, nil, time.Time{})
	if content.TotalGpus != MaxGpusPerNode+8 {
		t.Errorf("totalGpus = %d, want %d", content.TotalGpus, MaxGpusPerNode+8)
	}
}

func TestEntryWorkloadConfigDefaultsToContainer(t *testing.T) {
	entry, _ := Entry(node("n", corev1.ConditionTrue, map[string]string{LabelGPUPresent: "true"}))
	if entry.WorkloadConfig != "container" {
		t.Errorf("WorkloadConfig = %q, want container (the GPU Operator's default)", entry.WorkloadConfig)
	}
}

func TestTotalsSaturateInsteadOfWrapping(t *testing.T) {
	max := int32(2147483647)
	inv := FromEntries([]homelabv1.GpuNodeEntry{{Name: "a", Ready: true, GpuCount: max}, {Name: "b", Ready: true, GpuCount: max}})
	if inv.TotalGpus != max || inv.ReadyGpus != max {
		t.Errorf("totals %d/%d, want saturated at %d", inv.TotalGpus, inv.ReadyGpus, max)
	}
}

// Property: the inventory and its hash do not depend on the order in which nodes are listed.
func TestHashIndependentOfOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	products := []string{"NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-40GB", "Tesla-T4", ""}
	for trial := range 200 {
		var nodes []*corev1.Node
		for i := range 1 + rng.IntN(30) {
			lbls := map[string]string{LabelGPUPresent: "true", LabelCount: "8"}
			if p := products[rng.IntN(len(products))]; p != "" {
				lbls[LabelProduct] = p
			}
			ready := corev1.ConditionFalse
			if rng.IntN(2) == 0 {
				ready = corev1.ConditionTrue
			}
			nodes = append(nodes, node(string(rune('a'+i%26))+strings.Repeat("x", i/26), ready, lbls))
		}
		want, _ := Compute(nodes, nil, t0)
		shuffled := slices.Clone(nodes)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got, _ := Compute(shuffled, nil, t0)
		if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(Inventory{})); diff != "" {
			t.Fatalf("trial %d: inventory depends on node order (-first +shuffled):\n%s", trial, diff)
		}
	}
}

// Property: a cache that keeps each entry's place in the last result computes what an
// uncached Compute does, whatever order the nodes come in, as nodes come and go, change,
// and two selectors (two node sets) take turns.
func TestEntryCacheOrderAsNodesComeAndGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cache := NewEntryCache()
	var all []*corev1.Node
	for i := range 40 {
		all = append(all, node(fmt.Sprintf("gpu-%02d", i), corev1.ConditionTrue, map[string]string{LabelGPUPresent: "true", LabelCount: "8"}))
		all[i].ResourceVersion = "1"
	}
	for trial := range 300 {
		switch rng.IntN(5) {
		case 0: // a node changes
			i := rng.IntN(len(all))
			all[i] = all[i].DeepCopy()
			all[i].ResourceVersion = fmt.Sprint(trial + 2)
		case 1: // a node leaves, another joins
			i := rng.IntN(len(all))
			all[i] = node(fmt.Sprintf("gpu-%02d-%d", i, trial), corev1.ConditionFalse, map[string]string{LabelGPUPresent: "true", LabelCount: "4"})
			all[i].ResourceVersion = "1"
		case 2: // a node leaves
			if i := rng.IntN(len(all)); len(all) > 10 {
				all = slices.Delete(all, i, i+1)
			}
		case 3: // nodes join
			for j := range 1 + rng.IntN(4) {
				n := node(fmt.Sprintf("gpu-%02d-%d", rng.IntN(99), trial*10+j), corev1.ConditionTrue, map[string]string{LabelGPUPresent: "true", LabelCount: "2"})
				n.ResourceVersion = "1"
				all = append(all, n)
			}
		}
		listed := slices.Clone(all)
		if trial%2 == 1 { // the other selector: every third node
			listed = listed[:0]
			for i, n := range all {
				if i%3 == 0 {
					listed = append(listed, n)
				}
			}
		}
		rng.Shuffle(len(listed), func(i, j int) { listed[i], listed[j] = listed[j], listed[i] })
		want, _ := Compute(listed, nil, t0)
		got, _ := cache.Compute(listed, nil, t0)
		if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(Inventory{})); diff != "" {
			t.Fatalf("trial %d: the cache computes another inventory (-uncached +cached):\n%s", trial, diff)
		}
		got.Release() // the next trial's compute reuses the node list
	}
}

// What a sync keeps of an inventory (the listed nodes, the status) stays as it was when the
// inventory's node list is released and reused by the next compute.
func TestReleaseKeepsWhatWasCopied(t *testing.T) {
	cache := NewEntryCache()
	a := node("gpu-a", corev1.ConditionTrue, map[string]string{LabelGPUPresent: "true", LabelCount: "8", LabelProduct: "NVIDIA-H100-80GB-HBM3"})
	b := node("gpu-b", corev1.ConditionFalse, map[string]string{LabelGPUPresent: "true", LabelCount: "4", LabelProduct: "Tesla-T4"})
	a.ResourceVersion, b.ResourceVersion = "1", "1"
	first, _ := cache.Compute([]*corev1.Node{a}, nil, t0)
	listed, _ := first.Listed(DefaultMaxStatusNodes, MaxNodeListBytes)
	status := first.Status(listed, nil, 1, metav1.NewTime(t0))
	want := status.DeepCopy()
	first.Release()
	if first.Nodes != nil {
		t.Error("a released inventory still has its node list")
	}
	second, _ := cache.Compute([]*corev1.Node{b}, nil, t0)
	if len(second.Nodes) != 1 || second.Nodes[0].Name != "gpu-b" {
		t.Fatalf("the compute after a release: %+v", second.Nodes)
	}
	if diff := cmp.Diff(want, &status); diff != "" {
		t.Errorf("the status of the released inventory changed (-before +after):\n%s", diff)
	}
	second.Release()
	second.Release() // twice is harmless
}

func TestHashChangesWithContent(t *testing.T) {
	base := []homelabv1.GpuNodeEntry{{Name: "a", Ready: true, Product: "Tesla-T4", GpuCount: 1}}
	changes := map[string]func(*homelabv1.GpuNodeEntry){
		"ready":    func(n *homelabv1.GpuNodeEntry) { n.Ready = false },
		"product":  func(n *homelabv1.GpuNodeEntry) { n.Product = "Tesla-T4-SHARED" },
		"count":    func(n *homelabv1.GpuNodeEntry) { n.GpuCount = 2 },
		"memory":   func(n *homelabv1.GpuNodeEntry) { n.GpuMemoryMiB = 15360 },
		"workload": func(n *homelabv1.GpuNodeEntry) { n.WorkloadConfig = "vm-vgpu" },
		"name":     func(n *homelabv1.GpuNodeEntry) { n.Name = "b" },
	}
	for field, change := range changes {
		changed := slices.Clone(base)
		change(&changed[0])
		if Hash(changed) == Hash(base) {
			t.Errorf("changing %s does not change the hash", field)
		}
	}
	if Hash(nil) == Hash(base) {
		t.Error("an empty inventory hashes like a non-empty one")
	}
}

func TestDegradedCondition(t *testing.T) {
	var many []homelabv1.GpuNodeEntry
	for _, name := range []string{"g", "f", "e", "d", "c", "b", "a"} {
		many = append(many, homelabv1.GpuNodeEntry{Name: name})
	}
	cases := []struct {
		name        string
		nodes       []homelabv1.GpuNodeEntry
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		{"no GPU nodes", nil, metav1.ConditionFalse, homelabv1.ReasonNoGPUNodes, "no GPU nodes are covered by this inventory"},
		{"all ready", []homelabv1.GpuNodeEntry{{Name: "a", Ready: true}, {Name: "b", Ready: true}}, metav1.ConditionFalse, homelabv1.ReasonAllGPUNodesReady, "all 2 GPU nodes are Ready"},
		{"one not ready", []homelabv1.GpuNodeEntry{{Name: "a", Ready: true}, {Name: "b"}}, metav1.ConditionTrue, homelabv1.ReasonGPUNodesNotReady, "1 of 2 GPU nodes are not Ready: b"},
		{"many not ready", many, metav1.ConditionTrue, homelabv1.ReasonGPUNodesNotReady, "7 of 7 GPU nodes are not Ready: a, b, c, d, e and 2 more"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cond := DegradedCondition(FromEntries(tc.nodes), 1)
			if cond.Status != tc.wantStatus || cond.Reason != tc.wantReason || cond.Message != tc.wantMessage {
				t.Errorf("got %s/%s %q, want %s/%s %q", cond.Status, cond.Reason, cond.Message, tc.wantStatus, tc.wantReason, tc.wantMessage)
			}
		})
	}
}

func TestSelector(t *testing.T) {
	pool := map[string]string{"pool": "a100"}
	cases := []struct {
		name    string
		ls      *metav1.LabelSelector
		lbls    map[string]string
		want    bool
		wantErr bool
	}{
		{"absent selects everything", nil, pool, true, false},
		{"empty selects everything", &metav1.LabelSelector{}, pool, true, false},
		{"matchLabels hit", &metav1.LabelSelector{MatchLabels: pool}, pool, true, false},
		{"matchLabels miss", &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "h100"}}, pool, false, false},
		{"matchExpressions In", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: metav1.LabelSelectorOpIn, Values: []string{"a100", "h100"}}}}, pool, true, false},
		{"matchExpressions DoesNotExist", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: metav1.LabelSelectorOpDoesNotExist}}}, pool, false, false},
		{"unknown operator", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: "Near"}}}, pool, false, true},
		{"invalid key", &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}, pool, false, true},
		{"In without values", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: metav1.LabelSelectorOpIn}}}, pool, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := Selector(tc.ls)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "invalid node selector") {
					t.Fatalf("want an 'invalid node selector' error, got %v (selector %v)", err, sel)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got := sel.Matches(labels.Set(tc.lbls)); got != tc.want {
				t.Errorf("Matches(%v) = %v, want %v", tc.lbls, got, tc.want)
			}
		})
	}
}

var t1 = t0.Add(time.Hour)

func TestCutKeepsRunesWhole(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 20, "short"},
		{"aaaaaaaaaaaaaaaaaaaaaaaaa", 20, "aaaaaaaaaaaa...(cut)"},
		{"ééééééééééééééé", 20, "éééééé...(cut)"},
	} {
		if got := Cut(tc.in, tc.n); got != tc.want || len(got) > tc.n {
			t.Errorf("Cut(%q, %d) = %q; want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
