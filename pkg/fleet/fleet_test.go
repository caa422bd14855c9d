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

package fleet

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// inventory is a member's GpuInventory as the operator writes it: H100 and A100 nodes in two
// racks (three exist, two listed), Kueue quota with an overcommitted cohort, Degraded.
func inventory(uid string, h100Free int32) *homelabv1.GpuInventory {
	return &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: "cluster", UID: types.UID(uid)},
		Status: homelabv1.GpuInventoryStatus{
			TotalGpuNodes: 5, ReadyGpuNodes: 4, TotalGpus: 36, ReadyGpus: 28,
			Models: []homelabv1.GpuModel{
				{Product: "NVIDIA-A100-SXM4-80GB", Nodes: 1, ReadyNodes: 1, Gpus: 4, ReadyGpus: 4, FreeGpus: 4, LargestFit: 4},
				{Product: "NVIDIA-H100-80GB-HBM3", Nodes: 4, ReadyNodes: 3, Gpus: 32, ReadyGpus: 24, FreeGpus: h100Free, LargestFit: min(h100Free, 8), PendingGpus: 16},
			},
			Allocation: &homelabv1.GpuAllocation{FreeGpus: h100Free + 4},
			Topology: &homelabv1.GpuTopology{Topologies: []homelabv1.TopologyTree{{
				Name: "default", GangSizes: []int32{8, 16},
				Levels: []homelabv1.TopologyLevel{{Key: "topology.kubernetes.io/rack", Domains: 3}},
				Largest: []homelabv1.TopologyLargest{
					{Model: "NVIDIA-H100-80GB-HBM3", Level: "topology.kubernetes.io/rack", Gpus: 16, Domain: "r1"},
					{Model: "NVIDIA-A100-SXM4-80GB", Level: "topology.kubernetes.io/rack", Gpus: 4, Domain: "r2"},
				},
				Domains: []homelabv1.TopologyDomain{
					{Level: "topology.kubernetes.io/rack", Name: "r1", Nodes: 2, Models: []homelabv1.TopologyModel{
						{Model: "NVIDIA-H100-80GB-HBM3", Nodes: 2, Gpus: 16, FreeGpus: 16, GangSlots: []int32{2, 1}, LargestGang: 16}}},
					{Level: "topology.kubernetes.io/rack", Name: "r2", Nodes: 2, Models: []homelabv1.TopologyModel{
						{Model: "NVIDIA-H100-80GB-HBM3", Nodes: 1, Gpus: 8, FreeGpus: 8, GangSlots: []int32{1, 0}, LargestGang: 8},
						{Model: "NVIDIA-A100-SXM4-80GB", Nodes: 1, Gpus: 4, FreeGpus: 4, GangSlots: []int32{0, 0}, LargestGang: 4}}},
				},
			}}},
			Quota: &homelabv1.GpuQuota{ClusterQueues: 3, Cohorts: 2, StrandedNodes: 1, Models: []homelabv1.QuotaModel{
				{Model: "NVIDIA-H100-80GB-HBM3", Source: homelabv1.QuotaSourceKueue, QuotaFigures: homelabv1.QuotaFigures{Resource: "nvidia.com/gpu", Nominal: 48, Ready: 24, Finding: homelabv1.QuotaFindingOvercommitted}},
				{Model: "NVIDIA-A100-SXM4-80GB", Source: homelabv1.QuotaSourceKueue, QuotaFigures: homelabv1.QuotaFigures{Resource: "nvidia.com/gpu", Nominal: 4, Ready: 4}},
			}},
			Conditions: []metav1.Condition{
				{Type: homelabv1.ConditionDegraded, Status: metav1.ConditionTrue},
				{Type: homelabv1.ConditionTruncated, Status: metav1.ConditionTrue},
				{Type: homelabv1.ConditionQuotaOvercommitted, Status: metav1.ConditionTrue},
				{Type: homelabv1.ConditionFragmented, Status: metav1.ConditionFalse},
			},
		}}
}

func reachable(name, server string, inv *homelabv1.GpuInventory) Member {
	return Member{Name: name, Server: server, State: homelabv1.MemberReachable, Since: t0, Inventory: inv}
}

func unreachable(m Member, since time.Time, reason string) Member {
	m.State, m.Since, m.Reason, m.Message = homelabv1.MemberUnreachable, since, reason, "it said no"
	return m
}

