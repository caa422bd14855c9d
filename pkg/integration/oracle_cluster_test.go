//go:build integration

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

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// The table of cluster states, one node each (the scheduler sees them all; every probe and
// holder is pinned to its node):
//
//	or-dp          device plugin, 8 GPUs: a running pod holds 3, a terminating one 1, a
//	               finished one held 2, a gated one waits for 4
//	or-mig-mixed   MIG mixed: 4 whole GPUs and 14 1g.10gb devices; 1 and 3 held
//	or-mig-single  MIG single: nvidia.com/gpu is 14 1g.10gb devices; 4 held
//	or-ts          time-sliced T4s: 16 replicas; 5 held
//	or-cordoned    8 GPUs, cordoned
//	or-notready    8 GPUs, NotReady (no kubelet: it keeps the not-ready taint)
//	or-tainted     8 GPUs under nvidia.com/gpu=present:NoSchedule; 2 held by a tolerating pod
//	or-dra         DRA, 8 H100s: a job claims 2, an admin-access monitor claims all
//	or-dra-taint   DRA, gpu-3 tainted NoSchedule, not allocated
//	or-dra-taint2  DRA, gpu-3 tainted NoSchedule and allocated to a tolerating claim
//	or-dra-shared  DRA: one claim of 2 devices shared by two pods
//	or-dra-dynmig  DRA partitionable devices (shared counters): a 1g.10gb partition of gpu-0
//	or-dra-mixed   DRA GPUs and device-plugin 1g.10gb devices: a pod's nvidia.com/gpu is
//	               served by DRA (DeviceClass extendedResourceName), its 1g.10gb by the plugin
//	or-dra-share   DRA consumable capacity: two GPUs that allow several allocations, 80Gi of
//	               memory each (a share takes 80Gi unless it asks less, at least 10Gi); shares
//	               of 50Gi and 30Gi held
func (c *cluster) buildOracleCluster(t *testing.T) []oracleProbe {
	t.Helper()
	c.oracleClasses(t)
	gpu8 := corev1.ResourceList{oracleGPU: resource.MustParse("8")}
	mixed := corev1.ResourceList{oracleGPU: resource.MustParse("4"), oracleMIG: resource.MustParse("14")}
	nodes := []*corev1.Node{
		kwokNode("or-dp", gpu8), kwokNode("or-mig-mixed", mixed),
		labelled(kwokNode("or-mig-single", corev1.ResourceList{oracleGPU: resource.MustParse("14")}),
			inventory.LabelProduct, "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", "nvidia.com/mig.strategy", "single", inventory.LabelCount, "14"),
		labelled(kwokNode("or-ts", corev1.ResourceList{oracleGPU: resource.MustParse("16")}),
			inventory.LabelProduct, "Tesla-T4-SHARED", inventory.LabelCount, "4", "nvidia.com/gpu.replicas", "4", "nvidia.com/gpu.sharing-strategy", "time-slicing"),
		kwokNode("or-cordoned", gpu8), kwokNode("or-tainted", gpu8),
		kwokNode("or-dra", nil), kwokNode("or-dra-taint", nil), kwokNode("or-dra-taint2", nil), kwokNode("or-dra-shared", nil),
		kwokNode("or-dra-dynmig", nil), kwokNode("or-dra-mixed", corev1.ResourceList{oracleMIG: resource.MustParse("7")}),
		labelled(kwokNode("or-dra-share", nil), inventory.LabelProduct, "NVIDIA-H100-80GB-HBM3", inventory.LabelCount, "2"),
	}
	for _, n := range nodes {
		if n.Labels[inventory.LabelProduct] == "" {
			labelled(n, inventory.LabelProduct, "NVIDIA-H100-80GB-HBM3", inventory.LabelCount, "8")
		}
	}
	notReady := labelled(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "or-notready", Labels: map[string]string{"kubernetes.io/hostname": "or-notready"}},
		Status: corev1.NodeStatus{Capacity: gpu8, Allocatable: gpu8,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}}},
		inventory.LabelProduct, "NVIDIA-H100-80GB-HBM3", inventory.LabelCount, "8")
	if err := testenv.CreateNodes(context.Background(), c.kube, append(nodes, notReady)); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		c.waitSchedulable(t, n.Name)
	}
	c.oracleSlices(t)
	c.cordonAndTaint(t)
	c.oracleHolders(t)
	return oracleProbes()
}

