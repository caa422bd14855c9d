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
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// The why and fit measurement's DRA part and questions.
const (
	draPods      = 400 // pods on distinct DRA nodes, each holding GPUs through an allocated claim
	draNamespace = "ml-dra"
	draDriver    = "gpu.nvidia.com"
	h100         = "NVIDIA-H100-80GB-HBM3"
	whyGPUs      = 8 // what the pending pod that `why` explains asks for
	fitReplicas  = 4 // the Deployment that `fit` places: replicas of fitGPUs H100s each
	fitGPUs      = 2
	// the Deployment that `fit` places on any node: replicas of whyGPUs GPUs each
	anywhereReplicas = 2
	// the gang `fit` places: gangPods pods of one H100 each, all in one rack
	gangPods = 64
)

// whyFitResult is what the why and fit phase measured.
type whyFitResult struct {
	notMeasured          error // the plugin has no fit command
	rows                 []commandRow
	whyAgrees, fitAgrees string // whether the pinned answers equal the pods
}

// whyFitPhase measures `kubectl gpuinv why` on a pending pod and `fit -f` on a small
// Deployment, both pinned to the H100s by node selector, and `fit -f` on a Deployment that
// names no node (every node a candidate), with the allocation phase's pods in place, once
// the Ready nodes have lost the not-ready taint and draPods DRA pods hold GPUs through
// allocated claims; each as the plugin reads by default (uncompressed) and with
// --disable-compression=false (gzip, as kubectl asks); and whether the pinned answers agree
// with the pods.
func whyFitPhase(ctx context.Context, h *harness) (result, error) {
	o, env, pods := h.o, h.env, h.alloc.after
	if _, err := pluginHelp(o.plugin, "fit"); err != nil {
		return &whyFitResult{notMeasured: err}, nil
	}
	if err := prepareWhyFit(ctx, h); err != nil {
		return nil, fmt.Errorf("before why and fit: %w", err)
	}
	pending := pendingPlan(pods, h100, whyGPUs)
	if pending == nil {
		return nil, fmt.Errorf("no pending pod asks for %d GPUs of %s", whyGPUs, h100)
	}
	file, anywhere, gang := filepath.Join(env.Dir, "trainer-h100.yaml"), filepath.Join(env.Dir, "trainer-anywhere.yaml"), filepath.Join(env.Dir, "gang-rack.yaml")
	for path, content := range map[string]string{file: fitDeployment, anywhere: fitAnywhere, gang: fitGang} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	kubeconfig, res := env.KubeconfigPath(), &whyFitResult{}
	for _, c := range []struct {
		args   []string
		exits  []int
		what   string
		target commandTarget
	}{
		{[]string{"why", "-n", pending.namespace, pending.name}, []int{0}, fmt.Sprintf("a pending pod asking for %d H100s by node selector", whyGPUs), pinnedTarget},
		{[]string{"fit", "-f", file}, []int{0, 1}, fmt.Sprintf("a Deployment of %d replicas × %d H100s by node selector", fitReplicas, fitGPUs), pinnedTarget},
		{[]string{"fit", "-f", anywhere}, []int{0, 1}, fmt.Sprintf("a Deployment of %d replicas × %d GPUs, no node selector: every node's pods", anywhereReplicas, whyGPUs), anywhereTarget},
		{[]string{"fit", "-f", gang}, []int{0, 1}, fmt.Sprintf("a PodGroup of %d pods × 1 H100 by node selector, all in one rack", gangPods), pinnedTarget},
	} {
		for _, extra := range [][]string{nil, {"--disable-compression=false"}} {
			runs, err := measurePluginExits(env.Dir, o.plugin, kubeconfig, o.pluginRuns, c.exits, slices.Concat(c.args, extra)...)
			if err != nil {
				return nil, err
			}
			target := c.target
			if extra != nil {
				target = commandTarget{} // gzip is the user's choice: no target of its own
			}
			res.rows = append(res.rows, commandRow{args: append([]string{c.args[0]}, extra...), what: c.what, target: target, runs: runs})
		}
	}
	free := modelFree(h.fleet, pods, h100)
	res.whyAgrees = whyAgrees(o.plugin, kubeconfig, pending, free, o.nodes)
	res.fitAgrees = fitAgrees(o.plugin, kubeconfig, file, free)
	return res, nil
}

