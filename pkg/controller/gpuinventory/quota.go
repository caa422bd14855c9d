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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash/fnv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/quota"
)

// quotaRows bounds status.quota's per-cohort, per-queue and per-namespace lists.
const quotaRows = 32

// draDeviceClassGPUs is the ResourceQuota resource of NVIDIA's DRA driver's GPU class: a DRA
// node's whole GPUs are counted under it.
const draDeviceClassGPUs corev1.ResourceName = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"

// quotaConditionTypes are the conditions that only an inventory with quota carries.
var quotaConditionTypes = []string{homelabv1.ConditionQuotaOvercommitted, homelabv1.ConditionQuotaStranded, homelabv1.ConditionQuotaUnknown}

// computedQuota is an inventory's quota against its nodes.
type computedQuota struct {
	status     *homelabv1.GpuQuota
	conditions []metav1.Condition
	hash       string
}

// quotaFor puts the cluster's quota beside the inventory's GPU nodes. Only an inventory
// without a node selector has quota: quota is the cluster's.
func (c *Controller) quotaFor(logger klog.Logger, gi *homelabv1.GpuInventory, nodes []*corev1.Node, content inventory.Inventory) *computedQuota {
	if c.quotaNow == nil || gi.Spec.NodeSelector != nil {
		return nil
	}
	cluster, problem := c.quotaNow()
	if cluster.Kueue == nil && len(cluster.ResourceQuotas) == 0 && problem == "" {
		return nil // no quota: nothing to compare
	}
	c.keepFlavorLabels(cluster.Kueue)
	key := quotaKey{kueue: cluster.Kueue, quotas: len(cluster.ResourceQuotas), problem: problem,
		content: content.Hash, nodes: nodesDigest(nodes), generation: gi.Generation}
	if len(cluster.ResourceQuotas) > 0 {
		key.firstQuota = &cluster.ResourceQuotas[0]
	}
	if q := c.quotaMemo.get(gi.Name, key); q != nil {
		return q // the same quota, nodes and entries as the last sync: the same answer
	}
	cluster.Nodes = quotaNodes(nodes, content.Nodes, cluster.DRAResources)
	res := quota.Compute(cluster, quotaRows)
	for _, w := range res.Warnings { // bad quota input, said once per change of it
		logger.Info("Quota cannot be read as given", "warning", w)
	}
	q := &computedQuota{status: res.Status, conditions: quotaConditions(res, problem, gi.Generation)}
	if q.status == nil && problem == "" {
		q.conditions = nil
	}
	data, _ := json.Marshal(struct {
		Status     *homelabv1.GpuQuota
		Conditions []metav1.Condition
	}{q.status, q.conditions})
	sum := sha256.Sum256(data)
	q.hash = hex.EncodeToString(sum[:8])
	c.quotaMemo.put(gi.Name, key, q)
	return q
}

// keepFlavorLabels tells the owner of the node cache of every label ResourceFlavors select
// nodes by that the cache drops, all at once: one re-list keeps them all.
func (c *Controller) keepFlavorLabels(k *quota.Kueue) {
	if k == nil || c.keeps == nil || c.unknown == nil {
		return
	}
	for _, f := range k.Flavors {
		for key := range f.NodeLabels {
			if !c.keeps(key) {
				c.unknown(key)
			}
		}
	}
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
		c.Message = inventory.Cut(c.Message, maxMessageBytes)
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

func hasQuotaCondition(conditions []metav1.Condition) bool {
	for _, cond := range conditions {
		for _, t := range quotaConditionTypes {
			if cond.Type == t {
				return true
			}
		}
	}
	return false
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

// quotaKey is what an inventory's quota is computed from: the quota cache's snapshot (its
// parts are rebuilt, so new pointers, whenever it changes), the entries' hash and the Nodes'
// versions (a flavor's label is no part of an entry), and the generation the conditions name.
type quotaKey struct {
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
	key quotaKey
	q   *computedQuota
}

func (m *quotaMemo) get(inventory string, key quotaKey) *computedQuota {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.last[inventory]; ok && e.key == key {
		return e.q
	}
	return nil
}

func (m *quotaMemo) put(inventory string, key quotaKey, q *computedQuota) {
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