// shareableSlice publishes two H100s for node that allow several allocations, each share
// taking memory: 80Gi by default, at least 10Gi in steps of 10Gi.
func shareableSlice(node string) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-0"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: gpuClass, NodeName: ptr.To(node), Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}}}
	for i := range 2 {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type": {StringValue: ptr.To("gpu")}, "productName": {StringValue: ptr.To("NVIDIA H100 80GB HBM3")},
				"uuid": {StringValue: ptr.To(fmt.Sprintf("GPU-5a0e0000-0000-0000-0000-00000000000%d", i))},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi"),
				RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: ptr.To(resource.MustParse("80Gi")),
					ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("10Gi")), Step: ptr.To(resource.MustParse("10Gi"))}}}},
			AllowMultipleAllocations: ptr.To(true),
		})
	}
	return s
}

// withMemory makes the claim's request ask for that much of each device's memory.
func withMemory(s resourcev1.ResourceClaimSpec, memory string) *resourcev1.ResourceClaimSpec {
	s.Devices.Requests[0].Exactly.Capacity = &resourcev1.CapacityRequirements{
		Requests: map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse(memory)}}
	return &s
}

// labelled adds labels (key, value, ...) to the node.
func labelled(n *corev1.Node, kv ...string) *corev1.Node {
	for i := 0; i+1 < len(kv); i += 2 {
		n.Labels[kv[i]] = kv[i+1]
	}
	return n
}

