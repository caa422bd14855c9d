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

package quotacache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash/fnv"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/quota"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/section"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
)

// quotaRows bounds status.quota's per-cohort, per-queue and per-namespace lists.
const quotaRows = 32

// draDeviceClassGPUs is the ResourceQuota resource of NVIDIA's DRA driver's GPU class: a DRA
// node's whole GPUs are counted under it.
const draDeviceClassGPUs corev1.ResourceName = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"

// quotaConditionTypes are the conditions that only an inventory with quota carries.
var quotaConditionTypes = []string{homelabv1.ConditionQuotaOvercommitted, homelabv1.ConditionQuotaStranded, homelabv1.ConditionQuotaUnknown}

// Section is the quota part of the whole cluster's inventory (status.quota and the Quota*
// conditions): the cache's quota beside the inventory's GPU nodes. Only an inventory without
// a node selector has quota: quota is the cluster's.
type Section struct {
	snapshot func() Snapshot
	changes  source.Changes
	dra      []corev1.ResourceName
	memo     quotaMemo
}

// NewSection is the quota section of the snapshots snapshot returns (Cache.Snapshot), which
// changes tells of; quota in the resource names dra is compared with the nodes' DRA GPUs.
func NewSection(snapshot func() Snapshot, changes source.Changes, dra []corev1.ResourceName) *Section {
	return &Section{snapshot: snapshot, changes: changes, dra: dra}
}

// Sections is the cache's one section, counting DRA GPUs in Kueue under the resource names
// of Options.DRAResources.
func (c *Cache) Sections() []section.Section { return []section.Section{c.section} }

// Name names the part in the inventory's hash.
func (*Section) Name() string { return "quota" }

// Conditions are the conditions only an inventory with quota carries.
func (*Section) Conditions() []string { return quotaConditionTypes }

// Changes are the snapshots'.
func (s *Section) Changes() source.Changes { return s.changes }

// Forget drops the last quota computed for an inventory.
func (s *Section) Forget(inventory string) { s.memo.forget(inventory) }

// Compute puts the cluster's quota beside the inventory's GPU nodes.
func (s *Section) Compute(in section.Input) *section.Part {
	gi := in.Inventory
	if gi.Spec.NodeSelector != nil {
		return nil
	}
	snap := s.snapshot()
	cluster := quota.Cluster{Kueue: snap.Kueue, ResourceQuotas: snap.ResourceQuotas, DRAResources: s.dra}
	problem := snap.Problem
	if cluster.Kueue == nil && len(cluster.ResourceQuotas) == 0 && problem == "" {
		return nil // no quota: nothing to compare
	}
	missing := missingFlavorLabels(cluster.Kueue, in.KeepsLabel)
	key := memoKey{kueue: cluster.Kueue, quotas: len(cluster.ResourceQuotas), problem: problem,
		content: in.Content.Hash, nodes: nodesDigest(in.Nodes), generation: gi.Generation}
	if len(cluster.ResourceQuotas) > 0 {
		key.firstQuota = &cluster.ResourceQuotas[0]
	}
	q := s.memo.get(gi.Name, key) // the same quota, nodes and entries as the last sync: the same answer
	if q == nil {
		q = computeQuota(in, cluster, problem)
		s.memo.put(gi.Name, key, q)
	}
	if q.status == nil && len(q.conditions) == 0 {
		return nil
	}
	status := q.status
	return &section.Part{Hash: q.hash, Conditions: q.conditions, MissingLabels: missing,
		Set:     func(st *homelabv1.GpuInventoryStatus) { st.Quota = status },
		Observe: func(m *metrics.Content) { m.Quota = quotaMetrics(status, q.conditions) }}
}

// computedQuota is an inventory's quota against its nodes.
type computedQuota struct {
	status     *homelabv1.GpuQuota
	conditions []metav1.Condition
	hash       string
}

