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
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
)

const (
	gpuResource = corev1.ResourceName("nvidia.com/gpu")
	h100        = "NVIDIA H100 80GB HBM3"
	selectGPU   = `device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"`
	selectMIG   = `device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "mig"`
)

func node(name string, allocatable map[corev1.ResourceName]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")}
	for k, v := range allocatable {
		n.Status.Allocatable[k] = resource.MustParse(v)
	}
	return n
}

func class(name, selector string) *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: selector}}}},
	}
}

// gpuPod asks for n of res, pinned to node; bound to it when bound.
func gpuPod(name, nodeName string, res corev1.ResourceName, n int64, bound bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID(name)}}
	p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: nodeName}
	p.Spec.Containers = []corev1.Container{{Name: "main"}}
	if n > 0 {
		q := *resource.NewQuantity(n, resource.DecimalSI)
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{res: q}
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{res: q}
	}
	if bound {
		p.Spec.NodeName = nodeName
		p.Status.Phase = corev1.PodRunning
	}
	return p
}

// claimFor asks for n devices of the class, of the product when not "".
func claimFor(name, className, product string, n int64) *resourcev1.ResourceClaim {
	req := &resourcev1.ExactDeviceRequest{DeviceClassName: className, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: n}
	if product != "" {
		req.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: fmt.Sprintf(`device.attributes["gpu.nvidia.com"].productName == %q`, product)}}}
	}
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID(name)},
		Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpus", Exactly: req}}}},
	}
}

// allocated is a claim holding the devices of the node's pool.
func allocated(name, pool string, admin bool, devices ...string) *resourcev1.ResourceClaim {
	c := claimFor(name, "gpu.nvidia.com", "", int64(len(devices)))
	c.Status.Allocation = &resourcev1.AllocationResult{}
	for _, d := range devices {
		r := resourcev1.DeviceRequestAllocationResult{Request: "gpus", Driver: "gpu.nvidia.com", Pool: pool, Device: d}
		if admin {
			r.AdminAccess = ptr.To(true)
		}
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, r)
	}
	return c
}

func devicePluginProbe(nodeName string, resource corev1.ResourceName) Probe {
	return func(n int64) (*corev1.Pod, []*resourcev1.ResourceClaim) {
		return gpuPod("probe", nodeName, resource, n, false), nil
	}
}

func draProbe(nodeName, className, product string) Probe {
	return func(n int64) (*corev1.Pod, []*resourcev1.ResourceClaim) {
		return gpuPod("probe", nodeName, "", 0, false), []*resourcev1.ResourceClaim{claimFor("probe", className, product, n)}
	}
}

