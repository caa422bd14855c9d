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
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// startSchedulingCluster is startCluster with kube-scheduler, the ResourceClaim controller,
// the node lifecycle controller and kwok running pods (testenv.Env.StartScheduling).
func startSchedulingCluster(t *testing.T) *cluster {
	t.Helper()
	c := startCluster(t)
	if err := c.env.StartScheduling(testContext(t)); err != nil {
		t.Fatalf("start scheduling: %v", err)
	}
	return c
}

// kwokNode is a node that kwok runs: created without conditions and with the capacity and
// allocatable given (plus CPU, memory and pods); kwok's node-initialize stage keeps those
// and makes the node Ready.
func kwokNode(name string, extra corev1.ResourceList) *corev1.Node {
	resources := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("512Gi"), corev1.ResourcePods: resource.MustParse("110")}
	for k, v := range extra {
		resources[k] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{testenv.KwokAnnotation: "fake"},
			Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
		Status: corev1.NodeStatus{Capacity: resources, Allocatable: resources.DeepCopy()},
	}
}

// waitFor watches the objects of lw until cond accepts one, and returns it; the test fails
// after timeout with the last object seen.
func waitFor[T runtime.Object](t *testing.T, timeout time.Duration, what string, lw cache.ListerWatcher, cond func(T) bool) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last, zero T
	_, err := watchtools.UntilWithSync(ctx, lw, newObject[T](), nil, func(ev watch.Event) (bool, error) {
		obj, ok := ev.Object.(T)
		if !ok || ev.Type == watch.Deleted {
			return false, nil
		}
		last = obj
		return cond(obj), nil
	})
	if err != nil {
		t.Fatalf("%s: not true after %s (%v); last seen: %+v", what, timeout, err, last)
		return zero
	}
	return last
}

// newObject returns an empty object of T's type (a pointer), which watchtools wants.
func newObject[T runtime.Object]() runtime.Object {
	var zero T
	return reflect.New(reflect.TypeOf(zero).Elem()).Interface().(runtime.Object)
}

// named lists and watches the one object called name of a resource.
func named(client rest.Interface, resource, namespace, name string) cache.ListerWatcher {
	return cache.NewListWatchFromClient(client, resource, namespace, fields.OneTermEqualSelector("metadata.name", name))
}

// waitSchedulable waits until kwok made node Ready and the not-ready taint is lifted.
func (c *cluster) waitSchedulable(t *testing.T, node string) *corev1.Node {
	t.Helper()
	return waitFor(t, 30*time.Second, "node "+node+" Ready without taints", named(c.kube.CoreV1().RESTClient(), "nodes", "", node),
		func(n *corev1.Node) bool { return nodeIsReady(n) && len(n.Spec.Taints) == 0 })
}

func nodeIsReady(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
	})
}

// waitRunning waits until the scheduler bound the pod and kwok runs it.
func (c *cluster) waitRunning(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	return waitFor(t, 30*time.Second, "pod "+pod.Name+" Running", named(c.kube.CoreV1().RESTClient(), "pods", pod.Namespace, pod.Name),
		func(p *corev1.Pod) bool { return p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning })
}

// waitUnschedulable waits until the scheduler marks the pod unschedulable (PodScheduled
// False) with a message that says why, and returns the pod.
func (c *cluster) waitUnschedulable(t *testing.T, pod *corev1.Pod, why string) *corev1.Pod {
	t.Helper()
	return waitFor(t, 30*time.Second, "pod "+pod.Name+" unschedulable: "+why, named(c.kube.CoreV1().RESTClient(), "pods", pod.Namespace, pod.Name),
		func(p *corev1.Pod) bool {
			i := slices.IndexFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled })
			return i >= 0 && p.Status.Conditions[i].Status == corev1.ConditionFalse &&
				p.Status.Conditions[i].Reason == corev1.PodReasonUnschedulable && strings.Contains(p.Status.Conditions[i].Message, why)
		})
}

// scheduledMessage is the message of a pod's PodScheduled condition.
func scheduledMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Message
		}
	}
	return ""
}

