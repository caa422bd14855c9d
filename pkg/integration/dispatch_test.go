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
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/nominate"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/follow"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// dispatchMembers is a member view built as the hub's is: each worker's GpuInventory
// followed, and the worker Unreachable from a failed request until one succeeds again.
type dispatchMembers struct {
	mu        sync.Mutex
	members   map[string]nominate.Member
	listeners []func(string)
}

func (v *dispatchMembers) Member(name string) (nominate.Member, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	m, ok := v.members[name]
	return m, ok
}

func (v *dispatchMembers) OnChange(f func(string)) { v.listeners = append(v.listeners, f) }
func (v *dispatchMembers) HasSynced() bool         { return true }

func (v *dispatchMembers) update(name string, change func(*nominate.Member)) {
	v.mu.Lock()
	m := v.members[name]
	change(&m)
	v.members[name] = m
	v.mu.Unlock()
	for _, f := range v.listeners {
		f(name)
	}
}

// follow reads worker name's inventory until ctx ends.
func (v *dispatchMembers) follow(ctx context.Context, t *testing.T, name string, cfg *rest.Config) {
	v.update(name, func(m *nominate.Member) { m.State = homelabv1.MemberConnecting })
	client := versioned.NewForConfigOrDie(cfg).HomelabV1().GpuInventories()
	connection := func(err error) {
		v.update(name, func(m *nominate.Member) {
			switch {
			case err != nil && m.State != homelabv1.MemberUnreachable:
				m.State, m.Reason, m.Message, m.Since = homelabv1.MemberUnreachable, "ConnectionFailed", err.Error(), time.Now()
			case err == nil && m.Status != nil:
				m.State, m.Reason, m.Message, m.Since = homelabv1.MemberReachable, "", "", time.Now()
			}
		})
	}
	go func() {
		err := follow.InventoryWith(ctx, client, homelabv1.DefaultInventoryName, func(gi *homelabv1.GpuInventory, deleted bool) (bool, error) {
			v.update(name, func(m *nominate.Member) {
				if deleted {
					m.State, m.Status = homelabv1.MemberUnreachable, nil
					return
				}
				m.State, m.Status = homelabv1.MemberReachable, gi.Status.DeepCopy()
			})
			return false, nil
		}, follow.Options{Connection: connection})
		if err != nil && ctx.Err() == nil {
			t.Errorf("follow the inventory of %s: %v", name, err)
		}
	}()
}

// dispatchBed is the MultiKueue test bed with the operator on each worker and the
// dispatcher running in the test process.
type dispatchBed struct {
	*testenv.MultiKueue
	workers  map[string]*cluster
	manager  *cluster
	members  *dispatchMembers
	recorder *record.FakeRecorder
}

const (
	dispatchNamespace = "ml"
	dispatchQueue     = "train"
)

// startDispatchBed starts a manager and workers w1 and w2, H100 nodes of the given sizes on
// each, the operator on each worker, and the dispatcher on the manager.
func startDispatchBed(t *testing.T, nodes map[string][]int64) *dispatchBed {
	t.Helper()
	ctx := testContext(t)
	start := time.Now()
	flavor := testenv.KueueResourceFlavor("h100", map[string]string{"nvidia.com/gpu.product": h100Product})
	bed, err := testenv.StartMultiKueue(ctx, testenv.MultiKueueOptions{Workers: []string{"w1", "w2"},
		DispatcherName: homelabv1.MultiKueueDispatcherName, Namespace: dispatchNamespace, Queue: dispatchQueue,
		WorkerFlavors: []*unstructured.Unstructured{flavor},
		WorkerQuotas:  []testenv.KueueQuota{{Flavor: "h100", Resource: gpuResource, Nominal: "64"}},
		ManagerQuotas: []testenv.KueueQuota{{Resource: gpuResource, Nominal: "1000"}}})
	if err != nil {
		t.Fatalf("start the MultiKueue bed: %v", err)
	}
	t.Cleanup(bed.Stop)
	t.Logf("manager and two workers ready in %s", time.Since(start).Round(10*time.Millisecond))
	b := &dispatchBed{MultiKueue: bed, workers: map[string]*cluster{}, members: &dispatchMembers{members: map[string]nominate.Member{}},
		recorder: record.NewFakeRecorder(100), manager: clusterOn(bed.Manager)}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of the manager's Kueue log:\n%s", bed.Manager.KueueLogTail())
		}
	})
	for _, name := range []string{"w1", "w2"} {
		c := clusterOn(bed.Workers[name])
		c.ensureNamespace(t, operatorNamespace)
		var gpus int32
		for i, n := range nodes[name] {
			c.gfdNode(t, fmt.Sprintf("%s-h100-%d", name, i+1), h100Product, n)
			gpus += int32(n)
		}
		startOperator(t, c.env.Config, testOptions())
		n := int32(len(nodes[name]))
		c.waitTotals(t, homelabv1.DefaultInventoryName, totals{Nodes: n, ReadyNodes: n, Gpus: gpus, ReadyGpus: gpus})
		b.workers[name] = c
		b.members.follow(ctx, t, name, c.env.Config)
	}
	b.runDispatcher(ctx, t)
	return b
}