func slicesOf(t *testing.T, name string) []*resourcev1.ResourceSlice {
	t.Helper()
	s, err := dra.Slices(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func maxFit(t *testing.T, s *Snapshot, node string, limit int64, p Probe) int64 {
	t.Helper()
	n, err := s.MaxFit(node, limit, p)
	if err != nil {
		t.Fatalf("MaxFit on %s: %v", node, err)
	}
	return n
}

func TestDevicePluginFreeIsAllocatableMinusRequests(t *testing.T) {
	// GFD's mixed strategy: 8 GPUs, 4 of them partitioned, so nvidia.com/gpu is 4.
	n := node("mig-mixed", map[corev1.ResourceName]string{gpuResource: "4", "nvidia.com/mig-1g.10gb": "28"})
	terminating := gpuPod("terminating", "mig-mixed", gpuResource, 1, true)
	terminating.DeletionTimestamp = &metav1.Time{}
	done := gpuPod("done", "mig-mixed", gpuResource, 2, true)
	done.Status.Phase = corev1.PodSucceeded
	s := NewSnapshot(Cluster{
		Nodes: []*corev1.Node{n},
		Pods: []*corev1.Pod{
			gpuPod("one", "mig-mixed", gpuResource, 1, true), terminating, done,
			gpuPod("mig", "mig-mixed", "nvidia.com/mig-1g.10gb", 3, true),
			gpuPod("pending", "mig-mixed", gpuResource, 4, false),
		},
	})
	if got := s.DevicePluginFree("mig-mixed", gpuResource); got != 2 {
		t.Errorf("free nvidia.com/gpu = %d, want 2 (4 allocatable, 1 running, 1 terminating; finished and pending pods hold nothing)", got)
	}
	if got := maxFit(t, s, "mig-mixed", 8, devicePluginProbe("mig-mixed", gpuResource)); got != 2 {
		t.Errorf("largest nvidia.com/gpu pod = %d, want 2", got)
	}
	if got := maxFit(t, s, "mig-mixed", 64, devicePluginProbe("mig-mixed", "nvidia.com/mig-1g.10gb")); got != 25 {
		t.Errorf("largest mig-1g.10gb pod = %d, want 25", got)
	}
	r, err := s.Fit(gpuPod("big", "mig-mixed", gpuResource, 3, false), nil, "mig-mixed")
	if err != nil || r.Fits() || strings.Join(r.Reasons, ";") != "Insufficient nvidia.com/gpu" {
		t.Errorf("a 3-GPU pod: %v, %v; want the scheduler's Insufficient nvidia.com/gpu", r.Reasons, err)
	}
}

func TestAdminAccessHoldsNothing(t *testing.T) {
	all := []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"}
	s := NewSnapshot(Cluster{
		Nodes:   []*corev1.Node{node("dra-h100-1", nil)},
		Slices:  slicesOf(t, dra.H100),
		Claims:  []*resourcev1.ResourceClaim{allocated("dcgm", "dra-h100-1", true, all...), allocated("train", "dra-h100-1", false, "gpu-0", "gpu-1")},
		Classes: []*resourcev1.DeviceClass{class("gpu.nvidia.com", selectGPU)},
	})
	if got := maxFit(t, s, "dra-h100-1", 16, draProbe("dra-h100-1", "gpu.nvidia.com", h100)); got != 6 {
		t.Errorf("free H100s under an admin-access monitor and a 2-GPU job = %d, want 6", got)
	}
	if got := maxFit(t, s, "dra-h100-1", 16, draProbe("dra-h100-1", "gpu.nvidia.com", "NVIDIA A100-SXM4-40GB")); got != 0 {
		t.Errorf("free A100s on an H100 node = %d, want 0", got)
	}
}

func TestTaintedAllocatedDeviceCountsOnce(t *testing.T) {
	// gpu-3 is tainted NoSchedule (Xid 79); gpu-5's taint has effect None.
	cluster := Cluster{
		Nodes:   []*corev1.Node{node("dra-h100-1", nil)},
		Slices:  slicesOf(t, dra.H100Tainted),
		Classes: []*resourcev1.DeviceClass{class("gpu.nvidia.com", selectGPU)},
	}
	probe := draProbe("dra-h100-1", "gpu.nvidia.com", "")
	if got := maxFit(t, NewSnapshot(cluster), "dra-h100-1", 16, probe); got != 7 {
		t.Errorf("free with one tainted device = %d, want 7", got)
	}
	cluster.Claims = []*resourcev1.ResourceClaim{allocated("held", "dra-h100-1", false, "gpu-3")}
	if got := maxFit(t, NewSnapshot(cluster), "dra-h100-1", 16, probe); got != 7 {
		t.Errorf("free with the tainted device also allocated = %d, want 7 (not subtracted twice)", got)
	}
	tolerating := func(n int64) (*corev1.Pod, []*resourcev1.ResourceClaim) {
		p, claims := probe(n)
		claims[0].Spec.Devices.Requests[0].Exactly.Tolerations = []resourcev1.DeviceToleration{{Key: "gpu.nvidia.com/xid", Operator: resourcev1.DeviceTolerationOpExists}}
		return p, claims
	}
	cluster.Claims = nil
	if got := maxFit(t, NewSnapshot(cluster), "dra-h100-1", 16, tolerating); got != 8 {
		t.Errorf("free to a claim tolerating the taint = %d, want 8", got)
	}
}

func TestPartitionableDevicesShareCounters(t *testing.T) {
	s := NewSnapshot(Cluster{
		Nodes:   []*corev1.Node{node("dra-h100-dyn-1", nil)},
		Slices:  slicesOf(t, dra.H100DynMIG),
		Claims:  []*resourcev1.ResourceClaim{allocated("small", "dra-h100-dyn-1", false, "gpu-0-mig-1g10gb-19-0")},
		Classes: []*resourcev1.DeviceClass{class("gpu.nvidia.com", selectGPU), class("mig.nvidia.com", selectMIG)},
	})
	if got := maxFit(t, s, "dra-h100-dyn-1", 8, draProbe("dra-h100-dyn-1", "gpu.nvidia.com", "")); got != 1 {
		t.Errorf("whole GPUs with a MIG partition carved from gpu-0 = %d, want 1", got)
	}
	one := func(n int64) (*corev1.Pod, []*resourcev1.ResourceClaim) {
		p, claims := draProbe("dra-h100-dyn-1", "mig.nvidia.com", "")(n)
		claims[0].Spec.Devices.Requests[0].Exactly.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: `device.attributes["gpu.nvidia.com"].profile == "1g.10gb"`}}}
		return p, claims
	}
	if got := maxFit(t, s, "dra-h100-dyn-1", 32, one); got != 13 {
		t.Errorf("1g.10gb partitions left = %d, want 13 (6 on gpu-0, 7 on gpu-1)", got)
	}
}

