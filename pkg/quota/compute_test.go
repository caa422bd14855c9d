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

package quota

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

func modelRow(t *testing.T, r Result, source, model string, res corev1.ResourceName) homelabv1.QuotaModel {
	t.Helper()
	for _, m := range r.Status.Models {
		if m.Source == source && m.Model == model && m.Resource == string(res) {
			return m
		}
	}
	t.Fatalf("no %s row for model %q, %s in %+v", source, model, res, r.Status.Models)
	return homelabv1.QuotaModel{}
}

func cohortRow(t *testing.T, r Result, cohort, model string, res corev1.ResourceName) homelabv1.QuotaCohort {
	t.Helper()
	for _, c := range r.Status.CohortModels {
		if c.Cohort == cohort && c.Model == model && c.Resource == string(res) {
			return c
		}
	}
	t.Fatalf("no row for cohort %s, model %q, %s in %+v", cohort, model, res, r.Status.CohortModels)
	return homelabv1.QuotaCohort{}
}

func queueRow(t *testing.T, r Result, name, model string, res corev1.ResourceName) homelabv1.QuotaQueue {
	t.Helper()
	for _, q := range r.Status.Queues {
		if q.Name == name && q.Model == model && q.Resource == string(res) {
			return q
		}
	}
	t.Fatalf("no row for ClusterQueue %s, model %q, %s in %+v", name, model, res, r.Status.Queues)
	return homelabv1.QuotaQueue{}
}

// want checks one figure and says which.
func want[T comparable](t *testing.T, what string, got, expected T) {
	t.Helper()
	if got != expected {
		t.Errorf("%s = %v, want %v", what, got, expected)
	}
}

func wantLine(t *testing.T, kind string, lines []string, parts ...string) {
	t.Helper()
	if _, n := lineWith(lines, parts...); n != 1 {
		t.Errorf("%s: %d lines hold %q, want 1; lines: %q", kind, n, parts, lines)
	}
}

func wantNone(t *testing.T, r Result) {
	t.Helper()
	if len(r.Overcommitted)+len(r.Stranded)+len(r.Warnings) > 0 {
		t.Errorf("findings on a sound cluster: overcommitted %q, stranded %q, warnings %q", r.Overcommitted, r.Stranded, r.Warnings)
	}
}

