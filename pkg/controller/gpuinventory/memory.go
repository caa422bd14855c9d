package gpuinventory

import (
	"sync"

	"k8s.io/client-go/tools/cache"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// memory is what the controller knows of each inventory's stored status: the hash it wrote
// last (to tell its own write's echo from news), the node list at a resourceVersion (the
// informer's objects come without it, see inventorycache), and whether a sync succeeded.
type memory struct {
	mu    sync.Mutex
	byKey map[cache.ObjectName]*remembered
}

type remembered struct {
	hash            string
	resourceVersion string
	nodes           []homelabv1.GpuNode
	synced          bool
}

func newMemory() *memory { return &memory{byKey: map[cache.ObjectName]*remembered{}} }

func (m *memory) entry(key cache.ObjectName) *remembered {
	r, ok := m.byKey[key]
	if !ok {
		r = &remembered{}
		m.byKey[key] = r
	}
	return r
}

// wrote records a status write: its hash, and the node list at the version it produced.
func (m *memory) wrote(key cache.ObjectName, hash, resourceVersion string, nodes []homelabv1.GpuNode) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.entry(key)
	r.hash, r.resourceVersion, r.nodes, r.synced = hash, resourceVersion, nodes, true
}

// read records the node list read from the server at resourceVersion.
func (m *memory) read(key cache.ObjectName, resourceVersion string, nodes []homelabv1.GpuNode) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.entry(key)
	r.resourceVersion, r.nodes = resourceVersion, nodes
}

// nodesAt returns the node list remembered for resourceVersion.
func (m *memory) nodesAt(key cache.ObjectName, resourceVersion string) ([]homelabv1.GpuNode, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.byKey[key]
	if !ok || resourceVersion == "" || r.resourceVersion != resourceVersion {
		return nil, false
	}
	return r.nodes, true
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