func clusterOn(env *testenv.Env) *cluster {
	return &cluster{env: env, kube: kubernetes.NewForConfigOrDie(env.Config), gpu: versioned.NewForConfigOrDie(env.Config)}
}

// runDispatcher runs the nomination controller on the manager until the test ends.
func (b *dispatchBed) runDispatcher(ctx context.Context, t *testing.T) {
	dyn := dynamic.NewForConfigOrDie(b.Manager.Config)
	factory := nominate.NewKueueObjects(dyn)
	_, run, err := nominate.NewController(ctx, nominate.Options{Client: dyn, Informers: factory, Members: b.members,
		MemberChanges: b.members, Recorder: b.recorder, Metrics: metrics.New()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go factory.Run(ctx)
	go func() { done <- run.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dispatcher: %v", err)
		}
	})
}

// submit creates a Job of pods pods of gpus GPUs on the manager.
func (b *dispatchBed) submit(t *testing.T, name string, pods int32, gpus int64) *batchv1.Job {
	t.Helper()
	job := testenv.MultiKueueJob(dispatchNamespace, name, dispatchQueue, pods, corev1.ResourceList{gpuResource: *resource.NewQuantity(gpus, resource.DecimalSI)})
	created, err := b.manager.kube.BatchV1().Jobs(dispatchNamespace).Create(context.Background(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Job %s: %v", name, err)
	}
	return created
}

// sentTo waits until MultiKueue sent the Job's Workload to a worker, and returns its name;
// it fails when the Workload was ever nominated to another worker on the way.
func (b *dispatchBed) sentTo(t *testing.T, job *batchv1.Job) string {
	t.Helper()
	var nominations [][]string
	wl := b.manager.waitWorkload(t, job, "sent to a worker", func(wl *unstructured.Unstructured) bool {
		if names, _, _ := unstructured.NestedStringSlice(wl.Object, "status", "nominatedClusterNames"); len(names) > 0 {
			nominations = append(nominations, names)
		}
		name, _, _ := unstructured.NestedString(wl.Object, "status", "clusterName")
		return name != ""
	})
	name, _, _ := unstructured.NestedString(wl.Object, "status", "clusterName")
	for _, names := range nominations {
		if !slices.Equal(names, []string{name}) {
			t.Errorf("Job %s was nominated to %v on its way to %s", job.Name, names, name)
		}
	}
	return name
}

// fitsNowhere waits until the dispatcher says the Job fits nowhere, and returns its message.
func (b *dispatchBed) fitsNowhere(t *testing.T, job *batchv1.Job, saying ...string) *unstructured.Unstructured {
	t.Helper()
	return b.manager.waitWorkload(t, job, "fitting nowhere", func(wl *unstructured.Unstructured) bool {
		conditions, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
		for _, c := range conditions {
			c := c.(map[string]any)
			if c["type"] == nominate.ConditionGpuFit && c["reason"] == nominate.ReasonFitsNowhere {
				msg, _ := c["message"].(string)
				return !slices.ContainsFunc(saying, func(s string) bool { return !strings.Contains(msg, s) })
			}
		}
		return false
	})
}

// copies are the Workloads of the manager's Workload wl on each worker.
func (b *dispatchBed) copies(t *testing.T, wl *unstructured.Unstructured) []string {
	t.Helper()
	var on []string
	for name, w := range b.workers {
		_, err := dynamic.NewForConfigOrDie(w.env.Config).Resource(testenv.WorkloadsResource).Namespace(dispatchNamespace).
			Get(context.Background(), wl.GetName(), metav1.GetOptions{})
		if err == nil {
			on = append(on, name)
		}
	}
	return on
}

// runsOn waits until the Job's pods run on the worker, placed by its scheduler on its nodes.
func (b *dispatchBed) runsOn(t *testing.T, worker string, job *batchv1.Job, pods int) {
	t.Helper()
	for _, pod := range b.workers[worker].waitJobPodsRunning(t, job, pods) {
		if !strings.HasPrefix(pod.Spec.NodeName, worker+"-") {
			t.Errorf("pod %s of Job %s runs on %s, want a node of %s", pod.Name, job.Name, pod.Spec.NodeName, worker)
		}
	}
}

// The dispatcher sends each Job only where all of it fits, and MultiKueue and the worker's
// own Kueue and scheduler run it there: 16 GPUs go to the worker with two free 8-GPU nodes;
// once it is full, an 8-GPU Job goes to the other; 32 GPUs go nowhere and are never copied;
// a worker whose API server is stopped is not nominated until it answers again.
func TestDispatchSendsJobsWhereTheyFit(t *testing.T) {
	b := startDispatchBed(t, map[string][]int64{"w1": {8, 8}, "w2": {8, 4}})
	b.waitFree(t, "w1", 16)
	b.waitFree(t, "w2", 12)

	first := b.submit(t, "first", 2, 8)
	if w := b.sentTo(t, first); w != "w1" {
		t.Fatalf("a Job of 2 x 8 GPUs sent to %s, want w1, the only worker with two free 8-GPU nodes", w)
	}
	b.runsOn(t, "w1", first, 2)

	second := b.submit(t, "second", 1, 8)
	if w := b.sentTo(t, second); w != "w2" {
		t.Fatalf("a Job of 1 x 8 GPUs sent to %s, want w2 (w1 is full)", w)
	}
	b.runsOn(t, "w2", second, 1)

	big := b.submit(t, "big", 4, 8)
	wl := b.fitsNowhere(t, big, "w1: ", "w2: ")
	if on := b.copies(t, wl); len(on) != 0 {
		t.Errorf("a Job that fits nowhere was copied to %v", on)
	}
	if names, _, _ := unstructured.NestedStringSlice(wl.Object, "status", "nominatedClusterNames"); len(names) != 0 {
		t.Errorf("a Job that fits nowhere was nominated to %v", names)
	}

	if err := b.Workers["w2"].StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	b.waitState(t, "w2", homelabv1.MemberUnreachable)
	small := b.submit(t, "small", 1, 4)
	wl = b.fitsNowhere(t, small, "w2: ")
	if msg := gpuFitMessage(wl); !strings.Contains(msg, "w2: unreachable") && !strings.Contains(msg, "w2: MultiKueueCluster w2 is not Active") {
		t.Errorf("while w2 is down the dispatcher says %q, want w2 unreachable or not Active", msg)
	}
	if on := b.copies(t, wl); len(on) != 0 {
		t.Errorf("a Job sent while w2 was down was copied to %v", on)
	}
	if err := b.Workers["w2"].StartAPIServer(testContext(t)); err != nil {
		t.Fatal(err)
	}
	b.waitReconnected(t, "w2")
	if w := b.sentTo(t, small); w != "w2" {
		t.Fatalf("a Job of 1 x 4 GPUs sent to %s, want w2 once it answers again", w)
	}
	b.runsOn(t, "w2", small, 1)
	if on := b.copies(t, b.fitsNowhere(t, big)); len(on) != 0 {
		t.Errorf("the Job that fits nowhere was copied to %v in the end", on)
	}
}

// waitFree waits until the dispatcher's view of the worker shows free GPUs of H100.
func (b *dispatchBed) waitFree(t *testing.T, worker string, free int32) {
	t.Helper()
	eventually(t, 60*time.Second, worker+"'s inventory read with "+fmt.Sprint(free)+" free H100 GPUs", func() error {
		m, _ := b.members.Member(worker)
		if m.State != homelabv1.MemberReachable || m.Status == nil {
			return fmt.Errorf("state %s", m.State)
		}
		for _, model := range m.Status.Models {
			if model.Product == h100Product && model.FreeGpus == free && len(model.FreeNodes) > 0 {
				return nil
			}
		}
		return fmt.Errorf("models %+v", m.Status.Models)
	})
}

// waitReconnected waits until MultiKueue reaches the worker again (its reconnection backs
// off from 5 seconds) and the dispatcher's view reads it.
func (b *dispatchBed) waitReconnected(t *testing.T, worker string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := testenv.WaitObject(ctx, b.Manager.Config, testenv.MultiKueueClustersResource, "", worker, func(o *unstructured.Unstructured) bool {
		return o != nil && testenv.KueueConditionTrue(o, "Active")
	}); err != nil {
		t.Fatalf("MultiKueueCluster %s not Active again: %v", worker, err)
	}
	b.waitState(t, worker, homelabv1.MemberReachable)
}

func gpuFitMessage(wl *unstructured.Unstructured) string {
	conditions, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	for _, c := range conditions {
		if c := c.(map[string]any); c["type"] == nominate.ConditionGpuFit {
			msg, _ := c["message"].(string)
			return msg
		}
	}
	return ""
}

func (b *dispatchBed) waitState(t *testing.T, worker, state string) {
	t.Helper()
	eventually(t, 60*time.Second, worker+" "+state, func() error {
		if m, _ := b.members.Member(worker); m.State != state {
			return errors.New(m.State)
		}
		return nil
	})
}
