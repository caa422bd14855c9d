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

package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/plugintest"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// rackNode is a Ready node in a rack with gpus device-plugin GPUs.
func rackNode(name, rack string, gpus int64) *corev1.Node {
	n := schedNode(name, "train", gpus)
	n.Labels[rackKey] = rack
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return n
}

// racks is rack-a (a1 with 6 of its 8 GPUs held, a2, a3), rack-b (b1, b2, b3 free) and
// cpu-1, a node of no rack.
func racks() *plugintest.NodeServer {
	s := &plugintest.NodeServer{}
	for _, r := range []string{"a", "b"} {
		for i := 1; i <= 3; i++ {
			s.Nodes = append(s.Nodes, rackNode(fmt.Sprintf("%s%d", r, i), "rack-"+r, 8))
		}
	}
	s.Nodes = append(s.Nodes, schedNode("cpu-1", "train", 0))
	s.Pods = []*corev1.Pod{gpuPod("other", "holder", "a1", statusTime, allocation.ResourceGPU, 6)}
	return s
}

// gangClients serves the cluster from an API server, and Kueue's objects (none: Kueue not
// served) from a fake dynamic client.
func gangClients(t *testing.T, s *plugintest.NodeServer, kueue ...runtime.Object) *factory.Factory {
	t.Helper()
	return &factory.Factory{Base: s.Start(t), Warnings: io.Discard, FakeDynamic: kueueDynamic(kueue...)}
}

// kueueDynamic serves Kueue v1beta2's objects; without any, Kueue is not served.
func kueueDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	gvrs := map[schema.GroupVersionResource]string{}
	for _, r := range []string{"localqueues", "clusterqueues", "resourceflavors", "topologies"} {
		gvrs[schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: r}] = "List"
		gvrs[schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta1", Resource: r}] = "List"
	}
	d := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), gvrs, objs...)
	if len(objs) == 0 {
		d.PrependReactor("get", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewNotFound(a.GetResource().GroupResource(), "")
		})
	}
	return d
}

// gangPodGroup is PodGroup ml/trainer (minCount, a rack) and pods of 6 GPUs naming it.
func gangPodGroup(minCount, pods int) string {
	s := fmt.Sprintf(`apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: trainer, namespace: ml}
spec:
  schedulingPolicy: {gang: {minCount: %d}}
  schedulingConstraints: {topology: [{key: topology.kubernetes.io/rack}]}
`, minCount)
	for i := range pods {
		s += fmt.Sprintf(`---
apiVersion: v1
kind: Pod
metadata: {name: trainer-%d, namespace: ml}
spec:
  schedulingGroup: {podGroupName: trainer}
  containers:
  - name: main
    image: cuda:12
    resources: {limits: {nvidia.com/gpu: 6}}
`, i)
	}
	return s
}

func decodeGangFit(t *testing.T, out string) printer.GangFit {
	t.Helper()
	var a printer.GangFit
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	return a
}

func podNodes(a printer.GangFit) map[string]string {
	out := map[string]string{}
	for _, p := range a.Pods {
		out[p.Pod] = p.Node
	}
	return out
}

// Three pods of 6 GPUs and minCount 3 fit only in rack-b (rack-a has room for two); four do
// not fit in any rack, and the answer is the scheduler's condition message.
func TestFitPodGroup(t *testing.T) {
	r := runFit(t, gangClients(t, racks()), gangPodGroup(3, 3), "-f", "-")
	if r.code != factory.ExitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	golden(t, "fit-podgroup.golden", r.out)
	r = runFit(t, gangClients(t, racks()), gangPodGroup(3, 3), "-f", "-", "-o", "json")
	a := decodeGangFit(t, r.out)
	if !a.Fits || len(a.Gangs) != 1 || a.Gangs[0].Domain != "rack-b" || a.Gangs[0].As != printer.AsScheduler {
		t.Errorf("answer %+v", a)
	}
	if diff := cmp.Diff(map[string]string{"trainer-0": "b1", "trainer-1": "b2", "trainer-2": "b3"}, podNodes(a)); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
	if d := a.Gangs[0].Domains; len(d) != 2 || d[0].Value != "rack-b" || d[0].Pods != 3 || d[1].Pods != 2 {
		t.Errorf("domains %+v: want rack-b (3 pods) before rack-a (2)", d)
	}

	r = runFit(t, gangClients(t, racks()), gangPodGroup(4, 4), "-f", "-", "-o", "json")
	if r.code != factory.ExitDoesNotFit {
		t.Fatalf("four pods: exit %d, stderr %q", r.code, r.err)
	}
	a = decodeGangFit(t, r.out)
	want := "pod group is unschedulable, 0/2 placements are available, first placement status: minCount (4) cannot be satisfied: 2 scheduled, 1 remaining, pod group preemption: "
	if a.Fits || !strings.HasPrefix(a.Gangs[0].Message, want) {
		t.Errorf("four pods: message %q, want it to start %q", a.Gangs[0].Message, want)
	}
	r = runFit(t, gangClients(t, racks()), gangPodGroup(4, 4), "-f", "-")
	golden(t, "fit-podgroup-no.golden", r.out)
}

// minCount below the pods: the gang is placed when minCount fit; the rest stay pending.
func TestFitPodGroupMinCount(t *testing.T) {
	r := runFit(t, gangClients(t, racks()), gangPodGroup(3, 4), "-f", "-", "-o", "json")
	a := decodeGangFit(t, r.out)
	if r.code != factory.ExitOK || !a.Fits || a.Gangs[0].Placed != 3 || a.Gangs[0].Domain != "rack-b" {
		t.Errorf("exit %d, answer %+v", r.code, a.Gangs)
	}
}
