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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	for _, r := range []string{"localqueues", "clusterqueues", "resourceflavors", "topologies", "workloads"} {
		gvrs[schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: r}] = "List"
		gvrs[schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta1", Resource: r}] = "List"
	}
	gvrs[schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "podgroups"}] = "PodGroupList"
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

// job is Job ml/NAME of parallelism pods of gpus GPUs, its pod template annotated (KEY:
// VALUE pairs) and labelled with queue when not "".
func job(name string, parallelism, gpus int, queue string, annotations ...string) string {
	labels, ann := "", ""
	if queue != "" {
		labels = "\n  labels: {kueue.x-k8s.io/queue-name: " + queue + "}"
	}
	for i := 0; i+1 < len(annotations); i += 2 {
		ann += fmt.Sprintf("%s: %q, ", annotations[i], annotations[i+1])
	}
	return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata:
  name: %s
  namespace: ml%s
spec:
  parallelism: %d
  template:
    metadata: {annotations: {%s}}
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: cuda:12
        resources: {limits: {nvidia.com/gpu: %d}}
`, name, labels, parallelism, strings.TrimSuffix(ann, ", "), gpus)
}

// A Workload's podGroupTemplate is the group of the pods that name it; a Job's pods join the
// file's only group.
func TestFitWorkloadAndJob(t *testing.T) {
	file := `apiVersion: scheduling.k8s.io/v1beta1
kind: Workload
metadata: {name: training, namespace: ml}
spec:
  podGroupTemplates:
  - name: workers
    schedulingPolicy: {gang: {minCount: 3}}
    schedulingConstraints: {topology: [{key: topology.kubernetes.io/rack}]}
---
` + job("sweep", 3, 6, "")
	r := runFit(t, gangClients(t, racks()), file, "-f", "-", "-o", "json")
	a := decodeGangFit(t, r.out)
	if r.code != factory.ExitOK || !a.Fits || a.Gangs[0].Gang != "Workload/training/workers" || a.Gangs[0].Domain != "rack-b" {
		t.Fatalf("exit %d, stderr %q, answer %+v", r.code, r.err, a.Gangs)
	}
	if !strings.Contains(r.err, "Job ml/sweep names no pod group") {
		t.Errorf("stderr %q: want a note that the Job joined the only group", r.err)
	}
	if diff := cmp.Diff(map[string]string{"sweep-0": "b1", "sweep-1": "b2", "sweep-2": "b3"}, podNodes(a)); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
}

// Without Kueue, Kueue's required topology is the PodGroup's key: a Job of 3 x 6 GPUs goes to
// rack-b; a note says whose answer it is.
func TestFitJobTopologyWithoutKueue(t *testing.T) {
	file := job("sweep", 3, 6, "train", "kueue.x-k8s.io/podset-required-topology", rackKey)
	r := runFit(t, gangClients(t, racks()), file, "-f", "-", "-o", "json")
	a := decodeGangFit(t, r.out)
	if r.code != factory.ExitOK || a.Gangs[0].As != printer.AsScheduler || a.Gangs[0].Domain != "rack-b" {
		t.Fatalf("exit %d, stderr %q, answer %+v", r.code, r.err, a.Gangs)
	}
	for _, want := range []string{"serves no Kueue", "without Kueue's Topology Aware Scheduling"} {
		if !strings.Contains(r.err, want) {
			t.Errorf("stderr %q lacks %q", r.err, want)
		}
	}
	// Without a queue, a plain Job is placed as before, replica by replica.
	r = runFit(t, gangClients(t, racks()), job("plain", 3, 6, ""), "-f", "-", "-o", "json")
	if r.code != factory.ExitOK || strings.Contains(r.out, `"gangs"`) {
		t.Errorf("plain Job: exit %d, output %s", r.code, r.out)
	}
}

func kueueObject(kind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, "spec": spec}}
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// tasQueue is LocalQueue ml/train into ClusterQueue team, whose GPU flavor tas-gpu has
// Topology default: racks, then hosts.
func tasQueue() []runtime.Object {
	return []runtime.Object{
		kueueObject("LocalQueue", "ml", "train", map[string]any{"clusterQueue": "team"}),
		kueueObject("ClusterQueue", "", "team", map[string]any{"resourceGroups": []any{
			map[string]any{"coveredResources": []any{"cpu"}, "flavors": []any{map[string]any{"name": "cpu-only"}}},
			map[string]any{"coveredResources": []any{"nvidia.com/gpu"}, "flavors": []any{map[string]any{"name": "tas-gpu"}}},
		}}),
		kueueObject("ResourceFlavor", "", "cpu-only", map[string]any{}),
		kueueObject("ResourceFlavor", "", "tas-gpu", map[string]any{"topologyName": "default", "nodeLabels": map[string]any{"pool": "train"}}),
		kueueObject("Topology", "", "default", map[string]any{"levels": []any{
			map[string]any{"nodeLabel": rackKey}, map[string]any{"nodeLabel": "kubernetes.io/hostname"}}}),
	}
}

// In a queue of a flavor with a Topology, the Job is answered as Kueue assigns it: 3 x 6
// GPUs in rack-b, 4 x 6 nowhere, in Kueue's words.
func TestFitJobAsKueue(t *testing.T) {
	r := runFit(t, gangClients(t, racks(), tasQueue()...), job("sweep", 3, 6, "train", "kueue.x-k8s.io/podset-required-topology", rackKey), "-f", "-", "-o", "json")
	a := decodeGangFit(t, r.out)
	if r.code != factory.ExitOK || len(a.Gangs) != 1 || a.Gangs[0].As != printer.AsKueue || a.Gangs[0].Domain != "rack-b" {
		t.Fatalf("exit %d, stderr %q, answer %+v", r.code, r.err, a.Gangs)
	}
	k := a.Gangs[0].Kueue
	if k == nil || k.ClusterQueue != "team" || k.Flavor != "tas-gpu" || k.Mode != "Fit" || len(k.Levels) != 2 {
		t.Errorf("kueue %+v", k)
	}
	r = runFit(t, gangClients(t, racks(), tasQueue()...), job("sweep", 4, 6, "train", "kueue.x-k8s.io/podset-required-topology", rackKey), "-f", "-")
	if r.code != factory.ExitDoesNotFit {
		t.Fatalf("4 pods: exit %d, stderr %q", r.code, r.err)
	}
	golden(t, "fit-job-kueue-no.golden", r.out)
	want := `couldn't assign flavors to pod set main: topology "default" allows to fit only 3 out of 4 pod(s)`
	if !strings.Contains(r.out, want) {
		t.Errorf("output lacks %q:\n%s", want, r.out)
	}
	// A Job in the queue without annotations is a gang too: its topology is implied.
	r = runFit(t, gangClients(t, racks(), tasQueue()...), job("implied", 2, 8, "train"), "-f", "-", "-o", "json")
	if a := decodeGangFit(t, r.out); r.code != factory.ExitOK || len(a.Gangs) != 1 || a.Gangs[0].As != printer.AsKueue {
		t.Errorf("implied: exit %d, stderr %q, output %s", r.code, r.err, r.out)
	}
}