// prepareWhyFit lifts the not-ready taints of the Ready nodes, creates the DRA pods and
// waits until the operator's status has settled.
func prepareWhyFit(ctx context.Context, h *harness) error {
	start := time.Now()
	lifted, err := liftNotReadyTaints(ctx, h.kube)
	if err != nil {
		return err
	}
	if err := createDRAWorkload(ctx, h.kube, h.fleet, h.o.nodes); err != nil {
		return fmt.Errorf("DRA pods: %w", err)
	}
	if err := settle(ctx, h.watcher, homelabv1.DefaultInventoryName, 2*time.Second, 2*time.Minute); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "allocation: not-ready taints lifted from %d Ready nodes, %d DRA pods with allocated claims created, in %s\n",
		lifted, draPods, time.Since(start).Round(time.Second))
	return nil
}

// fitDeployment is the file `fit` places.
var fitDeployment = fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: trainer-h100, namespace: ml-00}
spec:
  replicas: %d
  selector: {matchLabels: {app: trainer-h100}}
  template:
    metadata: {labels: {app: trainer-h100}}
    spec:
      nodeSelector: {%s: %s}
      tolerations: [{key: %s, operator: Exists, effect: NoSchedule}]
      containers:
      - name: trainer
        image: registry.example.com/ml/trainer:1.0
        resources:
          requests: {cpu: "4", memory: 32Gi}
          limits: {%s: %d, memory: 32Gi}
`, fitReplicas, productLabel, h100, resourceGPU, resourceGPU, fitGPUs)

// fitGang is the gang `fit` places: a PodGroup of gangPods pods, all or nothing inside one
// rack, made by a Job whose pod template names no group (it joins the file's only one).
var fitGang = fmt.Sprintf(`apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: trainer-gang, namespace: ml-00}
spec:
  schedulingPolicy: {gang: {minCount: %d}}
  schedulingConstraints: {topology: [{key: topology.kubernetes.io/rack}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: trainer-gang, namespace: ml-00}
spec:
  parallelism: %d
  completions: %d
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {%s: %s}
      tolerations: [{key: %s, operator: Exists, effect: NoSchedule}]
      containers:
      - name: trainer
        image: registry.example.com/ml/trainer:1.0
        resources:
          requests: {cpu: "4", memory: 32Gi}
          limits: {%s: 1, memory: 32Gi}
`, gangPods, gangPods, gangPods, productLabel, h100, resourceGPU, resourceGPU)

// fitAnywhere is a file `fit` places on any node: every Ready node passes the node-only
// filters, so the pods of all of them are read.
var fitAnywhere = fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: trainer-anywhere, namespace: ml-00}
spec:
  replicas: %d
  selector: {matchLabels: {app: trainer-anywhere}}
  template:
    metadata: {labels: {app: trainer-anywhere}}
    spec:
      tolerations: [{key: %s, operator: Exists, effect: NoSchedule}]
      containers:
      - name: trainer
        image: registry.example.com/ml/trainer:1.0
        resources:
          requests: {cpu: "4", memory: 32Gi}
          limits: {%s: %d, memory: 32Gi}
`, anywhereReplicas, resourceGPU, resourceGPU, whyGPUs)

// pendingPlan is the first pod of pods waiting to be scheduled that pins product by node
// selector and asks for gpus.
func pendingPlan(pods []*podPlan, product string, gpus int64) *podPlan {
	for _, p := range pods {
		if !p.bound() && p.gpu == resourceGPU && p.pinned == product && !p.byAffinity && p.count == gpus {
			return p
		}
	}
	return nil
}

