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
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/hack/scale/proc"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// After the churn the operator restarts alternations times each way, pods listed at once and
// by namespace, alternationPause after the previous start.
const (
	alternations     = 3
	alternationPause = 20 * time.Second
)

// allocationResult is what the allocation phase measured.
type allocationResult struct {
	pods, gpuPods, bound, pending, finished int
	want                                    allocationTotals
	podJSON, podProto, podBare              int // bytes of a stored GPU pod: JSON, protobuf, JSON without managedFields
	created                                 time.Duration
	firstStatus                             time.Duration
	firstStatusCPU                          float64 // seconds the operator took of the CPU until then
	// Restarts in turn after the churn: pods listed at once, and by namespace.
	atOnce, byNamespace               []time.Duration
	floor                             *listFloor // its lists in turn with the starts
	steadyRSS, steadyAnon, steadyHeap float64    // KiB
	churn                             *churnCounts
	churnWall                         time.Duration
	churnCPU                          float64 // share of a core
	writesPerSec                      float64
	exactAfter                        time.Duration // from the churn's end until the status is exact
	wantAfter                         allocationTotals
	after                             []*podPlan // the pods the churn left
	afterRSS, peakRSS, afterHeap      float64    // KiB
	informer                          *informerResult
	informerErr                       error
}

// allocationPhase stops the operator, creates --pods pods (--gpu-pods of them GPU pods) and
// starts the operator again, so that its first status, its memory and its CPU under pod
// churn are those of a start with the pods in place, as after an upgrade, and no earlier
// phase's figure includes them. It fails when the status is not what the pods make it; once
// the pods have churned, what it measured is reported even then.
func allocationPhase(ctx context.Context, h *harness) (result, error) {
	res, err := measureAllocation(ctx, h)
	if res == nil {
		return nil, err
	}
	h.alloc = res
	return res, err
}

// measureAllocation runs the allocation phase's steps in order and returns what they
// measured (once the pods have churned, what it has so far when a later step fails).
func measureAllocation(ctx context.Context, h *harness) (*allocationResult, error) {
	o, env := h.o, h.env
	reset, err := resetFleet(ctx, h.kube, h.fleet, h.o.draShare)
	if err != nil {
		return nil, err
	}
	if err := waitTotals(ctx, h.watcher, homelabv1.DefaultInventoryName, expectTotals(h.fleet, labels.Everything()), 2*time.Minute); err != nil {
		return nil, fmt.Errorf("after the fleet reset (%s): %w", reset, err)
	}
	rng := rand.New(rand.NewPCG(18, 42))
	names := &podNames{}
	plans, free, err := podPopulation(h.fleet, o.nodes, o.pods, o.gpuPods, names, rng)
	if err != nil {
		return nil, err
	}
	res := newAllocationResult(h.fleet, plans)

	// The pods are created with no operator running: creating them is not what is measured.
	h.op.stop()
	if err := createAllocationPods(ctx, h.kube, plans, o, res); err != nil {
		return nil, err
	}
	var startProfiled sync.WaitGroup
	defer startProfiled.Wait()
	if err := allocationStart(ctx, h, &startProfiled, res); err != nil {
		return nil, err
	}
	if res.floor, err = newListFloor(ctx, env.Config); err != nil {
		return nil, err
	}
	if err := res.floor.listAtOnce(ctx); err != nil {
		return nil, err
	}

	// Churn: creations and deletions, GPU pods in their share of all pods; the status writes
	// are counted from its start until the phase ends.
	writesCtx, stopWrites := context.WithCancel(ctx)
	defer stopWrites()
	writes, err := countStatusWrites(writesCtx, h)
	if err != nil {
		return nil, err
	}
	state := newChurnState(h.fleet, o, plans, free, names, rng)
	churnEnd := allocationChurn(ctx, h, state, writes, res)
	if err := allocationAfterChurn(ctx, h, state, churnEnd, res); err != nil {
		return res, err
	}
	res.informer, res.informerErr = measureInformer(env.Dir, env.KubeconfigPath())
	if err := alternateRestarts(ctx, h, res); err != nil {
		return res, err
	}
	return res, nil
}

// newAllocationResult is the result of an allocation phase with the pods of plans: what
// their status must show, and how many of their GPU pods are bound, wait or have finished.
func newAllocationResult(fleet []fleetNode, plans []*podPlan) *allocationResult {
	res := &allocationResult{pods: len(plans), want: expectAllocation(fleet, plans)}
	for _, p := range plans {
		if p.gpu != "" {
			res.gpuPods++
		}
		switch {
		case p.gpu == "":
		case !p.bound():
			res.pending++
		case p.finished:
			res.finished++
		default:
			res.bound++
		}
	}
	return res
}

