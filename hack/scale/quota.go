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

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/youngju-dev/gpu-inventory-operator/hack/scale/proc"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

const (
	quotaWorkers   = 32          // parallel writes of Kueue's objects
	quotaQuietFor  = time.Minute // the quiet period whose status writes are counted
	quotaManager   = "kueue"     // field manager of the ClusterQueue statuses written here
	quotaZoneLabel = "topology.kubernetes.io/zone"
)

// quotaModel is one GPU model of the fleet as quota names it: the product label its flavors
// select, the resource its quota is given in and the units of that resource on one node.
type quotaModel struct {
	product  string
	resource corev1.ResourceName
	unit     int64
}

// quotaModels are the fleet's GFD models; a model without nvidia.com/gpu (MIG mixed) has
// its quota in its first MIG resource.
func quotaModels() []quotaModel {
	var out []quotaModel
	for _, m := range fixtures.GPUModels {
		qm := quotaModel{product: m.Labels["nvidia.com/gpu.product"], resource: "nvidia.com/gpu", unit: m.Capacity}
		if m.Capacity == 0 {
			names := make([]string, 0, len(m.Extra))
			for r := range m.Extra {
				names = append(names, string(r))
			}
			sort.Strings(names)
			q := m.Extra[corev1.ResourceName(names[0])]
			qm.resource, qm.unit = corev1.ResourceName(names[0]), q.Value()
		}
		out = append(out, qm)
	}
	return out
}

// quotaPlan is every Kueue object of the phase, and the usage its ClusterQueue statuses sum to.
type quotaPlan struct {
	flavors, cohorts, queues, localQueues, workloads []*unstructured.Unstructured
	statuses                                         map[string][]byte // ClusterQueue -> status merge patch
	localQueueOf                                     map[string]string // ClusterQueue -> NAMESPACE/NAME of its LocalQueue
	namespaces                                       []string
	cohortNames                                      map[string]bool
	borrowing, lending                               int   // ClusterQueues with such a limit
	reserved, used                                   int64 // GPU units in the statuses
}

// quotaFlavor is the k-th ResourceFlavor: model k%models, then in turn every zone or none
// and a node pool (SR-IOV capable or not, the instance type, or none); past those
// combinations the same selections again under other names, as teams name flavors.
func quotaFlavor(k int, models []quotaModel) *unstructured.Unstructured {
	m := models[k%len(models)]
	v := k / len(models)
	sel := map[string]string{"nvidia.com/gpu.product": m.product}
	if zone := v % 4; zone < 3 {
		sel[quotaZoneLabel] = fmt.Sprintf("us-east-1%c", 'a'+rune(zone))
	}
	switch v / 4 % 4 {
	case 1:
		sel["feature.node.kubernetes.io/network-sriov.capable"] = "true"
	case 2:
		sel["feature.node.kubernetes.io/network-sriov.capable"] = "false"
	case 3:
		sel["node.kubernetes.io/instance-type"] = "p5.48xlarge"
	}
	return testenv.KueueResourceFlavor(fmt.Sprintf("flavor-%03d", k), sel)
}

