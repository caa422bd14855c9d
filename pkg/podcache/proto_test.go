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
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

var created = metav1.NewTime(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))

// realisticPod is a pod as a Deployment's ReplicaSet makes it and a kubelet reports it:
// labels, owner, managed fields, a service-account volume, a container with env, probes
// and CPU/memory resources, tolerations, and a running status. No GPU resource.
func realisticPod(namespace, name string) *corev1.Pod {
	at := metav1.NewTime(created.Add(time.Minute))
	env := make([]corev1.EnvVar, 12)
	for i := range env {
		env[i] = corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", i), Value: fmt.Sprintf("value-%d", i)}
	}
	container := corev1.Container{
		Name: "app", Image: "registry.example.com/team/app:v1.42.0", Env: env,
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		},
		VolumeMounts:           []corev1.VolumeMount{{Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
		LivenessProbe:          &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10},
		ReadinessProbe:         &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 5},
		TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		ImagePullPolicy: corev1.PullIfNotPresent,
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace, UID: types.UID("0f7d3c52-5b1e-4a55-9b7e-" + fmt.Sprintf("%012d", len(name))),
			ResourceVersion: "18446744", CreationTimestamp: created, GenerateName: "app-7d9f8c6b5-",
			Labels:          map[string]string{"app": "app", "pod-template-hash": "7d9f8c6b5"},
			Annotations:     map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-11-29T10:00:00Z"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "app-7d9f8c6b5", UID: "3c0a", Controller: ptr.To(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &created, FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:env":{},"f:image":{},"f:resources":{"f:requests":{}}}}}}`)},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &at, Subresource: "status", FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:conditions":{},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:startTime":{}}}`)},
			},
		},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			}}}}},
			Containers:    []corev1.Container{container},
			RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst, SchedulerName: "default-scheduler",
			ServiceAccountName: "default", NodeName: "worker-17",
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "10.0.3.17", PodIP: "10.244.7.31", QOSClass: corev1.PodQOSBurstable, StartTime: &at,
			PodIPs: []corev1.PodIP{{IP: "10.244.7.31"}},
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: at},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: at},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: at},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: created},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Image: "registry.example.com/team/app:v1.42.0",
				ImageID:     "registry.example.com/team/app@sha256:4f6c1b1e0e9b8d1c3a5f7e2d9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b",
				ContainerID: "containerd://a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90", Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}}}},
		},
	}
}

// gpuPod is a realistic pod whose container asks for GPU resources as the device plugin's
// users write it: limits only (the API server copies them to requests; both are kept here).
func gpuPod(namespace, name string, gpu corev1.ResourceList) *corev1.Pod {
	p := realisticPod(namespace, name)
	r := &p.Spec.Containers[0].Resources
	for k, v := range gpu {
		r.Limits[k] = v
		r.Requests[k] = v
	}
	return p
}

func gpus(n string) corev1.ResourceList {
	return corev1.ResourceList{allocation.ResourceGPU: resource.MustParse(n)}
}

// podCase is a pod of the table, named.
type podCase = struct {
	name string
	pod  *corev1.Pod
}

// podCases is the table being built.
type podCases []podCase

// add appends a GPU pod (one GPU) that mutate changes.
func (c *podCases) add(name string, mutate func(p *corev1.Pod)) {
	p := gpuPod("ml-"+name, "trainer-"+name, gpus("1"))
	mutate(p)
	*c = append(*c, podCase{name, p})
}

// podTable is a pod of every shape the request arithmetic, the model pinning and the
// keep-nothing rule distinguish.
func podTable() []podCase {
	var out podCases
	out.addRequestShapes()
	out.addPlacementShapes()
	huge := realisticPod("web", "frontend-huge-status")
	for i := range 200 {
		huge.Status.Conditions = append(huge.Status.Conditions, corev1.PodCondition{Type: corev1.PodConditionType(fmt.Sprintf("example.com/gate-%d", i)),
			Status: corev1.ConditionFalse, Message: strings.Repeat("waiting for the gate to open; ", 20)})
	}
	huge.Status.Message = strings.Repeat("x", 64<<10)
	out = append(out, podCase{"no GPU, huge status", huge})
	out = append(out, podCase{"no GPU", realisticPod("web", "frontend-0")})
	out = append(out, podCase{"empty", &corev1.Pod{}})
	return out
}