// createAllocationPods creates the phase's namespaces and pods and measures the pods'
// creation and stored size.
func createAllocationPods(ctx context.Context, kube kubernetes.Interface, plans []*podPlan, o *options, res *allocationResult) error {
	if err := createNamespaces(ctx, kube); err != nil {
		return err
	}
	start := time.Now()
	if err := createPods(ctx, kube, plans, o.podWorkers, o.nodes); err != nil {
		return err
	}
	res.created = time.Since(start)
	var err error
	if res.podJSON, res.podProto, res.podBare, err = podSizes(ctx, kube, plans); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "allocation: created %d pods in %s; a GPU pod is %d bytes of JSON (%d without managedFields), %d of protobuf; expecting %s\n",
		len(plans), res.created.Round(time.Second), res.podJSON, res.podBare, res.podProto, &res.want)
	return nil
}

// allocationStart starts the operator with the pods in place, measures its start until the
// allocation is exact, and its memory once nothing has changed for 10 s; with --profile-dir,
// profiles of the start are fetched on profiled.
func allocationStart(ctx context.Context, h *harness, profiled *sync.WaitGroup, res *allocationResult) error {
	h.prof.start(profiled, 15*time.Second, "allocation-start-cpu.pprof")
	h.prof.apiServer(profiled, h.env.Config, 15*time.Second, "allocation-start-apiserver-cpu.pprof")
	var err error
	if res.firstStatus, err = restartUntilAllocation(ctx, h, "allocation: restart with the pods in place", &res.want); err != nil {
		return err
	}
	pid := h.op.pid
	res.firstStatusCPU = proc.Seconds(pid.CPUTicks())

	// Steady: nothing changes for 10 s after the first complete status.
	time.Sleep(10 * time.Second)
	res.steadyRSS, res.steadyAnon = pid.RSS(), pid.KiB("RssAnon")
	res.steadyHeap = h.op.metric("go_memstats_heap_inuse_bytes") / 1024
	h.prof.heap("allocation-heap.pprof")
	return nil
}

// restartUntilAllocation restarts the operator (why) and returns the time from its start
// until its status shows want.
func restartUntilAllocation(ctx context.Context, h *harness, why string, want *allocationTotals) (time.Duration, error) {
	var last *allocationTotals
	took, _, err := restartOperatorUntil(ctx, h, why, func(gi *homelabv1.GpuInventory) bool {
		last = allocationOf(gi.Status)
		return last.equal(want)
	})
	if err != nil {
		return 0, fmt.Errorf("want %s, last seen %s: %w", want, last, err)
	}
	return took, nil
}

// allocationChurn creates and deletes pods for --pod-churn-duration and measures the
// operator's CPU and status writes meanwhile; it returns when the churn ended.
func allocationChurn(ctx context.Context, h *harness, state *churnState, writes *writeCounter, res *allocationResult) time.Time {
	o := h.o
	churnCtx, stop := context.WithTimeout(ctx, o.podChurnFor)
	defer stop()
	pid := h.op.pid
	var profiled sync.WaitGroup
	h.prof.phase(&profiled, o.podChurnFor, "allocation-cpu.pprof", "")
	pid.ResetPeak()
	cpu0, wall0 := pid.CPUTicks(), time.Now()
	res.churn = churnPods(churnCtx, h.kube, state, o.podChurn, float64(o.gpuPods)/float64(max(1, o.pods)))
	res.churnWall = time.Since(wall0)
	res.churnCPU = pid.CoreShare(cpu0, res.churnWall)
	res.writesPerSec = float64(writes.count()) / res.churnWall.Seconds()
	churnEnd := time.Now()
	profiled.Wait()
	if res.churn.firstErr != nil {
		fmt.Fprintf(os.Stderr, "allocation churn: %d operations failed, the first: %v\n", res.churn.failed.Load(), res.churn.firstErr)
	}
	return churnEnd
}