func TestExtendedResourceBackedByDRA(t *testing.T) {
	gpuClass := class("gpu.nvidia.com", selectGPU)
	gpuClass.Spec.ExtendedResourceName = ptr.To(string(gpuResource))
	viaClaim := gpuPod("via-claim", "plugin", gpuResource, 2, true)
	viaClaim.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "via-claim-extended"}
	s := NewSnapshot(Cluster{
		Nodes: []*corev1.Node{node("dra-h100-1", map[corev1.ResourceName]string{gpuResource: "0"}),
			node("plugin", map[corev1.ResourceName]string{gpuResource: "8"})},
		Pods:    []*corev1.Pod{viaClaim, gpuPod("plain", "plugin", gpuResource, 1, true)},
		Slices:  slicesOf(t, dra.H100),
		Claims:  []*resourcev1.ResourceClaim{allocated("other", "dra-h100-1", false, "gpu-7")},
		Classes: []*resourcev1.DeviceClass{gpuClass},
	})
	if got := maxFit(t, s, "dra-h100-1", 16, devicePluginProbe("dra-h100-1", gpuResource)); got != 7 {
		t.Errorf("nvidia.com/gpu served by DRA on a DRA node = %d, want 7", got)
	}
	if got := maxFit(t, s, "plugin", 16, devicePluginProbe("plugin", gpuResource)); got != 5 {
		t.Errorf("nvidia.com/gpu from the device plugin = %d, want 5 (every bound pod's request counts)", got)
	}
}

func TestNodeFiltersInTheSchedulersWords(t *testing.T) {
	cordoned := node("cordoned", map[corev1.ResourceName]string{gpuResource: "8"})
	cordoned.Spec.Unschedulable = true
	tainted := node("tainted", map[corev1.ResourceName]string{gpuResource: "8"})
	tainted.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
	s := NewSnapshot(Cluster{Nodes: []*corev1.Node{cordoned, tainted, node("free", map[corev1.ResourceName]string{gpuResource: "8"})}})
	for _, tc := range []struct {
		node, pinned string
		tolerate     bool
		want         string
	}{
		{"cordoned", "cordoned", false, ReasonUnschedulable},
		{"tainted", "tainted", false, ReasonTaint},
		{"tainted", "tainted", true, ""},
		{"free", "tainted", false, ReasonAffinity},
		{"free", "free", false, ""},
	} {
		p := gpuPod("p", tc.pinned, gpuResource, 1, false)
		if tc.tolerate {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
		}
		r, err := s.Fit(p, nil, tc.node)
		if err != nil || strings.Join(r.Reasons, ";") != tc.want {
			t.Errorf("%s (pinned to %s, tolerating %v): %q, %v; want %q", tc.node, tc.pinned, tc.tolerate, r.Reasons, err, tc.want)
		}
	}
}

func TestBadClaimsAreErrors(t *testing.T) {
	s := NewSnapshot(Cluster{
		Nodes:   []*corev1.Node{node("dra-h100-1", nil)},
		Slices:  slicesOf(t, dra.H100),
		Classes: []*resourcev1.DeviceClass{class("gpu.nvidia.com", selectGPU), class("broken", `device.attributes[`)},
	})
	for _, tc := range []struct{ class, want string }{
		{"missing", "device class missing does not exist"},
		{"broken", "broken"},
	} {
		_, claims := draProbe("dra-h100-1", tc.class, "")(1)
		_, err := s.Fit(gpuPod("p", "dra-h100-1", "", 0, false), claims, "dra-h100-1")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("class %s: error %v, want one naming %q", tc.class, err, tc.want)
		}
	}
}