// modelFree is the nvidia.com/gpu free on each device-plugin node of product once pods hold
// their shares, by node name.
func modelFree(fleet []fleetNode, pods []*podPlan, product string) map[string]int64 {
	free := map[string]int64{}
	for _, n := range fleet {
		if !n.dra && n.product == product {
			free[n.name] = int64(n.gpus)
		}
	}
	for _, p := range pods {
		if p.holds() && p.gpu == resourceGPU {
			if n := fleet[p.slot.fleet]; !n.dra && n.product == product {
				free[n.name] -= p.count
			}
		}
	}
	return free
}

// expectWhy is what the scheduler says of a pod asking for want GPUs of the nodes in free,
// on a fleet of n nodes where no other node matches its selector and only GPUs are short:
// the nodes it fits on, else its FailedScheduling summary.
func expectWhy(free map[string]int64, want int64, n int) (fitsOn []string, message string) {
	for name, f := range free {
		if f >= want {
			fitsOn = append(fitsOn, name)
		}
	}
	if len(fitsOn) > 0 {
		slices.Sort(fitsOn)
		return fitsOn, ""
	}
	parts := []string{fmt.Sprintf("%d Insufficient %s", len(free), resourceGPU), fmt.Sprintf("%d node(s) didn't match Pod's node affinity/selector", n-len(free))}
	sort.Strings(parts)
	return nil, fmt.Sprintf("0/%d nodes are available: %s.", n, strings.Join(parts, ", "))
}

// expectPlaced is how many replicas of each GPUs fit on the nodes in free, placed one at a
// time: equal replicas, so any order of nodes places as many.
func expectPlaced(free map[string]int64, replicas, each int64) int64 {
	var slots int64
	for _, f := range free {
		slots += max(0, f) / each
	}
	return min(replicas, slots)
}

// whyAgrees compares `why -o json` of the pending pod p with what the pods make of it.
func whyAgrees(binary, kubeconfig string, p *podPlan, free map[string]int64, n int) string {
	data, err := exec.Command(binary, "--kubeconfig", kubeconfig, "why", "-n", p.namespace, p.name, "-o", "json").Output()
	if err != nil {
		return fmt.Sprintf("NO: %v", err)
	}
	var got struct {
		FitsOn  []string `json:"fitsOn"`
		Message string   `json:"message"`
	}
	if err := json.Unmarshal(data, &got); err != nil {
		return fmt.Sprintf("NO: decode its output: %v", err)
	}
	fitsOn, message := expectWhy(free, p.count, n)
	if !slices.Equal(got.FitsOn, fitsOn) || got.Message != message {
		return fmt.Sprintf("NO: why says fits on %d nodes, %q; the pods make %d nodes, %q", len(got.FitsOn), got.Message, len(fitsOn), message)
	}
	if message != "" {
		return fmt.Sprintf("yes: %q (%d H100 nodes, %d GPUs free among them)", message, len(free), sumFree(free))
	}
	return fmt.Sprintf("yes: fits on %d of the %d H100 nodes", len(fitsOn), len(free))
}

