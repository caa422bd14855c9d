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
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
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

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// The quota phase's size (main's flags): --quota-queues 0 skips it.
var (
	quotaQueues    int
	quotaFlavors   int
	quotaWorkloads int
)

const (
	quotaWorkers   = 32          // parallel writes of Kueue's objects
	quotaQuietFor  = time.Minute // the quiet period whose status writes are counted
	quotaBudgetKiB = 8 * 1024    // what Kueue's objects may add to the steady RSS
	quotaPlugin    = 500 * time.Millisecond
	quotaManager   = "kueue" // field manager of the ClusterQueue statuses written here
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

// quotaResult is what the quota phase measured.
type quotaResult struct {
	created, firstQuota, workloadsTook time.Duration
	before, live, restarted            rssWindow // steady RSS without Kueue, with it, after a restart with it
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
// `kubectl gpuinv quota`. It prints its table, then removes Kueue.
func quotaPhase(ctx context.Context, h *harness, env *testenv.Env) error {
	plan := planQuota(quotaQueues, quotaFlavors, quotaWorkloads)
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS = -1
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	res := &quotaResult{}
	// The baseline: a restarted operator without Kueue, measured as the quiet phase is.
	if _, _, err := restartOperator(ctx, h, "quota phase, without Kueue"); err != nil {
		return err
	}
	settleCPU(h.op.pid, 15*time.Second)
	res.before = rssOver(h.op, quotaQuietFor)
	fetchProfile(pprofAddr, "/debug/pprof/heap", "quota-before-heap.pprof")
	fmt.Fprintf(os.Stderr, "quota: steady RSS without Kueue %s; installing Kueue's CRDs\n", res.before)

	if err := env.InstallKueueCRDs(ctx); err != nil {
		return err
	}
	start := time.Now()
	if err := createKueue(ctx, h, dyn, plan); err != nil {
		return err
	}
	res.created = time.Since(start)
	last := time.Now()
	if err := watchInventory(ctx, h.watcher, homelabv1.DefaultInventoryName, 3*time.Minute, plan.shown); err != nil {
		return fmt.Errorf("status.quota with every ClusterQueue and its usage: %w", err)
	}
	res.firstQuota = time.Since(last)
	start = time.Now()
	if err := createAll(ctx, dyn, testenv.WorkloadsResource, plan.workloads); err != nil {
		return err
	}
	res.workloadsTook = time.Since(start)
	fmt.Fprintf(os.Stderr, "quota: Kueue's objects in %s, status.quota %s after the last, %d Workloads in %s\n",
		res.created.Round(100*time.Millisecond), res.firstQuota.Round(time.Millisecond), len(plan.workloads), res.workloadsTook.Round(100*time.Millisecond))

	if err := measureQuotaSteady(ctx, h, env, plan, res); err != nil {
		return err
	}
	printQuota(plan, res)
	return removeKueue(ctx, h, env, dyn, plan)
}

// measureQuotaSteady measures the operator with Kueue in place: RSS once settled, a quiet
// minute's writes, the plugin, and a restart.
func measureQuotaSteady(ctx context.Context, h *harness, env *testenv.Env, plan *quotaPlan, res *quotaResult) error {
	if err := settle(ctx, h.watcher, homelabv1.DefaultInventoryName, 5*time.Second, 2*time.Minute); err != nil {
		return err
	}
	settleCPU(h.op.pid, 30*time.Second)

	quiet, stop := context.WithCancel(ctx)
	writes, err := countStatusWrites(quiet, h)
	if err != nil {
		stop()
		return err
	}
	res.quietRecords, err = countWrites(h.op, func() error {
		res.live = rssOver(h.op, quotaQuietFor) // a quiet period: no change is expected to watch for
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
	if _, res.statusBytes, err = statusSize(ctx, h.gpu); err != nil {
		return err
	}
	if pluginBinary != "" && pluginRuns > 0 {
		if res.show, err = measurePlugin(env.Dir, pluginBinary, env.KubeconfigPath(), pluginRuns, "quota"); err != nil {
			return err
		}
		if res.quota != nil && len(res.quota.Queues) > 0 {
			res.queueArg = plan.localQueueOf[res.quota.Queues[0].Name]
			if res.queue, err = measurePlugin(env.Dir, pluginBinary, env.KubeconfigPath(), pluginRuns, "quota", "--queue", res.queueArg); err != nil {
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
	settleCPU(h.op.pid, 15*time.Second)
	res.restarted = rssOver(h.op, quotaQuietFor)
	fetchProfile(pprofAddr, "/debug/pprof/heap", "quota-heap.pprof")
	return nil
}

// rssWindow is VmRSS sampled once a second over a quiet window (KiB), and where the memory
// goes at its end.
type rssWindow struct {
	median, low, high float64
	split             memSplit
}

func (w rssWindow) String() string {
	return fmt.Sprintf("%.1f MiB (%.1f–%.1f)", w.median/1024, w.low/1024, w.high/1024)
}

// rssOver samples the operator's VmRSS once a second for d. With nothing changing, the
// garbage of the operator's periodic resyncs still comes and goes between collections: one
// reading can sit anywhere in that cycle, the median of a minute does not.
func rssOver(op *operatorProc, d time.Duration) rssWindow {
	var samples []float64
	for end := time.Now().Add(d); time.Now().Before(end); {
		samples = append(samples, readStatus(op.pid, "VmRSS"))
		time.Sleep(time.Second) // sampling a process that announces nothing
	}
	slices.Sort(samples)
	return rssWindow{median: samples[len(samples)/2], low: samples[0], high: samples[len(samples)-1], split: readMemSplit(op)}
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

// printQuota prints the quota phase's table.
func printQuota(p *quotaPlan, r *quotaResult) {
	mib := func(kib float64) float64 { return kib / 1024 }
	fmt.Printf("\nQuota: Kueue's CRDs installed while the operator runs; ClusterQueue status written by the harness through the status subresource, as Kueue would (no Kueue controller runs)\n\n")
	fmt.Println("| figure | measured | target |")
	fmt.Println("|---|---|---|")
	fmt.Printf("| Kueue's objects: %d ResourceFlavors, %d ClusterQueues (%d cohorts, %d with a borrowingLimit, %d with a lendingLimit), %d Cohort objects, %d LocalQueues in %d namespaces, each queue's status | created in %.1f s | |\n",
		len(p.flavors), len(p.queues), len(p.cohortNames), p.borrowing, p.lending, len(p.cohorts), len(p.localQueues), len(p.namespaces), r.created.Seconds())
	fmt.Printf("| last write to a status.quota counting every ClusterQueue and its usage (live, no restart) | %.2f s | |\n", r.firstQuota.Seconds())
	fmt.Printf("| %d Workloads (%d writers; the operator reads none) | created in %.1f s, %.0f/s | |\n",
		len(p.workloads), quotaWorkers, r.workloadsTook.Seconds(), float64(len(p.workloads))/r.workloadsTook.Seconds())
	fmt.Printf("| steady RSS without Kueue, after a restart (median of %s, range) | %s | |\n", quotaQuietFor, r.before)
	fmt.Printf("| steady RSS with Kueue picked up live, over the quiet minute | %s: %+.1f MiB | ≤ +8 MiB: %s |\n",
		r.live, mib(r.live.median-r.before.median), verdict(r.live.median-r.before.median <= quotaBudgetKiB))
	fmt.Printf("| steady RSS after a restart with Kueue in place (median of %s, range) | %s: %+.1f MiB | ≤ +8 MiB: %s |\n",
		quotaQuietFor, r.restarted, mib(r.restarted.median-r.before.median), verdict(r.restarted.median-r.before.median <= quotaBudgetKiB))
	fmt.Printf("| restart with Kueue in place: start to first complete status / to the first with every ClusterQueue and its usage | %.2f s / %.2f s | |\n", r.restartComplete.Seconds(), r.restartFirst.Seconds())
	fmt.Printf("| status writes while quiet (%s, Kueue in place) | %d (record writes %d) | 0: %s |\n",
		quotaQuietFor, r.quietWrites, r.quietRecords.writes(), verdict(r.quietWrites == 0 && r.quietRecords.writes() == 0))
	fmt.Printf("| status size with quota | %.0f KiB | ≤ 256 KiB: %s |\n", float64(r.statusBytes)/1024, verdict(r.statusBytes <= 256*1024))
	if len(r.show) > 0 {
		fmt.Printf("| `kubectl gpuinv quota` (%d runs: median wall time (range); max RSS median (range)) | %s, CPU %s | %s | ≤ 0.5 s: %s |\n",
			len(r.show), r.show.wall(), r.show.cpu(), rssSpread(r.show), verdict(r.show.medianWall() <= quotaPlugin))
	}
	if len(r.queue) > 0 {
		fmt.Printf("| `kubectl gpuinv quota --queue %s` (reads the LocalQueue too) | %s, CPU %s | %s | ≤ 0.5 s: %s |\n",
			r.queueArg, r.queue.wall(), r.queue.cpu(), rssSpread(r.queue), verdict(r.queue.medianWall() <= quotaPlugin))
	}
	if q := r.quota; q != nil {
		var found []string
		for _, c := range r.conditions {
			if slices.Contains([]string{homelabv1.ConditionQuotaOvercommitted, homelabv1.ConditionQuotaStranded, homelabv1.ConditionQuotaUnknown}, c.Type) {
				found = append(found, fmt.Sprintf("%s=%s", c.Type, c.Status))
			}
		}
		fmt.Printf("\nwhere the RSS goes at the end of each window (MiB, without Kueue / live / after the restart): %s\n", splitRows(r.before.split, r.live.split, r.restarted.split))
		fmt.Printf("status.quota: Kueue %s, %d ClusterQueues, %d cohorts, %d stranded Ready nodes (the DRA nodes: no flavor selects them), %d model rows, %d cohort rows, %d queue rows; %v\n",
			q.Kueue, q.ClusterQueues, q.Cohorts, q.StrandedNodes, len(q.Models), len(q.CohortModels), len(q.Queues), found)
	}
}

// rssSpread is the median of the runs' max RSS and its range.
func rssSpread(r pluginResults) string {
	kib := make([]float64, len(r))
	for i := range r {
		kib[i] = float64(r[i].MaxRSSKiB)
	}
	slices.Sort(kib)
	return fmt.Sprintf("%.0f MiB (%.0f–%.0f)", kib[len(kib)/2]/1024, kib[0]/1024, kib[len(kib)-1]/1024)
}

// memSplit is where an operator's RSS goes, in MiB: Go's heap spans in use and the objects
// in them (live and not yet swept), heap pages free but not returned to the system,
// goroutine stacks, and mapped files (the binary).
type memSplit struct{ rss, heapInuse, heapAlloc, idleKept, stacks, file float64 }

// readMemSplit reads the operator's memory from /proc and its /metrics (zero where the
// metrics cannot be read).
func readMemSplit(op *operatorProc) memSplit {
	s := memSplit{rss: readStatus(op.pid, "VmRSS") / 1024, file: readStatus(op.pid, "RssFile") / 1024}
	gauges := scrapeGo(op)
	mib := func(name string) float64 { return gauges[name] / (1 << 20) }
	s.heapInuse, s.heapAlloc, s.stacks = mib("go_memstats_heap_inuse_bytes"), mib("go_memstats_heap_alloc_bytes"), mib("go_memstats_stack_inuse_bytes")
	s.idleKept = mib("go_memstats_heap_idle_bytes") - mib("go_memstats_heap_released_bytes")
	return s
}

// scrapeGo reads the Go runtime's series without labels from the operator's /metrics (none
// when it cannot be read).
func scrapeGo(op *operatorProc) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get("http://" + op.metrics + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if name, value, ok := strings.Cut(sc.Text(), " "); ok && strings.HasPrefix(name, "go_") {
			out[name], _ = strconv.ParseFloat(value, 64)
		}
	}
	return out
}

// splitRows prints memory splits side by side.
func splitRows(splits ...memSplit) string {
	row := func(name string, v func(memSplit) float64) string {
		parts := make([]string, len(splits))
		for i, s := range splits {
			parts[i] = fmt.Sprintf("%.1f", v(s))
		}
		return name + " " + strings.Join(parts, " / ")
	}
	return strings.Join([]string{
		row("RSS", func(s memSplit) float64 { return s.rss }),
		row("heap spans in use", func(s memSplit) float64 { return s.heapInuse }),
		row("heap objects", func(s memSplit) float64 { return s.heapAlloc }),
		row("free heap kept", func(s memSplit) float64 { return s.idleKept }),
		row("stacks", func(s memSplit) float64 { return s.stacks }),
		row("mapped files", func(s memSplit) float64 { return s.file }),
	}, "; ")
}
