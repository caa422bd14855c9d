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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

// Inventory is the content of a GpuInventory's status, without the bookkeeping fields
// (observedGeneration, observedAt) that depend on the object and the clock. Nodes holds every
// covered GPU node; the status may list fewer (see Truncate).
type Inventory struct {
	Nodes              []homelabv1.GpuNodeEntry
	Models             []homelabv1.GpuModel // at most MaxModels (see FoldModels)
	ModelCount         int                  // distinct models, folded or not
	TotalGpuNodes      int32
	ReadyGpuNodes      int32
	TotalGpus          int32
	ReadyGpus          int32
	UnlabeledGpus      int32
	UnhealthyGpus      int32
	LabelsMissingNodes int32
	Cliques            []homelabv1.GpuClique // at most MaxCliques (see Cliques)
	// Allocation is nil unless the entries carry what pods hold (EntryCache.WithAllocation).
	Allocation *homelabv1.GpuAllocation
	// Hash identifies Nodes (and so everything else here, which derives from them).
	Hash string
	// digests[i] identifies Nodes[i] and gives the size of its JSON.
	digests []entryDigest
	sources []*corev1.Node // sources[i]: the Node of Nodes[i], nil when from elsewhere
	buf     *nodeBuffer    // where Nodes, digests and sources live, for Release
}

// Source is the Node entry i was computed from; nil when it came from elsewhere (a stored
// node list, FromEntries).
func (inv *Inventory) Source(i int) *corev1.Node {
	if i >= len(inv.sources) {
		return nil
	}
	return inv.sources[i]
}

// nodeBuffers recycles the node lists that Release hands back: a sync under churn computes
// every GPU node's entry list anew, and the garbage collector would take the old one.
var nodeBuffers sync.Pool // of *nodeBuffer

type nodeBuffer struct {
	nodes   []homelabv1.GpuNodeEntry
	digests []entryDigest
	sources []*corev1.Node
}

func getNodeBuffer(n int) *nodeBuffer {
	b, _ := nodeBuffers.Get().(*nodeBuffer)
	if b == nil || cap(b.nodes) < n {
		return &nodeBuffer{nodes: make([]homelabv1.GpuNodeEntry, n), digests: make([]entryDigest, n), sources: make([]*corev1.Node, n)}
	}
	b.nodes, b.digests, b.sources = b.nodes[:n], b.digests[:n], b.sources[:n]
	return b
}

// Release hands inv's node list back for a later Compute to reuse. Neither inv's Nodes nor
// anything that aliases them may be used afterwards; the results of Listed, Status and Diff
// are copies and stay valid. Calling it is optional.
func (inv *Inventory) Release() {
	if inv.buf == nil {
		return
	}
	clear(inv.buf.nodes) // the pool must not keep the entries' strings alive
	clear(inv.buf.sources)
	nodeBuffers.Put(inv.buf)
	inv.buf, inv.Nodes, inv.digests, inv.sources = nil, nil, nil, nil
}

// entryDigest is what a sync needs of an entry's JSON: its SHA-256 (for the hash) and its
// length (for the size bound). Keeping these instead of the JSON saves about 350 bytes per
// GPU node in the EntryCache.
type entryDigest struct {
	sum  [sha256.Size]byte
	size int
}

func digest(entry *homelabv1.GpuNodeEntry) entryDigest {
	b := encode(entry)
	return entryDigest{sum: sha256.Sum256(b), size: len(b)}
}

// Compute builds the inventory of the GPU nodes among nodes. The order of nodes does not
// matter. Non-GPU nodes are skipped; every GPU node gets an entry, however malformed its
// labels. previous holds the entries of the last stored status: a node whose GPU Feature
// Discovery labels vanished keeps its last-known product, count and memory from there,
// marked labelsMissing since now (or since the earlier time previous records).
func Compute(nodes []*corev1.Node, previous []homelabv1.GpuNodeEntry, now time.Time) (Inventory, []Warning) {
	return (*EntryCache)(nil).Compute(nodes, previous, now)
}