// allocationAfterChurn waits until the status is exact for the pods the churn left, then
// measures the operator's memory once quiet again.
func allocationAfterChurn(ctx context.Context, h *harness, state *churnState, churnEnd time.Time, res *allocationResult) error {
	res.after = state.all()
	res.wantAfter = expectAllocation(h.fleet, res.after)
	var last *allocationTotals
	err := watchInventory(ctx, h.watcher, homelabv1.DefaultInventoryName, 2*time.Minute, func(gi *homelabv1.GpuInventory) bool {
		last = allocationOf(gi.Status)
		return last.equal(&res.wantAfter)
	})
	if err != nil {
		return fmt.Errorf("after the pod churn: want %s, last seen %s: %w", &res.wantAfter, last, err)
	}
	res.exactAfter = time.Since(churnEnd)
	time.Sleep(10 * time.Second) // quiet again
	pid := h.op.pid
	res.afterRSS, res.peakRSS = pid.RSS(), pid.Peak()
	res.afterHeap = h.op.metric("go_memstats_heap_inuse_bytes") / 1024
	return nil
}

// alternateRestarts restarts the operator in turn without and with --list-pods-by-namespace,
// each after a pause: every start's list leaves garbage in the API server's heap that slows
// the lists after it, so starts measured after different work would compare the heap, not
// the listing.
func alternateRestarts(ctx context.Context, h *harness, res *allocationResult) error {
	args := h.launcher.args
	defer func() { h.launcher.args = args }()
	for range alternations {
		for _, split := range []bool{false, true} {
			time.Sleep(alternationPause)
			h.launcher.args = args
			if split {
				h.launcher.args = append(slices.Clone(args), "--list-pods-by-namespace")
			}
			took, err := restartUntilAllocation(ctx, h, fmt.Sprintf("allocation: restart, pods listed by namespace: %t", split), &res.wantAfter)
			if err != nil {
				return fmt.Errorf("restart (pods listed by namespace: %t): %w", split, err)
			}
			time.Sleep(alternationPause)
			if split {
				res.byNamespace = append(res.byNamespace, took)
				err = res.floor.listByNamespace(ctx)
			} else {
				res.atOnce = append(res.atOnce, took)
				err = res.floor.listAtOnce(ctx)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// createNamespaces creates the namespaces of the phase's pods.
func createNamespaces(ctx context.Context, kube kubernetes.Interface) error {
	var names []string
	for k := range gpuNamespaces {
		names = append(names, fmt.Sprintf("ml-%02d", k))
	}
	for k := range ordinaryNamespaces {
		names = append(names, fmt.Sprintf("team-%02d", k))
	}
	for _, name := range names {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	return nil
}

// createPods creates plans with workers in parallel, each pod then given the status its
// kubelet (or, for a pod that waits, the scheduler) writes. It stops at the first error.
func createPods(ctx context.Context, kube kubernetes.Interface, plans []*podPlan, workers, fleetSize int) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var done atomic.Int64
	todo := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for k := range todo {
				if err := createPod(ctx, kube, plans[k], k, fleetSize); err != nil {
					cancel(err)
					continue
				}
				done.Add(1)
			}
		})
	}
	progress := time.NewTicker(15 * time.Second)
	defer progress.Stop()
	start := time.Now()
feed:
	for k := range plans {
		for {
			select {
			case todo <- k:
				continue feed
			case <-ctx.Done():
				break feed
			case <-progress.C:
				d := done.Load()
				fmt.Fprintf(os.Stderr, "allocation: %d of %d pods created, %.0f/s\n", d, len(plans), float64(d)/time.Since(start).Seconds())
			}
		}
	}
	close(todo)
	wg.Wait()
	return context.Cause(ctx)
}

// createPod creates one pod and writes its status, as the Deployment, scheduler and kubelet
// would: the pod arrives bound (or not), then its status changes once; fleetSize is the
// fleet's nodes, which a pod that waits is told of.
func createPod(ctx context.Context, kube kubernetes.Interface, p *podPlan, serial, fleetSize int) error {
	pods := kube.CoreV1().Pods(p.namespace)
	created, err := retried(ctx, func() (*corev1.Pod, error) {
		return pods.Create(ctx, buildPod(p), metav1.CreateOptions{FieldManager: "kube-controller-manager"})
	})
	if apierrors.IsAlreadyExists(err) { // a retried create that had gone through
		created, err = pods.Get(ctx, p.name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("create pod %s/%s: %w", p.namespace, p.name, err)
	}
	created.Status = podStatus(created, p, serial, fleetSize)
	manager := "kubelet"
	if !p.bound() {
		manager = "kube-scheduler"
	}
	if _, err := retried(ctx, func() (*corev1.Pod, error) {
		return pods.UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: manager})
	}); err != nil {
		return fmt.Errorf("write the status of pod %s/%s: %w", p.namespace, p.name, err)
	}
	return nil
}