func TestMessageAndAssume(t *testing.T) {
	cordoned := node("cordoned", map[corev1.ResourceName]string{gpuResource: "8"})
	cordoned.Spec.Unschedulable = true
	s := NewSnapshot(Cluster{Nodes: []*corev1.Node{
		cordoned, node("a", map[corev1.ResourceName]string{gpuResource: "4"}), node("b", map[corev1.ResourceName]string{gpuResource: "2"}),
	}})
	pod := gpuPod("job", "", gpuResource, 3, false)
	pod.Spec.NodeSelector = nil
	results, err := s.FitAll(pod, nil)
	if err != nil {
		t.Fatal(err)
	}
	if msg := Message(results); msg != "" {
		t.Fatalf("a 3-GPU pod fits on a, but Message says %q", msg)
	}
	s.Assume(pod, results[0])
	if results[0].Node != "a" || !results[0].Fits() {
		t.Fatalf("first result %+v, want a fitting a", results[0])
	}
	if results, _ = s.FitAll(pod, nil); Message(results) != "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient nvidia.com/gpu." {
		t.Errorf("after assuming one on a, a second gets %q", Message(results))
	}
}

func TestDeviceTaintRulesTaintTheirDevices(t *testing.T) {
	slices := slicesOf(t, dra.H100)
	rule := func(device string) *resourcev1.DeviceTaintRule {
		return &resourcev1.DeviceTaintRule{Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To("gpu.nvidia.com"), Pool: ptr.To("dra-h100-1"), Device: ptr.To(device)},
			Taint:          resourcev1.DeviceTaint{Key: "maintenance", Effect: resourcev1.DeviceTaintEffectNoSchedule}}}
	}
	otherPool := rule("gpu-2")
	otherPool.Spec.DeviceSelector.Pool = ptr.To("elsewhere")
	s := NewSnapshot(Cluster{
		Nodes:      []*corev1.Node{node("dra-h100-1", nil)},
		Slices:     slices,
		Classes:    []*resourcev1.DeviceClass{class("gpu.nvidia.com", selectGPU)},
		TaintRules: []*resourcev1.DeviceTaintRule{rule("gpu-0"), rule("gpu-1"), otherPool, {}},
	})
	if got := maxFit(t, s, "dra-h100-1", 16, draProbe("dra-h100-1", "gpu.nvidia.com", "")); got != 6 {
		t.Errorf("free with two devices tainted by rules = %d, want 6", got)
	}
	if len(slices[0].Spec.Devices[0].Taints) != 0 {
		t.Error("the caller's slice was modified")
	}
}

// Bad input the API server may hold: a slice that lists a device twice, a claim holding a
// device no slice publishes, a pod asking for an absurd quantity. Answers stay sane.
func TestBadInputKeepsAnswersSane(t *testing.T) {
	slices := slicesOf(t, dra.H100)
	slices[0].Spec.Devices = append(slices[0].Spec.Devices, slices[0].Spec.Devices[0])
	s := NewSnapshot(Cluster{
		Nodes:   []*corev1.Node{node("dra-h100-1", nil), node("plugin", map[corev1.ResourceName]string{gpuResource: "8"})},
		Slices:  slices,
		Claims:  []*resourcev1.ResourceClaim{allocated("ghost", "dra-h100-1", false, "gpu-99")},
		Classes: []*resourcev1.DeviceClass{class("gpu.nvidia.com", selectGPU)},
	})
	n, err := s.MaxFit("dra-h100-1", 16, draProbe("dra-h100-1", "gpu.nvidia.com", ""))
	if n > 8 {
		t.Errorf("a device listed twice counts twice: %d free (err %v)", n, err)
	}
	huge := gpuPod("huge", "plugin", gpuResource, 1, false)
	q := resource.MustParse("99999999999999999999")
	huge.Spec.Containers[0].Resources.Requests[gpuResource], huge.Spec.Containers[0].Resources.Limits[gpuResource] = q, q
	r, err := s.Fit(huge, nil, "plugin")
	if err != nil || r.Fits() || strings.Join(r.Reasons, ";") != "Insufficient nvidia.com/gpu" {
		t.Errorf("an absurd request: %v %v; want Insufficient nvidia.com/gpu", r.Reasons, err)
	}
}
