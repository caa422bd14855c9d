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

package dispatch

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// model is a status model row: its Ready nodes and its free-GPU histogram.
func model(product string, ready int32, freeNodes ...int32) homelabv1.GpuModel {
	return homelabv1.GpuModel{Product: product, Nodes: ready, ReadyNodes: ready, FreeNodes: freeNodes}
}

// eights is a freeNodes list of n nodes with 8 free.
func eights(n int32) []int32 { return []int32{0, 0, 0, 0, 0, 0, 0, n} }

func status(models ...homelabv1.GpuModel) *homelabv1.GpuInventoryStatus {
	return &homelabv1.GpuInventoryStatus{Models: models, Quota: &homelabv1.GpuQuota{Queues: []homelabv1.QuotaQueue{
		queueRow("team-a", h100, 64, 0), queueRow("team-a", a100, 64, 0)}}}
}

func queueRow(name, m string, nominal, reserved int64) homelabv1.QuotaQueue {
	return homelabv1.QuotaQueue{Name: name, Model: m, QuotaFigures: homelabv1.QuotaFigures{Resource: "nvidia.com/gpu", Nominal: nominal, Reserved: reserved}}
}

// racks is a topology "default" of racks r1..rn over hosts, each rack's H100 nodes given
// as a freeNodes list; listed says how many racks the status lists.
func racks(total int32, listed ...[]int32) *homelabv1.GpuTopology {
	tr := homelabv1.TopologyTree{Name: "default", Levels: []homelabv1.TopologyLevel{{Key: "rack", Domains: total}, {Key: "host", Domains: total * 2}}}
	for i, fn := range listed {
		name := "r" + string(rune('1'+i))
		tr.Domains = append(tr.Domains, homelabv1.TopologyDomain{Level: "rack", Name: name, Models: []homelabv1.TopologyModel{{Model: h100, FreeNodes: fn}}})
	}
	return &homelabv1.GpuTopology{Topologies: []homelabv1.TopologyTree{tr}}
}

func ask(pods, gpus int32) Ask { return Ask{Name: "main", Pods: pods, Gpus: gpus} }

func req(asks ...Ask) Request {
	return Request{Workload: "ml/train", ClusterQueue: "team-a", Sets: asks}
}

