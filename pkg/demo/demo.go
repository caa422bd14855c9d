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

// Package demo is `make demo`: a local control plane loaded with the home lab and a few
// healthy GPU nodes kept Ready by kwok (among them a DRA node whose GPUs are in a
// ResourceSlice and a GKE node), kube-scheduler and Kueue with a queue of each kind quota
// against hardware tells apart, the operator running against it, and the inventory and its
// quota printed as tables whenever they change.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/follow"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// Options configure Run.
type Options struct {
	// Operator is the path of the gpu-inventory-operator binary.
	Operator string
	// Once prints the converged inventory and returns instead of following changes.
	Once bool
	// Out receives the report; progress goes there too.
	Out io.Writer
	// Color marks readiness and problems in the report (Out is a terminal).
	Color bool
	// Wide prints the report as `kubectl gpuinv -o wide` does: with each node's source and
	// clique.
	Wide bool
}

const namespace = "gpu-inventory-system"

// Run starts everything, prints the inventory, and follows it until ctx is cancelled (or,
// with Once, until it has printed it). Every process it started is stopped before it returns.
func Run(ctx context.Context, opts Options) (err error) {
	out := opts.Out
	if _, err := os.Stat(opts.Operator); err != nil {
		return fmt.Errorf("operator binary: %w (run `make build`)", err)
	}
	fmt.Fprintln(out, "Starting a local control plane (etcd, kube-apiserver, kwok, kube-scheduler, Kueue)...")
	env, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		return err
	}
	defer env.Stop()
	// The scheduler and Kueue start while the cluster is loaded and the operator starts.
	schedulingCtx, cancelScheduling := context.WithCancel(ctx)
	scheduling := make(chan error, 1)
	go func() { scheduling <- startScheduling(schedulingCtx, env) }()
	waitScheduling := sync.OnceValue(func() error { return <-scheduling })
	defer waitScheduling()   // before env.Stop
	defer cancelScheduling() // a failed start need not wait for Kueue
	c, err := load(ctx, out, env)
	if err != nil {
		return err
	}

	logPath := filepath.Join(env.Dir, "logs", "operator.log")
	stopOperator, err := startOperator(opts.Operator, env.KubeconfigPath(), logPath)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := stopOperator(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	fmt.Fprintf(out, "Operator running; its log: %s\n", logPath)
	if err := waitScheduling(); err != nil {
		if ctx.Err() != nil {
			return nil // Ctrl-C while Kueue started
		}
		return err
	}
	if err := submitQueues(ctx, env, c.kube); err != nil {
		return err
	}
	fmt.Fprintf(out, "Started kube-scheduler and Kueue with %d ClusterQueues (cohorts research and notebooks) and sent them %d Jobs; no flavor selects %s or %s.\n",
		len(clusterQueues()), len(queueJobs()), GKENode, DRANode)

	gi, err := waitForInventory(ctx, c.gpu, c.converged)
	if err != nil {
		return fmt.Errorf("waiting for the inventory (operator log: %s): %w", logPath, err)
	}
	fmt.Fprintln(out)
	if err := report(out, gi, opts); err != nil {
		return err
	}
	if opts.Once {
		return nil
	}
	printTryThis(out, env.KubeconfigPath())
	return followChanges(ctx, c.gpu, gi, opts)
}

// cluster is the loaded control plane: its clients and what it holds.
type cluster struct {
	kube     kubernetes.Interface
	gpu      versioned.Interface
	healthy  int // GPU nodes kwok keeps Ready
	draGPUs  int // in DRANode's ResourceSlice
	heldPods int // pods holding GPUs, besides the queues' Jobs
	queues   queueLoad
}

