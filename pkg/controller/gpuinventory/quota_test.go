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
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/quota"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/quotacache"
)

// quotaSource is a quota cache a test sets: what it says and whom it tells.
type quotaSource struct {
	cluster   quota.Cluster
	problem   string
	listeners []func(string)
}

func (q *quotaSource) OnChange(f func(string)) { q.listeners = append(q.listeners, f) }
func (q *quotaSource) HasSynced() bool         { return true }
func (q *quotaSource) snapshot() quotacache.Snapshot {
	return quotacache.Snapshot{Kueue: q.cluster.Kueue, ResourceQuotas: q.cluster.ResourceQuotas, Problem: q.problem}
}
func (q *quotaSource) set(c quota.Cluster, problem string) {
	q.cluster, q.problem = c, problem
	for _, f := range q.listeners {
		f("")
	}
}

func withQuota(q *quotaSource) func(*controller.Context, *Options) {
	return func(_ *controller.Context, opts *Options) {
		opts.Sections = append(opts.Sections, quotacache.NewSection(q.snapshot, q, nil))
	}
}

// team is a Kueue with one flavor of the pool-a nodes and one ClusterQueue giving gpus of
// nvidia.com/gpu in it.
func team(gpus int64) *quota.Kueue {
	return &quota.Kueue{Version: "v1beta2",
		Flavors: []quota.Flavor{{Name: "h100-a", NodeLabels: map[string]string{"pool": "a"}}},
		ClusterQueues: []quota.ClusterQueue{{Name: "team-a", Quotas: []quota.Limit{
			{Flavor: "h100-a", Resource: allocation.ResourceGPU, Nominal: gpus}}}},
	}
}