// retried calls fn until it succeeds or fails with an error that a later try cannot help,
// at most 5 times.
func retried(ctx context.Context, fn func() (*corev1.Pod, error)) (*corev1.Pod, error) {
	for attempt := 1; ; attempt++ {
		pod, err := fn()
		busy := apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err)
		if !busy || attempt == 5 || ctx.Err() != nil {
			return pod, err
		}
		time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
	}
}

// podSizes returns the size of a stored GPU pod of plans: JSON, protobuf and JSON without
// managedFields.
func podSizes(ctx context.Context, kube kubernetes.Interface, plans []*podPlan) (jsonBytes, protoBytes, bare int, err error) {
	for _, p := range plans {
		if !p.holds() {
			continue
		}
		pod, err := kube.CoreV1().Pods(p.namespace).Get(ctx, p.name, metav1.GetOptions{})
		if err != nil {
			return 0, 0, 0, err
		}
		raw, err := pod.Marshal()
		if err != nil {
			return 0, 0, 0, err
		}
		pod.APIVersion, pod.Kind = "v1", "Pod"
		full, err := json.Marshal(pod)
		if err != nil {
			return 0, 0, 0, err
		}
		pod.ManagedFields = nil
		stripped, err := json.Marshal(pod)
		return len(full), len(raw), len(stripped), err
	}
	return 0, 0, 0, nil
}

// churnState is the pods during the churn: which live, which GPU shares are free.
type churnState struct {
	mu       sync.Mutex
	rng      *rand.Rand
	fleet    []fleetNode
	n        int
	names    *podNames
	static   []*podPlan // waiting and finished GPU pods, which the churn leaves alone
	ordinary []*podPlan
	gpu      []*podPlan // bound GPU pods that hold their share
	free     []gpuSlot
	serial   int
	apps     [2]int // Deployments of ordinary and of GPU pods
}

func newChurnState(fleet []fleetNode, o *options, plans []*podPlan, free []gpuSlot, names *podNames, rng *rand.Rand) *churnState {
	s := &churnState{rng: rng, fleet: fleet, n: o.nodes, names: names, free: free, serial: len(plans)}
	s.apps = [2]int{max(1, (o.pods-o.gpuPods)/replicasPerApp), max(1, o.gpuPods/replicasPerApp)}
	for _, p := range plans {
		switch {
		case p.gpu == "":
			s.ordinary = append(s.ordinary, p)
		case p.holds():
			s.gpu = append(s.gpu, p)
		default:
			s.static = append(s.static, p)
		}
	}
	return s
}

// take removes a random live pod of the kind from the state, nil when none is left.
func (s *churnState) take(gpu bool) *podPlan {
	s.mu.Lock()
	defer s.mu.Unlock()
	live := &s.ordinary
	if gpu {
		live = &s.gpu
	}
	if len(*live) == 0 {
		return nil
	}
	k := s.rng.IntN(len(*live))
	p := (*live)[k]
	(*live)[k] = (*live)[len(*live)-1]
	*live = (*live)[:len(*live)-1]
	return p
}

// plan returns a new pod of the kind, of one of the existing Deployments; a GPU pod takes a
// random free share of a GPU node (nil when none is free).
func (s *churnState) plan(gpu bool) (*podPlan, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.serial++
	if !gpu {
		app := s.rng.IntN(s.apps[0])
		p := s.names.next(fmt.Sprintf("team-%02d", app%ordinaryNamespaces), app, false)
		p.node = s.rng.IntN(s.n)
		return p, s.serial
	}
	if len(s.free) == 0 {
		return nil, 0
	}
	k := s.rng.IntN(len(s.free))
	slot := s.free[k]
	s.free[k] = s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	app := s.rng.IntN(s.apps[1])
	p := s.names.next(fmt.Sprintf("ml-%02d", app%gpuNamespaces), app, true)
	p.node, p.slot, p.gpu, p.count = s.fleet[slot.fleet].index, slot, slot.resource, slot.count
	return p, s.serial
}

