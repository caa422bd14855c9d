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

package allocation

import "sort"

// Holding is what one pod holds on one node, for `kubectl gpuinv who`.
type Holding struct {
	Namespace, Pod, Node string
	// Resources are the device-plugin resources the pod holds there, sorted by name.
	Resources []ResourceCount
	// Devices are the DRA devices its claims hold there, sorted, unique.
	Devices []string
	// Claims are the names of the claims the devices come from, sorted.
	Claims []string
	// Shared: one of those claims is reserved for other pods too, which hold the same devices.
	Shared bool
	// Since is the pod's creation (Unix seconds) when the pod is known, else the creation of
	// the oldest of its claims.
	Since int64
}

// Holdings lists one Holding per pod and node where the pod holds anything, by the rules of
// Compute, sorted by namespace, pod and node. An allocated claim reserved for no pod gives a
// Holding with an empty Pod.
func Holdings(pods []*Pod, claims []*Claim) []Holding {
	type key struct{ namespace, pod, node string }
	type agg struct {
		resources map[string]int64
		devices   map[string]struct{}
		claims    map[string]struct{}
		shared    bool
		since     int64
	}
	byKey := map[key]*agg{}
	get := func(k key) *agg {
		a := byKey[k]
		if a == nil {
			a = &agg{resources: map[string]int64{}, devices: map[string]struct{}{}, claims: map[string]struct{}{}, since: -1}
			byKey[k] = a
		}
		return a
	}
	known := map[string]*Pod{}
	for _, p := range pods {
		if p != nil {
			known[p.Key()] = p
		}
	}
	for _, p := range known {
		if !p.holds() {
			continue
		}
		a := get(key{p.Namespace, p.Name, p.Node})
		addTo(a.resources, p.Requests)
	}
	claimsByKey := map[string]*Claim{}
	for _, c := range claims {
		if c != nil {
			claimsByKey[c.Key()] = c
		}
	}
	for _, c := range claimsByKey {
		holders := c.Holders
		if len(holders) == 0 {
			holders = []Holder{{}}
		}
		for _, h := range holders {
			for _, d := range c.Devices {
				if d.Pool == "" {
					continue
				}
				a := get(key{c.Namespace, h.Name, d.Pool})
				a.devices[d.Device] = struct{}{}
				a.claims[c.Name] = struct{}{}
				a.shared = a.shared || len(c.Holders) > 1
				if a.since < 0 || c.Created < a.since {
					a.since = c.Created
				}
			}
		}
	}
	out := make([]Holding, 0, len(byKey))
	for k, a := range byKey {
		h := Holding{Namespace: k.namespace, Pod: k.pod, Node: k.node, Resources: sortedCounts(a.resources), Shared: a.shared, Since: max(a.since, 0)}
		if p := known[k.namespace+"/"+k.pod]; p != nil && k.pod != "" {
			h.Since = p.Created
		}
		h.Devices = sortedKeys(a.devices)
		h.Claims = sortedKeys(a.claims)
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool {
		x, y := &out[i], &out[j]
		if x.Namespace != y.Namespace {
			return x.Namespace < y.Namespace
		}
		if x.Pod != y.Pod {
			return x.Pod < y.Pod
		}
		return x.Node < y.Node
	})
	return out
}

func sortedKeys(m map[string]struct{}) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
