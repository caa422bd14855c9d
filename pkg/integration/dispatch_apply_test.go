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
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/nominate"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// pendingWorkload is a Workload of pods x gpus as Kueue's manager leaves it waiting for
// MultiKueue: its quota reserved by an apply under kueue-admission, its admission check
// Pending written by kueue.
func pendingWorkload(t *testing.T, dyn dynamic.Interface, name string, pods, gpus int64) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	client := dyn.Resource(testenv.WorkloadsResource).Namespace(dispatchNamespace)
	wl := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": name, "namespace": dispatchNamespace},
		"spec": map[string]any{"queueName": dispatchQueue, "podSets": []any{map[string]any{"name": "main", "count": pods,
			"template": map[string]any{"spec": map[string]any{"restartPolicy": "Never", "containers": []any{map[string]any{"name": "main", "image": "pause",
				"resources": map[string]any{"requests": map[string]any{gpuResource: gpus}, "limits": map[string]any{gpuResource: gpus}}}}}}}}}}}
	if _, err := client.Create(ctx, wl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Workload %s: %v", name, err)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	reserved := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": name, "namespace": dispatchNamespace},
		"status": map[string]any{
			"admission": map[string]any{"clusterQueue": dispatchQueue, "podSetAssignments": []any{map[string]any{"name": "main", "count": pods,
				"flavors": map[string]any{gpuResource: "default"}, "resourceUsage": map[string]any{gpuResource: gpus * pods}}}},
			"conditions": []any{map[string]any{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
				"message": "Quota reserved in ClusterQueue train", "lastTransitionTime": now}}}}}
	if _, err := client.ApplyStatus(ctx, name, reserved, metav1.ApplyOptions{FieldManager: nominate.KueueFieldManager}); err != nil {
		t.Fatalf("reserve quota for %s: %v", name, err)
	}
	check, _ := json.Marshal(map[string]any{"status": map[string]any{"admissionChecks": []any{map[string]any{"name": testenv.MultiKueueCheck,
		"state": "Pending", "message": "", "lastTransitionTime": now}}}})
	got, err := client.Patch(ctx, name, types.MergePatchType, check, metav1.PatchOptions{FieldManager: "kueue"}, "status")
	if err != nil {
		t.Fatalf("the admission check of %s: %v", name, err)
	}
	return got
}