// EntryCache remembers each node's parsed entry by name and resourceVersion, so that a
// sync re-parses only the nodes that changed since the last one. A nil *EntryCache parses
// every node. It is safe for concurrent use.
type EntryCache struct {
	mu      sync.Mutex
	entries map[string]*cachedEntry
	// byObject finds a node's entry by the node object it was last looked up with (once
	// Notified): a node the informer has not replaced since is found without reading its
	// name or version.
	byObject map[*corev1.Node]*cachedEntry
	refs     []entryRef // Compute's scratch, reused from one Compute to the next
	slots    []entryRef // orderLocked's scratch: refs at their last places
	fresh    []entryRef // orderLocked's scratch: refs without a place
	devices  Devices
	// deviceList lists a node's devices for its record when its facts do not keep them.
	deviceList func(node string) []homelabv1.GpuDevice
	held       Held // nil: pods are not read

	// notified: Changed names every node whose devices or holdings change (Notified), so a
	// cached entry asks devices and held again only after that, or when its node changed.
	notified bool
	changeMu sync.Mutex
	changed  map[string]struct{} // named by Changed since the last lookups drained them
}

// Devices returns what a node's DRA ResourceSlices say (nil: no slices). A node's facts are
// replaced, never modified, when its slices change.
type Devices func(node string) *DeviceFacts

// entryRef is an entry and its digest, as Compute collects them before sorting. Compute
// keeps three lists of them from one sync to the next (its scratch), so it points at the
// digest rather than holding it.
type entryRef struct {
	entry  *homelabv1.GpuNodeEntry // nil: cached's, expanded by fromRefs
	digest *entryDigest
	milli  int64        // the share of GPUs held, in thousandths
	cached *cachedEntry // the entry's source and its place in the sorted result (nil: from a list)
	node   *corev1.Node // the Node it was computed from (nil: from a list)
}

func (r *entryRef) name() string {
	if r.entry != nil {
		return r.entry.Name
	}
	return r.cached.entry.name
}

// held is what pods held on the node when its entry was made (nil: not known).
func (r *entryRef) held() *allocation.Held {
	if r.cached == nil {
		return nil
	}
	return r.cached.held
}

type cachedEntry struct {
	resourceVersion string
	facts           *DeviceFacts     // what the entry was parsed with
	held            *allocation.Held // what pods held when it was parsed
	milli           int64
	gpu             bool
	// known: a discovery source (labels, slices, cloud labels) states the GPUs now; without
	// one, what was last known of the node is carried.
	known    bool
	stale    bool         // Changed named the node since facts and held were read
	entry    compactEntry // zero unless gpu: half the nodes of a typical fleet
	digest   entryDigest
	warnings []Warning
	rank     int          // 1 + the entry's index in the last sorted result; 0: none yet
	node     *corev1.Node // the object byObject knows the entry by; nil: none
}

// NewEntryCache returns an empty cache.
func NewEntryCache() *EntryCache { return NewEntryCacheWithDevices(nil) }

// NewEntryCacheWithDevices returns an empty cache whose entries include what devices says of
// each node (nil: nothing).
func NewEntryCacheWithDevices(devices Devices) *EntryCache {
	return &EntryCache{entries: map[string]*cachedEntry{}, byObject: map[*corev1.Node]*cachedEntry{}, devices: devices}
}

// WithDeviceList makes NodeIdentity list a node's devices with list, for facts that do not
// keep their device list (a slice cache lists them again on demand); it returns c.
func (c *EntryCache) WithDeviceList(list func(node string) []homelabv1.GpuDevice) *EntryCache {
	c.deviceList = list
	return c
}

// Forget drops a node (deleted) from the cache.
func (c *EntryCache) Forget(name string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.forgetLocked(name)
	c.mu.Unlock()
}

// forgetLocked drops a node's entry. c.mu is held.
func (c *EntryCache) forgetLocked(name string) {
	if e, ok := c.entries[name]; ok {
		if e.node != nil {
			delete(c.byObject, e.node)
		}
		delete(c.entries, name)
	}
}