// waitFailedScheduling waits for a FailedScheduling event of the pod that says why.
func (c *cluster) waitFailedScheduling(t *testing.T, pod *corev1.Pod, why string) *corev1.Event {
	t.Helper()
	selector := fields.Set{"involvedObject.name": pod.Name, "reason": "FailedScheduling"}.AsSelector()
	lw := cache.NewListWatchFromClient(c.kube.CoreV1().RESTClient(), "events", pod.Namespace, selector)
	return waitFor(t, 30*time.Second, "FailedScheduling event of "+pod.Name, lw,
		func(ev *corev1.Event) bool { return strings.Contains(ev.Message, why) })
}

// The real scheduler places pods by a kwok node's nvidia.com/gpu allocatable: two pods of
// four GPUs fill its eight and run, and a third pod of one GPU stays Pending as
// Insufficient. A NotReady node with free GPUs keeps the not-ready taint and gets no pod.
func TestSchedulerExtendedResource(t *testing.T) {
	c := startSchedulingCluster(t)
	ctx := context.Background()
	const node, down = "gpu-node-1", "gpu-node-down"
	gpus := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	notReady := kwokNode(down, gpus)
	delete(notReady.Annotations, testenv.KwokAnnotation) // no kubelet: it stays NotReady
	notReady.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse,
		Reason: "KubeletNotReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if err := testenv.CreateNodes(ctx, c.kube, []*corev1.Node{kwokNode(node, gpus), notReady}); err != nil {
		t.Fatal(err)
	}
	ready := c.waitSchedulable(t, node)
	if got := ready.Status.Allocatable["nvidia.com/gpu"]; got.Value() != 8 {
		t.Fatalf("kwok left %s with allocatable nvidia.com/gpu %s, want the 8 it was created with", node, got.String())
	}

	for _, name := range []string{"first", "second"} {
		pod := c.createPod(t, gpuPod("train", name, "", "nvidia.com/gpu", 4))
		if running := c.waitRunning(t, pod); running.Spec.NodeName != node {
			t.Errorf("pod %s runs on %s, want %s", name, running.Spec.NodeName, node)
		}
	}
	third := c.createPod(t, gpuPod("train", "third", "", "nvidia.com/gpu", 1))
	pending := c.waitUnschedulable(t, third, "Insufficient nvidia.com/gpu")
	ev := c.waitFailedScheduling(t, third, "Insufficient nvidia.com/gpu")
	t.Logf("third pod: %s (event: %s)", scheduledMessage(pending), ev.Message)
	if pending.Spec.NodeName != "" || pending.Status.Phase != corev1.PodPending {
		t.Errorf("third pod on %q in phase %s, want Pending and unbound", pending.Spec.NodeName, pending.Status.Phase)
	}
	n, err := c.kube.CoreV1().Nodes().Get(ctx, down, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(n.Spec.Taints, func(taint corev1.Taint) bool { return taint.Key == corev1.TaintNodeNotReady }) {
		t.Errorf("NotReady node %s lost its not-ready taint: %v", down, n.Spec.Taints)
	}
}

// twoGPUSlice is the ResourceSlice NVIDIA's DRA driver publishes for a node with two GPUs.
func twoGPUSlice(node string) *resourcev1.ResourceSlice {
	device := func(i int) resourcev1.Device {
		return resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type":          {StringValue: ptr.To("gpu")},
				"productName":   {StringValue: ptr.To("NVIDIA H100 80GB HBM3")},
				"uuid":          {StringValue: ptr.To(fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", i))},
				"driverVersion": {VersionValue: ptr.To("580.126.9")},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi")}},
		}
	}
	return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu.nvidia.com"},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: ptr.To(node),
			Pool:    resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{device(0), device(1)}}}
}

// templatePod is a pod whose claim "gpus" comes from a ResourceClaimTemplate.
func templatePod(namespace, name, template string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To(template)}},
			Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpus"}}}}}},
	}
}

// createDRAObjects creates what the DRA test schedules against: the driver's DeviceClass,
// node's slice of two GPUs and, in namespace, a template that asks for both.
func (c *cluster) createDRAObjects(t *testing.T, node, namespace, template string) {
	t.Helper()
	ctx := context.Background()
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.nvidia.com"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: `device.driver == "gpu.nvidia.com"`}}}}}
	if _, err := c.kube.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create DeviceClass: %v", err)
	}
	c.publish(t, twoGPUSlice(node))
	c.ensureNamespace(t, namespace)
	tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: template},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: "gpu.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 2}}}}}}}
	if _, err := c.kube.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ResourceClaimTemplate: %v", err)
	}
}