// computeQuota sets the cluster's quota beside the inventory's nodes.
func computeQuota(in section.Input, cluster quota.Cluster, problem string) *computedQuota {
	cluster.Nodes = quotaNodes(in.Nodes, in.Content.Nodes, cluster.DRAResources)
	res := quota.Compute(cluster, quotaRows)
	for _, w := range res.Warnings { // bad quota input, said once per change of it
		in.Logger.Info("Quota cannot be read as given", "warning", w)
	}
	q := &computedQuota{status: res.Status, conditions: quotaConditions(res, problem, in.Inventory.Generation)}
	if q.status == nil && problem == "" {
		q.conditions = nil
	}
	data, _ := json.Marshal(struct {
		Status     *homelabv1.GpuQuota
		Conditions []metav1.Condition
	}{q.status, q.conditions})
	sum := sha256.Sum256(data)
	q.hash = hex.EncodeToString(sum[:8])
	return q
}

// missingFlavorLabels are the labels ResourceFlavors select nodes by that the node cache
// drops, all at once: one re-list keeps them all.
func missingFlavorLabels(k *quota.Kueue, keeps func(string) bool) []string {
	if k == nil || keeps == nil {
		return nil
	}
	var missing []string
	for _, f := range k.Flavors {
		for key := range f.NodeLabels {
			if !keeps(key) && !slices.Contains(missing, key) {
				missing = append(missing, key)
			}
		}
	}
	slices.Sort(missing)
	return missing
}

// quotaNodes are the GPU nodes as quota reads them: labels and taints from the Node, the
// resources and what is free from the inventory's entries.
func quotaNodes(nodes []*corev1.Node, entries []homelabv1.GpuNodeEntry, draResources []corev1.ResourceName) []quota.Node {
	byName := make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}
	out := make([]quota.Node, 0, len(entries))
	for i := range entries {
		e := &entries[i]
		node := byName[e.Name]
		qn := quota.Node{Name: e.Name, Model: e.Product, Ready: e.Ready}
		if node != nil {
			qn.Labels, qn.Taints = node.Labels, node.Spec.Taints
			qn.Ready = qn.Ready && !node.Spec.Unschedulable
			qn.Resources = devicePluginResources(node, e, qn.Ready)
		}
		if strings.Contains(e.Source, homelabv1.SourceDRA) {
			free := int64(0)
			if qn.Ready {
				free = int64(e.FreeGpus) - freeOf(e, allocation.ResourceGPU)
			}
			for _, name := range append([]corev1.ResourceName{draDeviceClassGPUs}, draResources...) {
				qn.Resources = append(qn.Resources, quota.NodeResource{Name: name, Capacity: int64(e.GpuCount), Free: max(0, free)})
			}
		}
		out = append(out, qn)
	}
	return out
}

// devicePluginResources are a node's allocatable GPU resources and, on a node that can take
// pods, what of each the scheduler could still grant.
func devicePluginResources(node *corev1.Node, e *homelabv1.GpuNodeEntry, ready bool) []quota.NodeResource {
	var out []quota.NodeResource
	for name, q := range node.Status.Allocatable {
		if !allocation.IsGPUResource(string(name)) || q.Value() <= 0 {
			continue
		}
		r := quota.NodeResource{Name: name, Capacity: q.Value()}
		if ready {
			r.Free = freeOf(e, string(name))
		}
		out = append(out, r)
	}
	return out
}

// freeOf is what the entry says is free of a device-plugin resource (0 when not read).
func freeOf(e *homelabv1.GpuNodeEntry, resource string) int64 {
	for _, f := range e.Free {
		if f.Resource == resource {
			return int64(f.Free)
		}
	}
	return 0
}