// settle records the outcome of a creation (live) or a deletion (gone) of p: a pod
// created is live, a pod deleted frees its share; a failed creation frees its share, a
// failed deletion leaves the pod live.
func (s *churnState) settle(p *podPlan, live bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case live && p.gpu != "":
		s.gpu = append(s.gpu, p)
	case live:
		s.ordinary = append(s.ordinary, p)
	case p.gpu != "":
		s.free = append(s.free, p.slot)
	}
}

// all returns every pod there is.
func (s *churnState) all() []*podPlan {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]*podPlan(nil), s.static...)
	out = append(out, s.ordinary...)
	return append(out, s.gpu...)
}

// churnCounts are the churn's operations.
type churnCounts struct {
	creates, deletes, gpuCreates, gpuDeletes, failed atomic.Int64
	mu                                               sync.Mutex
	firstErr                                         error
}

func (c *churnCounts) fail(err error) {
	c.failed.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.firstErr == nil {
		c.firstErr = err
	}
}

// churnPods creates and deletes pods, rate a second in all (half each), a share gpuShare
// of them GPU pods, until ctx ends. A creation is the pod then its kubelet's status; a
// deletion is the graceful delete, then the kubelet's final one once the containers stop.
func churnPods(ctx context.Context, kube kubernetes.Interface, s *churnState, rate, gpuShare float64) *churnCounts {
	c := &churnCounts{}
	ops := make(chan func(), 64)
	var wg sync.WaitGroup
	for range 128 {
		wg.Go(func() {
			for op := range ops {
				op()
			}
		})
	}
	// The operations outlive ctx by their own short deadline, so that none is cut halfway.
	opCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	start := time.Now()
	for k := 0; ; k++ {
		at := start.Add(time.Duration(float64(k) / rate * float64(time.Second)))
		select {
		case <-ctx.Done():
			close(ops)
			wg.Wait()
			return c
		case <-time.After(time.Until(at)):
		}
		s.mu.Lock()
		gpu := s.rng.Float64() < gpuShare
		s.mu.Unlock()
		if k%2 == 0 {
			ops <- func() { churnCreate(opCtx, kube, s, c, gpu) }
		} else {
			ops <- func() { churnDelete(opCtx, kube, s, c, gpu) }
		}
	}
}

func churnCreate(ctx context.Context, kube kubernetes.Interface, s *churnState, c *churnCounts, gpu bool) {
	p, serial := s.plan(gpu)
	if p == nil {
		c.fail(errors.New("no GPU share free for a new GPU pod"))
		return
	}
	pods := kube.CoreV1().Pods(p.namespace)
	created, err := pods.Create(ctx, buildPod(p), metav1.CreateOptions{FieldManager: "kube-controller-manager"})
	if err != nil {
		s.settle(p, false)
		c.fail(fmt.Errorf("create pod %s/%s: %w", p.namespace, p.name, err))
		return
	}
	s.settle(p, true)
	c.creates.Add(1)
	if gpu {
		c.gpuCreates.Add(1)
	}
	created.Status = podStatus(created, p, serial, s.n)
	if _, err := pods.UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: "kubelet"}); err != nil {
		c.fail(fmt.Errorf("write the status of pod %s/%s: %w", p.namespace, p.name, err))
	}
}

func churnDelete(ctx context.Context, kube kubernetes.Interface, s *churnState, c *churnCounts, gpu bool) {
	p := s.take(gpu)
	if p == nil {
		c.fail(errors.New("no pod left to delete"))
		return
	}
	pods := kube.CoreV1().Pods(p.namespace)
	err := pods.Delete(ctx, p.name, metav1.DeleteOptions{})
	if err == nil || apierrors.IsNotFound(err) {
		err = pods.Delete(ctx, p.name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		s.settle(p, true)
		c.fail(fmt.Errorf("delete pod %s/%s: %w", p.namespace, p.name, err))
		return
	}
	s.settle(p, false)
	c.deletes.Add(1)
	if gpu {
		c.gpuDeletes.Add(1)
	}
}

// informerResult is hack/scale/podinformer's output.
type informerResult struct {
	Pods           int     `json:"pods"`
	SyncSeconds    float64 `json:"syncSeconds"`
	RSSKiB         int64   `json:"rssKiB"`
	HeapKiB        int64   `json:"heapKiB"`
	RSSAfterGCKiB  int64   `json:"rssAfterGCKiB"`
	HeapAfterGCKiB int64   `json:"heapAfterGCKiB"`
	PeakKiB        int64   `json:"peakKiB"`
}

// measureInformer builds hack/scale/podinformer into dir and runs it once.
func measureInformer(dir, kubeconfig string) (*informerResult, error) {
	bin := filepath.Join(dir, "podinformer")
	build := exec.Command("go", "build", "-o", bin, "github.com/youngju-dev/gpu-inventory-operator/hack/scale/podinformer")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build hack/scale/podinformer: %w: %s", err, out)
	}
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("podinformer: %w: %s", err, stderr.String())
	}
	var res informerResult
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, fmt.Errorf("podinformer's output: %w", err)
	}
	return &res, nil
}