// planQuota builds the phase's objects: flavors ResourceFlavors; queues ClusterQueues, each
// with quota for its model's resource (and CPU and memory) in two flavors of that model, nine
// in ten in a cohort of about ten queues of one model, every third with a borrowingLimit and
// every third another with a lendingLimit; a Cohort object for every fourth cohort under one
// organisation Cohort per model, every eighth with quota of its own; a LocalQueue per
// ClusterQueue, ten to a namespace; workloads Workloads spread over the LocalQueues.
func planQuota(queues, flavors, workloads int) *quotaPlan {
	models := quotaModels()
	p := &quotaPlan{statuses: map[string][]byte{}, localQueueOf: map[string]string{}, cohortNames: map[string]bool{}}
	for k := range flavors {
		p.flavors = append(p.flavors, quotaFlavor(k, models))
	}
	cohorts := max(1, queues/10)
	perModel := max(1, flavors/len(models))
	for i := range queues {
		m := models[i%len(models)]
		slot := i / len(models)
		names := []string{fmt.Sprintf("flavor-%03d", i%len(models)+len(models)*(slot%perModel))}
		if perModel > 1 {
			names = append(names, fmt.Sprintf("flavor-%03d", i%len(models)+len(models)*((slot+max(1, perModel/2))%perModel)))
		}
		cq := testenv.KueueClusterQueue{Name: fmt.Sprintf("cq-%04d", i)}
		if i%10 != 9 {
			cq.Cohort = fmt.Sprintf("cohort-%03d", i%cohorts)
			p.cohortNames[cq.Cohort] = true
		}
		nominal := max(1, m.unit*int64(1+i%3)/2)
		for j, f := range names {
			q := testenv.KueueQuota{Flavor: f, Resource: string(m.resource), Nominal: fmt.Sprint(nominal)}
			switch {
			case j == 0 && i%3 == 1 && cq.Cohort != "":
				q.BorrowingLimit, p.borrowing = fmt.Sprint(max(1, m.unit/2)), p.borrowing+1
			case j == 0 && i%3 == 2 && cq.Cohort != "":
				q.LendingLimit, p.lending = fmt.Sprint(nominal/2), p.lending+1
			}
			cq.Quotas = append(cq.Quotas, q,
				testenv.KueueQuota{Flavor: f, Resource: "cpu", Nominal: "256"},
				testenv.KueueQuota{Flavor: f, Resource: "memory", Nominal: "2Ti"})
		}
		p.queues = append(p.queues, cq.Object())
		p.statuses[cq.Name] = p.queueStatus(i, m, names)
		ns, lq := fmt.Sprintf("team-%03d", i/10), fmt.Sprintf("lq-%04d", i)
		if i%10 == 0 {
			p.namespaces = append(p.namespaces, ns)
		}
		p.localQueues = append(p.localQueues, testenv.KueueLocalQueue(ns, lq, cq.Name))
		p.localQueueOf[cq.Name] = ns + "/" + lq
	}
	p.cohorts = cohortObjects(cohorts, models)
	for w := range workloads {
		lq := p.localQueues[w%len(p.localQueues)]
		p.workloads = append(p.workloads, quotaWorkload(lq.GetNamespace(), fmt.Sprintf("wl-%05d", w), lq.GetName(), models[(w%len(p.localQueues))%len(models)].resource))
	}
	return p
}

// queueStatus is the status Kueue would write for the i-th ClusterQueue of model m with
// flavors: part of its first flavor's nominal quota reserved and used, workloads pending.
func (p *quotaPlan) queueStatus(i int, m quotaModel, flavors []string) []byte {
	reserved := m.unit * int64(i%4) / 4
	used := reserved
	if i%2 == 1 {
		used = reserved / 2
	}
	p.reserved += reserved
	p.used += used
	usage := func(first int64) []any {
		var out []any
		for j, f := range flavors {
			total := int64(0)
			if j == 0 {
				total = first
			}
			out = append(out, map[string]any{"name": f, "resources": []any{
				map[string]any{"name": string(m.resource), "total": fmt.Sprint(total), "borrowed": "0"},
				map[string]any{"name": "cpu", "total": fmt.Sprint(4 * total), "borrowed": "0"},
				map[string]any{"name": "memory", "total": fmt.Sprintf("%dGi", 32*total), "borrowed": "0"},
			}})
		}
		return out
	}
	status := map[string]any{"status": map[string]any{
		"flavorsReservation": usage(reserved), "flavorsUsage": usage(used),
		"pendingWorkloads": 10 - i%4, "reservingWorkloads": i % 4, "admittedWorkloads": i % 4,
	}}
	data, _ := json.Marshal(status)
	return data
}