// knowLocked makes byObject find e by node, the object it was last looked up with. c.mu is
// held.
func (c *EntryCache) knowLocked(e *cachedEntry, node *corev1.Node) {
	if !c.notified || e.node == node {
		return
	}
	if e.node != nil {
		delete(c.byObject, e.node)
	}
	e.node = node
	c.byObject[node] = e
}

// Notified tells c that Changed is called with every node whose devices or holdings change,
// before anything that reads c learns of the change (register it with the sources first):
// from then on, a compute asks devices and held only about nodes that changed or were named
// by Changed, not about every node. It returns c.
func (c *EntryCache) Notified() *EntryCache {
	c.mu.Lock()
	c.notified = true
	c.mu.Unlock()
	return c
}

// Changed says that a node's devices or holdings changed (see Notified); "" is ignored.
func (c *EntryCache) Changed(node string) {
	if node == "" {
		return
	}
	c.changeMu.Lock()
	if c.changed == nil {
		c.changed = map[string]struct{}{}
	}
	c.changed[node] = struct{}{}
	c.changeMu.Unlock()
}

// drainLocked marks stale the cached entries of the nodes Changed named; it runs before
// the lookups that follow read any devices or holdings, so a change named later is never
// lost. c.mu is held.
func (c *EntryCache) drainLocked() {
	if c == nil || !c.notified {
		return
	}
	c.changeMu.Lock()
	changed := c.changed
	c.changed = nil
	c.changeMu.Unlock()
	for node := range changed {
		if e, ok := c.entries[node]; ok {
			e.stale = true
		}
	}
}

// lookupLocked returns the node's parsed entry, parsing it when the node changed since it was
// cached. c.mu is held and drainLocked ran (or c is nil: no cache).
func (c *EntryCache) lookupLocked(node *corev1.Node) *cachedEntry {
	if c != nil && c.notified && node.ResourceVersion != "" {
		if e, ok := c.byObject[node]; ok && !e.stale {
			return e
		}
		if e, ok := c.entries[node.Name]; ok && e.resourceVersion == node.ResourceVersion && !e.stale {
			c.knowLocked(e, node)
			return e
		}
	}
	if !IsGPUNode(node) {
		if c != nil {
			c.forgetLocked(node.Name) // it may have been a GPU node
		}
		return &notGPU // not cached: the check is cheap, and half of a fleet is such nodes
	}
	var facts *DeviceFacts
	if c != nil && c.devices != nil {
		facts = c.devices(node.Name)
	}
	var held *allocation.Held
	if c != nil && c.held != nil {
		held = c.held(node.Name)
	}
	if c != nil && node.ResourceVersion != "" {
		if e, ok := c.entries[node.Name]; ok && e.resourceVersion == node.ResourceVersion && e.facts == facts && e.held == held {
			e.stale = false
			c.knowLocked(e, node)
			return e
		}
	}
	e := &cachedEntry{resourceVersion: node.ResourceVersion, facts: facts, held: held, gpu: true}
	parsed, warnings := EntryFrom(node, facts)
	e.warnings = warnings
	e.known = Discovered(node, &parsed)
	if c != nil {
		if old, ok := c.entries[node.Name]; ok {
			e.rank = old.rank
		}
	}
	if c != nil && c.held != nil {
		e.milli = applyHeld(&parsed, held, node, facts)
	}
	e.digest = digest(&parsed)
	e.entry = compact(&parsed)
	if c != nil && node.ResourceVersion != "" {
		c.forgetLocked(node.Name)
		c.entries[node.Name] = e
		c.knowLocked(e, node)
	}
	return e
}

// notGPU is the entry of every node that is no GPU node.
var notGPU = cachedEntry{}

// Compute is the package-level Compute, with parsed entries taken from the cache.
func (c *EntryCache) Compute(nodes []*corev1.Node, previous []homelabv1.GpuNodeEntry, now time.Time) (Inventory, []Warning) {
	return c.ComputeWithRecords(nodes, previous, nil, now)
}

