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
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/gpuinventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// nodeAllocation and modelAllocation are the allocation figures of a node entry and a model.
type nodeAllocation struct{ Allocated, Free, Pods int32 }

type modelAllocation struct {
	Allocated, Free, Pending int32
	Fit                      *homelabv1.GpuFit
}

// allocationView is every allocation figure of an inventory's status.
type allocationView struct {
	Nodes      map[string]nodeAllocation
	Models     map[string]modelAllocation
	Allocation *homelabv1.GpuAllocation
}

func allocationFigures(gi *homelabv1.GpuInventory) allocationView {
	v := allocationView{Nodes: map[string]nodeAllocation{}, Models: map[string]modelAllocation{}, Allocation: gi.Status.Allocation}
	for _, n := range gi.Status.Nodes {
		v.Nodes[n.Name] = nodeAllocation{n.AllocatedGpus, n.FreeGpus, n.GpuPods}
	}
	for _, m := range gi.Status.Models {
		v.Models[m.Product] = modelAllocation{m.AllocatedGpus, m.FreeGpus, m.PendingGpus, m.Fit}
	}
	return v
}

// waitAllocation waits until the inventory "cluster" has exactly the allocation figures want.
func (c *cluster) waitAllocation(t *testing.T, what string, want allocationView) *homelabv1.GpuInventory {
	t.Helper()
	return c.waitInventory(t, what, func(gi *homelabv1.GpuInventory) error {
		if diff := cmp.Diff(want, allocationFigures(gi)); diff != "" {
			return fmt.Errorf("allocation figures (-want +got):\n%s", diff)
		}
		return nil
	})
}

// createdAt is an object's creation time as the status gives it (whole seconds, UTC).
func createdAt(obj metav1.Object) *metav1.Time {
	at := metav1.NewTime(time.Unix(obj.GetCreationTimestamp().Unix(), 0).UTC())
	return &at
}

func earliest(times ...*metav1.Time) *metav1.Time {
	first := times[0]
	for _, at := range times[1:] {
		if at.Before(first) {
			first = at
		}
	}
	return first
}

// setPodPhase writes a pod's phase through the status subresource, as its kubelet would.
func (c *cluster) setPodPhase(t *testing.T, namespace, name string, phase corev1.PodPhase) {
	t.Helper()
	ctx := context.Background()
	pod, err := c.kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = phase
	if _, err := c.kube.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("set pod %s/%s phase %s: %v", namespace, name, phase, err)
	}
}

// bindPod binds a waiting pod to node through the binding subresource, as the scheduler does.
func (c *cluster) bindPod(t *testing.T, namespace, name, node string) {
	t.Helper()
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	if err := c.kube.CoreV1().Pods(namespace).Bind(context.Background(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind pod %s/%s to %s: %v", namespace, name, node, err)
	}
}

// gpuClaim is a ResourceClaim asking for count devices of the DeviceClass gpu.nvidia.com,
// with a CEL selector when selector is not "".
func gpuClaim(namespace, name string, count int64, selector string) *resourcev1.ResourceClaim {
	req := &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count}
	if selector != "" {
		req.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: selector}}}
	}
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpus", Exactly: req}}}},
	}
}