// cohortObjects are a Cohort for every fourth of cohorts, under an organisation Cohort per
// model (its cohorts' queues are of that model), every eighth with quota of its own.
func cohortObjects(cohorts int, models []quotaModel) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for o := range models {
		out = append(out, testenv.KueueClusterQueue{Name: fmt.Sprintf("org-%d", o)}.CohortObject())
	}
	for c := 0; c < cohorts; c += 4 {
		m := models[c%len(models)]
		obj := testenv.KueueClusterQueue{Name: fmt.Sprintf("cohort-%03d", c), Cohort: fmt.Sprintf("org-%d", c%len(models))}
		if c%8 == 0 {
			obj.Quotas = []testenv.KueueQuota{{Flavor: fmt.Sprintf("flavor-%03d", c%len(models)), Resource: string(m.resource), Nominal: fmt.Sprint(m.unit)}}
		}
		out = append(out, obj.CohortObject())
	}
	return out
}

// quotaWorkload is a minimal valid Workload of LocalQueue queue: one pod of one container
// asking for one unit of resource.
func quotaWorkload(namespace, name, queue string, resource corev1.ResourceName) *unstructured.Unstructured {
	requests := map[string]any{string(resource): "1", "cpu": "4", "memory": "32Gi"}
	pod := map[string]any{"restartPolicy": "Never", "containers": []any{map[string]any{
		"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": map[string]any{"requests": requests, "limits": requests}}}}
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"queueName": queue,
		"podSets":   []any{map[string]any{"name": "main", "count": int64(1), "template": map[string]any{"spec": pod}}},
	}}}
	obj.SetAPIVersion(testenv.KueueGroup + "/" + testenv.KueueVersion)
	obj.SetKind("Workload")
	obj.SetNamespace(namespace)
	obj.SetName(name)
	return obj
}

// quotaSize counts the plan's objects.
type quotaSize struct {
	flavors, queues, cohortNames, borrowing, lending, cohorts, localQueues, namespaces, workloads int
}

func (p *quotaPlan) size() quotaSize {
	return quotaSize{flavors: len(p.flavors), queues: len(p.queues), cohortNames: len(p.cohortNames), borrowing: p.borrowing, lending: p.lending,
		cohorts: len(p.cohorts), localQueues: len(p.localQueues), namespaces: len(p.namespaces), workloads: len(p.workloads)}
}

// quotaResult is what the quota phase measured.
type quotaResult struct {
	plan                               quotaSize
	created, firstQuota, workloadsTook time.Duration
	before, live, restarted            proc.Window // steady RSS without Kueue, with it, after a restart with it
	splits                             [3]memSplit // where the RSS goes at the end of each of those windows
	quietWrites                        int
	quietRecords                       writeCounts
	restartFirst, restartComplete      time.Duration // to the first status with quota; to the first complete one
	quota                              *homelabv1.GpuQuota
	conditions                         []metav1.Condition
	statusBytes                        int
	show, queue                        pluginResults
	queueArg                           string
}

// quotaPhase installs Kueue's CRDs on the running cluster, creates the plan's objects and
// writes the ClusterQueues' status through the status subresource as Kueue would (the test
// bed runs no Kueue controller here), and measures the operator's steady RSS without and
// with them, its quiet status writes, its first status with quota after a restart, and
// `kubectl gpuinv quota`. Then it removes Kueue.
func quotaPhase(ctx context.Context, h *harness) (result, error) {
	env := h.env
	plan := planQuota(h.o.quotaQueues, h.o.quotaFlavors, h.o.quotaWorkloads)
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS = -1
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	res := &quotaResult{plan: plan.size()}
	// The baseline: a restarted operator without Kueue, measured as the quiet phase is.
	if _, _, err := restartOperator(ctx, h, "quota phase, without Kueue"); err != nil {
		return nil, err
	}
	h.op.pid.SettleCPU(15 * time.Second)
	res.before, res.splits[0] = quietWindow(ctx, h.op)
	h.prof.heap("quota-before-heap.pprof")
	fmt.Fprintf(os.Stderr, "quota: steady RSS without Kueue %s; installing Kueue's CRDs\n", res.before)

	if err := env.InstallKueueCRDs(ctx); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := createKueue(ctx, h, dyn, plan); err != nil {
		return nil, err
	}
	res.created = time.Since(start)
	last := time.Now()
	if err := watchInventory(ctx, h.watcher, homelabv1.DefaultInventoryName, 3*time.Minute, plan.shown); err != nil {
		return nil, fmt.Errorf("status.quota with every ClusterQueue and its usage: %w", err)
	}
	res.firstQuota = time.Since(last)
	start = time.Now()
	if err := createAll(ctx, dyn, testenv.WorkloadsResource, plan.workloads); err != nil {
		return nil, err
	}
	res.workloadsTook = time.Since(start)
	fmt.Fprintf(os.Stderr, "quota: Kueue's objects in %s, status.quota %s after the last, %d Workloads in %s\n",
		res.created.Round(100*time.Millisecond), res.firstQuota.Round(time.Millisecond), len(plan.workloads), res.workloadsTook.Round(100*time.Millisecond))

	if err := measureQuotaSteady(ctx, h, plan, res); err != nil {
		return nil, err
	}
	return res, removeKueue(ctx, h, env, dyn, plan)
}