// Records returns a node's GpuNode record (its GPU identity as last discovered), or nil.
type Records func(name string) *homelabv1.GpuNodeSpec

// ComputeWithRecords is Compute where a node that no discovery source describes now is filled
// from its record first, and from previous only when it has none: the records remember every
// GPU node, previous only the ones a bounded status listed.
func (c *EntryCache) ComputeWithRecords(nodes []*corev1.Node, previous []homelabv1.GpuNodeEntry, records Records, now time.Time) (Inventory, []Warning) {
	var prev map[string]*homelabv1.GpuNodeEntry // previous by name, built when a node first needs it
	// Cached entries are never modified (a changed node gets a new one), so they are
	// referenced here and copied once, in order, into the result.
	var refs []entryRef
	var warnings []Warning
	if c != nil {
		// One lock for the whole pass: both controllers share the cache, and a sync touches
		// every node.
		c.mu.Lock()
		defer c.mu.Unlock()
		c.drainLocked()
		refs = c.refs[:0]
		defer func() { clear(refs); c.refs = refs[:0] }() // keep the room, not the entries
	}
	for _, node := range nodes {
		cached := c.lookupLocked(node)
		if !cached.gpu {
			continue
		}
		ref := entryRef{nil, &cached.digest, cached.milli, cached, node}
		warnings = append(warnings, cached.warnings...)
		if !cached.known {
			if prev == nil {
				prev = make(map[string]*homelabv1.GpuNodeEntry, len(previous))
				for i := range previous {
					prev[previous[i].Name] = &previous[i]
				}
			}
			var carried homelabv1.GpuNodeEntry
			cached.entry.expand(&carried)
			if carryLastKnown(&carried, lastKnownOf(node.Name, records, prev), now) {
				if c != nil && c.held != nil { // the count may have changed
					ref.milli = applyHeld(&carried, cached.held, node, cached.facts)
				}
				d := digest(&carried)
				ref.entry, ref.digest = &carried, &d
			}
		}
		refs = append(refs, ref)
	}
	if c != nil {
		c.orderLocked(refs)
	} else {
		slices.SortFunc(refs, byName)
	}
	return fromRefs(refs, c != nil && c.held != nil), warnings
}

// orderLocked sorts refs by node name. They come in the lister's order, which changes from
// one sync to the next, so each cached entry keeps its place in the last sorted result: the
// nodes seen last time are put in order without comparing names, and only the others (new
// nodes) are sorted, then merged in. Places that do not give name order (another
// selector's) fall back to sorting everything.
func (c *EntryCache) orderLocked(refs []entryRef) {
	last := 0
	for i := range refs {
		if r := refs[i].cached; r != nil {
			last = max(last, r.rank)
		}
	}
	if cap(c.slots) < last {
		c.slots = make([]entryRef, last)
	}
	slots, fresh := c.slots[:last], c.fresh[:0]
	for _, r := range refs {
		i := -1
		if r.cached != nil {
			i = r.cached.rank - 1
		}
		if i < 0 || slots[i].digest != nil {
			fresh = append(fresh, r)
			continue
		}
		slots[i] = r
	}
	placed := slots[:0]
	for _, r := range slots {
		if r.digest != nil {
			placed = append(placed, r)
		}
	}
	if slices.IsSortedFunc(placed, byName) {
		slices.SortFunc(fresh, byName)
		mergeByName(refs, placed, fresh)
	} else {
		slices.SortFunc(refs, byName)
	}
	clear(slots)
	clear(fresh)
	if cap(fresh) > 4*len(fresh)+64 {
		fresh = nil // a first sync's room: the syncs after it see few new nodes
	}
	c.fresh = fresh[:0]
	for i := range refs {
		if refs[i].cached != nil {
			refs[i].cached.rank = i + 1
		}
	}
}

// mergeByName merges a and b, each sorted by name, into out (len(a)+len(b) long).
func mergeByName(out, a, b []entryRef) {
	i, j := 0, 0
	for k := range out {
		if j == len(b) || (i < len(a) && byName(a[i], b[j]) <= 0) {
			out[k] = a[i]
			i++
		} else {
			out[k] = b[j]
			j++
		}
	}
}