const jobSetFile = `apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: js
  namespace: ml
  annotations: {alpha.jobset.sigs.k8s.io/exclusive-topology: topology.kubernetes.io/rack}
spec:
  failurePolicy: {maxRestarts: 3}
  replicatedJobs:
  - name: workers
    replicas: %d
    template:
      spec:
        parallelism: 2
        completions: 2
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: main
              image: cuda:12
              resources: {limits: {nvidia.com/gpu: 8}}
`

// A JobSet with exclusive placement: each child Job of 2 x 8 GPUs in a rack of its own; a
// third child Job finds none.
func TestFitJobSetExclusive(t *testing.T) {
	r := runFit(t, gangClients(t, racks()), fmt.Sprintf(jobSetFile, 2), "-f", "-", "-o", "json")
	a := decodeGangFit(t, r.out)
	if r.code != factory.ExitOK || len(a.Gangs) != 2 || a.Gangs[0].Domain == a.Gangs[1].Domain || a.Replicas != 4 {
		t.Fatalf("exit %d, stderr %q, answer %+v", r.code, r.err, a.Gangs)
	}
	if a.Gangs[0].Part != "Job js-workers-0" || a.Pods[0].Pod != "js-workers-0-0" || a.Gangs[0].Topology == nil || !a.Gangs[0].Topology.Exclusive {
		t.Errorf("first gang %+v, first pod %+v", a.Gangs[0], a.Pods[0])
	}
	r = runFit(t, gangClients(t, racks()), fmt.Sprintf(jobSetFile, 3), "-f", "-")
	if r.code != factory.ExitDoesNotFit {
		t.Fatalf("3 child Jobs: exit %d, stderr %q", r.code, r.err)
	}
	golden(t, "fit-jobset-no.golden", r.out)
}

