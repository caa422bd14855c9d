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
	"fmt"
	"slices"
	"strings"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Dedupe finds the members that are one cluster: the same server, or the same GpuInventory
// (its UID: two addresses of one API server), reached through two ClusterProfiles, or a
// ClusterProfile and a MultiKueueCluster. Of each such group one member stays: a reachable
// one, else the first by name. It takes the ClusterProfile and MultiKueueCluster names it
// lacks from the others, so that MultiKueue's name for the cluster leads to it; the others
// become Duplicate, naming it in SameAs and their message. Members come back sorted by name.
func Dedupe(members []Member) []Member {
	out := slices.Clone(members)
	slices.SortStableFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	parent := make([]int, len(out))
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	first := map[string]int{}
	for i, m := range out {
		for _, key := range sameKeys(m) {
			if j, ok := first[key]; ok {
				parent[find(i)] = find(j)
			} else {
				first[key] = i
			}
		}
	}
	groups := map[int][]int{}
	for i := range out {
		groups[find(i)] = append(groups[find(i)], i)
	}
	for _, g := range groups {
		if len(g) > 1 {
			merge(out, g)
		}
	}
	return out
}

// sameKeys are what makes two members one cluster: the server and the inventory's UID.
func sameKeys(m Member) []string {
	var keys []string
	if m.Server != "" {
		keys = append(keys, "server "+m.Server)
	}
	if m.Inventory != nil && m.Inventory.UID != "" {
		keys = append(keys, "GpuInventory uid "+string(m.Inventory.UID))
	}
	return keys
}

// merge keeps one member of group g (indices into out, in name order) and marks the others.
func merge(out []Member, g []int) {
	keep := slices.MinFunc(g, func(a, b int) int {
		return cmp.Or(cmp.Compare(notReachable(out[a]), notReachable(out[b])), cmp.Compare(a, b))
	})
	k := &out[keep]
	for _, i := range g {
		if i == keep {
			continue
		}
		d := &out[i]
		if k.MultiKueueCluster == "" {
			k.MultiKueueCluster = d.MultiKueueCluster
		}
		if k.ClusterProfile == "" {
			k.ClusterProfile = d.ClusterProfile
		}
		d.State, d.Reason, d.SameAs = homelabv1.MemberDuplicate, homelabv1.ReasonSameCluster, k.Name
		d.Message = fmt.Sprintf("the same cluster as member %s (%s): counted once, there", k.Name, shared(*k, *d))
	}
}

func notReachable(m Member) int {
	if m.State == homelabv1.MemberReachable {
		return 0
	}
	return 1
}

// shared says what two members of one cluster have in common.
func shared(a, b Member) string {
	for _, key := range sameKeys(a) {
		if slices.Contains(sameKeys(b), key) {
			return key
		}
	}
	return "through a third member"
}
