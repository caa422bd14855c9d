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

package podcache

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/intern"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
)

// The hand decoder (decodePod) against what client-go's protobuf serializer does (the
// generated Unmarshal) followed by allocation.FromPod and the interning the cache does of a
// pod decoded whole: per-decode CPU and garbage, and what is kept per pod afterwards.

// decodeBenchPodCount is how many pods each input set has.
const decodeBenchPodCount = 1000

// decodeBenchSet is one set of protobuf Pods (Marshal of the generated type, the message
// inside the API server's envelope) and the pods they encode.
type decodeBenchSet struct {
	name string
	pods []*corev1.Pod
	data [][]byte
}

// decodeBenchSets are GPU pods (device plugin, one or eight GPUs, pinned to a model), pods
// without GPUs, and a list's mix of both (one in five a GPU pod, as in the scale run).
func decodeBenchSets(tb testing.TB) []decodeBenchSet {
	sets := []decodeBenchSet{{name: "gpu"}, {name: "no-gpu"}, {name: "mix"}}
	for i := range decodeBenchPodCount {
		sets[0].pods = append(sets[0].pods, decodeBenchPod(i, true))
		sets[1].pods = append(sets[1].pods, decodeBenchPod(i, false))
		sets[2].pods = append(sets[2].pods, decodeBenchPod(i, i%5 == 0))
	}
	for s := range sets {
		for _, p := range sets[s].pods {
			data, err := p.Marshal()
			if err != nil {
				tb.Fatal(err)
			}
			sets[s].data = append(sets[s].data, data)
		}
	}
	return sets
}

// decodeBenchPod is the i-th pod of a Deployment's ReplicaSet as the API server holds it once
// a kubelet runs it: managed fields, env, probes, a service-account volume, tolerations, a
// running status; gpu: a trainer asking for whole GPUs of one model.
func decodeBenchPod(i int, gpu bool) *corev1.Pod {
	created := metav1.NewTime(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second))
	started := metav1.NewTime(created.Add(20 * time.Second))
	namespace, app := fmt.Sprintf("team-%02d", i%50), "frontend"
	if gpu {
		app = "trainer"
	}
	env := make([]corev1.EnvVar, 12)
	for j := range env {
		env[j] = corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", j), Value: fmt.Sprintf("value-%d", j)}
	}
	container := corev1.Container{
		Name: app, Image: "registry.example.com/" + namespace + "/" + app + ":v1.42.0", Env: env,
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Gi")},
		},
		VolumeMounts:           []corev1.VolumeMount{{Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
		LivenessProbe:          &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10},
		ReadinessProbe:         &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 5},
		TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		ImagePullPolicy: corev1.PullIfNotPresent,
	}
	hash := fmt.Sprintf("%x", 0x7d9f8c6b5+i%7)
	name := fmt.Sprintf("%s-%s-%05d", app, hash, i)
	seconds := int64(300)
	controller := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace, UID: types.UID(fmt.Sprintf("0f7d3c52-5b1e-4a55-9b7e-%012d", i)),
			ResourceVersion: fmt.Sprint(18000000 + i), CreationTimestamp: created, GenerateName: app + "-" + hash + "-",
			Labels:          map[string]string{"app": app, "pod-template-hash": hash},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-" + hash, UID: "3c0a5e7f-2b1d-4c8e-9f6a-0d2b4e6f8a1c", Controller: &controller, BlockOwnerDeletion: &controller}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &created, FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"3c0a5e7f-2b1d-4c8e-9f6a-0d2b4e6f8a1c\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"` + app + `\"}":{".":{},"f:env":{},"f:image":{},"f:imagePullPolicy":{},"f:livenessProbe":{},"f:name":{},"f:ports":{},"f:readinessProbe":{},"f:resources":{".":{},"f:limits":{},"f:requests":{}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}`)},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &started, Subresource: "status", FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"PodReadyToStartContainers\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:hostIPs":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.244.7.31\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`)},
			},
		},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &seconds}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			}}}}},
			Containers:    []corev1.Container{container},
			RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst, SchedulerName: "default-scheduler",
			ServiceAccountName: "default", NodeName: fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i/125%256, i%125),
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds},
			},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "10.0.3.17", PodIP: "10.244.7.31", QOSClass: corev1.PodQOSBurstable, StartTime: &started,
			HostIPs: []corev1.HostIP{{IP: "10.0.3.17"}}, PodIPs: []corev1.PodIP{{IP: "10.244.7.31"}},
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: created},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: created},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: app, Ready: true, Image: container.Image,
				ImageID:     "registry.example.com/" + namespace + "/" + app + "@sha256:4f6c1b1e0e9b8d1c3a5f7e2d9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b",
				ContainerID: "containerd://a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90", Started: &controller,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}},
		},
	}
	if gpu {
		decodeBenchAsksForGPUs(pod, i)
	}
	return pod
}