// addRequestShapes adds the pods of the request arithmetic: containers, init containers and
// sidecars, overhead, MIG and shared GPUs, absurd quantities.
func (c *podCases) addRequestShapes() {
	c.add("bound, running", func(*corev1.Pod) {})
	c.add("pending", func(p *corev1.Pod) {
		p.Spec.NodeName, p.Status = "", corev1.PodStatus{Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/50 nodes are available: 50 Insufficient nvidia.com/gpu."}}}
	})
	c.add("limits only", func(p *corev1.Pod) { delete(p.Spec.Containers[0].Resources.Requests, allocation.ResourceGPU) })
	c.add("requests only", func(p *corev1.Pod) { delete(p.Spec.Containers[0].Resources.Limits, allocation.ResourceGPU) })
	c.add("two containers", func(p *corev1.Pod) {
		c := p.Spec.Containers[0].DeepCopy()
		c.Name, c.Resources.Limits[allocation.ResourceGPU], c.Resources.Requests[allocation.ResourceGPU] = "second", resource.MustParse("3"), resource.MustParse("3")
		p.Spec.Containers = append(p.Spec.Containers, *c)
	})
	c.add("init container asks more", func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "warmup", Image: "warmup", Resources: corev1.ResourceRequirements{Limits: gpus("4")}}}
	})
	c.add("sidecars and init containers", func(p *corev1.Pod) {
		always := corev1.ContainerRestartPolicyAlways
		never := corev1.ContainerRestartPolicy("Never")
		p.Spec.InitContainers = []corev1.Container{
			{Name: "plain-init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}},
			{Name: "sidecar", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: gpus("2"), Limits: gpus("2")}},
			{Name: "gpu-init", RestartPolicy: &never, Resources: corev1.ResourceRequirements{Limits: gpus("2")}},
			{Name: "cpu-sidecar", RestartPolicy: &always},
		}
	})
	c.add("overhead", func(p *corev1.Pod) {
		p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), allocation.ResourceGPU: resource.MustParse("1")}
	})
	c.add("MIG", func(p *corev1.Pod) {
		r := &p.Spec.Containers[0].Resources
		delete(r.Limits, allocation.ResourceGPU)
		delete(r.Requests, allocation.ResourceGPU)
		r.Limits["nvidia.com/mig-1g.5gb"], r.Limits["nvidia.com/mig-3g.20gb"] = resource.MustParse("2"), resource.MustParse("1")
	})
	c.add("shared", func(p *corev1.Pod) {
		r := &p.Spec.Containers[0].Resources
		delete(r.Limits, allocation.ResourceGPU)
		delete(r.Requests, allocation.ResourceGPU)
		r.Limits[allocation.ResourceGPUShared] = resource.MustParse("1")
	})
	c.add("absurd quantities", func(p *corev1.Pod) {
		r := &p.Spec.Containers[0].Resources
		r.Limits[allocation.ResourceGPU], r.Requests[allocation.ResourceGPU] = resource.MustParse("99999999999999999999"), resource.MustParse("99999999999999999999")
		r.Limits[allocation.ResourceGPUShared] = resource.MustParse("500m")
		p.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{allocation.ResourceGPU: resource.MustParse("9e18")}}}}
	})
}

