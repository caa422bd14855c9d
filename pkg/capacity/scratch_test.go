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

package capacity

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
)

// scratchCluster is a device-plugin node and a DRA node, each with one GPU pod bound.
func scratchCluster(t *testing.T) Cluster {
	return Cluster{
		Nodes:   []*corev1.Node{node("dp", map[corev1.ResourceName]string{gpuResource: "8"}), node("dra-h100-1", nil)},
		Pods:    []*corev1.Pod{gpuPod("held", "dp", gpuResource, 2, true)},
		Slices:  slicesOf(t, dra.H100),
		Claims:  []*resourcev1.ResourceClaim{allocated("train", "dra-h100-1", false, "gpu-0", "gpu-1")},
		Classes: []*resourcev1.DeviceClass{class("gpu.nvidia.com", selectGPU)},
	}
}

// free is the largest device-plugin and DRA GPU pod each node of the snapshot takes.
func free(t *testing.T, s *Snapshot) [2]int64 {
	return [2]int64{
		maxFit(t, s, "dp", 16, devicePluginProbe("dp", gpuResource)),
		maxFit(t, s, "dra-h100-1", 16, draProbe("dra-h100-1", "gpu.nvidia.com", "")),
	}
}

func TestCloneForgetRestore(t *testing.T) {
	s := NewSnapshot(scratchCluster(t))
	before := free(t, s)
	if before != [2]int64{6, 6} {
		t.Fatalf("free before = %v, want [6 6]", before)
	}
	c := s.Clone()
	dpPod := gpuPod("gang-0", "dp", gpuResource, 4, false)
	dpFit, err := c.Fit(dpPod, nil, "dp")
	if err != nil || !dpFit.Fits() {
		t.Fatalf("4 GPUs on dp: %v %v", dpFit.Reasons, err)
	}
	c.Assume(dpPod, dpFit)
	draPod, claims := draProbe("dra-h100-1", "gpu.nvidia.com", "")(3)
	draPod.Name, draPod.UID = "gang-1", "gang-1"
	draFit, err := c.Fit(draPod, claims, "dra-h100-1")
	if err != nil || !draFit.Fits() {
		t.Fatalf("3 DRA GPUs: %v %v", draFit.Reasons, err)
	}
	c.Assume(draPod, draFit)
	if got := free(t, c); got != [2]int64{2, 3} {
		t.Errorf("free on the clone after assuming = %v, want [2 3]", got)
	}
	if got := free(t, s); got != before {
		t.Errorf("the original changed with its clone: %v, want %v", got, before)
	}
	c.Forget(dpPod, dpFit)
	c.Forget(draPod, draFit)
	if got := free(t, c); got != before {
		t.Errorf("free after Forget = %v, want %v", got, before)
	}
	held := c.PodsOn("dp")
	c.Evict("dp", held)
	if got := free(t, c); got[0] != 8 {
		t.Errorf("free on dp with its pod evicted = %d, want 8", got[0])
	}
	c.Restore("dp", held)
	if got := free(t, c); got != before {
		t.Errorf("free after Restore = %v, want %v", got, before)
	}
}

func TestNonZeroRequested(t *testing.T) {
	s := NewSnapshot(Cluster{
		Nodes: []*corev1.Node{node("n", map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "64Gi"})},
		Pods:  []*corev1.Pod{gpuPod("no-requests", "n", "", 0, true), gpuPod("cpu", "n", corev1.ResourceCPU, 2, true)},
		Usage: map[string]*Usage{"n": {count: 1, requested: map[corev1.ResourceName]int64{corev1.ResourceMemory: 1 << 30}}},
	})
	cpu, mem := s.NonZeroRequested("n")
	// no-requests counts 100m and 200Mi; cpu 2000m and 200Mi; the counted pod its 1Gi.
	if cpu != 2100 || mem != 2*DefaultMemoryRequest+1<<30 {
		t.Errorf("non-zero requested = %dm, %d bytes; want 2100m, %d", cpu, mem, 2*DefaultMemoryRequest+1<<30)
	}
	count, req := s.Requested("n")
	if count != 3 || req[corev1.ResourceCPU] != 2000 || req[corev1.ResourceMemory] != 1<<30 {
		t.Errorf("requested = %d pods, %v", count, req)
	}
	p := gpuPod("p", "n", corev1.ResourceMemory, 0, false)
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	if c, m := NonZeroRequests(p); c != DefaultMilliCPURequest || m != 1<<30 {
		t.Errorf("NonZeroRequests = %d, %d", c, m)
	}
}
