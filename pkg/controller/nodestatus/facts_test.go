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
	"context"
	"testing"

	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
)

// fakeSource is a source the test drives.
type fakeSource struct {
	name      string
	listeners []func(string)
	synced    bool
}

func (s *fakeSource) Name() string            { return s.name }
func (s *fakeSource) Run(context.Context)     {}
func (s *fakeSource) HasSynced() bool         { return s.synced }
func (s *fakeSource) OnChange(f func(string)) { s.listeners = append(s.listeners, f) }

type devicesOf struct{ *fakeSource }

func (devicesOf) Facts(string) *inventory.DeviceFacts  { return nil }
func (devicesOf) Devices(string) []homelabv1.GpuDevice { return nil }

type recordsOf struct{ *fakeSource }

func (recordsOf) Record(string) *homelabv1.GpuNodeSpec { return nil }

// The ConfigMap is synced again when a node's devices or its record change, and the
// controller waits for the devices and the records to be listed.
func TestFactsEnqueueTheConfigMap(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := k8sfake.NewClientset()
	factory := kubeinformers.NewSharedInformerFactory(client, 0)
	devices, records := &fakeSource{name: "resourceslices"}, &fakeSource{name: "gpunodes"}
	cc := &controller.Context{Nodes: factory.Core().V1().Nodes().Informer(), Metrics: metrics.New(),
		Facts: controller.NewFacts([]source.Source{devicesOf{devices}, recordsOf{records}})}
	c, _, err := NewController(ctx, cc, Options{Namespace: namespace, Client: client.CoreV1().ConfigMaps(namespace),
		ConfigMaps: NewConfigMapInformer(client.CoreV1().ConfigMaps(namespace), key.Name)})
	if err != nil {
		t.Fatal(err)
	}
	if len(devices.listeners) != 1 || len(records.listeners) != 1 {
		t.Fatalf("%d listeners of devices and %d of records, want 1 each", len(devices.listeners), len(records.listeners))
	}
	for _, notify := range []func(string){devices.listeners[0], records.listeners[0]} {
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
	devices.synced, records.synced = true, true
	if !c.facts.HasSynced() {
		t.Error("the facts are listed, but the controller still waits for them")
	}
}