// oracleClasses are the NVIDIA driver's classes; gpu.nvidia.com also serves nvidia.com/gpu on
// nodes whose device plugin offers none (KEP-5004).
func (c *cluster) oracleClasses(t *testing.T) {
	t.Helper()
	for _, cl := range []*resourcev1.DeviceClass{
		{ObjectMeta: metav1.ObjectMeta{Name: gpuClass}, Spec: resourcev1.DeviceClassSpec{
			Selectors:            []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"`}}},
			ExtendedResourceName: ptr.To(string(oracleGPU)),
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: migClass}, Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "mig"`}}},
		}},
	} {
		if _, err := c.kube.ResourceV1().DeviceClasses().Create(context.Background(), cl, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create class %s: %v", cl.Name, err)
		}
	}
}

func (c *cluster) oracleSlices(t *testing.T) {
	t.Helper()
	var all []*resourcev1.ResourceSlice
	for node, fixture := range map[string]string{"or-dra": dra.H100, "or-dra-taint": dra.H100Tainted, "or-dra-taint2": dra.H100Tainted,
		"or-dra-shared": dra.H100, "or-dra-dynmig": dra.H100DynMIG, "or-dra-mixed": dra.H100} {
		all = append(all, renamedSlices(t, fixture, node)...)
	}
	all = append(all, shareableSlice("or-dra-share"))
	for _, s := range all {
		if _, err := c.kube.ResourceV1().ResourceSlices().Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create slice %s: %v", s.Name, err)
		}
	}
}

// cordonAndTaint cordons or-cordoned and taints or-tainted, after kwok made them Ready.
func (c *cluster) cordonAndTaint(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for name, change := range map[string]func(*corev1.Node){
		"or-cordoned": func(n *corev1.Node) { n.Spec.Unschedulable = true },
		"or-tainted": func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: poolToler, Value: "present", Effect: corev1.TaintEffectNoSchedule})
		},
	} {
		n, err := c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(n)
		if _, err := c.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update node %s: %v", name, err)
		}
	}
}

// oracleHolders makes the scheduler place the pods that hold GPUs in the table.
func (c *cluster) oracleHolders(t *testing.T) {
	t.Helper()
	c.ensureNamespace(t, "oracle-admin")
	c.labelNamespace(t, "oracle-admin", "resource.kubernetes.io/admin-access", "true")
	uuid := deviceUUID(t, "or-dra-taint2", "gpu-3")
	for _, h := range []struct {
		pod   *corev1.Pod
		claim *resourcev1.ResourceClaimSpec // from a template of the pod's own
		state string                        // running, terminating, finished
	}{
		{pod: pinned("or-dp", "dp-run", oracleGPU, 3), state: "running"},
		{pod: pinned("or-dp", "dp-term", oracleGPU, 1), state: "terminating"},
		{pod: pinned("or-dp", "dp-done", oracleGPU, 2), state: "finished"},
		{pod: pinned("or-mig-mixed", "mixed-gpu", oracleGPU, 1), state: "running"},
		{pod: pinned("or-mig-mixed", "mixed-mig", oracleMIG, 3), state: "running"},
		{pod: pinned("or-mig-single", "single", oracleGPU, 4), state: "running"},
		{pod: pinned("or-ts", "ts", oracleGPU, 5), state: "running"},
		{pod: tolerating(pinned("or-tainted", "tainted", oracleGPU, 2)), state: "running"},
		{pod: pinned("or-dra", "dra-job", "", 0), claim: ptr.To(claimSpec(gpuClass, "", 2)), state: "running"},
		{pod: inNamespace(pinned("or-dra", "dcgm", "", 0), "oracle-admin"), claim: adminAll(), state: "running"},
		{pod: pinned("or-dra-taint2", "taint2", "", 0), claim: tolerateXid(claimSpec(gpuClass, fmt.Sprintf(`device.attributes["gpu.nvidia.com"].uuid == %q`, uuid), 1)), state: "running"},
		{pod: pinned("or-dra-dynmig", "dynmig", "", 0), claim: ptr.To(claimSpec(migClass, `device.attributes["gpu.nvidia.com"].profile == "1g.10gb"`, 1)), state: "running"},
		{pod: withResources(pinned("or-dra-mixed", "dra-mixed", oracleGPU, 2), oracleMIG, 1), state: "running"},
		{pod: pinned("or-dra-share", "share", "", 0), claim: withMemory(claimSpec(gpuClass, "", 1), "50Gi"), state: "running"},
		{pod: pinned("or-dra-share", "share-2", "", 0), claim: withMemory(claimSpec(gpuClass, "", 1), "30Gi"), state: "running"},
	} {
		c.placeHolder(t, h.pod, h.claim, h.state)
	}
	c.sharedClaimHolders(t)
	gated := pinned("or-dp", "dp-gated", oracleGPU, 4)
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/queue"}}
	c.createPod(t, gated)
}

// pinned is a pod pinned to node asking for n of res (nothing when res is "").
func pinned(node, name string, res corev1.ResourceName, n int64) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: oracleNS, Name: name},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"kubernetes.io/hostname": node},
			Containers: []corev1.Container{{Name: "main", Image: "holder"}}}}
	if res != "" {
		withResources(p, res, n)
	}
	return p
}

func withResources(p *corev1.Pod, res corev1.ResourceName, n int64) *corev1.Pod {
	r := &p.Spec.Containers[0].Resources
	if r.Limits == nil {
		r.Limits, r.Requests = corev1.ResourceList{}, corev1.ResourceList{}
	}
	r.Limits[res], r.Requests[res] = *resource.NewQuantity(n, resource.DecimalSI), *resource.NewQuantity(n, resource.DecimalSI)
	return p
}

func tolerating(p *corev1.Pod) *corev1.Pod {
	p.Spec.Tolerations = []corev1.Toleration{{Key: poolToler, Operator: corev1.TolerationOpExists}}
	return p
}

func inNamespace(p *corev1.Pod, ns string) *corev1.Pod {
	p.Namespace = ns
	return p
}

// adminAll is a DCGM-style monitor's claim: every GPU of the node, with admin access.
func adminAll() *resourcev1.ResourceClaimSpec {
	return &resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpus",
		Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: gpuClass, AllocationMode: resourcev1.DeviceAllocationModeAll, AdminAccess: ptr.To(true)}}}}}
}

func tolerateXid(s resourcev1.ResourceClaimSpec) *resourcev1.ResourceClaimSpec {
	s.Devices.Requests[0].Exactly.Tolerations = []resourcev1.DeviceToleration{{Key: "gpu.nvidia.com/xid", Operator: resourcev1.DeviceTolerationOpExists}}
	return &s
}

// placeHolder creates the pod (with a claim template of its own when claim is set), waits
// until the scheduler placed it and kwok runs it, then brings it to state.
func (c *cluster) placeHolder(t *testing.T, pod *corev1.Pod, claim *resourcev1.ResourceClaimSpec, state string) {
	t.Helper()
	ctx := context.Background()
	if claim != nil {
		tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: *claim}}
		if _, err := c.kube.ResourceV1().ResourceClaimTemplates(pod.Namespace).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: &tmpl.Name}}
		pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpus"}}
	}
	switch state {
	case "terminating":
		pod.Finalizers = []string{"example.com/hold"}
	case "finished":
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "done", UID: "done-uid"}}
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	created := c.createPod(t, pod)
	if state == "finished" {
		waitFor(t, time.Minute, "pod "+pod.Name+" Succeeded", named(c.kube.CoreV1().RESTClient(), "pods", pod.Namespace, pod.Name),
			func(p *corev1.Pod) bool { return p.Spec.NodeName != "" && p.Status.Phase == corev1.PodSucceeded })
		return
	}
	c.waitRunning(t, created)
	if state == "terminating" {
		if err := c.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.dropFinalizers(pod.Namespace, pod.Name) })
	}
}

// sharedClaimHolders: one claim of 2 devices, reserved for two pods.
func (c *cluster) sharedClaimHolders(t *testing.T) {
	t.Helper()
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: oracleNS, Name: "shared"}, Spec: claimSpec(gpuClass, "", 2)}
	if _, err := c.kube.ResourceV1().ResourceClaims(oracleNS).Create(context.Background(), claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"shared-a", "shared-b"} {
		p := pinned("or-dra-shared", name, "", 0)
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To("shared")}}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpus"}}
		c.waitRunning(t, c.createPod(t, p))
	}
}

func (c *cluster) dropFinalizers(namespace, name string) {
	ctx := context.Background()
	p, err := c.kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	p.Finalizers = nil
	_, _ = c.kube.CoreV1().Pods(namespace).Update(ctx, p, metav1.UpdateOptions{})
}

func (c *cluster) labelNamespace(t *testing.T, name, key, value string) {
	t.Helper()
	ctx := context.Background()
	ns, err := c.kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[key] = value
	if _, err := c.kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// deviceUUID is the uuid attribute of a device of node's slices.
func deviceUUID(t *testing.T, node, device string) string {
	t.Helper()
	for _, s := range renamedSlices(t, dra.H100Tainted, node) {
		for _, d := range s.Spec.Devices {
			if d.Name == device {
				return *d.Attributes["uuid"].StringValue
			}
		}
	}
	t.Fatalf("no device %s", device)
	return ""
}

// oracleProbes are the questions asked of each node of the table.
func oracleProbes() []oracleProbe {
	dp := func(node string, res corev1.ResourceName, status func(*homelabv1.GpuNodeEntry, int64) bool) oracleProbe {
		return oracleProbe{node: node, resource: res, status: status}
	}
	whole := wholeFree(false)
	profile := `device.attributes["gpu.nvidia.com"].profile == "1g.10gb"`
	return []oracleProbe{
		dp("or-dp", oracleGPU, whole),
		dp("or-mig-mixed", oracleGPU, whole), dp("or-mig-mixed", oracleMIG, unitsFree(oracleMIG)),
		{node: "or-mig-single", resource: oracleGPU, status: unitsFree(oracleGPU), limit: 11},
		{node: "or-ts", resource: oracleGPU, status: unitsFree(oracleGPU), limit: 12},
		dp("or-cordoned", oracleGPU, whole), dp("or-notready", oracleGPU, whole),
		dp("or-tainted", oracleGPU, whole), {node: "or-tainted", resource: oracleGPU, tolerate: true, status: wholeFree(true)},
		{node: "or-dra", class: gpuClass, status: whole}, dp("or-dra", oracleGPU, whole),
		{node: "or-dra", class: gpuClass, cel: `device.attributes["gpu.nvidia.com"].productName == "NVIDIA A100-SXM4-80GB"`},
		{node: "or-dra-taint", class: gpuClass, status: whole}, {node: "or-dra-taint2", class: gpuClass, status: whole},
		{node: "or-dra-shared", class: gpuClass, status: whole},
		{node: "or-dra-dynmig", class: gpuClass, status: whole}, {node: "or-dra-dynmig", class: migClass, cel: profile, limit: 14, status: unitsFree(inventory.DRAPartitionPrefix + "1g.10gb")},
		dp("or-dra-mixed", oracleGPU, whole), dp("or-dra-mixed", oracleMIG, unitsFree(oracleMIG)),
		{node: "or-dra-share", class: gpuClass, status: whole}, {node: "or-dra-share", class: gpuClass, memory: "30Gi", limit: 4},
		// The smallest share (10Gi): the status's shared GPUs.
		{node: "or-dra-share", class: gpuClass, memory: "10Gi", limit: 4, status: unitsFree(inventory.DRASharedResource)},
	}
}