func byName(a, b entryRef) int { return strings.Compare(a.name(), b.name()) }

// lastKnown is what is remembered of a node that lost its labels.
type lastKnown struct {
	product, family, computeCapability string
	gpuCount                           int32
	gpuMemoryMiB                       int64
	missingSince                       *metav1.Time // nil: not known to be missing yet
	source                             string       // as an entry says it ("": GFD's labels)
}

// lastKnownOf prefers the node's record to the previous entry; nil when neither knows its GPUs
// from a discovery source (what the capacity alone said is no memory: it is still there).
func lastKnownOf(name string, records Records, prev map[string]*homelabv1.GpuNodeEntry) *lastKnown {
	if records != nil {
		if r := records(name); r != nil && KnowsGPUs(r) && r.Source != homelabv1.SourceDevicePlugin {
			known := &lastKnown{product: r.Product, family: r.Family, computeCapability: r.ComputeCapability,
				gpuCount: r.GpuCount, gpuMemoryMiB: r.GpuMemoryMiB, missingSince: r.MissingSince, source: r.Source}
			if known.source == homelabv1.SourceGPUFeatureDiscovery || known.source == homelabv1.SourceSeeded {
				known.source = ""
			}
			if p := prev[name]; p != nil && p.LabelsMissing && p.LabelsMissingSince != nil {
				known.missingSince = p.LabelsMissingSince // as stored: the record may be marked a moment later
			}
			return known
		}
	}
	p := prev[name]
	if p == nil || !EntryKnowsGPUs(p) || p.Source == homelabv1.SourceDevicePlugin {
		return nil // never labelled: unknown, not missing
	}
	known := &lastKnown{product: p.Product, family: p.Family, computeCapability: p.ComputeCapability,
		gpuCount: p.GpuCount, gpuMemoryMiB: p.GpuMemoryMiB, source: p.Source}
	if p.LabelsMissing {
		known.missingSince = p.LabelsMissingSince
	}
	return known
}

// carryLastKnown fills a node that has no GFD labels now from what was last known of it, and
// reports whether it changed the entry.
func carryLastKnown(entry *homelabv1.GpuNodeEntry, last *lastKnown, now time.Time) bool {
	if last == nil {
		return false
	}
	entry.Product, entry.GpuCount, entry.GpuMemoryMiB = last.product, last.gpuCount, last.gpuMemoryMiB
	entry.Source = ""
	if validSource(last.source) {
		entry.Source = last.source
	}
	if entry.Family == "" {
		entry.Family = last.family
	}
	if entry.ComputeCapability == "" {
		entry.ComputeCapability = last.computeCapability
	}
	entry.LabelsMissing = true
	since := metav1.NewTime(now.UTC().Truncate(time.Second))
	if last.missingSince != nil {
		since = *last.missingSince
	}
	entry.LabelsMissingSince = &since
	// LabelsMissing goes after the readiness conditions, before the rest.
	at := 0
	for at < len(entry.Conditions) && (entry.Conditions[at] == NodeNotReady || entry.Conditions[at] == NodeUnreachable) {
		at++
	}
	// Clone: the entry may share its slices with an EntryCache.
	entry.Conditions = slices.Insert(slices.Clone(entry.Conditions), at, NodeLabelsMissing)
	return true
}

// FromEntries sorts entries by name and derives the totals, the models and the hash.
func FromEntries(entries []homelabv1.GpuNodeEntry) Inventory { return FromNodeEntries(entries, nil) }

// FromNodeEntries is FromEntries of entries made elsewhere from nodes: entries[i] of
// nodes[i], which Source gives (nodes may be nil).
func FromNodeEntries(entries []homelabv1.GpuNodeEntry, nodes []*corev1.Node) Inventory {
	refs := make([]entryRef, len(entries))
	digests := make([]entryDigest, len(entries))
	for i := range entries {
		digests[i] = digest(&entries[i])
		refs[i] = entryRef{entry: &entries[i], digest: &digests[i]}
		if i < len(nodes) {
			refs[i].node = nodes[i]
		}
	}
	slices.SortFunc(refs, byName)
	return fromRefs(refs, false)
}

