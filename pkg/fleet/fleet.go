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

// Package fleet is the pure part of the fleet hub: a member's GpuInventory summarised into
// its GpuFleet row, members that are one cluster found out, and the GpuFleet status made
// from the members (totals per model, conditions, the bounded list, the hash). No API
// calls and no clock: the caller says what time it is (docs/design/hub.md).
package fleet

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

// Member is what the hub knows of one member cluster.
type Member struct {
	// Name is the member's name in the fleet (a ClusterProfile's namespace/name, else the
	// MultiKueueCluster's name); ClusterProfile and MultiKueueCluster the objects naming it.
	Name              string
	ClusterProfile    string
	MultiKueueCluster string
	// Server is the member's endpoint (member.Endpoint); "" before it is known.
	Server string
	// State is Connecting, Reachable, Unreachable or Duplicate as the hub's reader last
	// found it; Status makes an Unreachable member Stale once it has been so for StaleAfter.
	State string
	// Reason and Message say why a member is not Reachable (member.Explain).
	Reason, Message string
	// Since is when the member entered its state.
	Since time.Time
	// Inventory is the member's GpuInventory as last read (status.nodes may be left out);
	// nil before the first read. It is kept while the member is unreachable.
	Inventory *homelabv1.GpuInventory
	// SameAs is, on a Duplicate member Dedupe made, the member it is the same cluster as.
	SameAs string
}

// Options are what the status depends on besides the members.
type Options struct {
	// Now is the time the status is computed at.
	Now time.Time
	// StaleAfter is spec.staleAfter (DefaultStaleAfter when zero).
	StaleAfter time.Duration
	// Generation is the GpuFleet's metadata.generation.
	Generation int64
	// MaxListed bounds status.members (MaxMembers when zero or larger); MaxListedBytes the
	// JSON of the listed rows (MaxMembersBytes when zero).
	MaxListed      int
	MaxListedBytes int
}

// Bounds of the status.
const (
	// DefaultStaleAfter is spec.staleAfter when unset.
	DefaultStaleAfter = 5 * time.Minute
	// MaxMembers is the API's bound of status.members.
	MaxMembers = 100
	// MaxMembersBytes bounds the JSON of status.members.
	MaxMembersBytes = 256 << 10
	// maxModels is the API's bound of status.models.
	maxModels = 64
)

func (o Options) staleAfter() time.Duration {
	if o.StaleAfter <= 0 {
		return DefaultStaleAfter
	}
	return o.StaleAfter
}

// state is m's state at o.Now: Stale for a member unreachable for StaleAfter or longer.
func (o Options) state(m Member) string {
	if m.State == homelabv1.MemberUnreachable && !m.Since.IsZero() && !o.Now.Before(m.Since.Add(o.staleAfter())) {
		return homelabv1.MemberStale
	}
	return m.State
}

// NextChange is when the status changes with no event: the first moment an unreachable
// member turns stale; false when none will.
func NextChange(members []Member, o Options) (time.Time, bool) {
	var next time.Time
	for _, m := range members {
		if m.State != homelabv1.MemberUnreachable || m.Since.IsZero() || o.state(m) == homelabv1.MemberStale {
			continue
		}
		if at := m.Since.Add(o.staleAfter()); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next, !next.IsZero()
}

// counted reports whether a member in state counts in the fleet's totals: reachable, or
// unreachable with last-known figures not yet stale.
func counted(m Member, state string) bool {
	return m.Inventory != nil && (state == homelabv1.MemberReachable || state == homelabv1.MemberUnreachable)
}

// Status is the GpuFleet status of members at o.Now: their rows (duplicates found out),
// totals over the members counted, conditions (without transition times, which the writer
// keeps) and the hash of it all.
func Status(members []Member, o Options) homelabv1.GpuFleetStatus {
	members = Dedupe(members)
	st := homelabv1.GpuFleetStatus{ObservedGeneration: o.Generation}
	rows := make([]homelabv1.FleetMember, 0, len(members))
	var inventories []Member
	for _, m := range members {
		state := o.state(m)
		rows = append(rows, row(m, state))
		st.TotalMembers++
		switch state {
		case homelabv1.MemberReachable:
			st.ReachableMembers++
		case homelabv1.MemberStale:
			st.StaleMembers++
			st.UnreachableMembers++
		case homelabv1.MemberUnreachable:
			st.UnreachableMembers++
		}
		if counted(m, state) {
			inventories = append(inventories, m)
			s := &m.Inventory.Status
			st.TotalGpus = saturating.Add(st.TotalGpus, s.TotalGpus)
			st.ReadyGpus = saturating.Add(st.ReadyGpus, s.ReadyGpus)
			if s.Allocation != nil {
				st.FreeGpus = saturating.Add(st.FreeGpus, s.Allocation.FreeGpus)
			}
		}
	}
	st.Models = Totals(inventories)
	st.Members = listed(rows, o)
	st.ListedMembers = int32(len(st.Members))
	st.Conditions = conditions(rows, len(st.Members), o.Generation)
	st.FleetHash = Hash(&st)
	return st
}

// listed is the rows status.members holds: problem members first, then the others by name,
// as many as the bounds allow; sorted by name.
func listed(rows []homelabv1.FleetMember, o Options) []homelabv1.FleetMember {
	limit, budget := o.MaxListed, o.MaxListedBytes
	if limit <= 0 || limit > MaxMembers {
		limit = MaxMembers
	}
	if budget <= 0 {
		budget = MaxMembersBytes
	}
	order := slices.Clone(rows)
	slices.SortStableFunc(order, func(a, b homelabv1.FleetMember) int {
		return cmp.Or(cmp.Compare(rank(a.State), rank(b.State)), strings.Compare(a.Name, b.Name))
	})
	out := make([]homelabv1.FleetMember, 0, min(len(order), limit))
	for _, r := range order {
		size := rowBytes(&r)
		if len(out) == limit || size > budget {
			break
		}
		budget -= size
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b homelabv1.FleetMember) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// rank orders states by how much a reader needs to see them: problems first.
func rank(state string) int {
	switch state {
	case homelabv1.MemberStale:
		return 0
	case homelabv1.MemberUnreachable:
		return 1
	case homelabv1.MemberDuplicate:
		return 2
	case homelabv1.MemberConnecting:
		return 3
	}
	return 4
}

func rowBytes(r *homelabv1.FleetMember) int {
	data, _ := json.Marshal(r)
	return len(data) + 1
}

// Hash identifies a status's content: everything but the generation, the hash itself and
// the conditions' transition times.
func Hash(st *homelabv1.GpuFleetStatus) string {
	c := *st
	c.ObservedGeneration, c.FleetHash = 0, ""
	c.Conditions = slices.Clone(st.Conditions)
	for i := range c.Conditions {
		c.Conditions[i].LastTransitionTime = metav1.Time{}
		c.Conditions[i].ObservedGeneration = 0
	}
	data, _ := json.Marshal(&c)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}