// addPlacementShapes adds the pods of model pinning, of finished and claim-served pods, and of
// pods that keep nothing.
func (c *podCases) addPlacementShapes() {
	c.add("model in the node selector", func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux", allocation.ProductLabel: "NVIDIA-H100-80GB-HBM3", "pool": "training"}
	})
	c.add("model in the required affinity", func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}},
					{Key: allocation.ProductLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"NVIDIA-A100-SXM4-80GB"}}}},
				{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: allocation.ProductLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"NVIDIA-A100-SXM4-80GB"}}},
					MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}},
			}},
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: corev1.NodeSelectorTerm{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: allocation.ProductLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"NVIDIA-L4"}}}}}},
		}, PodAntiAffinity: &corev1.PodAntiAffinity{}}
	})
	c.add("affinity terms that disagree", func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: allocation.ProductLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"NVIDIA-A100-SXM4-80GB"}}}},
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: allocation.ProductLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"NVIDIA-H100-80GB-HBM3"}}}},
			}}}}
	})
	c.add("affinity with an empty term", func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: allocation.ProductLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"NVIDIA-A100-SXM4-80GB"}}}},
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpExists}}},
			}}}}
	})
	c.add("succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })
	c.add("failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })
	c.add("served by a DRA claim", func(p *corev1.Pod) {
		p.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "trainer-gpu-x7k2p",
			RequestMappings: []corev1.ContainerExtendedResourceRequest{{ContainerName: "app", ResourceName: allocation.ResourceGPU, RequestName: "container-0-request-0"}}}
	})
	c.add("one resource served by a DRA claim, one by the device plugin", func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits["nvidia.com/mig-1g.10gb"] = resource.MustParse("1")
		p.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "trainer-gpu-x7k2p",
			RequestMappings: []corev1.ContainerExtendedResourceRequest{
				{ContainerName: "app", ResourceName: allocation.ResourceGPU, RequestName: "container-0-request-0"},
				{ContainerName: "app", ResourceName: "example.com/fpga", RequestName: "container-0-request-1"},
			}}
	})
	c.add("gated", func(p *corev1.Pod) {
		p.Spec.NodeName = ""
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}, {Name: "example.com/b"}}
	})
	c.add("being deleted", func(p *corev1.Pod) {
		p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1800000200, 0)}
		p.DeletionGracePeriodSeconds = ptr.To(int64(30))
	})
	c.add("zero GPUs", func(p *corev1.Pod) {
		r := &p.Spec.Containers[0].Resources
		r.Limits[allocation.ResourceGPU], r.Requests[allocation.ResourceGPU] = resource.MustParse("0"), resource.MustParse("0")
	})
	c.add("other nvidia.com resources only", func(p *corev1.Pod) {
		r := &p.Spec.Containers[0].Resources
		delete(r.Limits, allocation.ResourceGPU)
		delete(r.Requests, allocation.ResourceGPU)
		r.Limits["nvidia.com/mig-"], r.Limits["nvidia.com/gpumem"], r.Limits["example.com/fpga"] = resource.MustParse("1"), resource.MustParse("1"), resource.MustParse("1")
	})
}

// What DecodePod makes of a pod's protobuf is exactly what allocation.FromPod makes of the
// whole pod, for every shape in the table.
func TestDecodePodEqualsFromPod(t *testing.T) {
	for _, tc := range podTable() {
		t.Run(tc.name, func(t *testing.T) {
			data, err := tc.pod.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodePod(data)
			if err != nil {
				t.Fatal(err)
			}
			want := allocation.FromPod(tc.pod)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("DecodePod differs from FromPod (-FromPod +DecodePod):\n%s", diff)
			}
		})
	}
}

