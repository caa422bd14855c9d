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

package dispatch

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

const (
	h100 = "NVIDIA-H100-80GB-HBM3"
	a100 = "NVIDIA-A100-SXM4-80GB"
)

func gpuContainer(res string, n int64) corev1.Container {
	q := *resource.NewQuantity(n, resource.DecimalSI)
	return corev1.Container{Name: "main", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceName(res): q}}}
}

func podSet(count int32, containers ...corev1.Container) PodSet {
	return PodSet{Name: "main", Count: count, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: containers}}}
}

func workload(sets ...PodSet) *Workload {
	w := &Workload{Spec: WorkloadSpec{PodSets: sets}, Status: WorkloadStatus{Admission: &Admission{ClusterQueue: "team-a"}}}
	w.Namespace, w.Name = "ml", "train"
	return w
}

func productIn(values ...string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "nvidia.com/gpu.product", Operator: corev1.NodeSelectorOpIn, Values: values}}}}}}}
}

func TestRequestOf(t *testing.T) {
	pinned := podSet(2, gpuContainer("nvidia.com/gpu", 8))
	pinned.Template.Spec.NodeSelector = map[string]string{"nvidia.com/gpu.product": h100}
	either := podSet(1, gpuContainer("nvidia.com/gpu", 4))
	either.Template.Spec.Affinity = productIn(h100, a100)
	initLarger := podSet(1, gpuContainer("nvidia.com/gpu", 2))
	initLarger.Template.Spec.InitContainers = []corev1.Container{gpuContainer("nvidia.com/gpu", 4)}
	racked := podSet(4, gpuContainer("nvidia.com/gpu", 8))
	racked.TopologyRequest = &TopologyRequest{Required: ptr.To("rack")}
	sliced := podSet(4, gpuContainer("nvidia.com/gpu", 8))
	sliced.TopologyRequest = &TopologyRequest{PodSetSliceRequiredTopology: ptr.To("host"), PodSetSliceSize: ptr.To[int32](2)}
	cpuOnly := podSet(3, corev1.Container{Name: "main"})
	claims := podSet(1, corev1.Container{Name: "main"})
	claims.Template.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}

	cases := []struct {
		name      string
		w         *Workload
		want      []Ask
		notJudged string
		err       string
	}{
		{"a pinned model", workload(pinned), []Ask{{Name: "main", Pods: 2, Gpus: 8, Models: []string{h100}}}, "", ""},
		{"models by required affinity", workload(either), []Ask{{Name: "main", Pods: 1, Gpus: 4, Models: []string{a100, h100}}}, "", ""},
		{"the larger init container", workload(initLarger), []Ask{{Name: "main", Pods: 1, Gpus: 4}}, "", ""},
		{"required topology", workload(racked), []Ask{{Name: "main", Pods: 4, Gpus: 8, Required: "rack"}}, "", ""},
		{"slices", workload(sliced), []Ask{{Name: "main", Pods: 4, Gpus: 8, SliceLevel: "host", SliceSize: 2}}, "", ""},
		{"no GPU", workload(cpuOnly), nil, "", ""},
		{"a pod set without GPUs beside one with", workload(cpuOnly, pinned), []Ask{{Name: "main", Pods: 2, Gpus: 8, Models: []string{h100}}}, "", ""},
		{"MIG", workload(podSet(1, gpuContainer("nvidia.com/mig-1g.10gb", 1))), nil, "pod set main asks for nvidia.com/mig-1g.10gb", ""},
		{"shared replicas", workload(podSet(1, gpuContainer("nvidia.com/gpu.shared", 1))), nil, "nvidia.com/gpu.shared", ""},
		{"DRA claims", workload(pinned, claims), nil, "DRA claims", ""},
		{"a negative count", workload(podSet(-1, gpuContainer("nvidia.com/gpu", 1))), nil, "", "count -1 is negative"},
		{"a slice size that does not divide", workload(func() PodSet {
			p := sliced
			p.TopologyRequest = &TopologyRequest{PodSetSliceRequiredTopology: ptr.To("host"), PodSetSliceSize: ptr.To[int32](3)}
			return p
		}()), nil, "", "slice size 3 does not divide its 4 pods"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := RequestOf(c.w)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(r.NotJudged, c.notJudged) || (c.notJudged == "") != (r.NotJudged == "") {
				t.Errorf("not judged: %q, want %q", r.NotJudged, c.notJudged)
			}
			if len(r.Sets) != len(c.want) {
				t.Fatalf("asks %+v, want %+v", r.Sets, c.want)
			}
			for i, got := range r.Sets {
				want := c.want[i]
				if got.Pods != want.Pods || got.Gpus != want.Gpus || !slices.Equal(got.Models, want.Models) || got.Required != want.Required ||
					got.SliceLevel != want.SliceLevel || got.SliceSize != want.SliceSize {
					t.Errorf("ask %d: %+v, want %+v", i, got, want)
				}
			}
			if r.ClusterQueue != "team-a" || r.Workload != "ml/train" {
				t.Errorf("queue %q workload %q", r.ClusterQueue, r.Workload)
			}
		})
	}
}