func TestComputeKueue(t *testing.T) {
	a100Nodes := nodes("a100", a100, 2, 8, 3)
	tests := []struct {
		name    string
		cluster Cluster
		check   func(t *testing.T, r Result)
	}{{
		name: "a queue that fits its hardware",
		cluster: Cluster{Nodes: a100Nodes, Kueue: kueue([]Flavor{productFlavor("a100", a100)},
			[]ClusterQueue{{Name: "team-a", Quotas: []Limit{quota("a100", gpu, 16), quota("a100", corev1.ResourceCPU, 512)},
				Reserved: []Usage{{Flavor: "a100", Resource: gpu, Total: 10}}, Used: []Usage{{Flavor: "a100", Resource: gpu, Total: 8}},
				Pending: 2, Admitted: 3}})},
		check: func(t *testing.T, r Result) {
			wantNone(t, r)
			want(t, "ClusterQueues", r.Status.ClusterQueues, 1)
			want(t, "Cohorts", r.Status.Cohorts, 1)
			m := modelRow(t, r, homelabv1.QuotaSourceKueue, a100, gpu)
			want(t, "model figures", m.QuotaFigures, homelabv1.QuotaFigures{Resource: string(gpu), Capacity: 16, Ready: 16, Free: 6,
				Nominal: 16, Reserved: 10, Used: 8, PendingWorkloads: 2, AdmittedWorkloads: 3})
			q := queueRow(t, r, "team-a", a100, gpu)
			want(t, "queue cohort", q.Cohort, "")
			want(t, "queue flavors", strings.Join(q.Flavors, ","), "a100")
			want(t, "cohort named by its queue", cohortRow(t, r, "team-a", a100, gpu).Nominal, 16)
			want(t, "rows", len(r.Status.Models)+len(r.Status.Queues)+len(r.Status.CohortModels), 3) // cpu is not counted
		},
	}, {
		name: "an overcommitted cohort of two queues",
		cluster: Cluster{Nodes: a100Nodes, Kueue: kueue([]Flavor{productFlavor("a100", a100)},
			[]ClusterQueue{queue("team-a", "research", quota("a100", gpu, 12)), queue("team-b", "research", quota("a100", gpu, 8))})},
		check: func(t *testing.T, r Result) {
			c := cohortRow(t, r, "research", a100, gpu)
			want(t, "cohort nominal", c.Nominal, 20)
			want(t, "cohort ready", c.Ready, 16)
			want(t, "cohort finding", c.Finding, homelabv1.QuotaFindingOvercommitted)
			want(t, "cohort queues", strings.Join(c.Queues, ","), "team-a,team-b")
			want(t, "team-b finding", queueRow(t, r, "team-b", a100, gpu).Finding, homelabv1.QuotaFindingOvercommitted)
			want(t, "team-b's cohort", queueRow(t, r, "team-b", a100, gpu).Cohort, "research")
			want(t, "model finding", modelRow(t, r, homelabv1.QuotaSourceKueue, a100, gpu).Finding, homelabv1.QuotaFindingOvercommitted)
			want(t, "overcommitted lines", len(r.Overcommitted), 1)
			wantLine(t, "overcommitted", r.Overcommitted, "cohort research", "team-a, team-b", "20 nvidia.com/gpu", a100, "16 Ready")
		},
	}, {
		name: "Ready nodes no flavor selects are stranded; a NotReady one is not",
		cluster: Cluster{
			Nodes: concat(a100Nodes, nodes("h100", h100, 2, 8, 8), []Node{{Name: "h100-down", Model: h100, Labels: map[string]string{product: h100},
				Resources: []NodeResource{{Name: gpu, Capacity: 8, Free: 8}}}}),
			Kueue: kueue([]Flavor{productFlavor("a100", a100), productFlavor("h100", h100)}, []ClusterQueue{queue("team-a", "", quota("a100", gpu, 16))})},
		check: func(t *testing.T, r Result) {
			want(t, "StrandedNodes", r.Status.StrandedNodes, 2)
			m := modelRow(t, r, homelabv1.QuotaSourceKueue, h100, gpu)
			want(t, "H100 row", m, homelabv1.QuotaModel{Model: h100, Source: homelabv1.QuotaSourceKueue, StrandedReady: 16,
				QuotaFigures: homelabv1.QuotaFigures{Resource: string(gpu), Capacity: 24, Ready: 16, Free: 16, Finding: homelabv1.QuotaFindingStranded}})
			want(t, "A100 finding", modelRow(t, r, homelabv1.QuotaSourceKueue, a100, gpu).Finding, "")
			want(t, "stranded lines", len(r.Stranded), 1)
			wantLine(t, "stranded", r.Stranded, "2 Ready GPU nodes", "2 "+h100+" (16 nvidia.com/gpu)", "(h100-0, h100-1)")
			if strings.Contains(r.Stranded[0], "h100-down") {
				t.Errorf("the NotReady node is named stranded: %s", r.Stranded[0])
			}
			want(t, "overcommitted lines", len(r.Overcommitted), 0)
		},
	}, {
		name: "borrowing between two queues within their lending and borrowing limits",
		cluster: Cluster{Nodes: a100Nodes, Kueue: kueue([]Flavor{productFlavor("a100", a100)}, []ClusterQueue{
			queue("team-a", "pool", Limit{Flavor: "a100", Resource: gpu, Nominal: 8, BorrowingLimit: ptr(4)}),
			queue("team-b", "pool", Limit{Flavor: "a100", Resource: gpu, Nominal: 8, LendingLimit: ptr(2)}),
		})},
		check: func(t *testing.T, r Result) {
			wantNone(t, r)
			want(t, "team-a borrows what team-b lends", queueRow(t, r, "team-a", a100, gpu).Borrowable, 2)
			want(t, "team-b borrows all team-a has", queueRow(t, r, "team-b", a100, gpu).Borrowable, 8)
			want(t, "a cohort borrows nothing", cohortRow(t, r, "pool", a100, gpu).Borrowable, 0)
			want(t, "cohort nominal", cohortRow(t, r, "pool", a100, gpu).Nominal, 16)
		},
	}, {
		name: "a MIG flavor counts MIG devices; its whole-GPU quota reaches no node",
		cluster: Cluster{
			Nodes: []Node{{Name: "mig-0", Model: a100, Ready: true, Labels: map[string]string{product: a100, "nvidia.com/mig.config": "all-1g.10gb"},
				Resources: []NodeResource{{Name: mig1g, Capacity: 56, Free: 50}}}},
			Kueue: kueue([]Flavor{{Name: "a100-mig", NodeLabels: map[string]string{"nvidia.com/mig.config": "all-1g.10gb"}}},
				[]ClusterQueue{queue("inference", "", quota("a100-mig", mig1g, 56), quota("a100-mig", gpu, 4))})},
		check: func(t *testing.T, r Result) {
			m := modelRow(t, r, homelabv1.QuotaSourceKueue, a100, mig1g)
			want(t, "MIG row", m.QuotaFigures, homelabv1.QuotaFigures{Resource: string(mig1g), Capacity: 56, Ready: 56, Free: 50, Nominal: 56})
			want(t, "whole-GPU quota finding", queueRow(t, r, "inference", "", gpu).Finding, homelabv1.QuotaFindingStranded)
			wantLine(t, "stranded", r.Stranded, "ClusterQueue inference", "quota 4 nvidia.com/gpu", "a100-mig", "reaches no node")
			want(t, "stranded lines", len(r.Stranded), 1)
			want(t, "StrandedNodes", r.Status.StrandedNodes, 0)
		},
	}, {
		name: "a default flavor selects mixed models",
		cluster: Cluster{Nodes: concat(a100Nodes, nodes("l4", l4, 4, 1, 1)),
			Kueue: kueue([]Flavor{{Name: "default-flavor"}}, []ClusterQueue{queue("everyone", "", quota("default-flavor", gpu, 20))})},
		check: func(t *testing.T, r Result) {
			wantNone(t, r)
			m := modelRow(t, r, homelabv1.QuotaSourceKueue, a100+"+"+l4, gpu)
			want(t, "mixed capacity", m.Capacity, 20)
			want(t, "rows", len(r.Status.Models), 1)
		},
	}, {
		name: "hierarchical cohorts: quota summed over the tree, borrowing bounded on the way up",
		cluster: Cluster{Nodes: concat(a100Nodes, nodes("a100b", a100, 2, 8, 8)), Kueue: kueue([]Flavor{productFlavor("a100", a100)},
			[]ClusterQueue{queue("r1", "research", quota("a100", gpu, 4)), queue("p1", "prod", quota("a100", gpu, 8))},
			Cohort{Name: "org"},
			Cohort{Name: "research", Parent: "org", Quotas: []Limit{{Flavor: "a100", Resource: gpu, Nominal: 4, BorrowingLimit: ptr(2)}}},
			Cohort{Name: "prod", Parent: "org"})},
		check: func(t *testing.T, r Result) {
			wantNone(t, r)
			c := cohortRow(t, r, "org", a100, gpu)
			want(t, "org nominal", c.Nominal, 16)
			want(t, "org queues", strings.Join(c.Queues, ","), "p1,r1")
			want(t, "Cohorts", r.Status.Cohorts, 1)
			want(t, "r1's cohort is the root", queueRow(t, r, "r1", a100, gpu).Cohort, "org")
			// research holds 8 and may take 2 more from org: r1 may reach 10, 6 above its own 4.
			want(t, "r1 borrowable", queueRow(t, r, "r1", a100, gpu).Borrowable, 6)
			want(t, "p1 borrowable", queueRow(t, r, "p1", a100, gpu).Borrowable, 8)
		},
	}, {
		name: "two cohorts together promise more than the GPUs both reach",
		cluster: Cluster{Nodes: nodes("a100", a100, 1, 8, 8), Kueue: kueue([]Flavor{productFlavor("a100", a100)},
			[]ClusterQueue{queue("team-a", "", quota("a100", gpu, 8)), queue("team-b", "", quota("a100", gpu, 8))})},
		check: func(t *testing.T, r Result) {
			want(t, "team-a alone", cohortRow(t, r, "team-a", a100, gpu).Finding, "")
			m := modelRow(t, r, homelabv1.QuotaSourceKueue, a100, gpu)
			want(t, "model nominal", m.Nominal, 16)
			want(t, "model finding", m.Finding, homelabv1.QuotaFindingOvercommitted)
			wantLine(t, "overcommitted", r.Overcommitted, a100, "cohorts team-a, team-b", "quota 16", "8 Ready")
		},
	}, {
		name: "a flavor's taints select only the nodes that carry them",
		cluster: Cluster{
			Nodes: concat(nodes("a100", a100, 1, 8, 8), func() []Node {
				spot := nodes("spot", a100, 1, 8, 8)
				spot[0].Taints = []corev1.Taint{{Key: "spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
				return spot
			}()),
			Kueue: kueue([]Flavor{{Name: "spot", NodeLabels: map[string]string{product: a100}, NodeTaints: []corev1.Taint{
				{Key: "spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}, {Key: "ignored", Effect: corev1.TaintEffectPreferNoSchedule}}}},
				[]ClusterQueue{queue("batch", "", quota("spot", gpu, 8))})},
		check: func(t *testing.T, r Result) {
			want(t, "queue reaches the spot node", queueRow(t, r, "batch", a100, gpu).Capacity, 8)
			want(t, "the other node is stranded", r.Status.StrandedNodes, 1)
			wantLine(t, "stranded", r.Stranded, "1 Ready GPU node is selected by no ResourceFlavor", "1 "+a100+" (8 nvidia.com/gpu)")
			want(t, "model row holds both", modelRow(t, r, homelabv1.QuotaSourceKueue, a100, gpu).Capacity, 16)
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Compute(tc.cluster, MaxRows)
			if r.Status == nil {
				t.Fatalf("no status; warnings %q", r.Warnings)
			}
			want(t, "Kueue version", r.Status.Kueue, "v1beta2")
			tc.check(t, r)
		})
	}
}

func rq(namespace, name string, hard, used map[corev1.ResourceName]int64) NamespaceQuota {
	return NamespaceQuota{Namespace: namespace, Name: name, Hard: hard, Used: used}
}

func TestComputeResourceQuotas(t *testing.T) {
	fleet := concat(nodes("a100", a100, 1, 8, 2), nodes("h100", h100, 1, 8, 8))
	t.Run("over the hardware", func(t *testing.T) {
		r := Compute(Cluster{Nodes: fleet, ResourceQuotas: []NamespaceQuota{
			rq("ml", "gpus", map[corev1.ResourceName]int64{"requests.nvidia.com/gpu": 12, "requests.cpu": 64}, map[corev1.ResourceName]int64{"requests.nvidia.com/gpu": 6}),
			rq("cv", "gpus", map[corev1.ResourceName]int64{"requests.nvidia.com/gpu": 8}, nil),
		}}, MaxRows)
		if r.Status == nil {
			t.Fatal("no status for ResourceQuotas without Kueue")
		}
		want(t, "Kueue", r.Status.Kueue, "")
		want(t, "Namespaces", r.Status.Namespaces, 2)
		m := modelRow(t, r, homelabv1.QuotaSourceResourceQuota, a100+"+"+h100, gpu)
		want(t, "row", m.QuotaFigures, homelabv1.QuotaFigures{Resource: string(gpu), Capacity: 16, Ready: 16, Free: 10,
			Nominal: 20, Reserved: 6, Used: 6, Finding: homelabv1.QuotaFindingOvercommitted})
		wantLine(t, "overcommitted", r.Overcommitted, "namespaces cv, ml", "hard 20 nvidia.com/gpu", "16 Ready")
		want(t, "largest first", r.Status.NamespaceQuotas[0], homelabv1.QuotaNamespace{Namespace: "ml", Resource: "requests.nvidia.com/gpu", Hard: 12, Used: 6})
		want(t, "namespace rows", len(r.Status.NamespaceQuotas), 2)
	})
	t.Run("under the hardware, two quotas in one namespace: the smaller binds", func(t *testing.T) {
		r := Compute(Cluster{Nodes: fleet, ResourceQuotas: []NamespaceQuota{
			rq("ml", "team", map[corev1.ResourceName]int64{"requests.nvidia.com/gpu": 12}, nil),
			rq("ml", "gpu-cap", map[corev1.ResourceName]int64{"requests.nvidia.com/gpu": 4}, nil),
			rq("cv", "gpus", map[corev1.ResourceName]int64{"requests.nvidia.com/gpu": 8}, nil),
		}}, MaxRows)
		wantNone(t, r)
		want(t, "Namespaces", r.Status.Namespaces, 2)
		want(t, "nominal", modelRow(t, r, homelabv1.QuotaSourceResourceQuota, a100+"+"+h100, gpu).Nominal, 12)
	})
	t.Run("a DRA device class quota no node offers", func(t *testing.T) {
		const class corev1.ResourceName = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
		r := Compute(Cluster{Nodes: fleet, ResourceQuotas: []NamespaceQuota{rq("ml", "dra", map[corev1.ResourceName]int64{class: 4}, nil)}}, MaxRows)
		want(t, "finding", modelRow(t, r, homelabv1.QuotaSourceResourceQuota, "", class).Finding, homelabv1.QuotaFindingStranded)
		wantLine(t, "stranded", r.Stranded, "namespaces ml", "hard 4 "+string(class), "no node offers")
		fleet := concat(fleet, []Node{{Name: "b200", Model: "NVIDIA-B200", Ready: true, Resources: []NodeResource{{Name: class, Capacity: 8, Free: 8}}}})
		r = Compute(Cluster{Nodes: fleet, ResourceQuotas: []NamespaceQuota{rq("ml", "dra", map[corev1.ResourceName]int64{class: 4}, nil)}}, MaxRows)
		wantNone(t, r)
		want(t, "ready", modelRow(t, r, homelabv1.QuotaSourceResourceQuota, "NVIDIA-B200", class).Ready, 8)
	})
}

func TestComputeBadInput(t *testing.T) {
	fleet := nodes("a100", a100, 2, 8, 8)
	flavors := []Flavor{productFlavor("a100", a100)}
	t.Run("a negative quota counts as 0", func(t *testing.T) {
		r := Compute(Cluster{Nodes: fleet, Kueue: kueue(flavors, []ClusterQueue{
			queue("team-a", "pool", Limit{Flavor: "a100", Resource: gpu, Nominal: -1, LendingLimit: ptr(-5)}), queue("team-b", "pool", quota("a100", gpu, 8))})}, MaxRows)
		wantLine(t, "warnings", r.Warnings, "ClusterQueue team-a", "nominalQuota is negative (-1)")
		wantLine(t, "warnings", r.Warnings, "ClusterQueue team-a", "lendingLimit is negative (-5)")
		want(t, "cohort nominal", cohortRow(t, r, "pool", a100, gpu).Nominal, 8)
		want(t, "team-b borrows nothing", queueRow(t, r, "team-b", a100, gpu).Borrowable, 0)
	})
	t.Run("a queue naming a flavor that does not exist", func(t *testing.T) {
		r := Compute(Cluster{Nodes: fleet, Kueue: kueue(flavors, []ClusterQueue{queue("team-a", "", quota("a100", gpu, 8), quota("h100", gpu, 8))})}, MaxRows)
		wantLine(t, "warnings", r.Warnings, "ClusterQueue team-a", `"h100", which does not exist`)
		wantLine(t, "stranded", r.Stranded, "ClusterQueue team-a", "quota 8 nvidia.com/gpu", "h100", "reaches no node")
		want(t, "the rest is reported", queueRow(t, r, "team-a", a100, gpu).Nominal, 8)
	})
	t.Run("a flavor whose labels match no node", func(t *testing.T) {
		r := Compute(Cluster{Nodes: fleet, Kueue: kueue(append(flavors, productFlavor("typo", "NVIDIA-A100-SXM4-80G")),
			[]ClusterQueue{queue("team-a", "", quota("typo", gpu, 8), quota("a100", gpu, 16))})}, MaxRows)
		wantLine(t, "stranded", r.Stranded, "ClusterQueue team-a", "typo", "reaches no node")
		want(t, "nodes are covered by a100", r.Status.StrandedNodes, 0)
	})
	t.Run("a cohort cycle", func(t *testing.T) {
		r := Compute(Cluster{Nodes: fleet, Kueue: kueue(flavors,
			[]ClusterQueue{queue("team-a", "left", quota("a100", gpu, 8)), queue("team-b", "right", quota("a100", gpu, 8))},
			Cohort{Name: "left", Parent: "right"}, Cohort{Name: "right", Parent: "left"})}, MaxRows)
		wantLine(t, "warnings", r.Warnings, "Cohorts left, right form a parent cycle")
		want(t, "Cohorts", r.Status.Cohorts, 2)
		want(t, "left", cohortRow(t, r, "left", a100, gpu).Nominal, 8)
		want(t, "no borrowing across the cycle", queueRow(t, r, "team-a", a100, gpu).Borrowable, 0)
	})
	t.Run("a quota too large to count", func(t *testing.T) {
		r := Compute(Cluster{Nodes: fleet, Kueue: kueue(flavors, []ClusterQueue{
			queue("team-a", "pool", quota("a100", gpu, 1<<63-1)), queue("team-b", "pool", quota("a100", gpu, 1<<63-1))})}, MaxRows)
		wantLine(t, "warnings", r.Warnings, "team-a", "too large to count")
		want(t, "cohort nominal stops at the largest count", cohortRow(t, r, "pool", a100, gpu).Nominal, 1<<63-1)
		wantLine(t, "overcommitted", r.Overcommitted, "cohort pool")
	})
	t.Run("duplicates and nameless objects", func(t *testing.T) {
		r := Compute(Cluster{Nodes: fleet, Kueue: kueue(append(flavors, Flavor{Name: "a100"}),
			[]ClusterQueue{queue("team-a", "", quota("a100", gpu, 4), quota("a100", gpu, 6)), queue("team-a", "", quota("a100", gpu, 2)), queue("", "", quota("a100", gpu, 1))})}, MaxRows)
		wantLine(t, "warnings", r.Warnings, "ResourceFlavor a100 is given twice")
		wantLine(t, "warnings", r.Warnings, "ClusterQueue team-a is given twice")
		wantLine(t, "warnings", r.Warnings, "a ClusterQueue without a name")
		wantLine(t, "warnings", r.Warnings, "ClusterQueue team-a gives quota of nvidia.com/gpu", "twice")
		want(t, "the first counts", queueRow(t, r, "team-a", a100, gpu).Nominal, 4)
	})
}

func TestComputeStatusPresence(t *testing.T) {
	fleet := nodes("a100", a100, 1, 8, 8)
	if r := Compute(Cluster{Nodes: fleet, ResourceQuotas: []NamespaceQuota{rq("ml", "cpu", map[corev1.ResourceName]int64{"requests.cpu": 8}, nil)}}, MaxRows); r.Status != nil {
		t.Errorf("status without Kueue and without GPU quota: %+v", r.Status)
	}
	r := Compute(Cluster{Nodes: fleet, Kueue: kueue(nil, []ClusterQueue{queue("cpu-only", "", quota("default", corev1.ResourceCPU, 64))})}, MaxRows)
	if r.Status == nil {
		t.Fatal("no status while Kueue is served")
	}
	if !reflect.DeepEqual(*r.Status, homelabv1.GpuQuota{Kueue: "v1beta2"}) {
		t.Errorf("status with Kueue and no GPU quota: %+v, want only the Kueue version", *r.Status)
	}
}

func TestComputeBoundsListsAndKeepsTotalsExact(t *testing.T) {
	var queues []ClusterQueue
	for i := range 40 {
		queues = append(queues, queue(fmt.Sprintf("team-%02d", i), "", quota("a100", gpu, int64(i))))
	}
	c := Cluster{Nodes: nodes("a100", a100, 100, 8, 8), Kueue: kueue([]Flavor{productFlavor("a100", a100)}, queues),
		ResourceQuotas: []NamespaceQuota{rq("a", "q", map[corev1.ResourceName]int64{"requests.nvidia.com/gpu": 1}, nil), rq("b", "q", map[corev1.ResourceName]int64{"requests.nvidia.com/gpu": 2}, nil)}}
	for _, bound := range []int{1, MaxRows, 100} {
		r := Compute(c, bound)
		rows := min(bound, MaxRows)
		want(t, fmt.Sprintf("bound %d: queues", bound), len(r.Status.Queues), rows)
		want(t, fmt.Sprintf("bound %d: cohorts", bound), len(r.Status.CohortModels), rows)
		want(t, fmt.Sprintf("bound %d: namespaces", bound), len(r.Status.NamespaceQuotas), min(rows, 2))
		want(t, "ClusterQueues", r.Status.ClusterQueues, 40)
		want(t, "Cohorts", r.Status.Cohorts, 40)
		want(t, "Namespaces", r.Status.Namespaces, 2)
		want(t, "largest first", r.Status.Queues[0].Name, "team-39")
		want(t, "model total", modelRow(t, r, homelabv1.QuotaSourceKueue, a100, gpu).Nominal, 39*40/2)
	}
}

func TestComputeIgnoresInputOrder(t *testing.T) {
	c := Cluster{
		Nodes: concat(nodes("a100", a100, 3, 8, 1), nodes("h100", h100, 2, 8, 4), nodes("l4", l4, 2, 1, 1)),
		Kueue: kueue([]Flavor{productFlavor("a100", a100), productFlavor("h100", h100), {Name: "default"}}, []ClusterQueue{
			queue("a", "research", quota("a100", gpu, 16), quota("h100", gpu, 4)), queue("b", "research", quota("a100", gpu, 16)),
			queue("c", "prod", quota("h100", gpu, 32)), queue("d", "", quota("default", gpu, 2)), queue("e", "prod", quota("gone", gpu, 1))},
			Cohort{Name: "prod", Parent: "org"}, Cohort{Name: "research", Parent: "org", Quotas: []Limit{quota("a100", gpu, 2)}}),
		ResourceQuotas: []NamespaceQuota{rq("x", "q", map[corev1.ResourceName]int64{"requests.nvidia.com/gpu": 3}, nil), rq("y", "q", map[corev1.ResourceName]int64{"requests.nvidia.com/gpu": 3}, nil)},
	}
	first := Compute(c, 3)
	reversed := c
	reversed.Nodes = slices.Clone(c.Nodes)
	slices.Reverse(reversed.Nodes)
	k := *c.Kueue
	k.Flavors, k.ClusterQueues, k.Cohorts = slices.Clone(k.Flavors), slices.Clone(k.ClusterQueues), slices.Clone(k.Cohorts)
	slices.Reverse(k.Flavors)
	slices.Reverse(k.ClusterQueues)
	slices.Reverse(k.Cohorts)
	reversed.Kueue = &k
	reversed.ResourceQuotas = slices.Clone(c.ResourceQuotas)
	slices.Reverse(reversed.ResourceQuotas)
	if second := Compute(reversed, 3); !reflect.DeepEqual(first, second) {
		t.Errorf("the same cluster listed in another order gives another result:\n%+v\n%+v", first, second)
	}
}
