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

package nodestatus

import (
	"testing"

	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
)

// The ConfigMap is synced again when a node's devices or its record change, and the
// controller waits for the devices and the records to be listed.
func TestFactsEnqueueTheConfigMap(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := k8sfake.NewClientset()
	factory := kubeinformers.NewSharedInformerFactory(client, 0)
	var listeners []func(string)
	synced := false
	source := controller.FactsOf(func(f func(string)) { listeners = append(listeners, f) }, func() bool { return synced })
	cc := &controller.Context{Nodes: factory.Core().V1().Nodes().Informer(), Metrics: metrics.New(),
		Facts: controller.Facts{Devices: source, Records: source}}
	c, _, err := NewController(ctx, cc, Options{Namespace: namespace, Client: client.CoreV1().ConfigMaps(namespace),
		ConfigMaps: NewConfigMapInformer(client.CoreV1().ConfigMaps(namespace), key.Name)})
	if err != nil {
		t.Fatal(err)
	}
	if len(listeners) != 2 {
		t.Fatalf("%d listeners of devices and records, want 2", len(listeners))
	}
	for _, notify := range listeners {
		notify("dgx-1")
		if c.queue.Len() != 1 {
			t.Fatalf("queue holds %d keys after a change, want the ConfigMap's", c.queue.Len())
		}
		got, _ := c.queue.Get()
		c.queue.Done(got)
		if got != key {
			t.Errorf("queued %v, want %v", got, key)
		}
	}
	if c.facts.HasSynced() {
		t.Error("the facts are not listed, but the controller does not wait for them")
	}
	synced = true
	if !c.facts.HasSynced() {
		t.Error("the facts are listed, but the controller still waits for them")
	}
}