func TestAllowedModels(t *testing.T) {
	both := &corev1.PodSpec{Affinity: productIn(h100, a100)}
	both.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = append(
		both.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms,
		corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpExists}}})
	contradiction := &corev1.PodSpec{NodeSelector: map[string]string{"nvidia.com/gpu.product": "T4"}, Affinity: productIn(h100)}
	cases := []struct {
		name string
		spec *corev1.PodSpec
		want []string
	}{
		{"nothing pinned", &corev1.PodSpec{}, nil},
		{"a term without the product allows any", both, nil},
		{"selector and affinity that disagree allow none", contradiction, []string{}},
	}
	for _, c := range cases {
		if got := allowedModels(c.spec); !slices.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestDecodeWorkload(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": "job-a", "namespace": "ml"},
		"spec": map[string]any{"queueName": "train", "podSets": []any{map[string]any{"name": "main", "count": int64(2),
			"template":        map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "resources": map[string]any{"requests": map[string]any{"nvidia.com/gpu": "8"}}}}}},
			"topologyRequest": map[string]any{"required": "rack"}}}},
		"status": map[string]any{"clusterName": "w1", "nominatedClusterNames": []any{"w2"}, "somethingNew": true,
			"admissionChecks": []any{map[string]any{"name": "mk", "state": "Pending", "lastTransitionTime": "2026-03-01T12:00:00Z"}},
			"conditions":      []any{map[string]any{"type": "QuotaReserved", "status": "True", "reason": "r", "message": "", "lastTransitionTime": "2026-03-01T12:00:00Z"}}},
	}}
	w, err := DecodeWorkload(u)
	if err != nil {
		t.Fatal(err)
	}
	if w.Spec.PodSets[0].Count != 2 || *w.Spec.PodSets[0].TopologyRequest.Required != "rack" || *w.Status.ClusterName != "w1" ||
		w.Status.AdmissionChecks[0].State != CheckStatePending || !w.ConditionTrue(ConditionQuotaReserved) || w.ConditionTrue(ConditionFinished) {
		t.Errorf("decoded %+v", w)
	}
	u.Object["spec"] = "not an object"
	if _, err := DecodeWorkload(u); err == nil || !strings.Contains(err.Error(), "ml/job-a") {
		t.Errorf("a malformed Workload: %v, want an error naming it", err)
	}
}

func TestTolerates(t *testing.T) {
	tol := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ml", Effect: corev1.TaintEffectNoSchedule}}
	if !tolerates(tol, "dedicated=ml:NoSchedule") || tolerates(tol, "dedicated=web:NoSchedule") || tolerates(tol, "gpu:NoExecute") || tolerates(tol, "garbage") {
		t.Error("tolerations matched wrongly")
	}
}