// quotaConditions are the quota findings as conditions: each names what it found.
func quotaConditions(res quota.Result, problem string, generation int64) []metav1.Condition {
	cond := func(t string, found bool, yes, no string, lines []string, none string) metav1.Condition {
		c := metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: no, Message: none, ObservedGeneration: generation}
		if found {
			c.Status, c.Reason, c.Message = metav1.ConditionTrue, yes, strings.Join(lines, "; ")
		}
		c.Message = inventory.Cut(c.Message, inventory.MaxMessageBytes)
		return c
	}
	unknownReason := homelabv1.ReasonQuotaReadError
	if strings.Contains(problem, "forbidden") {
		unknownReason = homelabv1.ReasonQuotaForbidden
	}
	return []metav1.Condition{
		cond(homelabv1.ConditionQuotaOvercommitted, len(res.Overcommitted) > 0, homelabv1.ReasonQuotaOvercommitted,
			homelabv1.ReasonQuotaWithinHardware, res.Overcommitted, "No cohort's GPU quota exceeds the Ready GPUs its flavors reach."),
		cond(homelabv1.ConditionQuotaStranded, len(res.Stranded) > 0, homelabv1.ReasonQuotaStranded,
			homelabv1.ReasonNothingStranded, res.Stranded, "Every Ready GPU node is in a flavor, and every flavor's quota reaches nodes."),
		cond(homelabv1.ConditionQuotaUnknown, problem != "", unknownReason, homelabv1.ReasonQuotaRead,
			[]string{problem}, "Kueue's objects and the ResourceQuotas were read."),
	}
}

// quotaMetrics is status.quota as the metrics report it; nil when there is none.
func quotaMetrics(q *homelabv1.GpuQuota, conditions []metav1.Condition) *metrics.QuotaContent {
	unknown := meta.IsStatusConditionTrue(conditions, homelabv1.ConditionQuotaUnknown)
	if q == nil && !unknown {
		return nil
	}
	out := &metrics.QuotaContent{Unknown: unknown}
	if q == nil {
		return out
	}
	out.StrandedNodes = q.StrandedNodes
	row := func(cohort, model string, f *homelabv1.QuotaFigures) metrics.QuotaRow {
		return metrics.QuotaRow{Cohort: cohort, Model: model, Resource: f.Resource, Finding: f.Finding,
			Capacity: f.Capacity, Ready: f.Ready, Free: f.Free, Nominal: f.Nominal, Reserved: f.Reserved,
			Used: f.Used, Pending: f.PendingWorkloads}
	}
	for i := range q.Models {
		out.Models = append(out.Models, row("", q.Models[i].Model, &q.Models[i].QuotaFigures))
	}
	for i := range q.CohortModels {
		out.Cohorts = append(out.Cohorts, row(q.CohortModels[i].Cohort, q.CohortModels[i].Model, &q.CohortModels[i].QuotaFigures))
	}
	return out
}

// memoKey is what an inventory's quota is computed from: the quota cache's snapshot (its
// parts are rebuilt, so new pointers, whenever it changes), the entries' hash and the Nodes'
// versions (a flavor's label is no part of an entry), and the generation the conditions name.
type memoKey struct {
	kueue      *quota.Kueue
	firstQuota *quota.NamespaceQuota
	quotas     int
	problem    string
	content    string
	nodes      uint64
	generation int64
}

// quotaMemo keeps each inventory's last quota, so that a resync of an unchanged cluster does
// not compute it again.
type quotaMemo struct {
	mu   sync.Mutex
	last map[string]memoized
}

type memoized struct {
	key memoKey
	q   *computedQuota
}

func (m *quotaMemo) get(inventory string, key memoKey) *computedQuota {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.last[inventory]; ok && e.key == key {
		return e.q
	}
	return nil
}

func (m *quotaMemo) put(inventory string, key memoKey, q *computedQuota) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[string]memoized{}
	}
	m.last[inventory] = memoized{key, q}
}

func (m *quotaMemo) forget(inventory string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.last, inventory)
}

// nodesDigest identifies the Nodes by name and resourceVersion.
func nodesDigest(nodes []*corev1.Node) uint64 {
	h := fnv.New64a()
	for _, n := range nodes {
		h.Write([]byte(n.Name))
		h.Write([]byte{0})
		h.Write([]byte(n.ResourceVersion))
		h.Write([]byte{0})
	}
	return h.Sum64()
}
