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

package gang

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/topology"
)

const (
	gpu    = corev1.ResourceName("nvidia.com/gpu")
	migRes = corev1.ResourceName("nvidia.com/mig-1g.10gb")
	rack   = topology.Rack
	zone   = topology.Zone
	clique = topology.NVLinkClique
)

// gpuNode is a Ready node with 64 CPUs, 512Gi and 110 pods, in zone z and rack r, and the
// extra allocatable given.
func gpuNode(name, z, r string, extra map[corev1.ResourceName]string, opts ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{topology.Hostname: name}}}
	if z != "" {
		n.Labels[zone] = z
	}
	if r != "" {
		n.Labels[rack] = r
	}
	n.Status.Allocatable = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods: resource.MustParse("110"),
	}
	for k, v := range extra {
		n.Status.Allocatable[k] = resource.MustParse(v)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func gpus(n string) map[corev1.ResourceName]string { return map[corev1.ResourceName]string{gpu: n} }

func cordoned(n *corev1.Node) { n.Spec.Unschedulable = true }

// notReady is a node the node lifecycle controller found NotReady: condition and taint.
func notReady(n *corev1.Node) {
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
}

func label(k, v string) func(*corev1.Node) { return func(n *corev1.Node) { n.Labels[k] = v } }

// podAsking asks for n of res, 1 CPU and 1Gi.
func podAsking(name string, res corev1.ResourceName, n int64) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID(name)}}
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	if n > 0 {
		req[res] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	p.Spec.Containers = []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: req, Limits: req}}}
	return p
}

// bound is a running pod on node holding n GPUs at priority prio.
func bound(name, node string, n int64, prio int32) *corev1.Pod {
	p := podAsking(name, gpu, n)
	p.Spec.NodeName = node
	p.Spec.Priority = ptr.To(prio)
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return p
}

// replicas is a template of count pods of n GPUs each.
func replicas(name string, n int64, count int) Template {
	return Template{Pod: podAsking(name, gpu, n), Count: count}
}

// racks is the two racks of the lead's runs: rack-a's two nodes free, rack-b's b2 full.
func racks() capacity.Cluster {
	return capacity.Cluster{
		Nodes: []*corev1.Node{gpuNode("a1", "z1", "rack-a", gpus("8")), gpuNode("a2", "z1", "rack-a", gpus("8")),
			gpuNode("b1", "z1", "rack-b", gpus("8")), gpuNode("b2", "z1", "rack-b", gpus("8"))},
		Pods: []*corev1.Pod{bound("busy", "b2", 8, 0)},
	}
}

// cliques is two NVLink cliques of 18 GB200 nodes (4 GPUs each); c1 has its first
// busyC1 nodes full, c2 its first busyC2.
func cliques(busyC1, busyC2 int) capacity.Cluster {
	var c capacity.Cluster
	for _, cl := range []struct {
		name string
		busy int
	}{{"c1", busyC1}, {"c2", busyC2}} {
		for i := range 18 {
			name := fmt.Sprintf("%s-%02d", cl.name, i)
			c.Nodes = append(c.Nodes, gpuNode(name, "z1", "", gpus("4"), label(clique, "uuid."+cl.name)))
			if i < cl.busy {
				c.Pods = append(c.Pods, bound("busy-"+name, name, 4, 0))
			}
		}
	}
	return c
}

// draRack is two DRA nodes of eight H100s in rack-d and a device-plugin node in rack-p.
func draRack(t *testing.T) capacity.Cluster {
	t.Helper()
	var sl []*resourcev1.ResourceSlice
	for _, node := range []string{"dra-h100-1", "dra-h100-2"} {
		s, err := dra.Slices(dra.H100)
		if err != nil {
			t.Fatal(err)
		}
		s[0].Name, s[0].Spec.NodeName, s[0].Spec.Pool.Name = node+"-slice", ptr.To(node), node
		sl = append(sl, s...)
	}
	cls := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.nvidia.com"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: `device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"`}}}}}
	return capacity.Cluster{
		Nodes: []*corev1.Node{gpuNode("dra-h100-1", "z1", "rack-d", nil), gpuNode("dra-h100-2", "z1", "rack-d", nil),
			gpuNode("p1", "z1", "rack-p", gpus("8"))},
		Slices: sl, Classes: []*resourcev1.DeviceClass{cls},
	}
}

// draReplicas is a template whose pods each claim n whole GPUs through a claim template.
func draReplicas(name string, n int64, count int) Template {
	p := podAsking(name, "", 0)
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("eight-gpus")}}
	tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "eight-gpus"}}
	tmpl.Spec.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: "gpu.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: n}}}
	return Template{Pod: p, Count: count, ClaimTemplates: map[string]*resourcev1.ResourceClaimTemplate{"eight-gpus": tmpl}}
}

// sharedRack is rack-m: a MIG-mixed node (4 whole GPUs, 28 MIG devices), a time-sliced
// node (8 GPUs x 4 replicas) and a node of 8 whole GPUs.
func sharedRack() capacity.Cluster {
	return capacity.Cluster{Nodes: []*corev1.Node{
		gpuNode("m-mig", "z1", "rack-m", map[corev1.ResourceName]string{gpu: "4", migRes: "28"}),
		gpuNode("m-ts", "z1", "rack-m", gpus("32")),
		gpuNode("m-whole", "z1", "rack-m", gpus("8")),
	}}
}

// nodesOf lists the pods' nodes.
func nodesOf(pods []Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Node
	}
	return out
}