// The table covers what it claims: kept pods, pods kept as nothing, pinned models, finished
// pods and the claim-served pod, so that the equality above means something.
func TestPodTableCoversTheShapes(t *testing.T) {
	var kept, dropped, pinned, finished, viaClaim, init int
	for _, tc := range podTable() {
		p := allocation.FromPod(tc.pod)
		if p == nil {
			dropped++
			continue
		}
		kept++
		if p.Model != "" {
			pinned++
		}
		if p.Finished {
			finished++
		}
		if tc.pod.Status.ExtendedResourceClaimStatus != nil {
			viaClaim++
		}
		if len(tc.pod.Spec.InitContainers) > 0 {
			init++
		}
	}
	if kept < 15 || dropped < 4 || pinned < 2 || finished != 2 || viaClaim != 1 || init < 3 {
		t.Errorf("the table has %d kept pods (%d pinned, %d finished, %d via a claim, %d with init containers) and %d dropped",
			kept, pinned, finished, viaClaim, init, dropped)
	}
}

// Pods of one namespace on one node share their namespace's, node's and model's strings, and
// pods asking for the same single resource share their requests.
func TestDecodedPodsShareRepeatedStrings(t *testing.T) {
	decode := func(name string, resources corev1.ResourceList) *allocation.Pod {
		p := gpuPod("team-a", name, resources)
		p.Spec.NodeSelector = map[string]string{allocation.ProductLabel: "NVIDIA-H100-80GB-HBM3"}
		data, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodePod(data)
		if err != nil || got == nil {
			t.Fatalf("DecodePod = %v, %v", got, err)
		}
		return got
	}
	a, b := decode("a", gpus("1")), decode("b", gpus("1"))
	same := func(x, y string) bool { return len(x) > 0 && unsafe.StringData(x) == unsafe.StringData(y) }
	if !same(a.Namespace, b.Namespace) || !same(a.Node, b.Node) || !same(a.Model, b.Model) {
		t.Error("two pods of one namespace, node and model do not share those strings")
	}
	if unsafe.SliceData(a.Requests) != unsafe.SliceData(b.Requests) {
		t.Error("two pods asking for one GPU do not share their requests")
	}
	c := decode("c", gpus("2"))
	if want := []allocation.ResourceCount{{Name: allocation.ResourceGPU, Count: 2}}; !slices.Equal(c.Requests, want) || cap(c.Requests) != 1 {
		t.Errorf("a pod asking for two GPUs has requests %v (capacity %d); want %v", c.Requests, cap(c.Requests), want)
	}
	if !slices.Equal(a.Requests, []allocation.ResourceCount{{Name: allocation.ResourceGPU, Count: 1}}) {
		t.Errorf("a pod asking for one GPU has requests %v", a.Requests)
	}
}

// A pod that names no GPU resource costs nothing to decode but the walk over its spec.
func TestNonGPUPodsDecodeWithoutAllocating(t *testing.T) {
	data, err := realisticPod("web", "frontend-0").Marshal()
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if p, err := DecodePod(data); p != nil || err != nil {
			t.Fatalf("DecodePod = %v, %v", p, err)
		}
	})
	if allocs != 0 {
		t.Errorf("decoding a pod without GPU resources allocates %.0f times; want none", allocs)
	}
}

// Truncated or corrupted pods give an error, not a pod and not a panic.
func TestDecodePodRejectsMalformedPods(t *testing.T) {
	data, err := gpuPod("ml", "trainer", gpus("1")).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string][]byte{
		"truncated":    data[:len(data)-7],
		"bad tag":      append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, data...),
		"huge length":  {0x12, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"bad quantity": marshalWithQuantity(t, "lots"),
	}
	for name, data := range bad {
		if p, err := DecodePod(data); err == nil {
			t.Errorf("%s: DecodePod = %+v, no error", name, p)
		}
	}
}