func encode(entry *homelabv1.GpuNodeEntry) []byte {
	b, _ := json.Marshal(entry) // strings, bools, integers and times: cannot fail
	return b
}

// fromRefs is FromEntries for entries whose digests are already known, sorted by name. With
// tracked, the entries carry what pods hold and the inventory gets an allocation summary.
func fromRefs(refs []entryRef, tracked bool) Inventory {
	buf := getNodeBuffer(len(refs))
	inv := Inventory{Nodes: buf.nodes, digests: buf.digests, sources: buf.sources, buf: buf}
	for i := range refs {
		r := &refs[i]
		inv.sources[i] = r.node
		if r.entry != nil {
			inv.Nodes[i] = *r.entry
		} else {
			r.cached.entry.expand(&inv.Nodes[i])
		}
		inv.digests[i], r.entry = *r.digest, &inv.Nodes[i]
	}
	for _, n := range inv.Nodes {
		inv.TotalGpuNodes++
		inv.TotalGpus = saturating.Add(inv.TotalGpus, n.GpuCount)
		inv.UnhealthyGpus = saturating.Add(inv.UnhealthyGpus, n.UnhealthyGpus)
		if n.Ready {
			inv.ReadyGpuNodes++
			inv.ReadyGpus = saturating.Add(inv.ReadyGpus, n.GpuCount)
		}
		if n.LabelsMissing {
			inv.LabelsMissingNodes++
			inv.UnlabeledGpus = saturating.Add(inv.UnlabeledGpus, n.GpuCount)
		}
	}
	inv.Cliques = Cliques(inv.Nodes)
	all := modelsOf(inv.Nodes, tracked)
	inv.ModelCount = len(all)
	inv.Models = FoldModels(all)
	if tracked {
		inv.Allocation = allocationOf(refs)
	}
	inv.Hash = inv.hashWithAllocation()
	return inv
}

// BaseModel splits a product label into the base model and its variant: MIG single-strategy
// products (<model>-MIG-<profile>) and shared ones (<model>-SHARED).
func BaseModel(product string) (model, variant string) {
	if i := strings.Index(product, "-MIG-"); i >= 0 {
		return product[:i], product[i+1:]
	}
	if base, ok := strings.CutSuffix(product, "-SHARED"); ok {
		return base, "SHARED"
	}
	return product, ""
}

// Models summarises entries per base model, sorted by product ("" for unknown products),
// without pools: they need to know what pods hold (an inventory computed with allocation).
func Models(entries []homelabv1.GpuNodeEntry) []homelabv1.GpuModel { return modelsOf(entries, false) }