// fitAgrees compares `fit -f file -o json` with what the pods leave free.
func fitAgrees(binary, kubeconfig, file string, free map[string]int64) string {
	out, err := exec.Command(binary, "--kubeconfig", kubeconfig, "fit", "-f", file, "-o", "json").Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		return fmt.Sprintf("NO: %v", err)
	}
	var got struct {
		Fits   bool  `json:"fits"`
		Placed int64 `json:"placed"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		return fmt.Sprintf("NO: decode its output: %v", err)
	}
	placed := expectPlaced(free, fitReplicas, fitGPUs)
	if got.Placed != placed || got.Fits != (placed == fitReplicas) {
		return fmt.Sprintf("NO: fit places %d of %d (fits: %t); the pods leave room for %d", got.Placed, fitReplicas, got.Fits, placed)
	}
	return fmt.Sprintf("yes: %d of %d replicas placed (%d GPUs free on the H100 nodes)", placed, fitReplicas, sumFree(free))
}

func sumFree(free map[string]int64) int64 {
	var n int64
	for f := range maps.Values(free) {
		n += max(0, f)
	}
	return n
}

// liftNotReadyTaints does for the Ready nodes what kube-controller-manager's node lifecycle
// controller, which the scale run does not run, does: it removes the not-ready NoSchedule
// taint that the API server's admission puts on every new node, which every pod that does
// not tolerate it fails on. It returns how many nodes it changed.
func liftNotReadyTaints(ctx context.Context, kube kubernetes.Interface) (int, error) {
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	var patches []func() error
	for i := range nodes.Items {
		n := &nodes.Items[i]
		ready := slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		})
		taints := slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool {
			return t.Key == corev1.TaintNodeNotReady && t.Effect == corev1.TaintEffectNoSchedule
		})
		if !ready || len(taints) == len(n.Spec.Taints) {
			continue
		}
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{"taints": taints}})
		if err != nil {
			return 0, err
		}
		patches = append(patches, func() error {
			_, err := kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "node-lifecycle-controller"})
			return err
		})
	}
	return len(patches), inParallel(32, patches)
}

// inParallel runs fns, workers at a time, and returns the first error.
func inParallel(workers int, fns []func() error) error {
	work := make(chan func() error)
	errs := make(chan error, len(fns))
	for range workers {
		go func() {
			for fn := range work {
				errs <- fn()
			}
		}()
	}
	for _, fn := range fns {
		work <- fn
	}
	close(work)
	var first error
	for range fns {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// createDRAWorkload creates NVIDIA's DeviceClass and draPods pods, one on each of the first
// DRA nodes of a fleet of fleetSize nodes, each holding 1 to 4 of its GPUs through a
// ResourceClaim allocated and reserved for it, as the scheduler and the kubelet leave them.
func createDRAWorkload(ctx context.Context, kube kubernetes.Interface, fleet []fleetNode, fleetSize int) error {
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: draNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: draDriver}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", draDriver)}}}}}
	if _, err := kube.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	var pods []func() error
	for _, n := range fleet {
		if n.dra && len(pods) < draPods {
			k := len(pods)
			pods = append(pods, func() error { return createDRAPod(ctx, kube, n, k, fleetSize) })
		}
	}
	return inParallel(32, pods)
}

// createDRAPod creates the k-th DRA pod on node n, its claim of 1 to 4 GPUs allocated there.
func createDRAPod(ctx context.Context, kube kubernetes.Interface, n fleetNode, k, fleetSize int) error {
	p := &podPlan{namespace: draNamespace, name: fmt.Sprintf("dra-job-%04d", k), app: "dra-job", hash: digest("dra-job", 10), node: n.index}
	gpus := int64(1 + k%4)
	claims := kube.ResourceV1().ResourceClaims(draNamespace)
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: p.name + "-gpus", Namespace: draNamespace},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpus",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: draDriver, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: gpus}}}}}}
	claim, err := claims.Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create claim %s: %w", p.name, err)
	}
	pod := buildPod(p)
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To(claim.Name)}}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpus"}}
	pods := kube.CoreV1().Pods(draNamespace)
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{FieldManager: "kube-controller-manager"})
	if err != nil {
		return fmt.Errorf("create pod %s: %w", p.name, err)
	}
	alloc := &resourcev1.AllocationResult{NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{n.name}}}}}}}
	for j := range gpus {
		alloc.Devices.Results = append(alloc.Devices.Results, resourcev1.DeviceRequestAllocationResult{
			Request: "gpus", Driver: draDriver, Pool: n.name, Device: fmt.Sprintf("gpu-%d", j)})
	}
	claim.Status = resourcev1.ResourceClaimStatus{Allocation: alloc,
		ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: created.Name, UID: created.UID}}}
	if _, err := claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{FieldManager: "kube-scheduler"}); err != nil {
		return fmt.Errorf("allocate claim %s: %w", claim.Name, err)
	}
	created.Status = podStatus(created, p, 0, fleetSize)
	if _, err := pods.UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: "kubelet"}); err != nil {
		return fmt.Errorf("write the status of pod %s: %w", p.name, err)
	}
	return nil
}