// A message of many small entries cannot make the decoder build values many times its size:
// beyond maxElements containers with GPU resources it is an error; containers without GPU
// resources are not built at all.
func TestDecodePodBoundsWhatItBuilds(t *testing.T) {
	message := func(num protowire.Number, content []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), content)
	}
	gpuEntry := append(message(kubeproto.MapKey, []byte(allocation.ResourceGPU)), message(kubeproto.MapValue, message(1 /* resource.Quantity.string */, []byte("1")))...)
	gpuContainer := message(specContainers, message(containerResources, message(resourcesLimits, gpuEntry)))
	emptyContainer := message(specContainers, nil)
	spec := func(containers int) []byte {
		var b []byte
		for range containers {
			b = append(b, gpuContainer...)
		}
		for range 200_000 {
			b = append(b, emptyContainer...)
		}
		return message(podSpec, b)
	}
	if _, err := DecodePod(spec(maxElements + 1)); !errors.Is(err, errTooLarge) {
		t.Errorf("%d GPU containers: error %v; want errTooLarge", maxElements+1, err)
	}
	var p *allocation.Pod
	one := spec(1)
	allocs := testing.AllocsPerRun(1, func() {
		var err error
		if p, err = DecodePod(one); err != nil {
			t.Fatal(err)
		}
	})
	if p == nil || p.Requests[0].Count != 1 {
		t.Errorf("one GPU container among 200,000 empty ones: %+v", p)
	}
	if allocs > 20 {
		t.Errorf("one GPU container among 200,000 empty ones took %.0f allocations; want the empty ones to take none", allocs)
	}
}

// marshalWithQuantity is a pod whose container's nvidia.com/gpu limit is the string q, as a
// broken writer could send it (the API server validates quantities; the wire does not).
func marshalWithQuantity(t *testing.T, q string) []byte {
	t.Helper()
	message := func(num protowire.Number, content []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), content)
	}
	entry := append(message(kubeproto.MapKey, []byte(allocation.ResourceGPU)), message(kubeproto.MapValue, message(1, []byte(q)))...)
	return message(podSpec, message(specContainers, message(containerResources, message(resourcesLimits, entry))))
}

// The pod client's decoder gives an Object for a protobuf or JSON Pod (the GPU pod's
// allocation view, or only the resourceVersion), keeps the watch-list bookmark's marker, gives
// an ObjectList of the GPU pods for a PodList, and passes other objects through.
func TestDecodingSerializer(t *testing.T) {
	proto := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	js := jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, jsonserializer.SerializerOptions{})
	gpu, cpu := gpuPod("ml", "trainer", gpus("2")), realisticPod("web", "frontend")
	bookmark := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "77", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "80", Continue: "next"}, Items: []corev1.Pod{*cpu, *gpu, *cpu}}
	status := &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired}
	for name, serializer := range map[string]runtime.Serializer{"protobuf": proto, "JSON": js} {
		t.Run(name, func(t *testing.T) {
			encoder := scheme.Codecs.EncoderForVersion(serializer, corev1.SchemeGroupVersion)
			decoder := podCodec.Serializer(scheme.Codecs.WithoutConversion()).DecoderToVersion(serializer, corev1.SchemeGroupVersion)
			decode := func(obj runtime.Object) runtime.Object {
				t.Helper()
				data, err := runtime.Encode(encoder, obj)
				if err != nil {
					t.Fatal(err)
				}
				got, err := runtime.Decode(decoder, data)
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			gpuObject := &Object{Compact: kubeproto.Compact{Namespace: gpu.Namespace, Name: gpu.Name, ResourceVersion: gpu.ResourceVersion}, Pod: allocation.FromPod(gpu)}
			if diff := cmp.Diff(gpuObject, decode(gpu), cmp.AllowUnexported(Object{})); diff != "" {
				t.Errorf("GPU pod (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(&Object{Compact: kubeproto.Compact{ResourceVersion: cpu.ResourceVersion}}, decode(cpu), cmp.AllowUnexported(Object{})); diff != "" {
				t.Errorf("pod without GPUs (-want +got):\n%s", diff)
			}
			got := decode(bookmark).(*Object)
			if meta := got.GetObjectMeta(); meta.GetResourceVersion() != "77" || meta.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
				t.Errorf("bookmark decoded as %+v", meta)
			}
			wantList := &ObjectList{ListMeta: list.ListMeta, Items: []*Object{gpuObject}}
			if diff := cmp.Diff(wantList, decode(list), cmp.AllowUnexported(Object{})); diff != "" {
				t.Errorf("pod list (-want +got):\n%s", diff)
			}
			if got, ok := decode(status).(*metav1.Status); !ok || got.Reason != metav1.StatusReasonExpired {
				t.Errorf("a Status came out as %#v", got)
			}
		})
	}
}

