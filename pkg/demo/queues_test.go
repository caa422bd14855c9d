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

package demo

import (
	"cmp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/quota"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// draDevices is the ResourceQuota resource of NVIDIA's DRA driver's GPU class, under which
// the operator counts a DRA node's GPUs.
const draDevices corev1.ResourceName = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"

// demoQuotaNodes are the demo's GPU nodes as quota reads them once kwok runs them: kwok's
// nodes Ready, the home lab's not; the DRA node's GPUs are its slice's devices.
func demoQuotaNodes(t *testing.T) []quota.Node {
	t.Helper()
	nodes := append(append(fixtures.HomeLab(), fixtures.HealthyNodes()...), sourceNodes()...)
	byName := map[string]*corev1.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	inv, _ := inventory.Compute(nodes, nil, time.Now())
	slices, err := draSlices()
	if err != nil {
		t.Fatal(err)
	}
	var out []quota.Node
	for _, e := range inv.Nodes {
		n := byName[e.Name]
		qn := quota.Node{Name: e.Name, Labels: n.Labels, Model: e.Product, Ready: n.Annotations[fixtures.KwokAnnotation] == "fake"}
		if gpus, ok := n.Status.Allocatable[gpuResource]; ok && gpus.Value() > 0 {
			qn.Resources = append(qn.Resources, quota.NodeResource{Name: gpuResource, Capacity: gpus.Value()})
		}
		if e.Name == DRANode {
			qn.Model = "NVIDIA-H100-80GB-HBM3"
			qn.Resources = append(qn.Resources, quota.NodeResource{Name: draDevices, Capacity: int64(fullGPUs(slices[0]))})
		}
		out = append(out, qn)
	}
	return out
}

// demoKueue is the demo's Kueue as quota reads it, with the reservations and pending
// workloads Kueue reports once it has admitted what it can (expectedLoad).
func demoKueue() *quota.Kueue {
	k := &quota.Kueue{Version: "v1beta2"}
	for name, labels := range kueueFlavors() {
		k.Flavors = append(k.Flavors, quota.Flavor{Name: name, NodeLabels: labels})
	}
	load := expectedLoad()
	for _, cq := range clusterQueues() {
		q := quota.ClusterQueue{Name: cq.Name, Cohort: cq.Cohort, Pending: load.pending[cq.Name]}
		for _, l := range cq.Quotas {
			q.Quotas = append(q.Quotas, quota.Limit{Flavor: l.Flavor, Resource: corev1.ResourceName(l.Resource), Nominal: nominalOf(l)})
			u := quota.Usage{Flavor: l.Flavor, Resource: corev1.ResourceName(l.Resource), Total: load.reserved[cq.Name]}
			q.Reserved, q.Used = append(q.Reserved, u), append(q.Used, u)
		}
		k.ClusterQueues = append(k.ClusterQueues, q)
	}
	for _, lq := range localQueues() {
		k.LocalQueues = append(k.LocalQueues, quota.LocalQueue{Namespace: lq.namespace, Name: lq.name, ClusterQueue: lq.clusterQueue})
	}
	return k
}

// The demo's queues show every finding of `kubectl gpuinv quota`: a queue within its
// hardware, an overcommitted cohort, a MIG flavor, a queue borrowing, and stranded nodes.
func TestDemoQueuesShowEachFinding(t *testing.T) {
	res := quota.Compute(quota.Cluster{Kueue: demoKueue(), Nodes: demoQuotaNodes(t)}, quota.MaxRows)
	if len(res.Warnings) > 0 {
		t.Errorf("warnings: %q", res.Warnings)
	}
	if res.Status == nil {
		t.Fatal("no status.quota")
	}
	cohorts := map[string]homelabv1.QuotaCohort{}
	for _, c := range res.Status.CohortModels {
		cohorts[c.Cohort] = c
	}
	queues := map[string]homelabv1.QuotaQueue{}
	for _, q := range res.Status.Queues {
		queues[q.Name] = q
	}
	if c := cohorts["inference"]; c.Model != "NVIDIA-L4" || c.Nominal != 1 || c.Ready != 1 || c.Finding != "" {
		t.Errorf("inference: %+v; want 1 L4 of quota on 1 Ready L4, no finding", c)
	}
	if c := cohorts["research"]; c.Finding != homelabv1.QuotaFindingOvercommitted || c.Nominal != 16 || c.Ready != 8 {
		t.Errorf("research: %+v; want 16 H100s of quota on 8 Ready, Overcommitted", c)
	}
	if len(res.Overcommitted) != 1 || !strings.Contains(res.Overcommitted[0], "cohort research") {
		t.Errorf("overcommitted: %q; want one line, about cohort research", res.Overcommitted)
	}
	if c := cohorts["notebooks"]; c.Model != "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb" || c.Finding != "" {
		t.Errorf("notebooks: %+v; want quota on the MIG node's devices, no finding", c)
	}
	if q := queues["notebooks-a"]; q.Reserved <= q.Nominal || q.Reserved > q.Nominal+q.Borrowable {
		t.Errorf("notebooks-a: reserved %d of nominal %d, borrowable %d; want a reservation that borrows", q.Reserved, q.Nominal, q.Borrowable)
	}
	if q := queues["research-a"]; q.PendingWorkloads != 1 {
		t.Errorf("research-a: %d pending workloads, want 1", q.PendingWorkloads)
	}
	if res.Status.StrandedNodes != 2 || len(res.Stranded) != 1 || !strings.Contains(res.Stranded[0], "NVIDIA-L4 (2 nvidia.com/gpu)") {
		t.Errorf("stranded: %d nodes, %q; want 2 (%s and %s), naming %s's 2 L4s", res.Status.StrandedNodes, res.Stranded, GKENode, DRANode, GKENode)
	}
}

// What Kueue does with each Job follows from the quota and the nodes: the
// admitted Jobs fit in their cohort's quota, and the pending one asks more than its whole
// cohort has.
func TestDemoJobsMatchKueue(t *testing.T) {
	cohortQuota, cohortOf := map[string]int64{}, map[string]string{}
	for _, cq := range clusterQueues() {
		cohortOf[cq.Name] = cmp.Or(cq.Cohort, cq.Name)
		for _, l := range cq.Quotas {
			cohortQuota[cohortOf[cq.Name]] += nominalOf(l)
		}
	}
	cqOf := map[string]string{}
	for _, lq := range localQueues() {
		cqOf[lq.namespace+"/"+lq.name] = lq.clusterQueue
	}
	load := expectedLoad()
	cohortReserved := map[string]int64{}
	for cq, r := range load.reserved {
		cohortReserved[cohortOf[cq]] += r
	}
	for _, j := range queueJobs() {
		cq := cqOf[j.namespace+"/"+j.localQueue]
		if cq == "" {
			t.Fatalf("Job %s: LocalQueue %s/%s is not among the demo's", j.name, j.namespace, j.localQueue)
		}
		gpus := int64(j.pods) * j.gpusPerPod
		if !j.admitted && gpus <= cohortQuota[cohortOf[cq]] {
			t.Errorf("Job %s asks %d GPUs, within cohort %s's %d: Kueue could admit it", j.name, gpus, cohortOf[cq], cohortQuota[cohortOf[cq]])
		}
	}
	for c, r := range cohortReserved {
		if r > cohortQuota[c] {
			t.Errorf("cohort %s: %d GPUs reserved, more than its quota of %d", c, r, cohortQuota[c])
		}
	}
}

// nominalOf is a quota's nominal figure as a count.
func nominalOf(q testenv.KueueQuota) int64 {
	n := resource.MustParse(q.Nominal)
	return n.Value()
}