func TestJudge(t *testing.T) {
	tainted := model(h100, 4, eights(4)...)
	tainted.Taints = []homelabv1.TaintCount{{Taint: "dedicated=ml:NoSchedule", Nodes: 4}}
	partlyTainted := model(h100, 4, eights(4)...)
	partlyTainted.Taints = []homelabv1.TaintCount{{Taint: "maintenance:NoSchedule", Nodes: 1}}
	tolerating := ask(2, 8)
	tolerating.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ml", Effect: corev1.TaintEffectNoSchedule}}
	pinnedA100 := ask(1, 8)
	pinnedA100.Models = []string{a100}
	inRack := ask(4, 8)
	inRack.Required = "rack"
	preferRack := ask(4, 8)
	preferRack.Preferred = "rack"
	inZone := ask(1, 8)
	inZone.Required = "zone"
	slicedRacks := ask(4, 8)
	slicedRacks.SliceLevel, slicedRacks.SliceSize = "rack", 2

	withRacks := func(total int32, listed ...[]int32) *homelabv1.GpuInventoryStatus {
		st := status(model(h100, 8, eights(8)...))
		st.Topology = racks(total, listed...)
		return st
	}
	noQuota := status(model(h100, 2, eights(2)...))
	noQuota.Quota = nil
	lowQuota := status(model(h100, 4, eights(4)...))
	lowQuota.Quota.Queues = []homelabv1.QuotaQueue{queueRow("team-a", h100, 24, 16)}
	borrowing := status(model(h100, 4, eights(4)...))
	borrowing.Quota.Queues = []homelabv1.QuotaQueue{queueRow("team-a", h100, 8, 0)}
	borrowing.Quota.Queues[0].Cohort, borrowing.Quota.Queues[0].Borrowable = "all", 16
	borrowing.Quota.CohortModels = []homelabv1.QuotaCohort{{Cohort: "all", Model: h100, QuotaFigures: homelabv1.QuotaFigures{Resource: "nvidia.com/gpu", Nominal: 40, Reserved: 24}}}
	otherQueue := status(model(h100, 4, eights(4)...))
	otherQueue.Quota.Queues = []homelabv1.QuotaQueue{queueRow("team-b", h100, 64, 0)}

	cases := []struct {
		name    string
		req     Request
		worker  Worker
		assumed []Request
		verdict Verdict
		reason  string
		left    int64
	}{
		{"two pods of 8 on two free nodes", req(ask(2, 8)), Worker{Status: status(model(h100, 3, eights(3)...))}, nil, Fits, "", 0},
		{"best fit leaves the least", req(ask(1, 4)), Worker{Status: status(model(h100, 2, 0, 0, 0, 0, 0, 1, 0, 1))}, nil, Fits, "", 2},
		{"nodes with 4 free do not take pods of 8", req(ask(2, 8)), Worker{Status: status(model(h100, 4, 0, 0, 0, 3, 0, 0, 0, 1))},
			nil, DoesNotFit, h100 + ": 1 of 2 pods of 8 GPUs fit (1 with 8, 3 with 4 free)", 0},
		{"two pod sets share the nodes", req(ask(1, 8), ask(2, 4)), Worker{Status: status(model(h100, 1, eights(1)...))}, nil, DoesNotFit, "0 of 2 pods of 4 GPUs fit", 0},
		{"a model the worker lacks", req(pinnedA100), Worker{Status: status(model(h100, 1, eights(1)...))}, nil, DoesNotFit,
			"pod set main asks for " + a100 + "; the worker has " + h100, 0},
		{"a model chosen among several", req(ask(1, 8)), Worker{Status: status(model(h100, 1, 1), model(a100, 1, eights(1)...))}, nil, Fits, "", 0},
		{"a taint on every node", req(ask(2, 8)), Worker{Status: status(tainted)}, nil, DoesNotFit, "every node is tainted dedicated=ml:NoSchedule", 0},
		{"a tolerated taint", req(tolerating), Worker{Status: status(tainted)}, nil, Fits, "", 0},
		{"a taint on some nodes", req(ask(2, 8)), Worker{Status: status(partlyTainted)}, nil, FitsUncertain, "maintenance:NoSchedule on 1 of 4 nodes", 0},
		{"one rack takes the gang", req(inRack), Worker{Status: withRacks(2, eights(2), eights(4))}, nil, Fits, "", 0},
		{"no rack takes the gang", req(inRack), Worker{Status: withRacks(2, eights(3), eights(2))}, nil, DoesNotFit, "no rack takes 4 pods of 8 GPUs (the most: r1, 3)", 0},
		{"racks the status does not list", req(inRack), Worker{Status: withRacks(5, eights(3), eights(2))}, nil, FitsUncertain, "2 of the 5 domains of rack are listed", 0},
		{"a level the worker has not", req(inZone), Worker{Status: withRacks(2, eights(4))}, nil, DoesNotFit, "no topology of the worker has level zone", 0},
		{"slices of 2 in racks", req(slicedRacks), Worker{Status: withRacks(2, eights(2), eights(3))}, nil, Fits, "", 0},
		{"slices that no rack holds", req(slicedRacks), Worker{Status: withRacks(2, eights(1), eights(1))}, nil, DoesNotFit, "no domain of the topology takes 2 slices of 2 pods", 0},
		{"quota left", req(ask(1, 8)), Worker{Status: lowQuota}, nil, Fits, "", 0},
		{"quota short", req(ask(2, 8)), Worker{Status: lowQuota}, nil, DoesNotFit, "quota: ClusterQueue team-a has 8 nvidia.com/gpu of " + h100 + " left, 16 asked", 0},
		{"quota borrowed from the cohort", req(ask(3, 8)), Worker{Status: borrowing}, nil, Fits, "", 0},
		{"more than the cohort lends", req(ask(4, 8)), Worker{Status: borrowing}, nil, DoesNotFit, "has 24 nvidia.com/gpu", 0},
		{"a queue the status does not list", req(ask(1, 8)), Worker{Status: otherQueue}, nil, FitsUncertain, "does not list ClusterQueue team-a", 0},
		{"no quota in the status", req(ask(1, 8)), Worker{Status: noQuota}, nil, FitsUncertain, "quota: the worker's inventory shows none", 0},
		{"room promised to an earlier nomination", req(ask(2, 8)), Worker{Status: status(model(h100, 3, eights(3)...))}, []Request{req(ask(2, 8))},
			DoesNotFit, "1 of 2 pods", 0},
		{"an earlier nomination that no longer fits is left out", req(ask(2, 8)), Worker{Status: status(model(h100, 3, eights(3)...))}, []Request{req(ask(9, 8))}, Fits, "", 0},
		{"an unreachable worker", req(ask(1, 1)), Worker{Unavailable: "unreachable: Unauthorized since 12:04", Status: status(model(h100, 3, eights(3)...))},
			nil, DoesNotFit, "unreachable: Unauthorized since 12:04", 0},
		{"a worker with no data", req(ask(1, 1)), Worker{}, nil, DoesNotFit, "its GpuInventory has not been read", 0},
		{"a worker without GPUs", req(ask(1, 1)), Worker{Status: &homelabv1.GpuInventoryStatus{}}, nil, DoesNotFit, "the worker has no GPU node", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.worker.Name = "w1"
			a := Judge(c.req, c.worker, c.assumed)
			if a.Verdict != c.verdict || !strings.Contains(a.Reason, c.reason) || (c.reason == "") != (a.Reason == "") {
				t.Errorf("%s: %q, want %s: %q", a.Verdict, a.Reason, c.verdict, c.reason)
			}
			if a.Verdict != DoesNotFit && a.LeftFree != c.left {
				t.Errorf("leaves %d free, want %d", a.LeftFree, c.left)
			}
		})
	}
}

