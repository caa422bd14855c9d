//go:build integration

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

package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// quotaOf finds status.quota's row of model and resource in rows (by source when given).
func quotaRow(q *homelabv1.GpuQuota, model, res string) (homelabv1.QuotaModel, bool) {
	for _, m := range q.Models {
		if m.Model == model && m.Resource == res && m.Source != "ResourceQuota" {
			return m, true
		}
	}
	return homelabv1.QuotaModel{}, false
}

func cohortRow(q *homelabv1.GpuQuota, cohort, res string) (homelabv1.QuotaCohort, bool) {
	for _, c := range q.CohortModels {
		if c.Cohort == cohort && c.Resource == res {
			return c, true
		}
	}
	return homelabv1.QuotaCohort{}, false
}

func queueRow(q *homelabv1.GpuQuota, queue, res string) (homelabv1.QuotaQueue, bool) {
	for _, r := range q.Queues {
		if r.Name == queue && r.Resource == res {
			return r, true
		}
	}
	return homelabv1.QuotaQueue{}, false
}

func conditionIs(gi *homelabv1.GpuInventory, t string, status metav1.ConditionStatus, contains string) error {
	c := meta.FindStatusCondition(gi.Status.Conditions, t)
	if c == nil || c.Status != status || !strings.Contains(c.Message, contains) {
		return fmt.Errorf("condition %s = %+v, want %s naming %q", t, c, status, contains)
	}
	return nil
}

// Kueue installed while the operator runs is read without a restart: a ClusterQueue promising
// more H100s than exist makes the inventory say so; Kueue removed takes it all away again.
// Before Kueue the operator logs no error about it.
func TestKueueAppearingWhileTheOperatorRuns(t *testing.T) {
	c := startCluster(t)
	c.createH100Nodes(t, "h100-a", "h100-b")
	op := startOperator(t, c.env.Config, testOptions())
	c.waitInventory(t, "the fleet without quota", func(gi *homelabv1.GpuInventory) error {
		if gi.Status.TotalGpus != 16 || gi.Status.Quota != nil {
			return fmt.Errorf("%d GPUs, quota %+v; want 16 and none", gi.Status.TotalGpus, gi.Status.Quota)
		}
		return nil
	})

	ctx := testContext(t)
	if err := c.env.InstallKueueCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	c.applyKueue(t, testenv.KueueResourceFlavor("h100", map[string]string{"nvidia.com/gpu.product": h100Product}),
		testenv.KueueClusterQueue{Name: "team", Quotas: []testenv.KueueQuota{{Flavor: "h100", Resource: gpuResource, Nominal: "24"}}}.Object())
	c.waitInventory(t, "quota read from the Kueue installed meanwhile", func(gi *homelabv1.GpuInventory) error {
		q := gi.Status.Quota
		if q == nil || q.Kueue != testenv.KueueVersion {
			return fmt.Errorf("status.quota = %+v, want Kueue %s", q, testenv.KueueVersion)
		}
		row, ok := quotaRow(q, h100Product, gpuResource)
		if !ok || row.Nominal != 24 || row.Ready != 16 || row.Free != 16 || row.Finding != "Overcommitted" {
			return fmt.Errorf("H100 row %+v; want nominal 24 against 16 ready and free, Overcommitted (quota %+v)", row, q)
		}
		return conditionIs(gi, homelabv1.ConditionQuotaOvercommitted, metav1.ConditionTrue, "team")
	})
	waitMetrics(t, op, `gpu_inventory_quota_nominal{inventory="cluster",model="`+h100Product+`",resource="nvidia.com/gpu"} 24`)

	if err := c.env.UninstallKueueCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	c.waitInventory(t, "Kueue removed", func(gi *homelabv1.GpuInventory) error {
		if gi.Status.Quota != nil || meta.FindStatusCondition(gi.Status.Conditions, homelabv1.ConditionQuotaOvercommitted) != nil {
			return fmt.Errorf("status.quota = %+v, conditions %v; want neither", gi.Status.Quota, gi.Status.Conditions)
		}
		return nil
	})
	for _, line := range strings.Split(op.logs(), "\n") {
		if strings.HasPrefix(line, "E") && strings.Contains(strings.ToLower(line), "kueue") {
			t.Errorf("logged at error level about Kueue: %s", line)
		}
	}
}