// Whatever bytes arrive, DecodePod returns a pod, nothing or an error, never panics; and for
// any bytes the generated decoder accepts as a Pod it says what FromPod says of that Pod.
func FuzzDecodePod(f *testing.F) {
	for _, tc := range podTable() {
		data, err := tc.pod.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodePod(data)
		if errors.Is(err, kubeproto.ErrAbsurdQuantity) || mayParseForever.Match(data) {
			return // the generated decoder could take unbounded time: nothing to compare with
		}
		full, ok := unmarshal(data)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("DecodePod fails (%v) where the generated decoder does not", err)
		}
		if diff := cmp.Diff(allocation.FromPod(full), got); diff != "" {
			t.Fatalf("DecodePod differs from FromPod (-FromPod +DecodePod):\n%s", diff)
		}
	})
}

// mayParseForever matches bytes that could hold a quantity whose parsing takes unbounded
// time (a long run of digits, a large exponent): ParseQuantity, which the generated decoder
// runs on every quantity of a pod, is not bounded for those.
var mayParseForever = regexp.MustCompile(`[eE][+-]?[0-9]{4}|[0-9.]{40}`)

// unmarshal decodes data with the generated decoder; false when it fails, or panics (it
// slices with unchecked lengths).
func unmarshal(data []byte) (pod *corev1.Pod, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	pod = &corev1.Pod{}
	return pod, pod.Unmarshal(data) == nil
}

// A quantity whose parsing could take unbounded time is refused without being parsed, at
// once, whatever its place among the pod's GPU resources.
func TestAbsurdQuantitiesAreRefusedUnparsed(t *testing.T) {
	for _, q := range []string{"1e-999999999", "1e999999999", "0." + strings.Repeat("0", 100) + "1", strings.Repeat("9", 65), "1e4294967297"} {
		start := time.Now()
		_, err := DecodePod(marshalWithQuantity(t, q))
		if !errors.Is(err, kubeproto.ErrAbsurdQuantity) {
			t.Errorf("%.20s...: DecodePod error %v; want an absurd quantity", q, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%.20s...: refused after %v", q, d)
		}
	}
	for q, want := range map[string]int64{"1e999": math.MaxInt64, "1e-999": 1, "-1e999": 0, strings.Repeat("9", 64): math.MaxInt64, "0e999": 0} {
		p, err := DecodePod(marshalWithQuantity(t, q))
		if want == 0 {
			if p != nil || err != nil {
				t.Errorf("%.20s: DecodePod = %+v, %v; want no pod", q, p, err)
			}
			continue
		}
		if err != nil || p == nil || len(p.Requests) != 1 || p.Requests[0].Count != want {
			t.Errorf("%.20s: DecodePod = %+v, %v; want %d GPUs", q, p, err, want)
		}
	}
}

// BenchmarkDecodePod is the decoder's work for one watch event of a realistic pod, against
// the generated decoder and FromPod.
func BenchmarkDecodePod(b *testing.B) {
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
	}{
		{"no GPU", realisticPod("web", "frontend-7d9f8c6b5-x7k2p")},
		{"GPU", gpuPod("ml", "trainer-7d9f8c6b5-x7k2p", gpus("8"))},
	} {
		data, err := tc.pod.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name+"/DecodePod", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := DecodePod(data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/Unmarshal+FromPod", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				var full corev1.Pod
				if err := full.Unmarshal(data); err != nil {
					b.Fatal(err)
				}
				allocation.FromPod(&full)
			}
		})
	}
}