// createGPUDeviceClass creates the DeviceClass the NVIDIA DRA driver installs for whole GPUs.
func (c *cluster) createGPUDeviceClass(t *testing.T) {
	t.Helper()
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.nvidia.com"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: `device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"`}}}}}
	if _, err := c.kube.ResourceV1().DeviceClasses().Create(context.Background(), class, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create DeviceClass: %v", err)
	}
}

func (c *cluster) createClaim(t *testing.T, claim *resourcev1.ResourceClaim) *resourcev1.ResourceClaim {
	t.Helper()
	c.ensureNamespace(t, claim.Namespace)
	created, err := c.kube.ResourceV1().ResourceClaims(claim.Namespace).Create(context.Background(), claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ResourceClaim %s/%s: %v", claim.Namespace, claim.Name, err)
	}
	return created
}

// allocateClaim writes the claim's status as the scheduler does: devices of node's pool
// allocated to the claim's only request, reserved for the holders.
func (c *cluster) allocateClaim(t *testing.T, claim *resourcev1.ResourceClaim, node string, devices []string, holders ...*corev1.Pod) *resourcev1.ResourceClaim {
	t.Helper()
	claim = claim.DeepCopy()
	alloc := &resourcev1.AllocationResult{NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}
	for _, d := range devices {
		alloc.Devices.Results = append(alloc.Devices.Results, resourcev1.DeviceRequestAllocationResult{
			Request: claim.Spec.Devices.Requests[0].Name, Driver: "gpu.nvidia.com", Pool: node, Device: d})
	}
	claim.Status.Allocation = alloc
	for _, p := range holders {
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
	}
	updated, err := c.kube.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(context.Background(), claim, metav1.UpdateOptions{FieldManager: "kube-scheduler"})
	if err != nil {
		t.Fatalf("allocate ResourceClaim %s/%s: %v", claim.Namespace, claim.Name, err)
	}
	return updated
}

// claimPod is a pod bound to node that uses the claim for its container.
func claimPod(namespace, name, node, claim string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{NodeName: node,
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: &claim}},
			Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpus"}}}}}},
	}
}

// metricLine is a series line of the text exposition with its value as client_golang writes it.
func metricLine(series string, value float64) string {
	return series + " " + strconv.FormatFloat(value, 'g', -1, 64)
}

// The nodes of TestAllocationFromPodsAndClaims: mixed-fleet's device-plugin nodes and a DRA node.
const (
	h100Whole   = "dgx-01"      // eight H100s
	h100Faulty  = "dgx-07"      // eight H100s, two of them unhealthy (allocatable 6)
	a100MIG     = "a100-mixed"  // eight A100s, MIG mixed strategy
	t4Shared    = "t4-shared-1" // four T4s, time-sliced with four replicas each
	cpuOnly     = "cpu-1"       // no GPU
	h100DRA     = "dra-h100-1"  // eight H100s published by NVIDIA's DRA driver
	a100Product = "NVIDIA-A100-SXM4-40GB"
)

// What pods hold through the device plugin and DRA claims, and what waiting pods and claims
// ask for, as the status, its models' fit summaries and /metrics say; the figures follow pods
// finishing, being deleted and bound, claims being deallocated, and a cordon. With
// --allocation=false the operator reads no pods and leaves the allocation out.
func TestAllocationFromPodsAndClaims(t *testing.T) {
	c := startCluster(t)
	ctx := testContext(t)
	var nodes []*corev1.Node
	for _, n := range fixtures.MixedFleet() {
		switch n.Name {
		case h100Whole, h100Faulty, a100MIG, t4Shared, cpuOnly:
			nodes = append(nodes, n)
		}
	}
	nodes = append(nodes, readyNode(h100DRA, draModeLabels, 0))
	if err := testenv.CreateNodes(ctx, c.kube, nodes); err != nil {
		t.Fatal(err)
	}
	c.publish(t, driverSlices(t, dra.H100, h100DRA)...)
	c.createGPUDeviceClass(t)

	// Held through the device plugin.
	c.createPod(t, gpuPod("train", "llm", h100Whole, "nvidia.com/gpu", 2))
	done := gpuPod("train", "done", h100Whole, "nvidia.com/gpu", 1)
	c.createPod(t, done)
	c.setPodPhase(t, "train", "done", corev1.PodSucceeded)
	withInit := gpuPod("batch", "with-init", h100Faulty, "nvidia.com/gpu", 1)
	withInit.Spec.InitContainers = []corev1.Container{{Name: "warmup", Image: "registry.k8s.io/pause:3.10",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(4, resource.DecimalSI)}}}}
	c.createPod(t, withInit)
	c.createPod(t, gpuPod("infer", "mig", a100MIG, "nvidia.com/mig-1g.5gb", 1))
	c.createPod(t, gpuPod("infer", "shared", t4Shared, "nvidia.com/gpu", 1))
	c.createPod(t, gpuPod("train", "off-inventory", cpuOnly, "nvidia.com/gpu", 1))
	// Held through DRA: one claim for two GPUs shared by two pods.
	claim := c.createClaim(t, gpuClaim("dra", "shared-gpus", 2, ""))
	worker0 := c.createPod(t, claimPod("dra", "worker-0", h100DRA, claim.Name))
	worker1 := c.createPod(t, claimPod("dra", "worker-1", h100DRA, claim.Name))
	claim = c.allocateClaim(t, claim, h100DRA, []string{"gpu-0", "gpu-1"}, worker0, worker1)
	// Waiting: a pod pinning the H100, one taking any model, a claim selecting the H100 by
	// the driver's productName.
	pinned := gpuPod("queue", "pinned", "", "nvidia.com/gpu", 2)
	pinned.Spec.NodeSelector = map[string]string{"nvidia.com/gpu.product": h100Product}
	pinned = c.createPod(t, pinned)
	anyModel := c.createPod(t, gpuPod("queue", "any-model", "", "nvidia.com/gpu", 1))
	selecting := c.createClaim(t, gpuClaim("queue", "h100-by-cel", 1, `device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"`))

	log := &requestLog{}
	op := startOperator(t, log.wrap(c.env.Config), testOptions())

	h100Fit := &homelabv1.GpuFit{NodesWith1Free: 3, NodesWith2Free: 3, NodesWith4Free: 2,
		Most: []homelabv1.NodeFree{{Name: h100Whole, FreeGpus: 6}, {Name: h100DRA, FreeGpus: 6}, {Name: h100Faulty, FreeGpus: 2}}}
	c.waitAllocation(t, "allocation of every kind of holder", allocationView{
		Nodes: map[string]nodeAllocation{
			h100Whole:  {Allocated: 2, Free: 6, Pods: 1}, // the finished pod holds nothing
			h100Faulty: {Allocated: 4, Free: 2, Pods: 1}, // the init container's 4; 2 GPUs unhealthy
			a100MIG:    {Allocated: 1, Pods: 1},          // every GPU in MIG mode: no whole GPU to give
			t4Shared:   {Allocated: 1, Pods: 1},          // replicas, no whole GPUs
			h100DRA:    {Allocated: 2, Free: 6, Pods: 2},
		},
		Models: map[string]modelAllocation{
			h100Product: {Allocated: 8, Free: 14, Pending: 3, Fit: h100Fit},
			a100Product: {Allocated: 1},
			"Tesla-T4":  {Allocated: 1},
		},
		Allocation: &homelabv1.GpuAllocation{
			AllocatedGpus: 10, FreeGpus: 14, GpuPods: 6,
			// 2 + 4 whole, a 1g MIG device 1000/7, a quarter of a T4, 2 DRA GPUs.
			AllocatedMilliGpus: 2000 + 4000 + 142 + 250 + 2000,
			PendingPods:        3, PendingGpus: 4,
			Pending: []homelabv1.GpuDemand{
				{Model: "", Pods: 1, Gpus: 1, Since: createdAt(anyModel)},
				{Model: h100Product, Pods: 2, Gpus: 3, Since: earliest(createdAt(pinned), createdAt(selecting))},
			},
			Namespaces: []homelabv1.NamespaceUsage{
				{Namespace: "batch", Pods: 1, Gpus: 4, MilliGpus: 4000},
				{Namespace: "dra", Pods: 2, Gpus: 2, MilliGpus: 2000}, // the claim once for its two pods
				{Namespace: "train", Pods: 1, Gpus: 2, MilliGpus: 2000},
				{Namespace: "infer", Pods: 2, Gpus: 2, MilliGpus: 142 + 250},
			},
		},
	})
	waitMetrics(t, op,
		`gpu_inventory_allocated_gpus{inventory="cluster",product="NVIDIA-H100-80GB-HBM3"} 8`,
		`gpu_inventory_free_gpus{inventory="cluster",product="NVIDIA-H100-80GB-HBM3"} 14`,
		`gpu_inventory_allocated_gpus{inventory="cluster",product="Tesla-T4"} 1`,
		`gpu_inventory_free_gpus{inventory="cluster",product="NVIDIA-A100-SXM4-40GB"} 0`,
		`gpu_inventory_pending_gpus{inventory="cluster",product="NVIDIA-H100-80GB-HBM3"} 3`,
		`gpu_inventory_pending_gpus{inventory="cluster",product=""} 1`,
		metricLine(`gpu_inventory_pending_oldest_timestamp_seconds{inventory="cluster",product=""}`, float64(anyModel.CreationTimestamp.Unix())),
		`gpu_inventory_namespace_gpus{inventory="cluster",namespace="batch"} 4`,
		`gpu_inventory_namespace_gpus{inventory="cluster",namespace="dra"} 2`,
	)

	t.Run("pods finish, are deleted, a claim is deallocated", func(t *testing.T) {
		c.setPodPhase(t, "train", "llm", corev1.PodSucceeded)
		c.deletePod(t, "batch", "with-init")
		// The scheduler's deallocation: reservations and allocation go; the claim asks again.
		claim.Status = resourcev1.ResourceClaimStatus{}
		var err error
		if claim, err = c.kube.ResourceV1().ResourceClaims("dra").UpdateStatus(ctx, claim, metav1.UpdateOptions{FieldManager: "kube-scheduler"}); err != nil {
			t.Fatalf("deallocate the claim: %v", err)
		}
		c.waitAllocation(t, "allocation after finishing, deleting, deallocating", allocationView{
			Nodes: map[string]nodeAllocation{
				h100Whole: {Free: 8}, h100Faulty: {Free: 6}, h100DRA: {Free: 8},
				a100MIG:  {Allocated: 1, Pods: 1},
				t4Shared: {Allocated: 1, Pods: 1},
			},
			Models: map[string]modelAllocation{
				h100Product: {Free: 22, Pending: 3, Fit: &homelabv1.GpuFit{NodesWith1Free: 3, NodesWith2Free: 3, NodesWith4Free: 3, NodesWith8Free: 2,
					Most: []homelabv1.NodeFree{{Name: h100Whole, FreeGpus: 8}, {Name: h100DRA, FreeGpus: 8}, {Name: h100Faulty, FreeGpus: 6}}}},
				a100Product: {Allocated: 1},
				"Tesla-T4":  {Allocated: 1},
			},
			Allocation: &homelabv1.GpuAllocation{
				AllocatedGpus: 2, AllocatedMilliGpus: 142 + 250, FreeGpus: 22, GpuPods: 2,
				PendingPods: 4, PendingGpus: 6,
				Pending: []homelabv1.GpuDemand{
					{Model: "", Pods: 2, Gpus: 3, Since: earliest(createdAt(anyModel), createdAt(claim))},
					{Model: h100Product, Pods: 2, Gpus: 3, Since: earliest(createdAt(pinned), createdAt(selecting))},
				},
				Namespaces: []homelabv1.NamespaceUsage{{Namespace: "infer", Pods: 2, Gpus: 2, MilliGpus: 142 + 250}},
			},
		})
		waitMetrics(t, op,
			`gpu_inventory_allocated_gpus{inventory="cluster",product="NVIDIA-H100-80GB-HBM3"} 0`,
			`gpu_inventory_pending_gpus{inventory="cluster",product=""} 3`,
		)
	})

	t.Run("the waiting pod is bound, the rest goes", func(t *testing.T) {
		for _, name := range []string{"mig", "shared"} {
			c.deletePod(t, "infer", name)
		}
		c.deletePod(t, "queue", "any-model")
		for _, cl := range []*resourcev1.ResourceClaim{claim, selecting} {
			if err := c.kube.ResourceV1().ResourceClaims(cl.Namespace).Delete(ctx, cl.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete claim %s/%s: %v", cl.Namespace, cl.Name, err)
			}
		}
		c.bindPod(t, "queue", "pinned", h100Whole)
		gi := c.waitAllocation(t, "allocation with only the bound pod", allocationView{
			Nodes: map[string]nodeAllocation{
				h100Whole: {Allocated: 2, Free: 6, Pods: 1}, h100Faulty: {Free: 6}, h100DRA: {Free: 8},
				a100MIG: {}, t4Shared: {},
			},
			Models: map[string]modelAllocation{
				h100Product: {Allocated: 2, Free: 20, Fit: &homelabv1.GpuFit{NodesWith1Free: 3, NodesWith2Free: 3, NodesWith4Free: 3, NodesWith8Free: 1,
					Most: []homelabv1.NodeFree{{Name: h100DRA, FreeGpus: 8}, {Name: h100Whole, FreeGpus: 6}, {Name: h100Faulty, FreeGpus: 6}}}},
				a100Product: {}, "Tesla-T4": {},
			},
			Allocation: &homelabv1.GpuAllocation{AllocatedGpus: 2, AllocatedMilliGpus: 2000, FreeGpus: 20, GpuPods: 1, // 2 unhealthy
				Namespaces: []homelabv1.NamespaceUsage{{Namespace: "queue", Pods: 1, Gpus: 2, MilliGpus: 2000}}},
		})
		if gi.Status.TotalGpus != 36 {
			t.Errorf("totalGpus = %d, want 36 (pods change allocation, not the inventory)", gi.Status.TotalGpus)
		}
		waitMetrics(t, op, `gpu_inventory_allocated_gpus{inventory="cluster",product="NVIDIA-H100-80GB-HBM3"} 2`)
		_, body, err := get("http://" + op.MetricsAddress() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(body, "gpu_inventory_pending_gpus{") || strings.Contains(body, "gpu_inventory_pending_oldest_timestamp_seconds{") {
			t.Errorf("pending series remain with nothing waiting:\n%s", grepLines(body, "gpu_inventory_pending"))
		}
	})

	t.Run("what a cordoned node has free is counted apart", func(t *testing.T) {
		if _, err := c.kube.CoreV1().Nodes().Patch(ctx, h100Whole, "application/merge-patch+json", []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("cordon %s: %v", h100Whole, err)
		}
		c.waitInventory(t, h100Whole+" cordoned", func(gi *homelabv1.GpuInventory) error {
			e, _ := entryOf(gi, h100Whole)
			if !e.Ready || e.AllocatedGpus != 2 || e.FreeGpus != 0 || e.UnschedulableFreeGpus != 6 || gi.Status.Allocation == nil || gi.Status.Allocation.FreeGpus != 14 {
				return fmt.Errorf("%s: ready %t, allocated %d, free %d (%d unschedulable), conditions %v; allocation %+v",
					h100Whole, e.Ready, e.AllocatedGpus, e.FreeGpus, e.UnschedulableFreeGpus, e.Conditions, gi.Status.Allocation)
			}
			return nil
		})
	})

	if got := log.of("pods"); len(got) == 0 {
		t.Fatalf("the operator with --allocation read no pods: the request log does not see its pod cache")
	}

	t.Run("without --allocation no pods are read and the allocation goes", func(t *testing.T) {
		if err := op.stop(t); err != nil {
			t.Fatalf("operator stopped with %v", err)
		}
		opts := testOptions()
		opts.Allocation = false
		without := &requestLog{}
		off := startOperator(t, without.wrap(c.env.Config), opts)
		gi := c.waitInventory(t, "status without allocation", func(gi *homelabv1.GpuInventory) error {
			if gi.Status.Allocation != nil {
				return fmt.Errorf("status.allocation %+v", gi.Status.Allocation)
			}
			return nil
		})
		for _, n := range gi.Status.Nodes {
			if n.AllocatedGpus != 0 || n.FreeGpus != 0 || n.GpuPods != 0 {
				t.Errorf("entry %s: allocated %d, free %d, pods %d; want none without --allocation", n.Name, n.AllocatedGpus, n.FreeGpus, n.GpuPods)
			}
		}
		for _, m := range gi.Status.Models {
			if m.AllocatedGpus != 0 || m.FreeGpus != 0 || m.PendingGpus != 0 || m.Fit != nil {
				t.Errorf("model %s: %+v; want no allocation figures without --allocation", m.Product, m)
			}
		}
		waitReadyz(t, off, 20*time.Second, http.StatusOK, "ok")
		for _, resource := range []string{"pods", "resourceclaims"} {
			if got := without.of(resource); len(got) > 0 {
				t.Errorf("with --allocation=false the operator sent %d requests for %s, first %s", len(got), resource, got[0])
			}
		}
		_, body, err := get("http://" + off.MetricsAddress() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"gpu_inventory_allocated_gpus", "gpu_inventory_free_gpus", "gpu_inventory_pending_gpus", "gpu_inventory_namespace_gpus"} {
			if strings.Contains(body, name+"{") {
				t.Errorf("/metrics without --allocation exports %s:\n%s", name, grepLines(body, name))
			}
		}
	})
}

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// createH100Nodes creates Ready GPU nodes of the names, each with eight H100s.
func (c *cluster) createH100Nodes(t *testing.T, names ...string) []string {
	t.Helper()
	h100 := map[string]string{"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": h100Product, "nvidia.com/gpu.count": "8"}
	var nodes []*corev1.Node
	for _, name := range names {
		nodes = append(nodes, readyNode(name, h100, 8))
	}
	if err := testenv.CreateNodes(testContext(t), c.kube, nodes); err != nil {
		t.Fatal(err)
	}
	return names
}

// Churn of GPU pods, created and deleted as fast as the API server takes them, ends in an
// exact status, and the status is written about once per --min-sync-interval meanwhile.
func TestGPUPodChurnEndsExactWithFewWrites(t *testing.T) {
	const pods, live = 50, 10
	c := startCluster(t)
	nodes := c.createH100Nodes(t, "h100-a", "h100-b")
	opts := testOptions()
	op := startOperator(t, c.env.Config, opts)
	c.waitAllocation(t, "an idle fleet", allocationView{
		Nodes: map[string]nodeAllocation{nodes[0]: {Free: 8}, nodes[1]: {Free: 8}},
		Models: map[string]modelAllocation{h100Product: {Free: 16, Fit: &homelabv1.GpuFit{NodesWith1Free: 2, NodesWith2Free: 2, NodesWith4Free: 2, NodesWith8Free: 2,
			Most: []homelabv1.NodeFree{{Name: nodes[0], FreeGpus: 8}, {Name: nodes[1], FreeGpus: 8}}}}},
		Allocation: &homelabv1.GpuAllocation{FreeGpus: 16},
	})

	// Pod i goes to node i%2, every fifth waits unscheduled; pod i-live is deleted when pod i
	// is created, so pods 40 to 49 remain: 8 bound (4 per node), 44 and 49 waiting.
	writesBefore := statusWrites(op)
	start := time.Now()
	created := make([]*corev1.Pod, pods)
	for i := range pods {
		node := nodes[i%2]
		if i%5 == 4 {
			node = ""
		}
		created[i] = c.createPod(t, gpuPod("churn", fmt.Sprintf("job-%02d", i), node, "nvidia.com/gpu", 1))
		if i >= live {
			c.deletePod(t, "churn", created[i-live].Name)
		}
	}
	churn := time.Since(start)
	c.waitAllocation(t, "the status after the churn", allocationView{
		Nodes: map[string]nodeAllocation{nodes[0]: {Allocated: 4, Free: 4, Pods: 4}, nodes[1]: {Allocated: 4, Free: 4, Pods: 4}},
		Models: map[string]modelAllocation{h100Product: {Allocated: 8, Free: 8, Fit: &homelabv1.GpuFit{NodesWith1Free: 2, NodesWith2Free: 2, NodesWith4Free: 2,
			Most: []homelabv1.NodeFree{{Name: nodes[0], FreeGpus: 4}, {Name: nodes[1], FreeGpus: 4}}}}},
		Allocation: &homelabv1.GpuAllocation{AllocatedGpus: 8, AllocatedMilliGpus: 8000, FreeGpus: 8, GpuPods: 8,
			PendingPods: 2, PendingGpus: 2,
			Pending:    []homelabv1.GpuDemand{{Model: "", Pods: 2, Gpus: 2, Since: createdAt(created[44])}},
			Namespaces: []homelabv1.NamespaceUsage{{Namespace: "churn", Pods: 8, Gpus: 8, MilliGpus: 8000}}},
	})
	elapsed := time.Since(start)
	writes := statusWrites(op) - writesBefore
	// The bucket's burst, one token per interval, and one write that may have taken its token
	// before the count was read but been counted after.
	most := gpuinventory.WriteBurst + int(math.Ceil(elapsed.Seconds()/opts.MinSyncInterval.Seconds())) + 1
	t.Logf("%d pods created and deleted in %s; exact status after %s with %d status writes", pods, churn.Round(time.Millisecond), elapsed.Round(time.Millisecond), writes)
	if writes < 1 || writes > most {
		t.Errorf("%d status writes in %s with --min-sync-interval=%s; want between 1 and %d (burst %d, then one per interval)",
			writes, elapsed.Round(time.Millisecond), opts.MinSyncInterval, most, gpuinventory.WriteBurst)
	}
}

// With --list-pods-by-namespace the first list of pods is one list per namespace. GPU pods
// are created and deleted in four namespaces throughout the operator's start, and the lists
// of two of them are held back until more have been, so that the namespaces' lists see the
// cluster at different moments: the watch must start at the oldest list (or miss deletions
// the other lists predate) and skip what the newer lists already hold. The status ends exact.
func TestPodsListedByNamespaceDuringChurn(t *testing.T) {
	c := startCluster(t)
	ctx := testContext(t)
	nodes := c.createH100Nodes(t, "h100-a", "h100-b")
	namespaces := []string{"team-a", "team-b", "team-c", "team-d"}
	for i, ns := range namespaces {
		c.createPod(t, gpuPod(ns, "steady", nodes[i%2], "nvidia.com/gpu", 1))
	}

	// In each namespace, pod k is created, then pod k-1 deleted, until stop.
	stop := make(chan struct{})
	var (
		ops     atomic.Int64
		churned sync.WaitGroup
		errs    = make(chan error, len(namespaces))
	)
	for _, ns := range namespaces {
		churned.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				pod := gpuPod(ns, fmt.Sprintf("brief-%d", k), nodes[k%2], "nvidia.com/gpu", 2)
				if _, err := c.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
				if k > 0 {
					if err := c.kube.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("brief-%d", k-1), metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
						errs <- err
						return
					}
				}
				ops.Add(1)
			}
		})
	}

	opts := testOptions()
	opts.ListPodsByNamespace = true
	cfg := rest.CopyConfig(c.env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			held := req.URL.Path == "/api/v1/namespaces/team-c/pods" || req.URL.Path == "/api/v1/namespaces/team-d/pods"
			if held && req.URL.Query().Get("watch") != "true" {
				until := ops.Load() + 2*int64(len(namespaces))
				for ops.Load() < until && req.Context().Err() == nil {
					time.Sleep(5 * time.Millisecond)
				}
			}
			return rt.RoundTrip(req)
		})
	})
	op := startOperator(t, cfg, opts)
	eventually(t, 20*time.Second, "the operator's first list of pods", func() error {
		if !strings.Contains(op.logs(), "Listed pods") {
			return fmt.Errorf("no \"Listed pods\" in its log")
		}
		return nil
	})
	after := ops.Load()
	eventually(t, 20*time.Second, "more churn after the first list", func() error {
		if n := ops.Load() - after; n < 20 {
			return fmt.Errorf("%d pods created since", n)
		}
		return nil
	})
	close(stop)
	churned.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("churn: %v", err)
	}
	// The last brief pods are deleted now.
	list, err := c.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, "brief-") {
			c.deletePod(t, p.Namespace, p.Name)
		}
	}

	if listed := grepLines(op.logs(), "Listed pods"); !strings.Contains(listed, "namespaces=") {
		t.Errorf("the first list was not by namespace: %s", listed)
	}
	c.waitInventory(t, "the steady pods only", func(gi *homelabv1.GpuInventory) error {
		a := gi.Status.Allocation
		if a == nil || a.AllocatedGpus != 4 || a.GpuPods != 4 || a.PendingPods != 0 || len(a.Namespaces) != len(namespaces) {
			return fmt.Errorf("allocation %+v; want 4 GPUs held by 4 pods in %d namespaces", a, len(namespaces))
		}
		for _, n := range gi.Status.Nodes {
			if n.AllocatedGpus != 2 || n.GpuPods != 2 {
				return fmt.Errorf("node %s: %d GPUs allocated to %d pods; want 2 and 2", n.Name, n.AllocatedGpus, n.GpuPods)
			}
		}
		return nil
	})
}