// A gang placed in a rack takes its GPUs from the rack and the model: a second gang of the
// same size finds only the other rack.
func TestDomainPlacementTakesFromRackAndModel(t *testing.T) {
	st := status(model(h100, 6, eights(6)...))
	st.Topology = racks(2, eights(2), eights(4))
	s := newState(st)
	inRack := ask(2, 8)
	inRack.Required = "rack"
	for i, want := range []bool{true, true, true, false} {
		p := s.judge(req(inRack))
		if p.ok != want {
			t.Fatalf("gang %d: fits %v, want %v (%s)", i+1, p.ok, want, p.reason)
		}
		if p.ok {
			s = p.state
		}
	}
	if n := s.models[h100].free.takes(8); n != 0 {
		t.Errorf("the model still takes %d pods of 8 after three gangs of 2 in six nodes", n)
	}
}

func TestRankAndChoose(t *testing.T) {
	answers := []Answer{
		{Worker: "d", Verdict: DoesNotFit},
		{Worker: "c", Verdict: FitsUncertain},
		{Worker: "b", Verdict: Fits, LeftFree: 8},
		{Worker: "a", Verdict: Fits, LeftFree: 8, PendingGpus: 4},
		{Worker: "e", Verdict: Fits, LeftFree: 0},
		{Worker: "f", Verdict: Fits, LeftFree: 16, PreferredMet: 1},
	}
	Rank(answers)
	var order []string
	for _, a := range answers {
		order = append(order, a.Worker)
	}
	if want := []string{"f", "e", "b", "a", "c", "d"}; !slices.Equal(order, want) {
		t.Errorf("ranked %q, want %q", order, want)
	}
	if got := Choose(answers, 2); !slices.Equal(got, []string{"f", "e"}) {
		t.Errorf("chose %q, want the two best certain fits", got)
	}
	if got := Choose([]Answer{{Worker: "c", Verdict: FitsUncertain}, {Worker: "d"}}, 3); !slices.Equal(got, []string{"c"}) {
		t.Errorf("chose %q, want the uncertain fit when none is certain", got)
	}
	if got := Choose([]Answer{{Worker: "d"}}, 1); got != nil {
		t.Errorf("chose %q where nothing fits", got)
	}
}

// A preferred topology fits anywhere, and counts for the ranking where one domain takes it.
func TestPreferredTopology(t *testing.T) {
	preferRack := ask(4, 8)
	preferRack.Preferred = "rack"
	st := status(model(h100, 8, eights(8)...))
	st.Topology = racks(2, eights(4), eights(4))
	if a := Judge(req(preferRack), Worker{Name: "w1", Status: st}, nil); a.Verdict != Fits || a.PreferredMet != 1 {
		t.Errorf("one rack takes it: %+v, want a fit with the preference met", a)
	}
	st.Topology = racks(2, eights(2), eights(2))
	st.Topology.Topologies[0].Levels[0].Domains = 4
	if a := Judge(req(preferRack), Worker{Name: "w1", Status: st}, nil); a.Verdict != Fits || a.PreferredMet != 0 {
		t.Errorf("no rack takes it: %+v, want a fit without the preference", a)
	}
}