// modelsOf is Models, with a pool per model when pooled.
func modelsOf(entries []homelabv1.GpuNodeEntry, pooled bool) []homelabv1.GpuModel {
	byModel := map[string]*homelabv1.GpuModel{}
	sums := map[string]*modelSums{}
	var order []string
	for i := range entries {
		n := &entries[i]
		base, variant := BaseModel(n.Product)
		m := byModel[base]
		if m == nil {
			m = &homelabv1.GpuModel{Product: base}
			byModel[base] = m
			sums[base] = &modelSums{}
			order = append(order, base)
		}
		m.AllocatedGpus = saturating.Add(m.AllocatedGpus, n.AllocatedGpus)
		m.FreeGpus = saturating.Add(m.FreeGpus, n.FreeGpus)
		m.UnschedulableFreeGpus = saturating.Add(m.UnschedulableFreeGpus, n.UnschedulableFreeGpus)
		m.LargestFit = max(m.LargestFit, n.FreeGpus)
		sum := sums[base]
		sum.fit.add(n)
		sum.free.add(n)
		if pooled {
			sum.pool.add(n)
		}
		if variant != "" && !slices.Contains(m.Variants, variant) {
			m.Variants = append(m.Variants, variant)
		}
		m.Nodes++
		m.Gpus = saturating.Add(m.Gpus, n.GpuCount)
		m.AllocatableGpus = saturating.Add(m.AllocatableGpus, n.Allocatable)
		m.UnhealthyGpus = saturating.Add(m.UnhealthyGpus, n.UnhealthyGpus)
		if n.Ready {
			m.ReadyNodes++
			m.ReadyGpus = saturating.Add(m.ReadyGpus, n.GpuCount)
		}
		m.MemoryMiB = max(m.MemoryMiB, n.GpuMemoryMiB)
	}
	slices.Sort(order)
	models := make([]homelabv1.GpuModel, 0, len(order))
	for _, name := range order {
		m := byModel[name]
		m.Fit = sums[name].fit.result()
		m.FreeNodes, m.Taints = sums[name].free.result()
		if pooled {
			m.Pool = sums[name].pool.result()
		}
		slices.Sort(m.Variants)
		if extra := len(m.Variants) - MaxVariants; extra > 0 {
			m.Variants = append(m.Variants[:MaxVariants-1], fmt.Sprintf("and %d more", extra+1))
		}
		models = append(models, *m)
	}
	return models
}

// modelSums is what Models sums per model besides the model's own counts.
type modelSums struct {
	fit  fitter
	pool pooler
	free freeCounter
}

// Bounds of the per-model summary, so that thousands of distinct products cannot push the
// status past its size bound; totals stay exact.
const (
	MaxModels   = 64
	MaxVariants = 8
	// OtherModels is the model the smallest models are counted under beyond MaxModels.
	OtherModels = "<other models>"
)

// FoldModels keeps the MaxModels-1 models with the most GPUs (then nodes) and counts the
// rest under OtherModels.
func FoldModels(models []homelabv1.GpuModel) []homelabv1.GpuModel {
	if len(models) <= MaxModels {
		return models
	}
	bySize := slices.Clone(models)
	slices.SortStableFunc(bySize, func(a, b homelabv1.GpuModel) int {
		if a.Gpus != b.Gpus {
			return int(b.Gpus) - int(a.Gpus)
		}
		return int(b.Nodes) - int(a.Nodes)
	})
	kept := bySize[:MaxModels-1]
	other := homelabv1.GpuModel{Product: OtherModels}
	var fit fitter
	var pool pooler
	var free freeCounter
	pooled := false // the models carry pools (pods are read)
	for _, m := range bySize[MaxModels-1:] {
		other.AllocatedGpus = saturating.Add(other.AllocatedGpus, m.AllocatedGpus)
		other.FreeGpus = saturating.Add(other.FreeGpus, m.FreeGpus)
		other.UnschedulableFreeGpus = saturating.Add(other.UnschedulableFreeGpus, m.UnschedulableFreeGpus)
		other.PendingGpus = saturating.Add(other.PendingGpus, m.PendingGpus)
		other.LargestFit = max(other.LargestFit, m.LargestFit)
		fit.merge(m.Fit)
		pool.merge(m.Pool)
		free.merge(m.FreeNodes, m.Taints)
		pooled = pooled || m.Pool != nil
		other.Nodes += m.Nodes
		other.ReadyNodes += m.ReadyNodes
		other.Gpus = saturating.Add(other.Gpus, m.Gpus)
		other.ReadyGpus = saturating.Add(other.ReadyGpus, m.ReadyGpus)
		other.AllocatableGpus = saturating.Add(other.AllocatableGpus, m.AllocatableGpus)
		other.UnhealthyGpus = saturating.Add(other.UnhealthyGpus, m.UnhealthyGpus)
		other.MemoryMiB = max(other.MemoryMiB, m.MemoryMiB)
	}
	other.Fit = fit.result()
	other.FreeNodes, other.Taints = free.result()
	if pooled {
		other.Pool = pool.result()
	}
	other.Variants = []string{fmt.Sprintf("%d models", len(bySize)-len(kept))}
	folded := append(slices.Clone(kept), other)
	slices.SortFunc(folded, func(a, b homelabv1.GpuModel) int { return strings.Compare(a.Product, b.Product) })
	return folded
}

