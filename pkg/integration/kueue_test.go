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
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// gpuResource is the resource GPU quotas and jobs in the Kueue tests count.
const gpuResource = "nvidia.com/gpu"

// startKueueCluster is startCluster with pods scheduled and run (kube-scheduler, kwok, the
// Job controller) and Kueue's own controller (testenv.Env.StartSchedulingWithKueue). A failed
// test logs the end of Kueue's log.
func startKueueCluster(t *testing.T) *cluster {
	t.Helper()
	c := startCluster(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of Kueue's log:\n%s", c.env.KueueLogTail())
		}
	})
	start := time.Now()
	if err := c.env.StartSchedulingWithKueue(testContext(t), testenv.KueueOptions{}); err != nil {
		t.Fatalf("start scheduling with Kueue: %v", err)
	}
	t.Logf("scheduling and Kueue ready in %s", time.Since(start).Round(10*time.Millisecond))
	return c
}

// gfdNode is a kwok node with gpus nvidia.com/gpu allocatable and GPU Feature Discovery's
// labels for product; it returns once the node is Ready and schedulable.
func (c *cluster) gfdNode(t *testing.T, name, product string, gpus int64) *corev1.Node {
	t.Helper()
	node := kwokNode(name, corev1.ResourceList{gpuResource: *resource.NewQuantity(gpus, resource.DecimalSI)})
	for k, v := range map[string]string{"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product,
		"nvidia.com/gpu.count": strconv.FormatInt(gpus, 10), "nvidia.com/gpu.memory": "81559"} {
		node.Labels[k] = v
	}
	if _, err := c.kube.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
	return c.waitSchedulable(t, name)
}

// applyKueue server-side applies Kueue objects (testenv.KueueResourceFlavor, ...).
func (c *cluster) applyKueue(t *testing.T, objs ...*unstructured.Unstructured) {
	t.Helper()
	if _, err := testenv.ApplyObjects(context.Background(), c.env.Config, "kueue-test", objs); err != nil {
		t.Fatalf("apply Kueue objects: %v", err)
	}
}

// createFlavor creates a ResourceFlavor that selects the nodes carrying nodeLabels.
func (c *cluster) createFlavor(t *testing.T, name string, nodeLabels map[string]string) {
	t.Helper()
	c.applyKueue(t, testenv.KueueResourceFlavor(name, nodeLabels))
}

// createClusterQueue creates a ClusterQueue (cohort, quotas with borrowing and lending
// limits) and waits until Kueue marks it Active, which it does once its flavors exist.
func (c *cluster) createClusterQueue(t *testing.T, q testenv.KueueClusterQueue) *unstructured.Unstructured {
	t.Helper()
	c.applyKueue(t, q.Object())
	return c.waitClusterQueue(t, q.Name, "Active", func(cq *unstructured.Unstructured) bool {
		return testenv.KueueConditionTrue(cq, "Active")
	})
}

// createLocalQueue creates namespace (unless it exists) and a LocalQueue in it that sends
// its workloads to clusterQueue.
func (c *cluster) createLocalQueue(t *testing.T, namespace, name, clusterQueue string) {
	t.Helper()
	c.ensureNamespace(t, namespace)
	c.applyKueue(t, testenv.KueueLocalQueue(namespace, name, clusterQueue))
}

// createQueuedJob creates a suspended Job in LocalQueue queue: pods pods at once, each
// asking gpusPerPod nvidia.com/gpu.
func (c *cluster) createQueuedJob(t *testing.T, namespace, name, queue string, pods int32, gpusPerPod int64) *batchv1.Job {
	t.Helper()
	job := testenv.KueueJob(namespace, name, queue, pods, corev1.ResourceList{gpuResource: *resource.NewQuantity(gpusPerPod, resource.DecimalSI)})
	created, err := c.kube.BatchV1().Jobs(namespace).Create(context.Background(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Job %s/%s: %v", namespace, name, err)
	}
	return created
}

// waitKueue follows one Kueue object until cond accepts it, for at most 30 seconds.
func (c *cluster) waitKueue(t *testing.T, gvr schema.GroupVersionResource, namespace, name, what string, cond func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	obj, err := testenv.WaitObject(ctx, c.env.Config, gvr, namespace, name, func(o *unstructured.Unstructured) bool { return o != nil && cond(o) })
	if err != nil {
		t.Fatalf("%s %s: not %s: %v", gvr.Resource, name, what, err)
	}
	return obj
}

// waitClusterQueue follows ClusterQueue name until cond accepts it.
func (c *cluster) waitClusterQueue(t *testing.T, name, what string, cond func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	return c.waitKueue(t, testenv.ClusterQueuesResource, "", name, what, cond)
}

// waitReservation waits until ClusterQueue name's status.flavorsReservation counts want of
// resource on flavor, and returns the ClusterQueue.
func (c *cluster) waitReservation(t *testing.T, name, flavor, res string, want int64) *unstructured.Unstructured {
	t.Helper()
	return c.waitClusterQueue(t, name, fmt.Sprintf("reserving %d %s of flavor %s", want, res, flavor), func(cq *unstructured.Unstructured) bool {
		total := testenv.KueueFlavorTotal(cq, "flavorsReservation", flavor, res)
		return total.Value() == want
	})
}

// waitWorkload waits until Kueue's Workload of job satisfies cond, and returns it.
func (c *cluster) waitWorkload(t *testing.T, job *batchv1.Job, what string, cond func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	client := dynamic.NewForConfigOrDie(c.env.Config).Resource(testenv.WorkloadsResource).Namespace(job.Namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return client.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return client.Watch(ctx, opts)
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last *unstructured.Unstructured
	_, err := watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
		wl, ok := ev.Object.(*unstructured.Unstructured)
		if !ok || ev.Type == watch.Deleted || !ownedBy(wl, job) {
			return false, nil
		}
		last = wl
		return cond(wl), nil
	})
	if err != nil {
		t.Fatalf("Workload of Job %s/%s not %s: %v; last seen: %v", job.Namespace, job.Name, what, err, last)
	}
	return last
}