// measureQuotaSteady measures the operator with Kueue in place: RSS once settled, a quiet
// minute's writes, the plugin, and a restart.
func measureQuotaSteady(ctx context.Context, h *harness, plan *quotaPlan, res *quotaResult) error {
	if err := settle(ctx, h.watcher, homelabv1.DefaultInventoryName, 5*time.Second, 2*time.Minute); err != nil {
		return err
	}
	h.op.pid.SettleCPU(30 * time.Second)

	quiet, stop := context.WithCancel(ctx)
	writes, err := countStatusWrites(quiet, h)
	if err != nil {
		stop()
		return err
	}
	res.quietRecords, err = countWrites(h.op, func() error {
		res.live, res.splits[1] = quietWindow(ctx, h.op) // a quiet period: no change is expected to watch for
		return nil
	})
	res.quietWrites = writes.count()
	stop()
	if err != nil {
		return err
	}

	gi, err := h.watcher.HomelabV1().GpuInventories().Get(ctx, homelabv1.DefaultInventoryName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	res.quota, res.conditions = gi.Status.Quota, gi.Status.Conditions
	if _, res.statusBytes, err = inventorySize(ctx, h.gpu); err != nil {
		return err
	}
	if o := h.o; o.plugin != "" && o.pluginRuns > 0 {
		if res.show, err = measurePlugin(h.env.Dir, o.plugin, h.env.KubeconfigPath(), o.pluginRuns, "quota"); err != nil {
			return err
		}
		if res.quota != nil && len(res.quota.Queues) > 0 {
			res.queueArg = plan.localQueueOf[res.quota.Queues[0].Name]
			if res.queue, err = measurePlugin(h.env.Dir, o.plugin, h.env.KubeconfigPath(), o.pluginRuns, "quota", "--queue", res.queueArg); err != nil {
				return err
			}
		}
	}

	// done is asked only of complete statuses: the first call is the first complete status.
	done := func(gi *homelabv1.GpuInventory) bool {
		if res.restartComplete == 0 {
			res.restartComplete = time.Since(h.op.started)
		}
		return plan.shown(gi)
	}
	if res.restartFirst, _, err = restartOperatorUntil(ctx, h, "quota phase, with Kueue", done); err != nil {
		return err
	}
	h.op.pid.SettleCPU(15 * time.Second)
	res.restarted, res.splits[2] = quietWindow(ctx, h.op)
	h.prof.heap("quota-heap.pprof")
	return nil
}

// quietWindow samples the operator's RSS over quotaQuietFor, and where its memory goes at
// the end.
func quietWindow(ctx context.Context, op *operatorProc) (proc.Window, memSplit) {
	w := op.pid.Window(ctx, quotaQuietFor)
	return w, readMemSplit(op)
}

// shown says whether an inventory's status.quota counts every ClusterQueue of the plan and
// the usage their statuses sum to.
func (p *quotaPlan) shown(gi *homelabv1.GpuInventory) bool {
	q := gi.Status.Quota
	if q == nil || int(q.ClusterQueues) != len(p.queues) {
		return false
	}
	var reserved, used int64
	for _, m := range q.Models {
		if m.Source == homelabv1.QuotaSourceKueue {
			reserved, used = reserved+m.Reserved, used+m.Used
		}
	}
	return reserved == p.reserved && used == p.used
}

// createKueue creates the plan's flavors, Cohorts, ClusterQueues, namespaces and
// LocalQueues, and writes the ClusterQueues' status.
func createKueue(ctx context.Context, h *harness, dyn dynamic.Interface, p *quotaPlan) error {
	for _, ns := range p.namespaces {
		_, err := h.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	for _, step := range []struct {
		gvr  schema.GroupVersionResource
		objs []*unstructured.Unstructured
	}{
		{testenv.ResourceFlavorsResource, p.flavors}, {testenv.CohortsResource, p.cohorts},
		{testenv.ClusterQueuesResource, p.queues}, {testenv.LocalQueuesResource, p.localQueues},
	} {
		if err := createAll(ctx, dyn, step.gvr, step.objs); err != nil {
			return err
		}
	}
	var writes []func() error
	for name, patch := range p.statuses {
		writes = append(writes, func() error {
			_, err := dyn.Resource(testenv.ClusterQueuesResource).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: quotaManager}, "status")
			if err != nil {
				return fmt.Errorf("write the status of ClusterQueue %s: %w", name, err)
			}
			return nil
		})
	}
	return inParallel(quotaWorkers, writes)
}

