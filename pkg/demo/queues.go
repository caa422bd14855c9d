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
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// The demo's Kueue: one queue of each kind that quota against hardware tells apart.
//   - inference fits its hardware: one L4 of quota on the flavor of l4-1's one L4.
//   - the research cohort is overcommitted: research-a and research-b promise 8 H100s each,
//     and the h100 flavor reaches dgx-h100-1's 8. Kueue admits eval-70b on research-b's
//     quota; its pod waits, as no H100 is free. pretrain-70b asks more than the whole cohort
//     has and waits in Kueue.
//   - the notebooks cohort shares the MIG node: notebooks-a has 4 MIG devices of quota and
//     its 6-pod job borrows 2 of notebooks-b's.
//   - no flavor selects gke-l4-1 (no GPU Feature Discovery labels) or the DRA node: stranded.
const (
	gpuResource        = "nvidia.com/gpu"
	notebooksNamespace = "notebooks"
	kueueFieldManager  = "gpu-inventory-demo"
)

// queueJob is a Job sent to a LocalQueue, and what Kueue does with it.
type queueJob struct {
	namespace, name, localQueue string
	pods                        int32
	gpusPerPod                  int64
	// admitted: Kueue admits it; runs: its pods find room (else they wait in the scheduler).
	admitted, runs bool
}

// localQueue is a namespace's queue into a ClusterQueue.
type localQueue struct{ namespace, name, clusterQueue string }

// kueueFlavors are the ResourceFlavors: one per GFD product the demo's Ready nodes carry.
func kueueFlavors() map[string]map[string]string {
	return map[string]map[string]string{
		"h100":     {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
		"a100-mig": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"},
		"l4":       {"nvidia.com/gpu.product": "NVIDIA-L4"},
	}
}

// clusterQueues are the ClusterQueues; cohorts are implicit (named by the queues).
func clusterQueues() []testenv.KueueClusterQueue {
	quota := func(flavor, nominal string) []testenv.KueueQuota {
		return []testenv.KueueQuota{{Flavor: flavor, Resource: gpuResource, Nominal: nominal}}
	}
	return []testenv.KueueClusterQueue{
		{Name: "inference", Quotas: quota("l4", "1")},
		{Name: "research-a", Cohort: "research", Quotas: quota("h100", "8")},
		{Name: "research-b", Cohort: "research", Quotas: quota("h100", "8")},
		{Name: "notebooks-a", Cohort: "notebooks", Quotas: quota("a100-mig", "4")},
		{Name: "notebooks-b", Cohort: "notebooks", Quotas: quota("a100-mig", "4")},
	}
}

func localQueues() []localQueue {
	return []localQueue{
		{inferenceNamespace, "serving", "inference"},
		{trainingNamespace, "research-a", "research-a"},
		{trainingNamespace, "research-b", "research-b"},
		{notebooksNamespace, "team-a", "notebooks-a"},
		{notebooksNamespace, "team-b", "notebooks-b"},
	}
}

func queueJobs() []queueJob {
	return []queueJob{
		{inferenceNamespace, "l4-batch", "serving", 1, 1, true, true},
		{trainingNamespace, "pretrain-7b", "research-a", 1, 2, true, true},
		{trainingNamespace, "eval-70b", "research-b", 1, 8, true, false},
		{trainingNamespace, "pretrain-70b", "research-a", 3, 8, false, false},
		{notebooksNamespace, "jupyter-a", "team-a", 6, 1, true, true},
	}
}

// kueueObjects are the flavors, ClusterQueues and LocalQueues, in the order they are applied.
func kueueObjects() []*unstructured.Unstructured {
	var objs []*unstructured.Unstructured
	for _, name := range []string{"h100", "a100-mig", "l4"} {
		objs = append(objs, testenv.KueueResourceFlavor(name, kueueFlavors()[name]))
	}
	for _, q := range clusterQueues() {
		objs = append(objs, q.Object())
	}
	for _, lq := range localQueues() {
		objs = append(objs, testenv.KueueLocalQueue(lq.namespace, lq.name, lq.clusterQueue))
	}
	return objs
}

// queueLoad is what the queues' Jobs add to the inventory, and what Kueue reports.
type queueLoad struct {
	runningPods, waitingPods int32
	// reserved and pending are per ClusterQueue: the GPUs Kueue reserves, the workloads it holds.
	reserved map[string]int64
	pending  map[string]int32
}

// expectedLoad is what the Jobs of queueJobs come to once Kueue and the scheduler are done.
func expectedLoad() queueLoad {
	cqOf := map[string]string{}
	for _, lq := range localQueues() {
		cqOf[lq.namespace+"/"+lq.name] = lq.clusterQueue
	}
	load := queueLoad{reserved: map[string]int64{}, pending: map[string]int32{}}
	for _, j := range queueJobs() {
		cq := cqOf[j.namespace+"/"+j.localQueue]
		switch {
		case !j.admitted:
			load.pending[cq]++
		case j.runs:
			load.reserved[cq] += int64(j.pods) * j.gpusPerPod
			load.runningPods += j.pods
		default:
			load.reserved[cq] += int64(j.pods) * j.gpusPerPod
			load.waitingPods += j.pods
		}
	}
	return load
}

// quotaConverged reports whether status.quota shows what Kueue reserves and holds.
func (l queueLoad) quotaConverged(q *homelabv1.GpuQuota) bool {
	if q == nil || q.ClusterQueues != int32(len(clusterQueues())) {
		return false
	}
	reserved, pending := map[string]int64{}, map[string]int32{}
	for _, row := range q.Queues {
		reserved[row.Name] += row.Reserved
		pending[row.Name] += row.PendingWorkloads
	}
	for _, cq := range clusterQueues() {
		if reserved[cq.Name] != l.reserved[cq.Name] || pending[cq.Name] != l.pending[cq.Name] {
			return false
		}
	}
	return true
}

// startScheduling runs what places the queues' pods and admits their Jobs: the node
// lifecycle controller (it lifts the not-ready taint off kwok's nodes), kube-scheduler, and
// Kueue with the Job controller.
func startScheduling(ctx context.Context, env *testenv.Env) error {
	for _, start := range []func(context.Context) error{env.StartNodeLifecycle, env.StartScheduler} {
		if err := start(ctx); err != nil {
			return err
		}
	}
	if err := env.StartKueue(ctx, testenv.KueueOptions{}); err != nil {
		return fmt.Errorf("%w\nKueue's log ends:\n%s", err, env.KueueLogTail())
	}
	return nil
}

// submitQueues applies the flavors and queues and submits the Jobs, once Kueue runs.
func submitQueues(ctx context.Context, env *testenv.Env, kube kubernetes.Interface) error {
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: notebooksNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", notebooksNamespace, err)
	}
	if _, err := testenv.ApplyObjects(ctx, env.Config, kueueFieldManager, kueueObjects()); err != nil {
		return fmt.Errorf("apply the Kueue queues: %w", err)
	}
	for _, j := range queueJobs() {
		job := testenv.KueueJob(j.namespace, j.name, j.localQueue, j.pods,
			corev1.ResourceList{gpuResource: *resource.NewQuantity(j.gpusPerPod, resource.DecimalSI)})
		if _, err := kube.BatchV1().Jobs(j.namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create Job %s/%s: %w", j.namespace, j.name, err)
		}
	}
	return nil
}