func ownedBy(obj *unstructured.Unstructured, job *batchv1.Job) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == job.UID {
			return true
		}
	}
	return false
}

// waitJobPodsRunning waits until n pods of job are bound and Running, and returns them.
func (c *cluster) waitJobPodsRunning(t *testing.T, job *batchv1.Job, n int) []*corev1.Pod {
	t.Helper()
	selector := labels.Set{batchv1.JobNameLabel: job.Name}.AsSelector().String()
	lw := cache.NewFilteredListWatchFromClient(c.kube.CoreV1().RESTClient(), "pods", job.Namespace,
		func(opts *metav1.ListOptions) { opts.LabelSelector = selector })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	running := map[string]*corev1.Pod{}
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, nil, func(ev watch.Event) (bool, error) {
		pod, ok := ev.Object.(*corev1.Pod)
		if !ok {
			return false, nil
		}
		delete(running, pod.Name)
		if ev.Type != watch.Deleted && pod.Spec.NodeName != "" && pod.Status.Phase == corev1.PodRunning {
			running[pod.Name] = pod
		}
		return len(running) == n, nil
	})
	if err != nil {
		t.Fatalf("%d pods of Job %s/%s Running: %v (running: %d)", n, job.Namespace, job.Name, err, len(running))
	}
	pods := make([]*corev1.Pod, 0, n)
	for _, p := range running {
		pods = append(pods, p)
	}
	return pods
}

