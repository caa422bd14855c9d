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
	"cmp"
	"slices"
	"strings"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

// Bounds of a member's row (the API's MaxItems).
const (
	maxRowModels   = 8
	maxRowGangs    = 8
	maxRowFindings = 4
	maxRowProblems = 12
	maxGangSizes   = 8
	// OtherModels names the models a bounded list counts together.
	OtherModels = "<other models>"
)

// row is a member's GpuFleet row in state: its identity and state, and the figures of its
// inventory (last-known when it is not reachable).
func row(m Member, state string) homelabv1.FleetMember {
	r := homelabv1.FleetMember{Name: m.Name, ClusterProfile: m.ClusterProfile, MultiKueueCluster: m.MultiKueueCluster,
		Server: clip(m.Server, 512), State: state}
	if state != homelabv1.MemberReachable {
		r.Reason, r.Message = clip(m.Reason, 64), clip(m.Message, 1024)
	}
	if !m.Since.IsZero() {
		since := metav1.NewTime(m.Since).Rfc3339Copy()
		r.Since = &since
	}
	inv := m.Inventory
	if inv == nil || state == homelabv1.MemberDuplicate {
		return r
	}
	s := &inv.Status
	r.GpuNodes, r.ReadyGpuNodes, r.Gpus, r.ReadyGpus = s.TotalGpuNodes, s.ReadyGpuNodes, s.TotalGpus, s.ReadyGpus
	if s.Allocation != nil {
		r.FreeGpus = s.Allocation.FreeGpus
	}
	r.Models = rowModels(s.Models)
	r.Gangs = gangs(s.Topology)
	r.Quota = quota(s.Quota)
	r.Problems = problems(s.Conditions)
	return r
}

// rowModels is the inventory's models, the most GPUs first, at most maxRowModels: the rest
// (and the inventory's own <other models>) summed under OtherModels.
func rowModels(models []homelabv1.GpuModel) []homelabv1.FleetMemberModel {
	out := make([]homelabv1.FleetMemberModel, 0, min(len(models), maxRowModels))
	for _, m := range models {
		out = append(out, homelabv1.FleetMemberModel{Model: clip(modelName(m.Product), 128), Gpus: m.Gpus, ReadyGpus: m.ReadyGpus,
			FreeGpus: m.FreeGpus, LargestFit: m.LargestFit, PendingGpus: m.PendingGpus})
	}
	slices.SortStableFunc(out, func(a, b homelabv1.FleetMemberModel) int {
		return cmp.Or(cmp.Compare(b.Gpus, a.Gpus), strings.Compare(a.Model, b.Model))
	})
	if len(out) <= maxRowModels {
		return out
	}
	other := homelabv1.FleetMemberModel{Model: OtherModels}
	for _, m := range out[maxRowModels-1:] {
		other.Gpus = saturating.Add(other.Gpus, m.Gpus)
		other.ReadyGpus = saturating.Add(other.ReadyGpus, m.ReadyGpus)
		other.FreeGpus = saturating.Add(other.FreeGpus, m.FreeGpus)
		other.PendingGpus = saturating.Add(other.PendingGpus, m.PendingGpus)
		other.LargestFit = max(other.LargestFit, m.LargestFit)
	}
	return append(out[:maxRowModels-1], other)
}

// modelName is the model a fleet knows a product by: "" (unknown product) reads as such.
func modelName(product string) string {
	if product == "" {
		return "<unknown>"
	}
	return product
}

// gangs is, per topology, model and level, the largest gang one domain takes (exact in the
// inventory) and the slots of each gang size summed over the level's listed domains: the
// largest gangs first, at most maxRowGangs.
func gangs(t *homelabv1.GpuTopology) []homelabv1.FleetMemberGang {
	if t == nil {
		return nil
	}
	var out []homelabv1.FleetMemberGang
	for i := range t.Topologies {
		tree := &t.Topologies[i]
		for _, l := range tree.Largest {
			g := homelabv1.FleetMemberGang{Model: clip(l.Model, 128), Topology: clip(tree.Name, 253), Level: clip(l.Level, 317),
				LargestGang: l.Gpus, Domain: clip(l.Domain, 63)}
			g.Slots, g.Partial = slots(tree, l.Model, l.Level)
			out = append(out, g)
		}
	}
	slices.SortStableFunc(out, func(a, b homelabv1.FleetMemberGang) int {
		return cmp.Or(cmp.Compare(b.LargestGang, a.LargestGang), strings.Compare(a.Model, b.Model),
			strings.Compare(a.Topology, b.Topology), strings.Compare(a.Level, b.Level))
	})
	return out[:min(len(out), maxRowGangs)]
}

// slots sums, per gang size, the gang slots of model in the listed domains of level;
// partial is true when the tree lists fewer domains of the level than it has.
func slots(tree *homelabv1.TopologyTree, model, level string) (out []homelabv1.GangSlots, partial bool) {
	n := min(len(tree.GangSizes), maxGangSizes)
	out = make([]homelabv1.GangSlots, n)
	for i := range out {
		out[i].Gpus = tree.GangSizes[i]
	}
	var listed int32
	for _, d := range tree.Domains {
		if d.Level != level {
			continue
		}
		listed++
		for _, m := range d.Models {
			if m.Model != model {
				continue
			}
			for i := range min(n, len(m.GangSlots)) {
				out[i].Gangs = saturating.Add(out[i].Gangs, m.GangSlots[i])
			}
		}
	}
	for _, l := range tree.Levels {
		if l.Key == level {
			partial = listed < l.Domains
		}
	}
	return out, partial
}

// quota is what the member's quota section finds: its counts and the overcommitted and
// stranded rows with the largest quota.
func quota(q *homelabv1.GpuQuota) *homelabv1.FleetMemberQuota {
	if q == nil {
		return nil
	}
	out := &homelabv1.FleetMemberQuota{ClusterQueues: q.ClusterQueues, Cohorts: q.Cohorts, StrandedNodes: q.StrandedNodes}
	for _, m := range q.Models {
		if m.Finding != homelabv1.QuotaFindingOvercommitted && m.Finding != homelabv1.QuotaFindingStranded {
			continue
		}
		out.Findings = append(out.Findings, homelabv1.FleetQuotaFinding{Model: clip(modelName(m.Model), 128),
			Resource: clip(m.Resource, 317), Finding: m.Finding, Nominal: m.Nominal, Ready: m.Ready})
	}
	slices.SortStableFunc(out.Findings, func(a, b homelabv1.FleetQuotaFinding) int {
		return cmp.Or(cmp.Compare(b.Nominal, a.Nominal), strings.Compare(a.Model, b.Model), strings.Compare(a.Resource, b.Resource))
	})
	out.Findings = out.Findings[:min(len(out.Findings), maxRowFindings)]
	return out
}

// problems are the types of the inventory's True conditions, sorted, at most maxRowProblems;
// Truncated is not a problem of the cluster.
func problems(conds []metav1.Condition) []string {
	var out []string
	for _, c := range conds {
		if c.Status == metav1.ConditionTrue && c.Type != homelabv1.ConditionTruncated {
			out = append(out, clip(c.Type, 64))
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	return out[:min(len(out), maxRowProblems)]
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
