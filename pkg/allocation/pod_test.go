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

package allocation

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func rc(name string, n int64) ResourceCount { return ResourceCount{Name: name, Count: n} }

func gpus(n int64) []ResourceCount { return []ResourceCount{rc(ResourceGPU, n)} }

func TestPodRequests(t *testing.T) {
	mig1 := ResourceMIGPrefix + "1g.5gb"
	tests := []struct {
		name     string
		app      []Container
		init     []Container
		overhead []ResourceCount
		want     []ResourceCount
	}{
		{name: "nothing"},
		{name: "app containers add up", app: []Container{{Requests: gpus(1)}, {Requests: gpus(2)}}, want: gpus(3)},
		{
			name: "a larger init container wins",
			app:  []Container{{Requests: gpus(1)}},
			init: []Container{{Requests: gpus(4)}, {Requests: gpus(2)}},
			want: gpus(4),
		},
		{
			name: "a smaller init container changes nothing",
			app:  []Container{{Requests: gpus(3)}},
			init: []Container{{Requests: gpus(2)}},
			want: gpus(3),
		},
		{
			name: "sidecars add to the app containers",
			app:  []Container{{Requests: gpus(1)}},
			init: []Container{{Requests: gpus(1), Restartable: true}, {Requests: gpus(1), Restartable: true}},
			want: gpus(3),
		},
		{
			name: "a sidecar before a big init container adds to it",
			app:  []Container{{Requests: gpus(1)}},
			init: []Container{{Requests: gpus(2), Restartable: true}, {Requests: gpus(4)}},
			want: gpus(6),
		},
		{
			name: "a sidecar after a big init container does not",
			app:  []Container{{Requests: gpus(1)}},
			init: []Container{{Requests: gpus(4)}, {Requests: gpus(2), Restartable: true}},
			want: gpus(4),
		},
		{
			name: "the sidecars running together can be the largest init need",
			init: []Container{{Requests: gpus(2), Restartable: true}, {Requests: gpus(3), Restartable: true}},
			want: gpus(5),
		},
		{
			name: "per resource maximum",
			app:  []Container{{Requests: []ResourceCount{rc(ResourceGPU, 2)}}},
			init: []Container{{Requests: []ResourceCount{rc(mig1, 3), rc(ResourceGPU, 1)}}},
			want: []ResourceCount{rc(ResourceGPU, 2), rc(mig1, 3)},
		},
		{
			name:     "overhead adds on top",
			app:      []Container{{Requests: gpus(1)}},
			init:     []Container{{Requests: gpus(2)}},
			overhead: []ResourceCount{rc(ResourceGPUShared, 1), rc(ResourceGPU, 1)},
			want:     []ResourceCount{rc(ResourceGPU, 3), rc(ResourceGPUShared, 1)},
		},
		{
			name: "zeros and negatives dropped",
			app:  []Container{{Requests: []ResourceCount{rc(ResourceGPU, 0), rc(ResourceGPUShared, -5)}}},
		},
		{
			name:     "sums clamp instead of overflowing",
			app:      []Container{{Requests: gpus(math.MaxInt64)}, {Requests: gpus(math.MaxInt64)}},
			init:     []Container{{Requests: gpus(math.MaxInt64), Restartable: true}},
			overhead: gpus(7),
			want:     gpus(math.MaxInt64),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, PodRequests(tt.app, tt.init, tt.overhead)); diff != "" {
				t.Errorf("PodRequests (-want +got):\n%s", diff)
			}
		})
	}
}

func resources(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func container(requests, limits corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}
}

func basePod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ml", Name: "train", UID: "u1", ResourceVersion: "7",
			CreationTimestamp: metav1.NewTime(time.Unix(1700000000, 0)),
		},
		Spec: corev1.PodSpec{NodeName: "n1"},
	}
}

func productTerm(op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "kubernetes.io/os", Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
		{Key: ProductLabel, Operator: op, Values: values},
	}}
}

func withAffinity(terms ...corev1.NodeSelectorTerm) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}}
	}
}