// Kueue's own controller admits a suspended Job on a flavor whose nodeLabels select the A100
// nodes: its Workload is admitted, the ClusterQueue reserves its GPUs, and the real scheduler
// runs its pods on A100 nodes only, though an H100 node has room. A Job asking more GPUs than
// the queue's quota stays pending in Kueue, suspended, with no pod.
func TestKueueAdmitsJobOntoFlavorNodes(t *testing.T) {
	c := startKueueCluster(t)
	const a100 = "NVIDIA-A100-SXM4-80GB"
	c.gfdNode(t, "a100-1", a100, 8)
	c.gfdNode(t, "a100-2", a100, 8)
	c.gfdNode(t, "h100-1", "NVIDIA-H100-80GB-HBM3", 8)
	c.createFlavor(t, "a100", map[string]string{"nvidia.com/gpu.product": a100})
	c.createClusterQueue(t, testenv.KueueClusterQueue{Name: "research",
		Quotas: []testenv.KueueQuota{{Flavor: "a100", Resource: gpuResource, Nominal: "12"}}})
	c.createLocalQueue(t, "research", "train", "research")

	job := c.createQueuedJob(t, "research", "llm", "train", 2, 4)
	wl := c.waitWorkload(t, job, "admitted", func(wl *unstructured.Unstructured) bool { return testenv.KueueConditionTrue(wl, "Admitted") })
	if flavors := admittedFlavors(wl, gpuResource); len(flavors) != 1 || flavors[0] != "a100" {
		t.Errorf("Workload admitted with %s on flavors %q, want [a100]", gpuResource, flavors)
	}
	cq := c.waitReservation(t, "research", "a100", gpuResource, 8)
	if n := testenv.KueueCount(cq, "admittedWorkloads"); n != 1 {
		t.Errorf("ClusterQueue research: admittedWorkloads = %d, want 1", n)
	}
	for _, pod := range c.waitJobPodsRunning(t, job, 2) {
		if pod.Spec.NodeName != "a100-1" && pod.Spec.NodeName != "a100-2" {
			t.Errorf("pod %s runs on %s, want an A100 node of flavor a100", pod.Name, pod.Spec.NodeName)
		}
	}

	big := c.createQueuedJob(t, "research", "too-big", "train", 1, 16)
	c.waitClusterQueue(t, "research", "with 1 pending workload", func(cq *unstructured.Unstructured) bool {
		return testenv.KueueCount(cq, "pendingWorkloads") == 1
	})
	c.waitWorkload(t, big, "pending (QuotaReserved False)", func(wl *unstructured.Unstructured) bool {
		return !testenv.KueueConditionTrue(wl, "QuotaReserved") && hasCondition(wl, "QuotaReserved")
	})
	got, err := c.kube.BatchV1().Jobs("research").Get(context.Background(), "too-big", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Suspend == nil || !*got.Spec.Suspend {
		t.Errorf("Job too-big was unsuspended, want it held by Kueue")
	}
	cq = c.waitReservation(t, "research", "a100", gpuResource, 8)
	if n := testenv.KueueCount(cq, "admittedWorkloads"); n != 1 {
		t.Errorf("ClusterQueue research: admittedWorkloads = %d, want 1 (the pending Job admitted?)", n)
	}
}

// Kueue installed on a running cluster is served and picked up: its CRDs alone serve
// ClusterQueues and Cohorts, Kueue's controller started later marks the queue already there
// (in a cohort, with borrowing and lending limits and a MIG flavor) Active, stops cleanly, and removing the CRDs removes the API even though
// Kueue's finalizers were left on its objects.
func TestKueueInstalledAndRemoved(t *testing.T) {
	c := startCluster(t)
	ctx := testContext(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of Kueue's log:\n%s", c.env.KueueLogTail())
		}
	})
	start := time.Now()
	if err := c.env.InstallKueueCRDs(ctx); err != nil {
		t.Fatalf("install Kueue's CRDs: %v", err)
	}
	t.Logf("Kueue's CRDs installed in %s", time.Since(start).Round(10*time.Millisecond))
	c.createFlavor(t, "l4", map[string]string{"nvidia.com/gpu.product": "NVIDIA-L4"})
	c.createFlavor(t, "mig-1g", map[string]string{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"})
	c.applyKueue(t, testenv.KueueClusterQueue{Name: "lab", Quotas: []testenv.KueueQuota{{Flavor: "l4", Resource: gpuResource, Nominal: "2"}}}.CohortObject(),
		testenv.KueueClusterQueue{Name: "inference", Cohort: "lab", Quotas: []testenv.KueueQuota{
			{Flavor: "l4", Resource: gpuResource, Nominal: "4", BorrowingLimit: "2", LendingLimit: "1"},
			{Flavor: "mig-1g", Resource: "nvidia.com/mig-1g.10gb", Nominal: "14"}}}.Object())

	start = time.Now()
	if err := c.env.StartKueue(ctx, testenv.KueueOptions{}); err != nil {
		t.Fatalf("start Kueue: %v", err)
	}
	t.Logf("Kueue ready in %s (CRDs installed already)", time.Since(start).Round(10*time.Millisecond))
	cq := c.waitClusterQueue(t, "inference", "Active", func(cq *unstructured.Unstructured) bool {
		return testenv.KueueConditionTrue(cq, "Active")
	})
	if len(cq.GetFinalizers()) == 0 {
		t.Fatalf("ClusterQueue inference has no finalizer from Kueue; this test removes CRDs with finalizers left")
	}
	start = time.Now()
	if err := c.env.StopKueue(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Kueue stopped in %s", time.Since(start).Round(10*time.Millisecond))

	start = time.Now()
	if err := c.env.UninstallKueueCRDs(ctx); err != nil {
		t.Fatalf("uninstall Kueue's CRDs: %v", err)
	}
	t.Logf("Kueue's CRDs removed in %s", time.Since(start).Round(10*time.Millisecond))
	groups, err := c.kube.Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Groups {
		if g.Name == testenv.KueueGroup {
			t.Errorf("API group %s still served after its CRDs were removed: %v", g.Name, g.Versions)
		}
	}
}

// hasCondition reports whether a Kueue object has a condition of that type, of any status.
func hasCondition(obj *unstructured.Unstructured, conditionType string) bool {
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		if c, ok := c.(map[string]any); ok && c["type"] == conditionType {
			return true
		}
	}
	return false
}

// admittedFlavors are the flavors of res in a Workload's admission, one per pod set.
func admittedFlavors(wl *unstructured.Unstructured, res string) []string {
	var flavors []string
	assignments, _, _ := unstructured.NestedSlice(wl.Object, "status", "admission", "podSetAssignments")
	for _, a := range assignments {
		if a, ok := a.(map[string]any); ok {
			flavor, _, _ := unstructured.NestedString(a, "flavors", res)
			flavors = append(flavors, flavor)
		}
	}
	return flavors
}