// A LeaderWorkerSet of 2 groups of a leader and a worker, 8 GPUs each, each group in a rack
// of its own.
func TestFitLeaderWorkerSet(t *testing.T) {
	file := `apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: infer
  namespace: ml
  annotations: {leaderworkerset.sigs.k8s.io/exclusive-topology: topology.kubernetes.io/rack}
spec:
  replicas: 2
  startupPolicy: LeaderCreated
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      spec:
        containers:
        - name: main
          image: vllm
          resources: {limits: {nvidia.com/gpu: 8}}
`
	r := runFit(t, gangClients(t, racks()), file, "-f", "-", "-o", "json")
	a := decodeGangFit(t, r.out)
	if r.code != factory.ExitOK || len(a.Gangs) != 2 || a.Gangs[0].Domain == a.Gangs[1].Domain {
		t.Fatalf("exit %d, stderr %q, answer %+v", r.code, r.err, a.Gangs)
	}
	var names []string
	for _, p := range a.Pods {
		names = append(names, p.Pod)
	}
	if diff := cmp.Diff([]string{"infer-0", "infer-0-1", "infer-1", "infer-1-1"}, names); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
}

// Bad input: a clear message and exit status 2, before any simulation.
func TestFitGangBadInput(t *testing.T) {
	huge := fmt.Sprintf(jobSetFile, 10000)
	for _, tc := range []struct {
		name, file, want string
	}{
		{"minCount above the pods", gangPodGroup(5, 4), "PodGroup ml/trainer: minCount 5 is more than its 4 pods"},
		{"key no node carries", strings.Replace(gangPodGroup(2, 2), rackKey, "example.com/row", 1), `no node carries the label "example.com/row"`},
		{"10,000 child Jobs", huge, "fit places at most 2048 pods of gangs"},
		{"two topology keys", strings.Replace(gangPodGroup(2, 2), "[{key: topology.kubernetes.io/rack}]", "[{key: a}, {key: b}]", 1), "has 2 keys: the API allows one"},
		{"a typo", strings.Replace(gangPodGroup(2, 2), "schedulingPolicy", "schedulingPolicyy", 1), `unknown field "spec.schedulingPolicyy"`},
		{"a group not in the file", strings.Replace(gangPodGroup(2, 2), "podGroupName: trainer", "podGroupName: other", 1), `names pod group "other", which the file does not hold`},
		{"a group without pods", strings.Split(gangPodGroup(2, 0), "---")[0], "no pod of the file joins it"},
		{"a gang beside other pods", gangPodGroup(2, 2) + "---\n" + strings.Replace(trainerDeployment, "namespace: ml", "namespace: other", 1), "is in no gang, beside the file's gangs"},
		{"Kueue's annotations at odds", job("sweep", 2, 8, "", "kueue.x-k8s.io/podset-required-topology", rackKey, "kueue.x-k8s.io/podset-preferred-topology", rackKey), "Kueue refuses more than one topology annotation"},
		{"LocalQueue missing", job("sweep", 2, 8, "nope", "kueue.x-k8s.io/podset-required-topology", rackKey), "LocalQueue ml/nope not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runFit(t, gangClients(t, racks(), tasQueue()...), tc.file, "-f", "-")
			if r.code != factory.ExitFitError || !strings.Contains(r.err, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.err, factory.ExitFitError, tc.want)
			}
		})
	}
}

// A gang with a rack constraint reads the pods of the nodes in racks only: cpu-1, in no
// rack, is in no placement.
func TestFitGangReadsItsDomains(t *testing.T) {
	s := racks()
	c := gangClients(t, s)
	r := runFit(t, c, gangPodGroup(3, 3), "-f", "-")
	if r.code != factory.ExitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	var lists []string
	for _, req := range s.ListRequests() {
		if strings.HasSuffix(req.Path, "/pods") {
			lists = append(lists, req.Fields)
		}
	}
	if len(lists) != 6 || strings.Contains(strings.Join(lists, " "), "cpu-1") {
		t.Errorf("pod lists %q: want one per node in a rack, none of cpu-1", lists)
	}
}
