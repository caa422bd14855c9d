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

package gpunode

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned/fake"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
)

// The controller running on informers: it is Synced once the records of the nodes seen at
// start are right (created, repaired, deleted for a node that is gone), and it puts back a
// record someone deletes and follows a relabel.
func TestRunKeepsRecordsFollowingTheNodes(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()

	cpu := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-1", UID: "uid-cpu-1"}}
	kube := k8sfake.NewClientset(gpuNode("dgx-1", "NVIDIA-H100-80GB-HBM3", 8), gpuNode("dgx-2", "NVIDIA-L4", 1), cpu)
	stale := &homelabv1.GpuNode{ObjectMeta: metav1.ObjectMeta{Name: "gone", UID: "r-gone",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "gone", UID: "uid-gone"}}},
		Spec: homelabv1.GpuNodeSpec{Product: "NVIDIA-T4", GpuCount: 1}}
	forged := &homelabv1.GpuNode{ObjectMeta: metav1.ObjectMeta{Name: "dgx-2", UID: "r-dgx-2"},
		Spec: homelabv1.GpuNodeSpec{Product: "NVIDIA-B200", GpuCount: 64}}
	client := fake.NewClientset(stale, forged)

	// The fake clients do not replay what happened between an informer's list and its watch:
	// the test changes nothing before both informers watch.
	watching := make(chan string, 2)
	for _, fakeClient := range []interface {
		PrependWatchReactor(string, core.WatchReactionFunc)
	}{kube, client} {
		fakeClient.PrependWatchReactor("*", func(a core.Action) (bool, watch.Interface, error) {
			select {
			case watching <- a.GetResource().Resource:
			default: // a later watch
			}
			return false, nil, nil
		})
	}

	nodes := nodecache.NewNodeInformer(prototest.ListOnly[*corev1.NodeList]{ListWatcher: kube.CoreV1().Nodes()}, 0)
	records := NewRecordInformer(prototest.ListOnly[*homelabv1.GpuNodeList]{ListWatcher: client.HomelabV1().GpuNodes()}, 0)
	c, run, err := NewController(ctx, &controller.Context{Nodes: nodes, Metrics: metrics.New()},
		Options{Client: client.HomelabV1().GpuNodes(), Records: records, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if c.Synced() {
		t.Fatal("Synced before the caches started")
	}
	go nodes.RunWithContext(ctx)
	go records.Informer().RunWithContext(ctx)
	done := make(chan error)
	go func() { done <- run.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) { return c.Synced(), nil }); err != nil {
		t.Fatalf("never Synced: %v", err)
	}

	for range 2 {
		select {
		case <-watching:
		case <-ctx.Done():
			t.Fatal("the informers never watched")
		}
	}
	gpuNodes := client.HomelabV1().GpuNodes()
	for name, product := range map[string]string{"dgx-1": "NVIDIA-H100-80GB-HBM3", "dgx-2": "NVIDIA-L4"} {
		r, err := gpuNodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil || r.Spec.Product != product || len(r.OwnerReferences) != 1 {
			t.Errorf("record %s once Synced = %+v, %v; want product %s, owned by its node", name, r, err, product)
		}
	}
	if _, err := gpuNodes.Get(ctx, "gone", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("record of a node that is gone: %v, want NotFound", err)
	}
	if _, err := gpuNodes.Get(ctx, "cpu-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("record of a CPU node: %v, want NotFound", err)
	}

	// Someone deletes a record; then the node is relabelled.
	w, err := gpuNodes.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := gpuNodes.Delete(ctx, "dgx-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The fake client's watch starts with the records that exist: the deletion comes first.
	waitFor(t, w, "dgx-1 deleted", 10*time.Second, func(e watch.Event, r *homelabv1.GpuNode) bool {
		return e.Type == watch.Deleted && r.Name == "dgx-1"
	})
	waitFor(t, w, "dgx-1 recreated", 10*time.Second, func(e watch.Event, r *homelabv1.GpuNode) bool {
		return e.Type == watch.Added && r.Name == "dgx-1" && r.Spec.Product == "NVIDIA-H100-80GB-HBM3"
	})
	relabelled := gpuNode("dgx-1", "NVIDIA-H200", 8)
	relabelled.ResourceVersion = ""
	if _, err := kube.CoreV1().Nodes().Update(ctx, relabelled, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Its third write in a moment: the write limiter spaces it by up to RelabelInterval.
	waitFor(t, w, "dgx-1 relabelled", RelabelInterval+10*time.Second, func(e watch.Event, r *homelabv1.GpuNode) bool {
		return e.Type == watch.Modified && r.Name == "dgx-1" && r.Spec.Product == "NVIDIA-H200"
	})
	if r := c.Record("dgx-2"); r == nil || len(r.ManagedFields) != 0 {
		t.Errorf("cached record = %+v; want it without managedFields", r)
	}
	if r := c.Record("dgx-2"); r == nil || !Summarized(r) || r.Spec.Product != "NVIDIA-L4" {
		t.Errorf("cached record = %+v; want the summary of the record as written", r)
	}
}

func waitFor(t *testing.T, w watch.Interface, what string, within time.Duration, match func(watch.Event, *homelabv1.GpuNode) bool) {
	t.Helper()
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed before %s", what)
			}
			if r, isRecord := e.Object.(*homelabv1.GpuNode); isRecord && match(e, r) {
				return
			}
		case <-time.After(within):
			t.Fatalf("no %s within %v", what, within)
		}
	}
}
