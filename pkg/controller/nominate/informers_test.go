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
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"
)

func namedWorkload(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"namespace": "ml", "name": name}}}
}

// The dispatcher's Kueue informers, made without dynamicinformer (which would link client-go's
// typed informers into the hub): one per resource however
// often it is asked for, listed and then watched once the source runs, synced only once
// listed, and stopped with the run.
func TestKueueObjectsListWatchAndStop(t *testing.T) {
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{WorkloadsResource: "WorkloadList"}, namedWorkload("listed"))
	k := NewKueueObjects(client)
	informer := k.Informer(WorkloadsResource)
	if k.Informer(WorkloadsResource) != informer {
		t.Fatal("a second informer of the same resource")
	}
	watched := make(chan string, 2)
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		watched <- obj.(*unstructured.Unstructured).GetName()
	}}); err != nil {
		t.Fatal(err)
	}
	if k.HasSynced() {
		t.Fatal("synced before it ran")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stopped := make(chan struct{})
	go func() { k.Run(ctx); close(stopped) }()
	if !cache.WaitForCacheSync(ctx.Done(), k.HasSynced) {
		t.Fatal("never synced")
	}
	if _, err := client.Resource(WorkloadsResource).Namespace("ml").Create(ctx, namedWorkload("watched"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"listed", "watched"} {
		select {
		case got := <-watched:
			if got != want {
				t.Errorf("informer saw %s, want %s", got, want)
			}
		case <-ctx.Done():
			t.Fatalf("informer never saw %s", want)
		}
	}
	if _, exists, _ := informer.GetIndexer().GetByKey("ml/watched"); !exists {
		t.Error("ml/watched not in the informer's index")
	}
	cancel()
	<-stopped
}