// load starts kwok and loads the control plane: the home lab, the healthy GPU nodes, the
// DRA node's slice (where resource.k8s.io/v1 is served) and the workloads.
func load(ctx context.Context, out io.Writer, env *testenv.Env) (*cluster, error) {
	if err := env.StartKwokWithRunningJobs(ctx); err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return nil, err
	}
	gpu, err := versioned.NewForConfig(env.Config)
	if err != nil {
		return nil, err
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create namespace: %w", err)
	}
	healthy := append(fixtures.HealthyNodes(), sourceNodes()...)
	if err := testenv.CreateNodes(ctx, kube, append(fixtures.HomeLab(), healthy...)); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "Loaded the home lab (8 nodes, 4 GPU nodes, all NotReady) and %d healthy GPU nodes kept Ready by kwok.\n", len(healthy))
	draGPUs, published, err := publishDRASlices(ctx, kube)
	if err != nil {
		return nil, err
	}
	if published {
		fmt.Fprintf(out, "%s has no GPU Feature Discovery labels: its %d GPUs are in a gpu.nvidia.com ResourceSlice, as NVIDIA's DRA driver publishes them; %s has GKE's labels and %d nvidia.com/gpu.\n",
			DRANode, draGPUs, GKENode, GKENodeGPUs)
	} else {
		fmt.Fprintf(out, "The API server does not serve resource.k8s.io/v1: %s gets no ResourceSlice (0 GPUs known); %s has GKE's labels and %d nvidia.com/gpu.\n",
			DRANode, GKENode, GKENodeGPUs)
	}
	heldPods, err := runWorkloads(ctx, kube, published)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "Started %d pods holding GPUs in namespaces %s and %s, and one 8-GPU pod waiting for an H100 node with 8 free GPUs.\n",
		heldPods, trainingNamespace, inferenceNamespace)
	return &cluster{kube: kube, gpu: gpu, healthy: len(healthy), draGPUs: draGPUs, heldPods: heldPods, queues: expectedLoad()}, nil
}

// converged reports whether the operator has reported the cluster: kwok has made the healthy
// nodes Ready, the DRA node has its slice's GPUs, the pods are counted (the queues' too) and
// the quota shows what Kueue reserves and holds.
func (c *cluster) converged(gi *homelabv1.GpuInventory) bool {
	a := gi.Status.Allocation
	return gi.Status.InventoryHash != "" && gi.Status.ReadyGpuNodes == int32(c.healthy) &&
		entryGPUs(gi, DRANode) == int32(c.draGPUs) &&
		a != nil && a.GpuPods == int32(c.heldPods)+c.queues.runningPods && a.PendingPods == 1+c.queues.waitingPods &&
		c.queues.quotaConverged(gi.Status.Quota)
}

// printTryThis says what to try while the demo follows the inventory.
func printTryThis(out io.Writer, kubeconfig string) {
	fmt.Fprintf(out, `
The cluster is yours until Ctrl-C. In another terminal:
  export KUBECONFIG=%s
  bin/kubectl-gpuinv --problems            # or, with bin/ on the PATH: kubectl gpuinv --problems
  bin/kubectl-gpuinv -o wide               # SOURCE: where each node's facts came from (%s: dra, %s: gke)
  bin/kubectl-gpuinv nodes -o wide         # one GpuNode record per GPU node, with its source
  bin/kubectl-gpuinv free --count 2        # where a 2-GPU job could start now
  bin/kubectl-gpuinv who --by-namespace    # who holds the GPUs
  # one ClusterQueue beside its cohort (Kueue admitted research-b's Job; its pod waits for an H100):
  bin/kubectl-gpuinv quota --queue research-b
  kubectl get clusterqueues                # Kueue's own view: PENDING WORKLOADS, ADMITTED WORKLOADS
  kubectl get gpuinv                       # GPU-NODES, READY, GPUS, READY-GPUS, DEGRADED
  kubectl get gpunodes                     # the records: PRODUCT, GPUS, ..., SOURCE
  kubectl get resourceslices               # %s's GPUs as the DRA driver published them
  kubectl get gpuinv cluster -o yaml       # the whole status
  kubectl get configmap -n %s gpu-node-status -o yaml
  # bring nuc1 back, and watch the table here change:
  kubectl patch node nuc1 --subresource=status --type=json \
    -p '[{"op":"replace","path":"/status/conditions/0/status","value":"True"}]'

`, kubeconfig, DRANode, GKENode, DRANode, namespace)
}