// The nomination is Kueue's own apply: on a real API server with Kueue's CRDs it leaves the
// status as it was but for nominatedClusterNames, and Kueue's next apply, which sets
// clusterName and leaves the nomination out, is accepted and clears it. The hub's
// condition, applied under its own manager, survives Kueue's applies that leave it out.
func TestNominationIsKueuesApply(t *testing.T) {
	c := startCluster(t)
	ctx := testContext(t)
	if err := c.env.InstallKueueCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	c.ensureNamespace(t, dispatchNamespace)
	dyn := dynamic.NewForConfigOrDie(c.env.Config)
	c.applyKueue(t,
		kueueObj("AdmissionCheck", testenv.MultiKueueCheck, map[string]any{"controllerName": testenv.MultiKueueControllerName,
			"parameters": map[string]any{"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": testenv.MultiKueueCheck}}),
		kueueObj("MultiKueueConfig", testenv.MultiKueueCheck, map[string]any{"clusters": []any{"w1"}}),
		kueueObj("MultiKueueCluster", "w1", map[string]any{"clusterSource": map[string]any{"kubeConfig": map[string]any{"locationType": "Secret", "location": "w1"}}}))
	active := kueueObj("MultiKueueCluster", "w1", nil)
	active.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Active", "status": "True", "reason": "Active",
		"message": "Connected", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}
	if _, err := dyn.Resource(testenv.MultiKueueClustersResource).ApplyStatus(ctx, "w1", active, metav1.ApplyOptions{FieldManager: "kueue"}); err != nil {
		t.Fatal(err)
	}
	before := pendingWorkload(t, dyn, "fits", 2, 8)
	pendingWorkload(t, dyn, "too-big", 4, 8)

	runNominator(ctx, t, c.env.Config, staticMembers{"w1": {State: homelabv1.MemberReachable, Status: &homelabv1.GpuInventoryStatus{
		Models: []homelabv1.GpuModel{{Product: h100Product, Nodes: 2, ReadyNodes: 2, FreeNodes: []int32{0, 0, 0, 0, 0, 0, 0, 2}}}}}})

	after := c.waitKueue(t, testenv.WorkloadsResource, dispatchNamespace, "fits", "nominated", func(wl *unstructured.Unstructured) bool {
		names, _, _ := unstructured.NestedStringSlice(wl.Object, "status", "nominatedClusterNames")
		return slices.Equal(names, []string{"w1"})
	})
	wantStatus := before.DeepCopy().Object["status"].(map[string]any)
	wantStatus["nominatedClusterNames"] = []any{"w1"}
	if got := after.Object["status"]; !reflect.DeepEqual(got, wantStatus) {
		t.Errorf("status after the nomination:\n%v\nwant the status before and the nomination:\n%v", got, wantStatus)
	}
	if owner := fieldOwner(after, "nominatedClusterNames"); owner != nominate.KueueFieldManager {
		t.Errorf("nominatedClusterNames owned by %q, want %s", owner, nominate.KueueFieldManager)
	}

	// Kueue admits on w1: its apply sets clusterName and leaves the nomination out.
	admitted := after.DeepCopy()
	status := admitted.Object["status"].(map[string]any)
	delete(status, "nominatedClusterNames")
	status["clusterName"] = "w1"
	apply := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": "fits", "namespace": dispatchNamespace, "resourceVersion": after.GetResourceVersion()}, "status": status}}
	client := dyn.Resource(testenv.WorkloadsResource).Namespace(dispatchNamespace)
	got, err := client.ApplyStatus(ctx, "fits", apply, metav1.ApplyOptions{FieldManager: nominate.KueueFieldManager, Force: true})
	if err != nil {
		t.Fatalf("Kueue's apply of clusterName after the hub's nomination: %v", err)
	}
	if names, found, _ := unstructured.NestedStringSlice(got.Object, "status", "nominatedClusterNames"); found {
		t.Errorf("nominatedClusterNames %v after Kueue's apply, want it cleared", names)
	}

	big := c.waitKueue(t, testenv.WorkloadsResource, dispatchNamespace, "too-big", "fitting nowhere", func(wl *unstructured.Unstructured) bool {
		return gpuFitMessage(wl) != ""
	})
	if owner := fieldOwner(big, `k:{"type":"`+nominate.ConditionGpuFit+`"}`); owner != homelabv1.FleetFieldManager {
		t.Errorf("the GpuFit condition owned by %q, want %s", owner, homelabv1.FleetFieldManager)
	}
	kueueApply := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": "too-big", "namespace": dispatchNamespace},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
			"message": "Quota reserved in ClusterQueue train", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}}}
	got, err = client.ApplyStatus(ctx, "too-big", kueueApply, metav1.ApplyOptions{FieldManager: nominate.KueueFieldManager, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if gpuFitMessage(got) == "" {
		t.Errorf("the hub's condition was removed by Kueue's apply that left it out")
	}
}

// staticMembers is a view of workers that never changes: the apply needs no worker.
type staticMembers map[string]nominate.Member

func (v staticMembers) Member(name string) (nominate.Member, bool) {
	m, ok := v[name]
	return m, ok
}

// runNominator runs the nomination controller alone on cfg's cluster, with members, until
// the test ends.
func runNominator(ctx context.Context, t *testing.T, cfg *rest.Config, members nominate.Members) {
	dyn := dynamic.NewForConfigOrDie(cfg)
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	informers := nominate.InformerFunc(func(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
		return factory.ForResource(gvr).Informer()
	})
	_, run, err := nominate.NewController(ctx, nominate.Options{Client: dyn, Informers: informers, Members: members,
		Recorder: record.NewFakeRecorder(100), Metrics: metrics.New()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	factory.Start(ctx.Done())
	go func() { done <- run.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dispatcher: %v", err)
		}
		factory.Shutdown()
	})
}

func kueueObj(kind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind,
		"metadata": map[string]any{"name": name}}}
	if spec != nil {
		u.Object["spec"] = spec
	}
	return u
}

// fieldOwner is the manager whose entry of the status subresource names field.
func fieldOwner(obj *unstructured.Unstructured, field string) string {
	for _, mf := range obj.GetManagedFields() {
		if mf.Subresource != "status" || mf.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		status, _ := fields["f:status"].(map[string]any)
		if _, ok := status["f:"+field]; ok {
			return mf.Manager
		}
		if conditions, ok := status["f:conditions"].(map[string]any); ok {
			if _, ok := conditions[field]; ok {
				return mf.Manager
			}
		}
	}
	return ""
}