func TestRowSummarisesTheInventory(t *testing.T) {
	m := reachable("fleet/w1", "https://w1:443", inventory("u1", 10))
	m.MultiKueueCluster = "w1"
	got := row(m, homelabv1.MemberReachable)
	since := metav1.NewTime(t0)
	rack := "topology.kubernetes.io/rack"
	want := homelabv1.FleetMember{Name: "fleet/w1", MultiKueueCluster: "w1", Server: "https://w1:443", State: homelabv1.MemberReachable, Since: &since,
		GpuNodes: 5, ReadyGpuNodes: 4, Gpus: 36, ReadyGpus: 28, FreeGpus: 14,
		Models: []homelabv1.FleetMemberModel{
			{Model: "NVIDIA-H100-80GB-HBM3", Gpus: 32, ReadyGpus: 24, FreeGpus: 10, LargestFit: 8, PendingGpus: 16},
			{Model: "NVIDIA-A100-SXM4-80GB", Gpus: 4, ReadyGpus: 4, FreeGpus: 4, LargestFit: 4},
		},
		Gangs: []homelabv1.FleetMemberGang{
			{Model: "NVIDIA-H100-80GB-HBM3", Topology: "default", Level: rack, LargestGang: 16, Domain: "r1",
				Slots: []homelabv1.GangSlots{{Gpus: 8, Gangs: 3}, {Gpus: 16, Gangs: 1}}, Partial: true},
			{Model: "NVIDIA-A100-SXM4-80GB", Topology: "default", Level: rack, LargestGang: 4, Domain: "r2",
				Slots: []homelabv1.GangSlots{{Gpus: 8}, {Gpus: 16}}, Partial: true},
		},
		Quota: &homelabv1.FleetMemberQuota{ClusterQueues: 3, Cohorts: 2, StrandedNodes: 1, Findings: []homelabv1.FleetQuotaFinding{
			{Model: "NVIDIA-H100-80GB-HBM3", Resource: "nvidia.com/gpu", Finding: homelabv1.QuotaFindingOvercommitted, Nominal: 48, Ready: 24}}},
		Problems: []string{homelabv1.ConditionDegraded, homelabv1.ConditionQuotaOvercommitted},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}

func TestRowIsBounded(t *testing.T) {
	inv := inventory("u1", 10)
	s := &inv.Status
	s.Models = nil
	for i := range 20 {
		s.Models = append(s.Models, homelabv1.GpuModel{Product: fmt.Sprintf("model-%02d", i), Gpus: int32(100 - i), ReadyGpus: 1, FreeGpus: 1, LargestFit: int32(i)})
	}
	tree := &s.Topology.Topologies[0]
	for i := range 30 {
		tree.Largest = append(tree.Largest, homelabv1.TopologyLargest{Model: fmt.Sprintf("model-%02d", i), Level: "rack", Gpus: int32(i)})
	}
	for i := range 10 {
		s.Quota.Models = append(s.Quota.Models, homelabv1.QuotaModel{Model: strings.Repeat("m", 300),
			QuotaFigures: homelabv1.QuotaFigures{Resource: "nvidia.com/gpu", Nominal: int64(i), Finding: homelabv1.QuotaFindingStranded}})
	}
	for i := range 20 {
		s.Conditions = append(s.Conditions, metav1.Condition{Type: fmt.Sprintf("Problem%02d", i), Status: metav1.ConditionTrue})
	}
	r := row(reachable("w", "", inv), homelabv1.MemberReachable)
	if len(r.Models) != maxRowModels || len(r.Gangs) != maxRowGangs || len(r.Quota.Findings) != maxRowFindings || len(r.Problems) != maxRowProblems {
		t.Fatalf("row holds %d models, %d gangs, %d findings, %d problems", len(r.Models), len(r.Gangs), len(r.Quota.Findings), len(r.Problems))
	}
	other := r.Models[maxRowModels-1]
	// models 07..19 are folded: 93+92+...+81 GPUs, one free each, the largest fit 19.
	if other.Model != OtherModels || other.Gpus != 13*87 || other.FreeGpus != 13 || other.LargestFit != 19 {
		t.Errorf("folded models = %+v", other)
	}
	if r.Gangs[0].LargestGang != 29 || len(r.Quota.Findings[1].Model) != 128 || r.Quota.Findings[0].Nominal != 48 {
		t.Errorf("the largest gang first (%d), model names clipped (%d bytes), the largest quota first (%d)",
			r.Gangs[0].LargestGang, len(r.Quota.Findings[1].Model), r.Quota.Findings[0].Nominal)
	}
}

// A fleet of five members, one of each kind: what counts, what the conditions name.
func TestStatusCountsReachableAndNotYetStaleMembers(t *testing.T) {
	o := Options{Now: t0.Add(10 * time.Minute), StaleAfter: 5 * time.Minute, Generation: 3}
	members := []Member{
		reachable("fleet/a", "https://a:443", inventory("ua", 10)),
		unreachable(reachable("fleet/b", "https://b:443", inventory("ub", 2)), o.Now.Add(-time.Minute), homelabv1.ReasonConnectionFailed),
		unreachable(reachable("fleet/c", "https://c:443", inventory("uc", 8)), o.Now.Add(-6*time.Minute), homelabv1.ReasonUnauthorized),
		{Name: "fleet/d", State: homelabv1.MemberConnecting, Since: o.Now},
		reachable("fleet/e", "https://a:443", inventory("ua", 10)),
	}
	st := Status(members, o)
	if st.TotalMembers != 5 || st.ReachableMembers != 1 || st.UnreachableMembers != 2 || st.StaleMembers != 1 {
		t.Errorf("members = %d, reachable %d, unreachable %d, stale %d", st.TotalMembers, st.ReachableMembers, st.UnreachableMembers, st.StaleMembers)
	}
	if st.TotalGpus != 72 || st.ReadyGpus != 56 || st.FreeGpus != 20 {
		t.Errorf("totals = %d GPUs, %d Ready, %d free: want a and b (b's last-known), not c (stale), d (never read) or e (a again)", st.TotalGpus, st.ReadyGpus, st.FreeGpus)
	}
	wantModels := []homelabv1.FleetModel{
		{Model: "NVIDIA-H100-80GB-HBM3", Members: 2, Gpus: 64, ReadyGpus: 48, FreeGpus: 12, LargestFit: 8, LargestFitMember: "fleet/a"},
		{Model: "NVIDIA-A100-SXM4-80GB", Members: 2, Gpus: 8, ReadyGpus: 8, FreeGpus: 8, LargestFit: 4, LargestFitMember: "fleet/a"},
	}
	if diff := cmp.Diff(wantModels, st.Models); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
	states := map[string]string{}
	for _, r := range st.Members {
		states[r.Name] = r.State
	}
	if want := map[string]string{"fleet/a": "Reachable", "fleet/b": "Unreachable", "fleet/c": "Stale", "fleet/d": "Connecting", "fleet/e": "Duplicate"}; !cmp.Equal(states, want) {
		t.Errorf("states = %v, want %v", states, want)
	}
	wantConditions := map[string]string{
		homelabv1.ConditionMembersUnreachable: "True 2 of 4 members cannot be read: fleet/b (ConnectionFailed), fleet/c (Unauthorized)",
		homelabv1.ConditionMembersStale:       "True 1 members have been unreachable for longer than spec.staleAfter; their last-known GPUs are out of the totals: fleet/c since 2026-03-01T12:04:00Z",
		homelabv1.ConditionDuplicateMembers:   "True 1 members are another member's cluster again: fleet/e: the same cluster as member fleet/a (server https://a:443): counted once, there",
		homelabv1.ConditionTruncated:          "False status.members lists all 5 members",
	}
	for _, c := range st.Conditions {
		if got := string(c.Status) + " " + c.Message; got != wantConditions[c.Type] || c.ObservedGeneration != 3 {
			t.Errorf("condition %s = %q (generation %d), want %q", c.Type, got, c.ObservedGeneration, wantConditions[c.Type])
		}
	}
	if next, ok := NextChange(members, o); !ok || !next.Equal(o.Now.Add(4*time.Minute)) {
		t.Errorf("NextChange = %v, %v: b turns stale 5m after it became unreachable", next, ok)
	}
	if _, ok := NextChange(members, Options{Now: o.Now.Add(time.Hour), StaleAfter: o.StaleAfter}); ok {
		t.Errorf("NextChange an hour later: nothing is left to turn stale")
	}
}

// A member appearing, changing, becoming unreachable, turning stale, returning or vanishing
// changes its own row and the totals, and no other member's row.
func TestAMemberChangesOnlyItsOwnRow(t *testing.T) {
	o := Options{Now: t0, StaleAfter: 5 * time.Minute}
	others := []Member{reachable("fleet/a", "https://a:443", inventory("ua", 10)), reachable("fleet/c", "https://c:443", inventory("uc", 3))}
	b := reachable("fleet/b", "https://b:443", inventory("ub", 6))
	steps := []struct {
		name string
		b    *Member
		now  time.Time
	}{
		{"appears, connecting", &Member{Name: "fleet/b", State: homelabv1.MemberConnecting, Since: t0}, t0},
		{"is read", &b, t0},
		{"changes", ptr(reachable("fleet/b", "https://b:443", inventory("ub", 0))), t0},
		{"answers too slowly", ptr(unreachable(b, t0, "AnswerTooSlow")), t0.Add(time.Minute)},
		{"turns stale", ptr(unreachable(b, t0, "AnswerTooSlow")), t0.Add(6 * time.Minute)},
		{"returns", &b, t0.Add(7 * time.Minute)},
		{"vanishes", nil, t0.Add(8 * time.Minute)},
	}
	base := Status(others, o)
	for _, step := range steps {
		members := slices.Clone(others)
		if step.b != nil {
			members = append(members, *step.b)
		}
		o.Now = step.now
		st := Status(members, o)
		for _, r := range st.Members {
			if r.Name == "fleet/b" {
				continue
			}
			i := slices.IndexFunc(base.Members, func(x homelabv1.FleetMember) bool { return x.Name == r.Name })
			if diff := cmp.Diff(base.Members[i], r); diff != "" {
				t.Errorf("b %s: row %s changed (-before +after):\n%s", step.name, r.Name, diff)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestDedupe(t *testing.T) {
	viaProfile := reachable("fleet/w1", "https://w1.example.com:443", inventory("u1", 1))
	viaProfile.ClusterProfile = "fleet/w1"
	viaLB := unreachable(reachable("w1-lb", "https://10.0.0.9:443", inventory("u1", 1)), t0, homelabv1.ReasonConnectionFailed)
	viaLB.MultiKueueCluster = "w1-lb"
	secondProfile := reachable("other/w1", "https://w1.example.com:443", nil)
	secondProfile.ClusterProfile = "other/w1"
	alone := reachable("fleet/w2", "https://w2.example.com:443", inventory("u2", 1))

	in := []Member{viaLB, secondProfile, alone, viaProfile}
	for range 5 {
		rand.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
		out := Dedupe(in)
		var got []string
		for _, m := range out {
			got = append(got, fmt.Sprintf("%s %s %s %s %s", m.Name, m.State, m.ClusterProfile, m.MultiKueueCluster, m.SameAs))
		}
		want := []string{
			"fleet/w1 Reachable fleet/w1 w1-lb ",
			"fleet/w2 Reachable   ",
			"other/w1 Duplicate other/w1  fleet/w1",
			"w1-lb Duplicate  w1-lb fleet/w1",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Dedupe(%v) (-want +got):\n%s", names(in), diff)
		}
		if !strings.Contains(out[3].Message, "GpuInventory uid u1") || !strings.Contains(out[2].Message, "server https://w1.example.com:443") {
			t.Errorf("messages %q, %q do not say what the members share", out[2].Message, out[3].Message)
		}
	}
}

func names(ms []Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

func TestTotalsFoldTheSmallestModels(t *testing.T) {
	var members []Member
	for i := range 3 {
		inv := &homelabv1.GpuInventory{}
		for j := range 40 {
			inv.Status.Models = append(inv.Status.Models, homelabv1.GpuModel{Product: fmt.Sprintf("m%02d-%d", j, i%2), Gpus: int32(1000 - j), FreeGpus: 1, LargestFit: int32(i)})
		}
		members = append(members, reachable(fmt.Sprintf("w%d", i), "", inv))
	}
	got := Totals(members)
	if len(got) != maxModels || got[maxModels-1].Model != OtherModels {
		t.Fatalf("%d models, the last %q", len(got), got[len(got)-1].Model)
	}
	var gpus int32
	for _, m := range got {
		gpus += m.Gpus
	}
	if want := int32(3 * (40*1000 - 39*40/2)); gpus != want {
		t.Errorf("the models hold %d GPUs in all, want %d: folding lost some", gpus, want)
	}
	if got[0].Model != "m00-0" || got[0].Members != 2 || got[0].LargestFit != 2 || got[0].LargestFitMember != "w2" {
		t.Errorf("first model = %+v", got[0])
	}
}

// 150 members, 10 of them unreachable: all 10 are listed, the list is bounded by count and
// by bytes, and sorted by name.
func TestStatusListsProblemMembersFirstWithinTheBounds(t *testing.T) {
	var members []Member
	for i := range 150 {
		m := reachable(fmt.Sprintf("fleet/w%03d", i), fmt.Sprintf("https://w%d:443", i), inventory(fmt.Sprint(i), 1))
		if i%15 == 14 {
			m = unreachable(m, t0, homelabv1.ReasonForbidden)
		}
		members = append(members, m)
	}
	for _, tc := range []struct {
		name   string
		bytes  int
		listed int
	}{{"by count", 0, MaxMembers}, {"by bytes", 20 << 10, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			st := Status(members, Options{Now: t0, MaxListedBytes: tc.bytes})
			if tc.listed != 0 && len(st.Members) != tc.listed || int(st.ListedMembers) != len(st.Members) {
				t.Errorf("listed %d (%d), want %d", len(st.Members), st.ListedMembers, tc.listed)
			}
			var unreachable, size int
			for _, r := range st.Members {
				if r.State == homelabv1.MemberUnreachable {
					unreachable++
				}
				size += rowBytes(&r)
			}
			if unreachable != 10 {
				t.Errorf("%d unreachable members listed, want all 10", unreachable)
			}
			if tc.bytes != 0 && size > tc.bytes {
				t.Errorf("listed rows take %d bytes, over %d", size, tc.bytes)
			}
			if !slices.IsSortedFunc(st.Members, func(a, b homelabv1.FleetMember) int { return strings.Compare(a.Name, b.Name) }) {
				t.Errorf("the listed rows are not sorted by name")
			}
			c := st.Conditions[3]
			if c.Type != homelabv1.ConditionTruncated || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, fmt.Sprintf("lists %d of 150 members", len(st.Members))) {
				t.Errorf("Truncated = %s %s", c.Status, c.Message)
			}
		})
	}
}

// The largest status the API allows stays far under etcd's object limit.
func TestStatusSizeBound(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	var members []Member
	for i := range 300 {
		inv := inventory(fmt.Sprint(i), 1)
		s := &inv.Status
		for j := range 20 {
			s.Models = append(s.Models, homelabv1.GpuModel{Product: long(120) + fmt.Sprint(i*100+j), Gpus: 8})
			s.Topology.Topologies[0].Largest = append(s.Topology.Topologies[0].Largest,
				homelabv1.TopologyLargest{Model: long(120), Level: long(300), Gpus: int32(j), Domain: long(63)})
			s.Quota.Models = append(s.Quota.Models, homelabv1.QuotaModel{Model: long(200), QuotaFigures: homelabv1.QuotaFigures{
				Resource: long(300), Finding: homelabv1.QuotaFindingStranded}})
			s.Conditions = append(s.Conditions, metav1.Condition{Type: long(60) + fmt.Sprint(j), Status: metav1.ConditionTrue})
		}
		m := unreachable(reachable(long(300)+fmt.Sprint(i), long(500)+fmt.Sprint(i), inv), t0, long(64))
		m.Message, m.ClusterProfile, m.MultiKueueCluster = long(2000), long(317), long(256)
		members = append(members, m)
	}
	st := Status(members, Options{Now: t0})
	data, err := json.Marshal(&st)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 320<<10 {
		t.Errorf("the status is %d KiB, want at most 320 KiB", len(data)>>10)
	}
	t.Logf("worst status: %d KiB, %d of %d members listed", len(data)>>10, st.ListedMembers, st.TotalMembers)
}

func TestHashFollowsTheContentOnly(t *testing.T) {
	o := Options{Now: t0, Generation: 1}
	a, b := reachable("a", "https://a:443", inventory("ua", 4)), reachable("b", "https://b:443", inventory("ub", 4))
	st := Status([]Member{a, b}, o)
	o.Generation = 2
	if again := Status([]Member{b, a}, o); again.FleetHash != st.FleetHash {
		t.Errorf("the hash changed with the members' order or the generation")
	}
	moved := st
	moved.Conditions = slices.Clone(st.Conditions)
	moved.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(time.Hour))
	if Hash(&moved) != st.FleetHash {
		t.Errorf("the hash changed with a transition time")
	}
	b.Inventory = inventory("ub", 3)
	if changed := Status([]Member{a, b}, o); changed.FleetHash == st.FleetHash {
		t.Errorf("a member's free GPUs changed and the hash did not")
	}
}