// freeWhoResult is what the free and who phase measured.
type freeWhoResult struct {
	rows      []commandRow
	whoAgrees string // whether who equals the pods, once who was measured
}

// freeWhoPhase measures `kubectl gpuinv free` and `kubectl gpuinv who` on the allocation
// phase's pods; a command this plugin does not have is reported as not measured.
func freeWhoPhase(ctx context.Context, h *harness) (result, error) {
	o, env := h.o, h.env
	kubeconfig := env.KubeconfigPath()
	res := &freeWhoResult{}
	var whoArgs []string
	for _, c := range []struct {
		args   []string
		exits  []int // exit codes that are answers
		what   string
		target commandTarget
	}{
		{[]string{"free"}, []int{0, 4}, "reads the GpuInventory", freeTarget},
		{[]string{"who"}, []int{0}, fmt.Sprintf("streams the %d pods and the claims", o.pods), whoTarget},
		{[]string{"who", "--disable-compression"}, []int{0}, "the same without gzip, kubectl's flag", whoTarget},
	} {
		row := commandRow{args: c.args, what: c.what, target: c.target}
		help, err := pluginHelp(o.plugin, c.args[0])
		if err != nil {
			row.notMeasured = err
			res.rows = append(res.rows, row)
			continue
		}
		if c.args[0] == "who" && strings.Contains(help, "--all-namespaces") {
			row.args = append(c.args[:1:1], append([]string{"--all-namespaces"}, c.args[1:]...)...)
		}
		var profiled sync.WaitGroup
		if c.args[0] == "who" && len(row.args) == 2 {
			h.prof.apiServer(&profiled, env.Config, 15*time.Second, "who-apiserver-cpu.pprof")
		}
		row.runs, err = measurePluginExits(env.Dir, o.plugin, kubeconfig, o.pluginRuns, c.exits, row.args...)
		profiled.Wait()
		if err != nil {
			return nil, err
		}
		res.rows = append(res.rows, row)
		if c.args[0] == "who" && whoArgs == nil {
			whoArgs = row.args
		}
	}
	if whoArgs != nil {
		res.whoAgrees = whoAgrees(o.plugin, kubeconfig, whoArgs, &h.alloc.wantAfter)
	}
	return res, nil
}

// whoAgrees compares the totals of `kubectl gpuinv who -o json` with the pods as created and
// the operator's status (want): the pods holding and waiting must be equal; the milli-GPUs
// are shown side by side, who summing per namespace on each node as the status's namespaces
// do.
func whoAgrees(binary, kubeconfig string, args []string, want *allocationTotals) string {
	data, err := exec.Command(binary, append([]string{"--kubeconfig", kubeconfig}, append(args, "--by-namespace", "-o", "json")...)...).Output()
	if err != nil {
		return fmt.Sprintf("NO: %v", err)
	}
	var who struct {
		Pods        int32 `json:"pods"`
		MilliGpus   int64 `json:"milliGpus"`
		WaitingPods int32 `json:"waitingPods"`
		WaitingGpus int32 `json:"waitingGpus"`
	}
	if err := json.Unmarshal(data, &who); err != nil {
		return fmt.Sprintf("NO: decode its output: %v", err)
	}
	milli := fmt.Sprintf("milli-GPUs: who %d, the status's allocatedMilliGpus %d (%+d)", who.MilliGpus, want.Milli, who.MilliGpus-want.Milli)
	if who.Pods != want.Pods || who.WaitingPods != want.PendingPods || who.WaitingGpus != want.PendingGpus {
		return fmt.Sprintf("NO: who %d pods holding, %d waiting for %d GPUs; the pods make %d, %d waiting for %d; %s",
			who.Pods, who.WaitingPods, who.WaitingGpus, want.Pods, want.PendingPods, want.PendingGpus, milli)
	}
	return fmt.Sprintf("yes: %d pods holding, %d waiting for %d GPUs; %s", who.Pods, who.WaitingPods, who.WaitingGpus, milli)
}