// podClaim returns the ResourceClaim made for a running pod's claim "gpus", checking that
// the scheduler allocated it both GPUs of node's pool and reserved it for the pod.
func (c *cluster) podClaim(t *testing.T, pod *corev1.Pod, node string) *resourcev1.ResourceClaim {
	t.Helper()
	i := slices.IndexFunc(pod.Status.ResourceClaimStatuses, func(s corev1.PodResourceClaimStatus) bool { return s.Name == "gpus" })
	if i < 0 || pod.Status.ResourceClaimStatuses[i].ResourceClaimName == nil {
		t.Fatalf("pod %s names no claim for gpus: %+v", pod.Name, pod.Status.ResourceClaimStatuses)
	}
	name := *pod.Status.ResourceClaimStatuses[i].ResourceClaimName
	claim, err := c.kube.ResourceV1().ResourceClaims(pod.Namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Allocation == nil {
		t.Fatalf("claim %s of running pod %s is not allocated", name, pod.Name)
	}
	var devices []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != "gpu.nvidia.com" || r.Pool != node || r.Request != "gpus" {
			t.Errorf("claim %s: result %+v, want request gpus from pool %s of gpu.nvidia.com", name, r, node)
		}
		devices = append(devices, r.Device)
	}
	slices.Sort(devices)
	if !slices.Equal(devices, []string{"gpu-0", "gpu-1"}) {
		t.Errorf("claim %s allocated %v, want [gpu-0 gpu-1]", name, devices)
	}
	if !slices.ContainsFunc(claim.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool { return r.UID == pod.UID }) {
		t.Errorf("claim %s is reserved for %+v, not for pod %s", name, claim.Status.ReservedFor, pod.Name)
	}
	return claim
}

// The real scheduler allocates DRA devices: a pod whose template claim asks for two GPUs gets
// both GPUs of a kwok node's slice and runs; a second such pod stays Pending until the first
// is deleted (kwok completes the deletion) and the ResourceClaim controller deallocates its
// claim, then gets them. kube-apiserver and kube-scheduler run
// with every DRA feature gate the tests need.
func TestSchedulerDRA(t *testing.T) {
	c := startSchedulingCluster(t)
	ctx := context.Background()
	for _, component := range []string{"kube-apiserver", "kube-scheduler"} {
		gates, err := c.env.FeatureGates(ctx, component)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range testenv.DRAFeatureGates {
			if !gates[g] {
				t.Errorf("%s runs without feature gate %s", component, g)
			}
		}
	}
	const node, ns = "dra-node-1", "infer"
	if err := testenv.CreateNodes(ctx, c.kube, []*corev1.Node{kwokNode(node, nil)}); err != nil {
		t.Fatal(err)
	}
	c.waitSchedulable(t, node)
	c.createDRAObjects(t, node, ns, "two-gpus")

	first := c.waitRunning(t, c.createPod(t, templatePod(ns, "first", "two-gpus")))
	if first.Spec.NodeName != node {
		t.Errorf("pod first runs on %s, want %s", first.Spec.NodeName, node)
	}
	firstClaim := c.podClaim(t, first, node)
	second := c.createPod(t, templatePod(ns, "second", "two-gpus"))
	pending := c.waitUnschedulable(t, second, "cannot allocate all claims")
	t.Logf("second pod: %s", scheduledMessage(pending))

	if err := c.kube.CoreV1().Pods(ns).Delete(ctx, first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The ResourceClaim controller deallocates the claim; deleting it is the garbage
	// collector's job, which does not run here.
	waitFor(t, 30*time.Second, "claim of the deleted pod released", named(c.kube.ResourceV1().RESTClient(), "resourceclaims", ns, firstClaim.Name),
		func(cl *resourcev1.ResourceClaim) bool {
			return cl.Status.Allocation == nil && len(cl.Status.ReservedFor) == 0 && len(cl.Finalizers) == 0
		})
	c.podClaim(t, c.waitRunning(t, second), node)
}
