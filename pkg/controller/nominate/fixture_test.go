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

package nominate

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

const (
	h100      = "NVIDIA-H100-80GB-HBM3"
	namespace = "ml"
)

// fixture is the controller on a fake dynamic client whose informers are fed by hand, and a
// fake member view.
type fixture struct {
	t        *testing.T
	ctx      context.Context
	client   *dynamicfake.FakeDynamicClient
	c        *Controller
	members  *fakeMembers
	clock    *clocktesting.FakeClock
	recorder *record.FakeRecorder
	rv       int
}

func newFixture(t *testing.T, workers ...string) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	listKinds := map[schema.GroupVersionResource]string{
		WorkloadsResource: "WorkloadList", AdmissionChecksResource: "AdmissionCheckList",
		MultiKueueConfigsResource: "MultiKueueConfigList", MultiKueueClustersResource: "MultiKueueClusterList",
	}
	f := &fixture{t: t, ctx: ctx, members: &fakeMembers{members: map[string]Member{}},
		client:   dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds),
		clock:    clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)),
		recorder: record.NewFakeRecorder(100)}
	f.client.PrependReactor("patch", "workloads", f.apply)
	factory := dynamicinformer.NewDynamicSharedInformerFactory(f.client, 0)
	informers := InformerFunc(func(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
		return factory.ForResource(gvr).Informer()
	})
	c, _, err := NewController(ctx, Options{Client: f.client, Informers: informers,
		Members: f.members, MemberChanges: f.members, Recorder: f.recorder, Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	f.add(AdmissionChecksResource, object("AdmissionCheck", "", "multikueue", map[string]any{"spec": map[string]any{
		"controllerName": MultiKueueControllerName,
		"parameters":     map[string]any{"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "gpus"}}}))
	clusters := make([]any, len(workers))
	for i, w := range workers {
		clusters[i] = w
		f.add(MultiKueueClustersResource, activeCluster(w, true))
	}
	f.add(MultiKueueConfigsResource, object("MultiKueueConfig", "", "gpus", map[string]any{"spec": map[string]any{"clusters": clusters}}))
	return f
}

func object(kind, ns, name string, content map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: content}
	u.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func activeCluster(name string, active bool) *unstructured.Unstructured {
	status := "True"
	if !active {
		status = "False"
	}
	return object("MultiKueueCluster", "", name, map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": "Active", "status": status, "reason": "r", "message": "client cannot connect"}}}})
}

// workload is a pending MultiKueue Workload of pods pods of gpus nvidia.com/gpu each, with
// quota reserved in ClusterQueue team-a, and a status field the dispatcher does not know.
func workload(name string, pods, gpus int64) *unstructured.Unstructured {
	container := map[string]any{"name": "main", "resources": map[string]any{"requests": map[string]any{}}}
	if gpus > 0 {
		container["resources"].(map[string]any)["requests"].(map[string]any)["nvidia.com/gpu"] = strconv.FormatInt(gpus, 10)
	}
	return object("Workload", namespace, name, map[string]any{
		"spec": map[string]any{"queueName": "train", "podSets": []any{map[string]any{"name": "main", "count": pods,
			"template": map[string]any{"spec": map[string]any{"containers": []any{container}}}}}},
		"status": map[string]any{
			"admission":       map[string]any{"clusterQueue": "team-a"},
			"admissionChecks": []any{map[string]any{"name": "multikueue", "state": "Pending", "lastTransitionTime": "2026-03-01T11:59:00Z", "message": ""}},
			"conditions": []any{map[string]any{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
				"message": "Quota reserved in ClusterQueue team-a", "lastTransitionTime": "2026-03-01T11:59:00Z"}},
			"accumulatedPastExecutionTimeSeconds": int64(7),
		}})
}

// add puts an object (new or changed) in the fake server and in its informer's cache.
func (f *fixture) add(gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	f.t.Helper()
	f.rv++
	u.SetResourceVersion(strconv.Itoa(f.rv))
	err := f.client.Tracker().Add(u)
	if apierrors.IsAlreadyExists(err) {
		err = f.client.Tracker().Update(gvr, u, u.GetNamespace())
	}
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.informer(gvr).GetIndexer().Update(u.DeepCopy()); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) informer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	return map[schema.GroupVersionResource]cache.SharedIndexInformer{WorkloadsResource: f.c.workloads, AdmissionChecksResource: f.c.checks,
		MultiKueueConfigsResource: f.c.configs, MultiKueueClustersResource: f.c.clusters}[gvr]
}

// get is the Workload as the fake server holds it.
func (f *fixture) get(name string) *unstructured.Unstructured {
	f.t.Helper()
	obj, err := f.client.Tracker().Get(WorkloadsResource, namespace, name)
	if err != nil {
		f.t.Fatal(err)
	}
	return obj.(*unstructured.Unstructured)
}

// sync runs one sync of the Workload, then lets the informer see what it wrote.
func (f *fixture) sync(name string) {
	f.t.Helper()
	if err := f.c.sync(f.ctx, cache.ObjectName{Namespace: namespace, Name: name}); err != nil {
		f.t.Fatalf("sync %s: %v", name, err)
	}
	f.c.workloads.GetIndexer().Update(f.get(name).DeepCopy())
}

// applies are the status applies the controller sent.
func (f *fixture) applies() []clienttesting.PatchActionImpl {
	var out []clienttesting.PatchActionImpl
	for _, a := range f.client.Actions() {
		if p, ok := a.(clienttesting.PatchActionImpl); ok && p.GetPatchType() == types.ApplyPatchType {
			out = append(out, p)
		}
	}
	return out
}

// apply is the server's side of a status apply: the nomination's precondition and whole
// status, or the hub's condition merged into the conditions.
func (f *fixture) apply(action clienttesting.Action) (bool, runtime.Object, error) {
	p := action.(clienttesting.PatchActionImpl)
	var body unstructured.Unstructured
	if err := json.Unmarshal(p.GetPatch(), &body.Object); err != nil {
		return true, nil, err
	}
	stored := f.get(p.GetName()).DeepCopy()
	status, _, _ := unstructured.NestedMap(body.Object, "status")
	switch p.GetPatchOptions().FieldManager {
	case KueueFieldManager:
		if body.GetResourceVersion() != stored.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(WorkloadsResource.GroupResource(), p.GetName(), fmt.Errorf("stale"))
		}
		stored.Object["status"] = status
	case homelabv1.FleetFieldManager:
		cond := status["conditions"].([]any)[0].(map[string]any)
		conditions, _, _ := unstructured.NestedSlice(stored.Object, "status", "conditions")
		kept := []any{cond}
		for _, c := range conditions {
			if c.(map[string]any)["type"] != cond["type"] {
				kept = append(kept, c)
			}
		}
		_ = unstructured.SetNestedSlice(stored.Object, kept, "status", "conditions")
	default:
		return true, nil, fmt.Errorf("apply under an unexpected field manager %q", p.GetPatchOptions().FieldManager)
	}
	f.rv++
	stored.SetResourceVersion(strconv.Itoa(f.rv))
	return true, stored, f.client.Tracker().Update(WorkloadsResource, stored, namespace)
}

// events drains the recorded events.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// fakeMembers is the hub's member view, and its changes.
type fakeMembers struct {
	mu        sync.Mutex
	members   map[string]Member
	listeners []func(string)
}

func (m *fakeMembers) Member(name string) (Member, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mem, ok := m.members[name]
	return mem, ok
}

func (m *fakeMembers) OnChange(f func(string)) { m.listeners = append(m.listeners, f) }
func (m *fakeMembers) HasSynced() bool         { return true }

func (m *fakeMembers) set(name string, mem Member) {
	m.mu.Lock()
	m.members[name] = mem
	m.mu.Unlock()
	for _, f := range m.listeners {
		f(name)
	}
}

// reachable is a member whose nodes have 8 free H100 GPUs each, with 64 GPUs of quota for
// ClusterQueue team-a.
func reachable(nodes int32) Member {
	return Member{State: homelabv1.MemberReachable, Status: &homelabv1.GpuInventoryStatus{
		Models: []homelabv1.GpuModel{{Product: h100, Nodes: nodes, ReadyNodes: nodes, FreeNodes: []int32{0, 0, 0, 0, 0, 0, 0, nodes}}},
		Quota: &homelabv1.GpuQuota{Queues: []homelabv1.QuotaQueue{{Name: "team-a", Model: h100,
			QuotaFigures: homelabv1.QuotaFigures{Resource: "nvidia.com/gpu", Nominal: 64}}}}}}
}