// entryGPUs is the GPU count of the node's entry in the inventory's status (-1 when not listed).
func entryGPUs(gi *homelabv1.GpuInventory, node string) int32 {
	for _, n := range gi.Status.Nodes {
		if n.Name == node {
			return n.GpuCount
		}
	}
	return -1
}

// report prints what `kubectl gpuinv` (-o wide with opts.Wide) prints for the inventory,
// then what `kubectl gpuinv quota` prints.
func report(out io.Writer, gi *homelabv1.GpuInventory, opts Options) error {
	popts := printer.Options{Color: opts.Color, Wide: opts.Wide, Now: time.Now()}
	if err := printer.Report(out, gi, popts); err != nil {
		return err
	}
	if gi.Status.Quota == nil {
		return nil
	}
	fmt.Fprintln(out, "\n$ kubectl gpuinv quota")
	return printer.Quota(out, printer.QuotaView{Inventory: gi.Name, Quota: gi.Status.Quota, Conditions: gi.Status.Conditions}, popts)
}

// startOperator runs the operator binary against kubeconfig and returns a function that
// stops it with SIGTERM and reports how it exited.
func startOperator(bin, kubeconfig, logPath string) (func() error, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--kubeconfig="+kubeconfig, "--namespace="+namespace,
		"--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group: Ctrl-C in the terminal reaches only the demo, which then stops
	// the operator with one SIGTERM (a second signal would make the operator exit at once).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start operator: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); logFile.Close() }()
	return func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				return fmt.Errorf("operator exited with %v (log: %s)", err, logPath)
			}
			return nil
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("operator did not stop within 10s of SIGTERM (log: %s)", logPath)
		}
	}, nil
}

// waitForInventory follows the default inventory until done accepts it (one minute at most).
func waitForInventory(ctx context.Context, gpu versioned.Interface, done func(*homelabv1.GpuInventory) bool) (*homelabv1.GpuInventory, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var accepted *homelabv1.GpuInventory
	for {
		err := follow.Inventory(ctx, gpu.HomelabV1().GpuInventories(), homelabv1.DefaultInventoryName, func(gi *homelabv1.GpuInventory, deleted bool) (bool, error) {
			if !deleted && done(gi) {
				accepted = gi
				return true, nil
			}
			return false, nil
		})
		switch {
		case err == nil:
			return accepted, nil
		case ctx.Err() != nil:
			return nil, errors.New("the inventory did not converge within a minute")
		case !apierrors.IsNotFound(err):
			return nil, err
		}
		// The CRD is not installed yet: the operator does that first.
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("GpuInventory %s never appeared: %w", homelabv1.DefaultInventoryName, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// followChanges prints the report again each time the inventory changes after shown, and a
// line when it is deleted, until ctx ends.
func followChanges(ctx context.Context, gpu versioned.Interface, shown *homelabv1.GpuInventory, opts Options) error {
	out := opts.Out
	rv := shown.ResourceVersion
	err := follow.Inventory(ctx, gpu.HomelabV1().GpuInventories(), shown.Name, func(gi *homelabv1.GpuInventory, deleted bool) (bool, error) {
		at := time.Now().Format(time.TimeOnly)
		switch {
		case deleted:
			rv = ""
			_, err := fmt.Fprintf(out, "\n--- %s: the inventory was deleted\n", at)
			return false, err
		case gi.ResourceVersion != rv:
			rv = gi.ResourceVersion
			fmt.Fprintf(out, "\n--- %s: the inventory changed\n", at)
			return false, report(out, gi, opts)
		}
		return false, nil
	})
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("follow the inventory: %w", err)
}