// createAll creates objs of gvr, quotaWorkers at a time.
func createAll(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, objs []*unstructured.Unstructured) error {
	fns := make([]func() error, len(objs))
	for i, obj := range objs {
		fns[i] = func() error {
			_, err := dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{FieldManager: quotaManager})
			if err != nil {
				return fmt.Errorf("create %s %s: %w", gvr.Resource, obj.GetName(), err)
			}
			return nil
		}
	}
	return inParallel(quotaWorkers, fns)
}

// removeKueue deletes the Workloads by namespace, then Kueue's objects and CRDs, and waits
// until the inventory no longer shows Kueue.
func removeKueue(ctx context.Context, h *harness, env *testenv.Env, dyn dynamic.Interface, p *quotaPlan) error {
	for _, ns := range p.namespaces {
		err := dyn.Resource(testenv.WorkloadsResource).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		if err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			return fmt.Errorf("delete the Workloads of %s: %w", ns, err)
		}
	}
	if err := env.UninstallKueueCRDs(ctx); err != nil {
		return err
	}
	return watchInventory(ctx, h.watcher, homelabv1.DefaultInventoryName, 2*time.Minute, func(gi *homelabv1.GpuInventory) bool {
		return gi.Status.Quota == nil || gi.Status.Quota.Kueue == ""
	})
}

// memSplit is where an operator's RSS goes, in MiB: Go's heap spans in use and the objects
// in them (live and not yet swept), heap pages free but not returned to the system,
// goroutine stacks, and mapped files (the binary).
type memSplit struct{ rss, heapInuse, heapAlloc, idleKept, stacks, file float64 }

// readMemSplit reads the operator's memory from /proc and its /metrics (zero where the
// metrics cannot be read).
func readMemSplit(op *operatorProc) memSplit {
	s := memSplit{rss: op.pid.RSS() / 1024, file: op.pid.KiB("RssFile") / 1024}
	series, _ := scrape("http://" + op.metrics + "/metrics")
	mib := func(name string) float64 { return series[name] / (1 << 20) }
	s.heapInuse, s.heapAlloc, s.stacks = mib("go_memstats_heap_inuse_bytes"), mib("go_memstats_heap_alloc_bytes"), mib("go_memstats_stack_inuse_bytes")
	s.idleKept = mib("go_memstats_heap_idle_bytes") - mib("go_memstats_heap_released_bytes")
	return s
}
