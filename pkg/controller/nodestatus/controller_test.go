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
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
)

const namespace = "gpu-inventory-system"

var key = cache.ObjectName{Namespace: namespace, Name: homelabv1.NodeStatusConfigMapName}

// syncOnce seeds the caches, runs the sync handler and returns the client and its actions.
func syncOnce(t *testing.T, nodes []*corev1.Node, existing *corev1.ConfigMap) (*k8sfake.Clientset, []core.Action, context.Context) {
	t.Helper()
	client, actions, ctx, _ := syncRecorded(t, nodes, existing)
	return client, actions, ctx
}

// syncRecorded is syncOnce that also returns the events recorded.
func syncRecorded(t *testing.T, nodes []*corev1.Node, existing *corev1.ConfigMap) (*k8sfake.Clientset, []core.Action, context.Context, *record.FakeRecorder) {
	t.Helper()
	recorder := record.NewFakeRecorder(10)
	_, ctx := ktesting.NewTestContext(t)
	var objs []runtime.Object
	if existing != nil {
		objs = append(objs, existing)
	}
	client := k8sfake.NewClientset(objs...)
	factory := kubeinformers.NewSharedInformerFactory(client, 0)
	cc := &controller.Context{Nodes: factory.Core().V1().Nodes().Informer(), MaxStatusNodes: 500,
		Metrics: metrics.New(), Recorder: recorder}
	configMaps := NewConfigMapInformer(client.CoreV1().ConfigMaps(namespace), key.Name)
	c, _, err := NewController(ctx, cc, Options{Namespace: namespace, Client: client.CoreV1().ConfigMaps(namespace), ConfigMaps: configMaps})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if err := factory.Core().V1().Nodes().Informer().GetIndexer().Add(n); err != nil {
			t.Fatal(err)
		}
	}
	if existing != nil {
		if err := configMaps.GetIndexer().Add(existing); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.syncHandler(ctx, key); err != nil {
		t.Fatalf("sync: %v", err)
	}
	return client, client.Actions(), ctx, recorder
}

func homeLabData(t *testing.T) map[string]string {
	content, _ := inventory.Compute(fixtures.HomeLab(), nil, time.Time{})
	data, err := Data(content.Nodes)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func configMap(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: namespace,
		Annotations: map[string]string{OmittedAnnotation: "0"}}, Data: data}
}

// stored returns the ConfigMap after a sync that must have made exactly one write of verb.
func stored(t *testing.T, client *k8sfake.Clientset, actions []core.Action, ctx context.Context, verb string) *corev1.ConfigMap {
	t.Helper()
	if len(actions) != 1 || actions[0].GetVerb() != verb {
		t.Fatalf("want one %s, got %v", verb, actions)
	}
	cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ConfigMap after sync: %v", err)
	}
	return cm
}

func TestCreatesConfigMapWithOneKeyPerGPUNode(t *testing.T) {
	client, actions, ctx := syncOnce(t, fixtures.HomeLab(), nil)
	cm := stored(t, client, actions, ctx, "create")
	if len(cm.Data) != 4 {
		t.Fatalf("data keys = %v, want the four GPU nodes", cm.Data)
	}
	var nuc1 homelabv1.GpuNodeEntry
	if err := json.Unmarshal([]byte(cm.Data["nuc1"]), &nuc1); err != nil {
		t.Fatalf("nuc1 value %q is not an entry: %v", cm.Data["nuc1"], err)
	}
	want := homelabv1.GpuNodeEntry{Name: "nuc1", Product: "NVIDIA-GeForce-RTX-4070-Laptop-GPU-SHARED", GpuCount: 1, GpuMemoryMiB: 8188, WorkloadConfig: "vm-passthrough"}
	if got := inventory.ReportFields([]homelabv1.GpuNodeEntry{nuc1})[0]; !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("nuc1 = %+v, want %+v", nuc1, want)
	}
	if want := `{"name":"omen2","ready":false,"gpuCount":0,"workloadConfig":"container","conditions":["NotReady","Unreachable"]}`; cm.Data["omen2"] != want {
		t.Errorf("omen2 = %s, want compact JSON %s", cm.Data["omen2"], want)
	}
	for _, plain := range []string{"cp1", "worker1", "worker2", "worker3"} {
		if _, ok := cm.Data[plain]; ok {
			t.Errorf("non-GPU node %s has a key", plain)
		}
	}
}