func TestFromPod(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	h100 := "NVIDIA-H100-80GB-HBM3"
	a100 := "NVIDIA-A100-SXM4-40GB"
	tests := []struct {
		name   string
		modify func(*corev1.Pod)
		want   func(*Pod) // nil: FromPod returns nil
	}{
		{
			name:   "no GPU request",
			modify: func(p *corev1.Pod) { p.Spec.Containers = []corev1.Container{container(resources("cpu", "2"), nil)} },
		},
		{
			name: "a zero GPU request is no GPU pod",
			modify: func(p *corev1.Pod) {
				p.Spec.Containers = []corev1.Container{container(resources(ResourceGPU, "0"), resources(ResourceGPU, "0"))}
			},
		},
		{
			name: "requests",
			modify: func(p *corev1.Pod) {
				p.Spec.Containers = []corev1.Container{
					container(resources("cpu", "2", ResourceGPU, "2"), resources(ResourceGPU, "2")),
					container(resources(ResourceGPU, "1"), nil),
				}
			},
			want: func(p *Pod) { p.Requests = gpus(3) },
		},
		{
			name: "the limit stands in for a missing request",
			modify: func(p *corev1.Pod) {
				p.Spec.Containers = []corev1.Container{container(resources("cpu", "1"), resources(ResourceGPUShared, "2", "memory", "1Gi"))}
			},
			want: func(p *Pod) { p.Requests = []ResourceCount{rc(ResourceGPUShared, 2)} },
		},
		{
			name: "a request wins over a different limit",
			modify: func(p *corev1.Pod) {
				p.Spec.Containers = []corev1.Container{container(resources(ResourceGPU, "1"), resources(ResourceGPU, "4"))}
			},
			want: func(p *Pod) { p.Requests = gpus(1) },
		},
		{
			name: "init container and sidecar",
			modify: func(p *corev1.Pod) {
				p.Spec.Containers = []corev1.Container{container(resources(ResourceGPU, "1"), nil)}
				sidecar := container(resources(ResourceGPU, "1"), nil)
				sidecar.RestartPolicy = &always
				p.Spec.InitContainers = []corev1.Container{sidecar, container(resources(ResourceGPU, "3"), nil)}
			},
			want: func(p *Pod) { p.Requests = gpus(4) },
		},
		{
			name: "GPU only in the overhead",
			modify: func(p *corev1.Pod) {
				p.Spec.Containers = []corev1.Container{container(resources("cpu", "1"), nil)}
				p.Spec.Overhead = resources(ResourceGPUShared, "1")
			},
			want: func(p *Pod) { p.Requests = []ResourceCount{rc(ResourceGPUShared, 1)} },
		},
		{
			name: "absurd and fractional quantities are clamped and rounded up",
			modify: func(p *corev1.Pod) {
				p.Spec.Containers = []corev1.Container{
					container(resources(ResourceGPU, "99999999999999999999"), nil),
					container(resources(ResourceGPUShared, "500m", ResourceMIGPrefix+"1g.5gb", "-3"), nil),
				}
			},
			want: func(p *Pod) { p.Requests = []ResourceCount{rc(ResourceGPU, math.MaxInt64), rc(ResourceGPUShared, 1)} },
		},
		{
			name: "succeeded is finished",
			modify: func(p *corev1.Pod) {
				p.Spec.Containers = []corev1.Container{container(resources(ResourceGPU, "1"), nil)}
				p.Status.Phase = corev1.PodSucceeded
			},
			want: func(p *Pod) { p.Requests = gpus(1); p.Finished = true },
		},
		{
			name: "failed is finished",
			modify: func(p *corev1.Pod) {
				p.Spec.Containers = []corev1.Container{container(resources(ResourceGPU, "1"), nil)}
				p.Status.Phase = corev1.PodFailed
			},
			want: func(p *Pod) { p.Requests = gpus(1); p.Finished = true },
		},
		{
			name: "gated and being deleted",
			modify: func(p *corev1.Pod) {
				p.Spec.Containers = []corev1.Container{container(resources(ResourceGPU, "1"), nil)}
				p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/queue"}}
				p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1700000500, 0)}
			},
			want: func(p *Pod) { p.Requests = gpus(1); p.Gated, p.Deleting = true, true },
		},
		{
			name: "served through a claim: the claim counts, the pod is not kept",
			modify: func(p *corev1.Pod) {
				p.Spec.Containers = []corev1.Container{container(resources(ResourceGPU, "1"), nil)}
				p.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "train-gpu",
					RequestMappings: []corev1.ContainerExtendedResourceRequest{{ContainerName: "c", ResourceName: ResourceGPU, RequestName: "container-0-request-0"}}}
			},
		},
		{
			name: "one resource served through a claim, the other by the device plugin",
			modify: func(p *corev1.Pod) {
				p.Spec.Containers = []corev1.Container{container(resources(ResourceGPU, "2", ResourceMIGPrefix+"1g.10gb", "1"), nil)}
				p.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "train-gpu",
					RequestMappings: []corev1.ContainerExtendedResourceRequest{{ContainerName: "c", ResourceName: ResourceGPU, RequestName: "container-0-request-0"}}}
			},
			want: func(p *Pod) { p.Requests = []ResourceCount{{ResourceMIGPrefix + "1g.10gb", 1}} },
		},
		{
			name: "model from the node selector",
			modify: func(p *corev1.Pod) {
				p.Spec.Containers = []corev1.Container{container(resources(ResourceGPU, "1"), nil)}
				p.Spec.NodeSelector = map[string]string{ProductLabel: h100}
				withAffinity(productTerm(corev1.NodeSelectorOpIn, a100))(p)
			},
			want: func(p *Pod) { p.Requests = gpus(1); p.Model = h100 },
		},
		{
			name: "model from every affinity term",
			modify: func(p *corev1.Pod) {
				p.Spec.Containers = []corev1.Container{container(resources(ResourceGPU, "1"), nil)}
				withAffinity(productTerm(corev1.NodeSelectorOpIn, h100), productTerm(corev1.NodeSelectorOpIn, h100))(p)
			},
			want: func(p *Pod) { p.Requests = gpus(1); p.Model = h100 },
		},
		{
			name: "conflicting affinity terms pin none",
			modify: func(p *corev1.Pod) {
				p.Spec.Containers = []corev1.Container{container(resources(ResourceGPU, "1"), nil)}
				withAffinity(productTerm(corev1.NodeSelectorOpIn, h100), productTerm(corev1.NodeSelectorOpIn, a100))(p)
			},
			want: func(p *Pod) { p.Requests = gpus(1) },
		},
		{
			name: "a term without the product lets any model in",
			modify: func(p *corev1.Pod) {
				p.Spec.Containers = []corev1.Container{container(resources(ResourceGPU, "1"), nil)}
				withAffinity(productTerm(corev1.NodeSelectorOpIn, h100), corev1.NodeSelectorTerm{})(p)
			},
			want: func(p *Pod) { p.Requests = gpus(1) },
		},
		{
			name: "several values pin none",
			modify: func(p *corev1.Pod) {
				p.Spec.Containers = []corev1.Container{container(resources(ResourceGPU, "1"), nil)}
				withAffinity(productTerm(corev1.NodeSelectorOpIn, h100, a100))(p)
			},
			want: func(p *Pod) { p.Requests = gpus(1) },
		},
		{
			name: "NotIn pins none",
			modify: func(p *corev1.Pod) {
				p.Spec.Containers = []corev1.Container{container(resources(ResourceGPU, "1"), nil)}
				withAffinity(productTerm(corev1.NodeSelectorOpNotIn, h100))(p)
			},
			want: func(p *Pod) { p.Requests = gpus(1) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := basePod()
			tt.modify(pod)
			got := FromPod(pod)
			if tt.want == nil {
				if got != nil {
					t.Fatalf("FromPod = %+v, want nil", got)
				}
				return
			}
			want := &Pod{Namespace: "ml", Name: "train", UID: UIDOf("u1"), Node: "n1", Created: 1700000000}
			tt.want(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("FromPod (-want +got):\n%s", diff)
			}
		})
	}
	if FromPod(nil) != nil {
		t.Error("FromPod(nil) is not nil")
	}
}