// Hash returns a deterministic digest of entries sorted by name: the SHA-256 of the entries'
// SHA-256s, each over the entry's JSON. Struct fields encode in declaration order and map
// keys sorted, so neither the order in which nodes were seen nor map iteration order can
// change the result.
func Hash(sortedEntries []homelabv1.GpuNodeEntry) string {
	digests := make([]entryDigest, len(sortedEntries))
	for i := range sortedEntries {
		digests[i] = digest(&sortedEntries[i])
	}
	return hashDigests(digests)
}

func hashDigests(digests []entryDigest) string {
	h := sha256.New()
	for i := range digests {
		h.Write(digests[i].sum[:])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Selector converts an inventory's node selector. Unlike metav1.LabelSelectorAsSelector, an
// absent selector selects every node, as the API documents.
func Selector(ls *metav1.LabelSelector) (labels.Selector, error) {
	if ls == nil {
		return labels.Everything(), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, fmt.Errorf("invalid node selector: %w", err)
	}
	return sel, nil
}

// Discovered reports whether a discovery source (GFD's labels, DRA slices, cloud labels)
// states a node's GPUs, as opposed to the capacity alone or nothing: entry is EntryFrom's.
func Discovered(node *corev1.Node, entry *homelabv1.GpuNodeEntry) bool {
	return HasGFDLabels(node) || entry.Source != "" && entry.Source != homelabv1.SourceDevicePlugin
}

// MaxCliques bounds the per-clique counts; OtherCliques counts the rest.
const (
	MaxCliques   = 32
	OtherCliques = "<other cliques>"
)

// Cliques counts nodes and GPUs per NVLink clique, the largest MaxCliques-1 by GPUs (then
// name) listed and the rest folded into OtherCliques; nil when no node names a clique.
func Cliques(entries []homelabv1.GpuNodeEntry) []homelabv1.GpuClique {
	byName := map[string]*homelabv1.GpuClique{}
	for i := range entries {
		n := &entries[i]
		if n.Clique == "" {
			continue
		}
		c := byName[n.Clique]
		if c == nil {
			c = &homelabv1.GpuClique{Name: n.Clique}
			byName[n.Clique] = c
		}
		c.Nodes++
		c.Gpus = saturating.Add(c.Gpus, n.GpuCount)
		if n.Ready {
			c.ReadyGpus = saturating.Add(c.ReadyGpus, n.GpuCount)
		}
	}
	if len(byName) == 0 {
		return nil
	}
	all := make([]homelabv1.GpuClique, 0, len(byName))
	for _, c := range byName {
		all = append(all, *c)
	}
	slices.SortFunc(all, func(a, b homelabv1.GpuClique) int {
		if a.Gpus != b.Gpus {
			return int(b.Gpus) - int(a.Gpus)
		}
		return strings.Compare(a.Name, b.Name)
	})
	if len(all) > MaxCliques {
		other := homelabv1.GpuClique{Name: OtherCliques}
		for _, c := range all[MaxCliques-1:] {
			other.Nodes += c.Nodes
			other.Gpus = saturating.Add(other.Gpus, c.Gpus)
			other.ReadyGpus = saturating.Add(other.ReadyGpus, c.ReadyGpus)
		}
		all = append(all[:MaxCliques-1], other)
	}
	return all
}

// validSource reports whether source names only sources an entry can have: a stored entry or
// a record that anyone could have edited must not put other words into the status or into
// the metrics' labels.
func validSource(source string) bool {
	for part := range strings.SplitSeq(source, ",") {
		switch part {
		case homelabv1.SourceGPUFeatureDiscovery, homelabv1.SourceDRA, homelabv1.SourceGKE,
			homelabv1.SourceAcceleratorLabel, homelabv1.SourceDevicePlugin:
		default:
			return false
		}
	}
	return true
}