// decodeBenchAsksForGPUs makes p a trainer asking for one or eight GPUs of one model, as the
// device plugin's users write it (limits, which the API server copies to requests).
func decodeBenchAsksForGPUs(p *corev1.Pod, i int) {
	gpus := resource.MustParse([]string{"1", "8"}[i%2])
	r := &p.Spec.Containers[0].Resources
	r.Limits[allocation.ResourceGPU], r.Requests[allocation.ResourceGPU] = gpus, gpus
	p.Spec.NodeSelector = map[string]string{allocation.ProductLabel: "NVIDIA-H100-80GB-HBM3", "kubernetes.io/os": "linux"}
	p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: allocation.ResourceGPU, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	p.Status.QOSClass = corev1.PodQOSBurstable
}

// decodeBenchInterner shares what the cache shares of a pod decoded whole: the namespace,
// node and model strings and requests of a single resource.
type decodeBenchInterner struct {
	strings  intern.Strings
	mu       sync.Mutex
	requests map[allocation.ResourceCount][]allocation.ResourceCount
}

func (t *decodeBenchInterner) pod(p *allocation.Pod) {
	p.Namespace, p.Node, p.Model = t.strings.Intern(p.Namespace), t.strings.Intern(p.Node), t.strings.Intern(p.Model)
	for i := range p.Requests {
		p.Requests[i].Name = t.strings.Intern(p.Requests[i].Name)
	}
	if len(p.Requests) != 1 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if kept, ok := t.requests[p.Requests[0]]; ok {
		p.Requests = kept
		return
	}
	if t.requests == nil {
		t.requests = map[allocation.ResourceCount][]allocation.ResourceCount{}
	}
	p.Requests = slices.Clip(p.Requests)
	t.requests[p.Requests[0]] = p.Requests
}

// decodeBenchDecoders are the two ways to what the tracker keeps of a pod (nil for a pod
// without GPUs).
var decodeBenchDecoders = []prototest.Decoder[*allocation.Pod]{
	{Name: "hand", Make: func() func([]byte) (*allocation.Pod, error) {
		return func(b []byte) (*allocation.Pod, error) {
			p, _, err := decodePod(b)
			return p, err
		}
	}},
	{Name: "generated+FromPod", Make: func() func([]byte) (*allocation.Pod, error) {
		t := &decodeBenchInterner{}
		return func(b []byte) (*allocation.Pod, error) {
			full := &corev1.Pod{}
			if err := full.Unmarshal(b); err != nil {
				return nil, err
			}
			p := allocation.FromPod(full)
			if p != nil {
				t.pod(p)
			}
			return p, nil
		}
	}},
}

// The two decoders of the benchmark keep the same of every input, so that the benchmark
// compares equal work.
func TestDecodeBenchDecodersAgree(t *testing.T) {
	for _, set := range decodeBenchSets(t) {
		hand, generated := decodeBenchDecoders[0].Make(), decodeBenchDecoders[1].Make()
		kept := 0
		for i, data := range set.data {
			want, err := generated(data)
			if err != nil {
				t.Fatal(err)
			}
			got, err := hand(data)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("%s %s: the hand decoder differs from the generated one (-generated +hand):\n%s", set.name, set.pods[i].Name, diff)
			}
			if got != nil {
				kept++
			}
		}
		if want := map[string]int{"gpu": len(set.data), "no-gpu": 0, "mix": len(set.data) / 5}[set.name]; kept != want {
			t.Errorf("%s: %d pods kept, want %d", set.name, kept, want)
		}
	}
}

// BenchmarkDecodeBenchPod decodes one pod per op, cycling through a set of a thousand;
// held-B/obj is the heap the kept pods hold per pod of the set once the garbage is collected
// (after one pass that fills the tables of shared strings).
func BenchmarkDecodeBenchPod(b *testing.B) {
	var sets []prototest.Inputs
	for _, set := range decodeBenchSets(b) {
		sets = append(sets, prototest.Inputs{Name: set.name, Data: set.data})
	}
	prototest.DecodeBench(b, sets, decodeBenchDecoders, true)
}