// Without Kueue, ResourceQuotas on GPU resources are set against the cluster's GPUs: two
// namespaces promised more H100s than exist make the cluster's row overcommitted, and what a
// namespace uses is the quota's own status.
func TestResourceQuotasBesideTheHardware(t *testing.T) {
	c := startCluster(t)
	c.createH100Nodes(t, "h100-a", "h100-b")
	startOperator(t, c.env.Config, testOptions())
	ctx := testContext(t)
	for ns, hard := range map[string]int64{"team-a": 8, "team-b": 12} {
		c.ensureNamespace(t, ns)
		rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gpus"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.nvidia.com/gpu": *resource.NewQuantity(hard, resource.DecimalSI),
				corev1.ResourcePods: resource.MustParse("100")}}}
		created, err := c.kube.CoreV1().ResourceQuotas(ns).Create(ctx, rq, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// What the ResourceQuota controller (not run here) writes: hard, and what is used.
		created.Status = corev1.ResourceQuotaStatus{Hard: created.Spec.Hard, Used: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("2")}}
		if _, err := c.kube.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.waitInventory(t, "ResourceQuotas beside the H100s", func(gi *homelabv1.GpuInventory) error {
		q := gi.Status.Quota
		if q == nil || q.Kueue != "" || q.Namespaces != 2 || len(q.NamespaceQuotas) != 2 {
			return fmt.Errorf("status.quota = %+v; want 2 namespaces' quotas and no Kueue", q)
		}
		for _, n := range q.NamespaceQuotas {
			if n.Resource != "requests."+gpuResource || n.Used != 2 || (n.Namespace == "team-a") != (n.Hard == 8) {
				return fmt.Errorf("namespace quota %+v", n)
			}
		}
		var found bool
		for _, m := range q.Models {
			if m.Source == "ResourceQuota" && m.Resource == gpuResource {
				found = m.Nominal == 20 && m.Ready == 16 && m.Used == 4 && m.Finding == "Overcommitted"
			}
		}
		if !found {
			return fmt.Errorf("models %+v; want a ResourceQuota row of 20 nvidia.com/gpu against 16 ready, 4 used, Overcommitted", q.Models)
		}
		return conditionIs(gi, homelabv1.ConditionQuotaOvercommitted, metav1.ConditionTrue, "")
	})
}

// An operator whose ClusterRole lacks Kueue's objects says so in a condition and reports the
// rest as always.
func TestQuotaForbiddenIsACondition(t *testing.T) {
	c := startCluster(t)
	c.createH100Nodes(t, "h100-a")
	ctx := testContext(t)
	if err := c.env.InstallKueueCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.ApplyManifests(ctx, c.env.Config, "integration-test", "../../manifests/namespace.yaml", "../../manifests/rbac"); err != nil {
		t.Fatal(err)
	}
	role, err := c.kube.RbacV1().ClusterRoles().Get(ctx, "gpu-inventory-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := len(role.Rules)
	role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.APIGroups, testenv.KueueGroup) })
	if len(role.Rules) == n {
		t.Fatal("the ClusterRole has no Kueue rule to take away")
	}
	if _, err := c.kube.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	saConfig, err := c.env.ServiceAccountConfig(ctx, operatorNamespace, "gpu-inventory-operator")
	if err != nil {
		t.Fatal(err)
	}
	startOperator(t, saConfig, testOptions())
	c.waitInventory(t, "the fleet, and quota unknown", func(gi *homelabv1.GpuInventory) error {
		if gi.Status.TotalGpus != 8 {
			return fmt.Errorf("%d GPUs, want 8", gi.Status.TotalGpus)
		}
		c := meta.FindStatusCondition(gi.Status.Conditions, homelabv1.ConditionQuotaUnknown)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != homelabv1.ReasonQuotaForbidden || !strings.Contains(c.Message, "forbidden") {
			return fmt.Errorf("QuotaUnknown = %+v, want True, Forbidden", c)
		}
		return nil
	})
}

