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

package gpuinventory

import (
	"sync"

	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// memory is what the controller knows of each inventory's stored status: the hash it wrote
// last (to tell its own write's echo from news), the node list at a resourceVersion (the
// informer's objects come without it, see inventorycache), and whether a sync succeeded.
//
// Inventories that select the same nodes store the same entries, so a node list is kept as
// pointers into one table of entries by node name: the memory grows with inventories plus
// nodes, not with their product.
type memory struct {
	mu      sync.Mutex
	byKey   map[cache.ObjectName]*remembered
	entries map[string]*homelabv1.GpuNodeEntry // the latest entry remembered for each node
}

type remembered struct {
	hash            string
	resourceVersion string
	nodes           []*homelabv1.GpuNodeEntry
	synced          bool
}

func newMemory() *memory {
	return &memory{byKey: map[cache.ObjectName]*remembered{}, entries: map[string]*homelabv1.GpuNodeEntry{}}
}

func (m *memory) entry(key cache.ObjectName) *remembered {
	r, ok := m.byKey[key]
	if !ok {
		r = &remembered{}
		m.byKey[key] = r
	}
	return r
}

// shareLocked returns nodes as pointers to the table's entries, adding the ones it lacks.
func (m *memory) shareLocked(nodes []homelabv1.GpuNodeEntry) []*homelabv1.GpuNodeEntry {
	shared := make([]*homelabv1.GpuNodeEntry, len(nodes))
	for i := range nodes {
		p, ok := m.entries[nodes[i].Name]
		if !ok || !sameEntry(p, &nodes[i]) {
			p = new(homelabv1.GpuNodeEntry)
			*p = nodes[i]
			m.entries[p.Name] = p
		}
		shared[i] = p
	}
	return shared
}

// sameEntry reports whether two entries are equal, field by field: a write compares every
// listed entry, too often for reflection. (It may say "different" for equal times, which
// only costs a copy; TestSameEntrySeesEveryField keeps it complete.)
func sameEntry(a, b *homelabv1.GpuNodeEntry) bool {
	return a.Name == b.Name && a.Ready == b.Ready && a.Product == b.Product && a.GpuCount == b.GpuCount &&
		a.GpuMemoryMiB == b.GpuMemoryMiB && a.WorkloadConfig == b.WorkloadConfig && a.Family == b.Family &&
		a.ComputeCapability == b.ComputeCapability && a.DriverVersion == b.DriverVersion && a.CudaVersion == b.CudaVersion &&
		samePointee(a.Sharing, b.Sharing, func(x, y *homelabv1.GpuSharing) bool { return *x == *y }) &&
		samePointee(a.MIG, b.MIG, sameMIG) &&
		a.Capacity == b.Capacity && a.Allocatable == b.Allocatable && a.UnhealthyGpus == b.UnhealthyGpus &&
		a.LabelsMissing == b.LabelsMissing &&
		samePointee(a.LabelsMissingSince, b.LabelsMissingSince, func(x, y *metav1.Time) bool { return x.Equal(y) }) &&
		a.AllocatedGpus == b.AllocatedGpus && a.FreeGpus == b.FreeGpus && a.GpuPods == b.GpuPods &&
		a.UnschedulableFreeGpus == b.UnschedulableFreeGpus && slices.Equal(a.Free, b.Free) && slices.Equal(a.Taints, b.Taints) &&
		a.Source == b.Source && a.Clique == b.Clique && slices.Equal(a.Conditions, b.Conditions) &&
		slices.Equal(a.Warnings, b.Warnings)
}

func sameMIG(a, b *homelabv1.MigInfo) bool {
	return a.Capable == b.Capable && a.Strategy == b.Strategy && a.Config == b.Config &&
		a.ConfigState == b.ConfigState && slices.Equal(a.Devices, b.Devices)
}

func samePointee[T any](a, b *T, same func(a, b *T) bool) bool {
	if a == nil || b == nil {
		return a == b
	}
	return same(a, b)
}

// wrote records a status write: its hash, and the node list at the version it produced.
func (m *memory) wrote(key cache.ObjectName, hash, resourceVersion string, nodes []homelabv1.GpuNodeEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.entry(key)
	r.hash, r.resourceVersion, r.nodes, r.synced = hash, resourceVersion, m.shareLocked(nodes), true
}

// read records the node list read from the server at resourceVersion.
func (m *memory) read(key cache.ObjectName, resourceVersion string, nodes []homelabv1.GpuNodeEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.entry(key)
	r.resourceVersion, r.nodes = resourceVersion, m.shareLocked(nodes)
}

// nodesAt returns a copy of the node list remembered for resourceVersion.
func (m *memory) nodesAt(key cache.ObjectName, resourceVersion string) ([]homelabv1.GpuNodeEntry, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.byKey[key]
	if !ok || resourceVersion == "" || r.resourceVersion != resourceVersion {
		return nil, false
	}
	nodes := make([]homelabv1.GpuNodeEntry, len(r.nodes))
	for i, p := range r.nodes {
		nodes[i] = *p
	}
	return nodes, true
}

// wroteHash reports whether the last status written for key had hash.
func (m *memory) wroteHash(key cache.ObjectName, hash string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.byKey[key]
	return ok && r.hash != "" && r.hash == hash
}

func (m *memory) markSynced(key cache.ObjectName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entry(key).synced = true
}

func (m *memory) synced(key cache.ObjectName) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.byKey[key]
	return ok && r.synced
}

func (m *memory) forget(key cache.ObjectName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byKey, key)
}

// forgetNode drops a deleted node's entry from the table; lists that hold it keep their copy.
func (m *memory) forgetNode(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, name)
}