func TestCurrentConfigMapIsNotWritten(t *testing.T) {
	_, actions, _ := syncOnce(t, fixtures.HomeLab(), configMap(homeLabData(t)))
	if len(actions) != 0 {
		t.Errorf("data is current: want no API call, got %v", actions)
	}
}

func TestChangedNodeUpdatesItsKey(t *testing.T) {
	nodes := fixtures.HomeLab()
	nodes[0].Status.Conditions[0].Status = corev1.ConditionTrue
	client, actions, ctx := syncOnce(t, nodes, configMap(homeLabData(t)))
	cm := stored(t, client, actions, ctx, "update")
	var nuc1 homelabv1.GpuNodeEntry
	if err := json.Unmarshal([]byte(cm.Data["nuc1"]), &nuc1); err != nil || !nuc1.Ready {
		t.Errorf("nuc1 = %s (%v), want ready", cm.Data["nuc1"], err)
	}
}

func TestKeysOfGoneNodesAreDropped(t *testing.T) {
	data := homeLabData(t)
	data["retired"] = `{"name":"retired","ready":false,"gpuCount":8}`
	client, actions, ctx := syncOnce(t, fixtures.HomeLab(), configMap(data))
	cm := stored(t, client, actions, ctx, "update")
	if _, ok := cm.Data["retired"]; ok || len(cm.Data) != 4 {
		t.Errorf("data keys = %v, want the four current GPU nodes only", cm.Data)
	}
}

func TestNoGPUNodesStillCreatesAnEmptyConfigMap(t *testing.T) {
	client, actions, ctx := syncOnce(t, nil, nil)
	if cm := stored(t, client, actions, ctx, "create"); len(cm.Data) != 0 || cm.Labels["app.kubernetes.io/managed-by"] != homelabv1.FieldManager {
		t.Errorf("ConfigMap = %+v, want empty data and the managed-by label", cm)
	}
}

// Someone else's keys, forged entries and binaryData are not taken for memory, and go with
// the next write (binaryData alone could keep the ConfigMap over 1 MiB, failing every update).
func TestForeignContentIsDroppedAndReported(t *testing.T) {
	data := homeLabData(t)
	data["hello"] = "world"
	data["nuc9"] = `{"name":"nuc9","ready":true,"gpuCount":8,"product":"NVIDIA-H100","extra":"field"}`
	data["nuc8"] = `{"name":"other","gpuCount":8}`
	data["nuc7"] = `{"name":"nuc7","gpuCount":-8}`
	data["nuc6"] = `{"name":"nuc6","gpuCount":1,"product":"` + strings.Repeat("x", maxEntryBytes) + `"}`
	existing := configMap(data)
	existing.BinaryData = map[string][]byte{"blob": make([]byte, 900<<10)}
	client, actions, ctx, recorder := syncRecorded(t, fixtures.HomeLab(), existing)
	cm := stored(t, client, actions, ctx, "update")
	if len(cm.Data) != 4 || len(cm.BinaryData) != 0 {
		t.Errorf("data keys %d, binaryData keys %d; want the four GPU nodes and no binaryData", len(cm.Data), len(cm.BinaryData))
	}
	select {
	case ev := <-recorder.Events:
		for _, want := range []string{"Warning ForeignContentDropped", "5 data keys", "hello", "nuc6", "1 binaryData keys"} {
			if !strings.Contains(ev, want) {
				t.Errorf("event %q lacks %q", ev, want)
			}
		}
	default:
		t.Error("no event about the dropped content")
	}
}

func TestReadEntryKeepsOnlyEntriesAsTheOperatorWritesThem(t *testing.T) {
	good := `{"name":"dgx-1","ready":true,"product":"NVIDIA-H100-80GB-HBM3","gpuCount":8,"gpuMemoryMiB":81559}`
	if e, ok := readEntry("dgx-1", good); !ok || e.GpuCount != 8 {
		t.Errorf("readEntry of an entry the operator writes = %+v, %v", e, ok)
	}
	for name, value := range map[string]string{
		"not json": "world", "two values": good + good, "unknown field": `{"name":"dgx-1","x":1}`,
		"other name": `{"name":"dgx-2"}`, "negative count": `{"name":"dgx-1","gpuCount":-1}`,
	} {
		if _, ok := readEntry("dgx-1", value); ok {
			t.Errorf("%s: readEntry accepted %q", name, value)
		}
	}
}