// Quota against hardware with Kueue's own controller and the real scheduler: a queue that
// fits its H100s, a cohort of two queues promising more than the H100s there are, one of them
// borrowing from the other, a MIG flavor, and an L4 node no flavor selects. Kueue admits a
// Job of "solo" with quota to spare, yet no node has room for its pod: quota says yes, the
// hardware says no, and the inventory shows both. The figures are Kueue's and the
// scheduler's, not the test's.
func TestQuotaBesideKueueAndTheScheduler(t *testing.T) {
	c := startKueueCluster(t)
	const a100 = "NVIDIA-A100-SXM4-80GB"
	c.gfdNode(t, "h100-1", h100Product, 8)
	c.gfdNode(t, "h100-2", h100Product, 8)
	c.gfdNode(t, "l4-1", "NVIDIA-L4", 4)
	mig := kwokNode("a100-mig", corev1.ResourceList{migResource: resource.MustParse("7")})
	for k, v := range map[string]string{"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": a100,
		"nvidia.com/gpu.count": "1", "nvidia.com/mig.strategy": "mixed", "nvidia.com/mig-1g.10gb.count": "7"} {
		mig.Labels[k] = v
	}
	if _, err := c.kube.CoreV1().Nodes().Create(testContext(t), mig, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitSchedulable(t, "a100-mig")

	c.createFlavor(t, "h100", map[string]string{"nvidia.com/gpu.product": h100Product})
	c.createFlavor(t, "a100-mig", map[string]string{"nvidia.com/gpu.product": a100})
	for _, q := range []testenv.KueueClusterQueue{
		{Name: "solo", Quotas: []testenv.KueueQuota{{Flavor: "h100", Resource: gpuResource, Nominal: "4"}}},
		{Name: "research-a", Cohort: "research", Quotas: []testenv.KueueQuota{{Flavor: "h100", Resource: gpuResource, Nominal: "8", BorrowingLimit: "4"}}},
		{Name: "research-b", Cohort: "research", Quotas: []testenv.KueueQuota{{Flavor: "h100", Resource: gpuResource, Nominal: "12", LendingLimit: "6"}}},
		{Name: "mig", Quotas: []testenv.KueueQuota{{Flavor: "a100-mig", Resource: migResource, Nominal: "7"}}},
	} {
		c.createClusterQueue(t, q)
		c.createLocalQueue(t, "ml", q.Name, q.Name)
	}
	op := startOperator(t, c.env.Config, testOptions())

	borrow := c.createQueuedJob(t, "ml", "borrow", "research-a", 2, 5) // 10 of a nominal 8
	c.waitReservation(t, "research-a", "h100", gpuResource, 10)
	c.waitJobPodsRunning(t, borrow, 2)
	migJob := testenv.KueueJob("ml", "mig", "mig", 1, corev1.ResourceList{migResource: resource.MustParse("2")})
	if _, err := c.kube.BatchV1().Jobs("ml").Create(testContext(t), migJob, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitReservation(t, "mig", "a100-mig", migResource, 2)
	c.createQueuedJob(t, "ml", "solo", "solo", 1, 4) // 3 H100s free on each node: no room
	c.waitReservation(t, "solo", "h100", gpuResource, 4)

	gi := c.waitInventory(t, "quota beside Kueue's admissions and the scheduler's placements", func(gi *homelabv1.GpuInventory) error {
		q := gi.Status.Quota
		if q == nil || q.Kueue != testenv.KueueVersion || q.ClusterQueues != 4 || q.Cohorts != 3 || q.StrandedNodes != 1 {
			return fmt.Errorf("status.quota = %+v; want Kueue %s, 4 queues in 3 cohorts, 1 stranded node", q, testenv.KueueVersion)
		}
		if a := gi.Status.Allocation; a == nil || a.PendingGpus != 4 {
			return fmt.Errorf("allocation %+v; want solo's 4 GPUs pending in the scheduler", a)
		}
		research, _ := cohortRow(q, "research", gpuResource)
		if research.Nominal != 20 || research.Ready != 16 || research.Reserved != 10 || research.Finding != homelabv1.QuotaFindingOvercommitted {
			return fmt.Errorf("cohort research %+v; want 20 promised against 16 ready, 10 reserved, Overcommitted", research)
		}
		solo, _ := cohortRow(q, "solo", gpuResource)
		if solo.Nominal != 4 || solo.Reserved != 4 || solo.Free != 6 || solo.Finding != "" {
			return fmt.Errorf("cohort solo %+v; want 4 promised and reserved, 6 free, no finding", solo)
		}
		a, _ := queueRow(q, "research-a", gpuResource)
		if a.Nominal != 8 || a.Borrowable != 4 || a.Reserved != 10 || a.AdmittedWorkloads != 1 {
			return fmt.Errorf("queue research-a %+v; want nominal 8, 4 borrowable, 10 reserved (2 borrowed), 1 admitted", a)
		}
		m, _ := queueRow(q, "mig", migResource)
		if m.Model != a100 || m.Nominal != 7 || m.Capacity != 7 || m.Reserved != 2 || m.Free != 5 || m.Finding != "" {
			return fmt.Errorf("queue mig %+v; want 7 MIG devices of %s promised and there, 2 reserved, 5 free", m, a100)
		}
		if h, _ := quotaRow(q, h100Product, gpuResource); h.Nominal != 24 || h.Capacity != 16 || h.Free != 6 || h.Reserved != 14 || h.Finding != homelabv1.QuotaFindingOvercommitted {
			return fmt.Errorf("H100 row %+v; want 24 promised, 16 there, 6 free, 14 reserved, Overcommitted", h)
		}
		if l4, ok := quotaRow(q, "NVIDIA-L4", gpuResource); !ok || l4.StrandedReady != 4 || l4.Finding != homelabv1.QuotaFindingStranded {
			return fmt.Errorf("L4 row %+v; want its 4 GPUs stranded", l4)
		}
		if err := conditionIs(gi, homelabv1.ConditionQuotaOvercommitted, metav1.ConditionTrue, "research"); err != nil {
			return err
		}
		return conditionIs(gi, homelabv1.ConditionQuotaStranded, metav1.ConditionTrue, "NVIDIA-L4")
	})
	t.Logf("QuotaOvercommitted: %s", meta.FindStatusCondition(gi.Status.Conditions, homelabv1.ConditionQuotaOvercommitted).Message)
	waitMetrics(t, op, `gpu_inventory_quota_cohort_nominal{cohort="research",inventory="cluster",model="`+h100Product+`",resource="nvidia.com/gpu"} 20`)
}

const migResource = "nvidia.com/mig-1g.10gb"

// A ResourceFlavor selects nodes by labels the node cache would drop (a pool, a zone): an
// operator started with the flavor there keeps the label from its first list, without a
// re-list; a flavor made while it runs costs one re-list; both read their nodes right.
func TestFlavorsSelectByLabelsTheNodeCacheKeeps(t *testing.T) {
	c := startCluster(t)
	h100 := map[string]string{"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": h100Product, "nvidia.com/gpu.count": "8"}
	nodes := []*corev1.Node{readyNode("h100-a", h100, 8), readyNode("h100-b", h100, 8)}
	nodes[0].Labels["example.com/pool"], nodes[1].Labels["example.com/zone"] = "a", "b"
	if err := testenv.CreateNodes(testContext(t), c.kube, nodes); err != nil {
		t.Fatal(err)
	}
	if err := c.env.InstallKueueCRDs(testContext(t)); err != nil {
		t.Fatal(err)
	}
	c.applyKueue(t, testenv.KueueResourceFlavor("pool-a", map[string]string{"example.com/pool": "a"}),
		testenv.KueueClusterQueue{Name: "team-a", Quotas: []testenv.KueueQuota{{Flavor: "pool-a", Resource: gpuResource, Nominal: "8"}}}.Object())
	op := startOperator(t, c.env.Config, testOptions())
	c.waitInventory(t, "pool-a's node read at start", func(gi *homelabv1.GpuInventory) error {
		q := gi.Status.Quota
		if row, ok := queueRow(q, "team-a", gpuResource); q == nil || !ok || row.Capacity != 8 || row.Finding != "" || q.StrandedNodes != 1 {
			return fmt.Errorf("status.quota = %+v; want team-a's 8 GPUs on h100-a, h100-b stranded", q)
		}
		return nil
	})
	if strings.Contains(op.logs(), "Re-listing") {
		t.Errorf("the operator re-listed for a flavor that was there at start:\n%s", op.logs())
	}

	c.applyKueue(t, testenv.KueueResourceFlavor("zone-b", map[string]string{"example.com/zone": "b"}),
		testenv.KueueClusterQueue{Name: "team-b", Quotas: []testenv.KueueQuota{{Flavor: "zone-b", Resource: gpuResource, Nominal: "8"}}}.Object())
	c.waitInventory(t, "zone-b's node read after a re-list", func(gi *homelabv1.GpuInventory) error {
		q := gi.Status.Quota
		if row, ok := queueRow(q, "team-b", gpuResource); q == nil || !ok || row.Capacity != 8 || row.Finding != "" || q.StrandedNodes != 0 {
			return fmt.Errorf("status.quota = %+v; want team-b's 8 GPUs on h100-b, nothing stranded", q)
		}
		return nil
	})
	if n := strings.Count(op.logs(), "Re-listing"); n != 1 {
		t.Errorf("%d re-lists for one new flavor label, want 1", n)
	}
}
