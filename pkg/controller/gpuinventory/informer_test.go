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

package gpuinventory

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned/fake"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
)

// The informer caches the inventories for the lister, and resyncs at its period, which the
// controller's own handler period needs.
func TestInformerListsAndResyncs(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := fake.NewClientset(&homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: "cluster", ResourceVersion: "3"}})
	inf := NewInformer(prototest.ListOnly[*homelabv1.GpuInventoryList]{ListWatcher: client.HomelabV1().GpuInventories()}, time.Second)
	resynced := make(chan string, 10)
	if _, err := inf.Informer().AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, cur any) { resynced <- cur.(*homelabv1.GpuInventory).Name },
	}, time.Second); err != nil {
		t.Fatal(err)
	}
	go inf.Informer().RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		t.Fatal("the informer never synced")
	}
	gi, err := inf.Lister().Get("cluster")
	if err != nil || gi.ResourceVersion != "3" {
		t.Fatalf("lister: %v, %v; want the inventory at resourceVersion 3", gi, err)
	}
	select {
	case name := <-resynced:
		if name != "cluster" {
			t.Errorf("resync of %q; want cluster", name)
		}
	case <-time.After(30 * time.Second):
		t.Error("no resync within 30 s at a period of 1 s")
	}
}