// Quota beside the hardware reaches the whole cluster's inventory only: a queue of 16 GPUs
// on a flavor of 8 is overcommitted (condition naming the queue, metric), the node no flavor
// selects is stranded; the same quota again writes nothing; quota that fits flips the
// condition; Kueue gone takes status.quota and the conditions away.
func TestQuotaReachesTheWholeClusterInventory(t *testing.T) {
	src := &quotaSource{cluster: quota.Cluster{Kueue: team(16)}}
	all := gpuInventory("all", 1, homelabv1.GpuInventoryStatus{})
	pool := gpuInventory("pool-b", 1, homelabv1.GpuInventoryStatus{})
	pool.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "b"}}
	nodes := []*corev1.Node{h100("gpu-a", "a"), h100("gpu-b", "b")}
	f := newFixtureWith(t, withQuota(src), nodes, all, pool)

	status := f.appliedStatus(f.sync("all"), "all")
	q := status.Quota
	if q == nil || q.Kueue != "v1beta2" || q.ClusterQueues != 1 || q.StrandedNodes != 1 {
		t.Fatalf("status.quota = %+v; want Kueue v1beta2, 1 queue, 1 stranded node", q)
	}
	over := meta.FindStatusCondition(status.Conditions, homelabv1.ConditionQuotaOvercommitted)
	if over == nil || over.Status != metav1.ConditionTrue || !strings.Contains(over.Message, "team-a") {
		t.Errorf("QuotaOvercommitted = %+v; want True naming team-a", over)
	}
	stranded := meta.FindStatusCondition(status.Conditions, homelabv1.ConditionQuotaStranded)
	if stranded == nil || stranded.Status != metav1.ConditionTrue {
		t.Errorf("QuotaStranded = %+v; want True (gpu-b is in no flavor)", stranded)
	}
	if got, _ := f.gauge("gpu_inventory_quota_stranded_nodes", "all"); got != 1 {
		t.Errorf("gpu_inventory_quota_stranded_nodes = %v, want 1", got)
	}
	if got, ok := f.gauge("gpu_inventory_quota_nominal", "all", "NVIDIA-H100-80GB-HBM3", allocation.ResourceGPU); !ok || got != 16 {
		t.Errorf("gpu_inventory_quota_nominal = %v (%t), want 16", got, ok)
	}
	poolStatus := f.appliedStatus(f.sync("pool-b"), "pool-b")
	if poolStatus.Quota != nil || meta.FindStatusCondition(poolStatus.Conditions, homelabv1.ConditionQuotaOvercommitted) != nil {
		t.Errorf("an inventory with a node selector got quota: %+v", poolStatus.Quota)
	}

	// A node relabelled into the flavor (an entry unchanged, its Node not): no longer stranded.
	moved := h100("gpu-b", "a")
	moved.ResourceVersion = "2"
	if err := f.nodeIndexer.Update(moved); err != nil {
		t.Fatal(err)
	}
	relabelled := f.appliedStatus(f.sync("all"), "all")
	if relabelled.Quota == nil || relabelled.Quota.StrandedNodes != 0 {
		t.Errorf("after gpu-b joined pool a: status.quota = %+v, want nothing stranded", relabelled.Quota)
	}
	if err := f.nodeIndexer.Update(nodes[1]); err != nil {
		t.Fatal(err)
	}

	// Unchanged quota: no write.
	f = newFixtureWith(t, withQuota(src), nodes, gpuInventory("all", 1, status))
	if actions := f.sync("all"); len(actions) != 0 || len(f.writer.written) != 0 {
		t.Fatalf("unchanged quota: %d writes, calls %v; want none", len(f.writer.written), actions)
	}

	// Quota within the hardware: the condition flips; the change reached the queue.
	src.set(quota.Cluster{Kueue: team(8)}, "")
	if got := drain(f.controller); !got["all"] {
		t.Errorf("a quota change enqueued %v, want all", got)
	}
	status = f.appliedStatus(f.sync("all"), "all")
	if over := meta.FindStatusCondition(status.Conditions, homelabv1.ConditionQuotaOvercommitted); over == nil || over.Status != metav1.ConditionFalse {
		t.Errorf("QuotaOvercommitted = %+v after the quota fits, want False", over)
	}

	// Kueue removed and no ResourceQuota: nothing of quota stays.
	f = newFixtureWith(t, withQuota(src), nodes, gpuInventory("all", 1, status))
	src.set(quota.Cluster{}, "")
	status = f.appliedStatus(f.sync("all"), "all")
	if status.Quota != nil {
		t.Errorf("status.quota = %+v after Kueue went, want none", status.Quota)
	}
	for _, c := range quotacache.NewSection(nil, nil, nil).Conditions() {
		if meta.FindStatusCondition(status.Conditions, c) != nil {
			t.Errorf("condition %s stays after Kueue went", c)
		}
	}
	if _, ok := f.gauge("gpu_inventory_quota_stranded_nodes", "all"); ok {
		t.Error("quota series stay after Kueue went")
	}
}

// A refusal to read quota is a condition saying so, and the rest of the status is written.
func TestQuotaForbiddenIsACondition(t *testing.T) {
	src := &quotaSource{problem: `cannot list kueue.x-k8s.io/v1beta2 clusterqueues: forbidden`}
	f := newFixtureWith(t, withQuota(src), []*corev1.Node{h100("gpu-a", "a")}, gpuInventory("all", 1, homelabv1.GpuInventoryStatus{}))
	status := f.appliedStatus(f.sync("all"), "all")
	unknown := meta.FindStatusCondition(status.Conditions, homelabv1.ConditionQuotaUnknown)
	if unknown == nil || unknown.Status != metav1.ConditionTrue || unknown.Reason != homelabv1.ReasonQuotaForbidden || !strings.Contains(unknown.Message, "forbidden") {
		t.Errorf("QuotaUnknown = %+v; want True, Forbidden, quoting the refusal", unknown)
	}
	if status.TotalGpus != 8 {
		t.Errorf("totalGpus = %d; the rest of the status must be written", status.TotalGpus)
	}
	if got, _ := f.gauge("gpu_inventory_quota_unknown", "all"); got != 1 {
		t.Errorf("gpu_inventory_quota_unknown = %v, want 1", got)
	}
}