// Quantities are clamped to [0, MaxInt64], whatever their exponent, and rounded up.
func TestQuantityCountClamps(t *testing.T) {
	for s, want := range map[string]int64{"1e999999": math.MaxInt64, "9e18": 9e18, "1e19": math.MaxInt64, "1E18": 1e18,
		"500m": 1, "-1e999999": 0, "-3": 0, "8": 8} {
		if got := quantityCount(resource.MustParse(s)); got != want {
			t.Errorf("quantityCount(%s) = %d, want %d", s, got, want)
		}
	}
}

// A UID the API server assigns is held as its 16 bytes; any other string as a hash, so that
// distinct strings stay distinct (an uppercase spelling included) and "" is unknown.
func TestUIDOf(t *testing.T) {
	u := UIDOf("0f7d3c52-5b1e-4a55-9b7e-000000000007")
	if want := (UID{0x0f, 0x7d, 0x3c, 0x52, 0x5b, 0x1e, 0x4a, 0x55, 0x9b, 0x7e, 0, 0, 0, 0, 0, 0x07}); u != want {
		t.Errorf("UIDOf(a UUID) = %x; want its bytes %x", u, want)
	}
	seen := map[UID]string{}
	for _, s := range []string{"0f7d3c52-5b1e-4a55-9b7e-000000000007", "0F7D3C52-5B1E-4A55-9B7E-000000000007",
		"0f7d3c52-5b1e-4a55-9b7e-00000000000g", "0f7d3c525b1e4a559b7e000000000007", "u1", "u2", "pod-a"} {
		got := UIDOf(s)
		if got == (UID{}) {
			t.Errorf("UIDOf(%q) is the zero UID", s)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("UIDOf(%q) = UIDOf(%q)", s, other)
		}
		seen[got] = s
		if UIDOf(s) != got {
			t.Errorf("UIDOf(%q) differs between calls", s)
		}
	}
	if UIDOf("") != (UID{}) {
		t.Error(`UIDOf("") is not the zero UID`)
	}
}
