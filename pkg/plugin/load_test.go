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
	gocmp "cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/simulate"
)

// mixedCluster is 26 nodes; 24 in three pools (label pool) of three products (label product):
// device-plugin GPUs (8, 4, none or 2), some cordoned, some tainted NoSchedule, NoExecute or
// PreferNoSchedule, some allowing 3 pods, three of them DRA nodes with eight H100s and a
// network-attached pool of the train pool's nodes; pods on every node (CPU, GPUs,
// terminating, finished, a sidecar, overhead, DRA claims), and pods waiting. Two more have
// MIG devices free and H100s, some held by a claim of no pod.
func mixedCluster(t *testing.T) []runtime.Object {
	objs := []runtime.Object{gpuClass(true), claimTemplate("ml", "h100-eight", 8), networkSlice(t)}
	for i := range 24 {
		objs = append(objs, mixedNode(t, i)...)
	}
	// Two nodes with MIG devices free and H100s, 6 of mig-2's held by a claim of no pod.
	for _, name := range []string{"mig-1", "mig-2"} {
		n := schedNode(name, "infer", 0)
		n.Labels["product"] = "mig"
		n.Status.Allocatable[migResource] = resource.MustParse("2")
		objs = append(objs, n)
		objs = append(objs, nodeSlices(t, name)...)
	}
	var held [][2]string
	for d := range 6 {
		held = append(held, [2]string{"mig-2", fmt.Sprintf("gpu-%d", d)})
	}
	objs = append(objs, gpuClaim("ml", "orphan", statusTime, held))
	objs = append(objs, pendingPods()...)
	return objs
}

// mixedNode is node i of mixedCluster, with its slices and its pods.
func mixedNode(t *testing.T, i int) []runtime.Object {
	name := fmt.Sprintf("n%02d", i)
	n := schedNode(name, []string{"train", "infer", "batch"}[i%3], []int64{8, 4, 0, 2}[i%4])
	n.Labels["product"] = []string{"h100", "a100", "l4"}[i/3%3]
	n.Spec.Unschedulable = i%7 == 3
	switch {
	case i%11 == 1:
		n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	case i == 5:
		n.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}}
	case i%13 == 4:
		n.Spec.Taints = []corev1.Taint{{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}}
	}
	if i%9 == 2 {
		n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("3")
	}
	objs := []runtime.Object{n}
	for k := range 1 + i%4 { // 8 CPUs each: a node of 4 is half full
		p := gpuPod("team", fmt.Sprintf("%s-web-%d", name, k), name, statusTime, "cpu", 8)
		objs = append(objs, p)
	}
	if gpus := []int{3, 4, 0, 1}[i%4]; gpus > 0 {
		objs = append(objs, gpuPod("ml", name+"-train", name, statusTime, allocation.ResourceGPU, gpus))
	}
	objs = append(objs, mixedHolders(name, i)...)
	if i%8 == 2 { // n02, n10, n18: DRA nodes, with MIG devices of a device plugin, all held
		n.Status.Allocatable[migResource] = resource.MustParse("4")
		objs = append(objs, gpuPod("ml", name+"-mig", name, statusTime, string(migResource), 4))
		objs = append(objs, nodeSlices(t, name)...)
		objs = append(objs, withClaim(gpuPod("ml", name+"-dra", name, statusTime), name+"-gpus"),
			gpuClaim("ml", name+"-gpus", statusTime, [][2]string{{name, "gpu-0"}, {name, "gpu-1"}, {name, "gpu-2"}}, name+"-dra"))
	}
	return objs
}

// mixedHolders are pods that hold in the ways the scheduler counts: terminating, finished
// (nothing), a restartable init container, overhead.
func mixedHolders(name string, i int) []runtime.Object {
	var objs []runtime.Object
	switch i % 4 {
	case 0:
		old := gpuPod("serving", name+"-old", name, statusTime, allocation.ResourceGPU, 1)
		old.DeletionTimestamp = &metav1.Time{Time: now}
		done := gpuPod("ml", name+"-done", name, statusTime, allocation.ResourceGPU, 4)
		done.Status.Phase = corev1.PodSucceeded
		objs = append(objs, old, done)
	case 1:
		p := gpuPod("team", name+"-sidecar", name, statusTime, "cpu", 2)
		p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20")}}}}
		objs = append(objs, p)
	case 2:
		p := gpuPod("team", name+"-kata", name, statusTime, "cpu", 1)
		p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("9")}
		objs = append(objs, p)
	}
	return objs
}

// nodeSlices are eight H100s on the named node, in a pool of its name.
func nodeSlices(t *testing.T, node string) []runtime.Object {
	var out []runtime.Object
	for _, o := range draSlices(t) {
		s := o.(*resourcev1.ResourceSlice).DeepCopy()
		s.Name, s.Spec.NodeName, s.Spec.Pool.Name = node+"-gpu.nvidia.com", ptr.To(node), node
		out = append(out, s)
	}
	return out
}

// networkSlice is a pool of two H100s that the train pool's nodes reach.
func networkSlice(t *testing.T) *resourcev1.ResourceSlice {
	s := draSlices(t)[0].(*resourcev1.ResourceSlice).DeepCopy()
	s.Name, s.Spec.NodeName, s.Spec.Pool.Name = "fabric-gpu.nvidia.com", nil, "fabric"
	s.Spec.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"train"}}}}}}
	s.Spec.Devices = s.Spec.Devices[:2]
	return s
}

func claimTemplate(namespace, name string, gpus int64) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: gpus}}}}}}}
}

const migResource = corev1.ResourceName("nvidia.com/mig-1g.10gb")

// pendingPods wait in namespace ml: pinned by selector, by affinity (labels and the node's
// name), not at all, tolerating all, with a claim template, with a shared claim, for a MIG
// device that only DRA nodes have.
func pendingPods() []runtime.Object {
	pending := func(name string, resources ...any) *corev1.Pod {
		p := gpuPod("ml", name, "", statusTime, resources...)
		p.Status.Phase = corev1.PodPending
		return p
	}
	pinned := pending("pinned", allocation.ResourceGPU, 8, "cpu", 40)
	pinned.Spec.NodeSelector = map[string]string{"pool": "train"}
	affinity := pending("affinity", allocation.ResourceGPU, 3)
	affinity.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	affinity.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "product", Operator: corev1.NodeSelectorOpIn, Values: []string{"h100", "a100"}},
				{Key: "pool", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"batch"}}},
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"n00"}}}},
			{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n23"}}}}}}}}
	anywhere := pending("anywhere", allocation.ResourceGPU, 9)
	tolerant := pending("tolerant", allocation.ResourceGPU, 8)
	tolerant.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	tolerant.Spec.NodeSelector = map[string]string{"product": "l4"}
	templated := pending("templated")
	templated.Spec.NodeSelector = map[string]string{"pool": "train"}
	templated.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("h100-eight")}}
	shared := withClaim(pending("shared", "cpu", 1), "n10-gpus")
	mig := pending("mig", string(migResource), 1) // no class maps it: no DRA in the question
	return []runtime.Object{pinned, affinity, anywhere, tolerant, templated, shared, mig}
}

// mixedFit are files for fit on mixedCluster: a Deployment by selector, two objects (one by
// affinity, a Job with claims from a template), a new shared claim, MIG devices (best fit
// counts the nodes' free H100s, which the claim of no pod holds), a Pod anywhere.
var mixedFit = map[string]string{
	"deployment": trainerDeployment,
	"two objects": `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: infer, namespace: serving}
spec:
  replicas: 5
  template:
    spec:
      tolerations: [{key: dedicated, operator: Exists}]
      affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: product, operator: In, values: [l4, a100]}]}]}}}
      containers: [{name: main, image: cuda:12, resources: {limits: {nvidia.com/gpu: 2}}}]
---
` + draJob(9),
	"shared claim": `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: pair, namespace: ml}
spec: {devices: {requests: [{name: gpus, exactly: {deviceClassName: gpu.nvidia.com, count: 2}}]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: users, namespace: ml}
spec:
  replicas: 3
  template:
    spec:
      nodeSelector: {product: h100}
      resourceClaims: [{name: gpus, resourceClaimName: pair}]
      containers: [{name: main, image: cuda:12, resources: {claims: [{name: gpus}]}}]
`,
	"mig": `apiVersion: apps/v1
kind: Deployment
metadata: {name: notebooks, namespace: ml}
spec:
  replicas: 2
  template:
    spec:
      nodeSelector: {product: mig}
      containers: [{name: main, image: cuda:12, resources: {limits: {nvidia.com/mig-1g.10gb: 1}}}]
`,
	"pod": `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "solo", "namespace": "ml"},
 "spec": {"containers": [{"name": "main", "image": "cuda:12", "resources": {"limits": {"nvidia.com/gpu": 3, "cpu": 30}}}]}}`,
}

// What Load reads for a question answers it as the whole cluster does: why's and
// fit's outputs, for people and as JSON, are the same with either, pods listed node by node
// or all at once.
func TestLoadClusterAnswersAsTheWholeCluster(t *testing.T) {
	objs := mixedCluster(t)
	defer func(limit int) { simulate.MaxNodeLists = limit }(simulate.MaxNodeLists)
	for _, limit := range []int{simulate.MaxNodeLists, 0} {
		simulate.MaxNodeLists = limit
		for _, output := range []string{"", "json"} {
			for _, pod := range []string{"pinned", "affinity", "anywhere", "tolerant", "templated", "shared", "mig"} {
				t.Run(fmt.Sprintf("why %s -o %q, %d node lists at most", pod, output, limit), func(t *testing.T) {
					run := func(c *factory.Factory) result {
						return runPlugin(t.Context(), c, false, nil, "why", "-n", "ml", pod, "-o", output)
					}
					compareLoads(t, objs, run)
				})
			}
			for name, file := range mixedFit {
				t.Run(fmt.Sprintf("fit %s -o %q, %d node lists at most", name, output, limit), func(t *testing.T) {
					compareLoads(t, objs, func(c *factory.Factory) result { return runFit(t, c, file, "-f", "-", "-n", "ml", "-o", output) })
				})
			}
		}
	}
}

// compareLoads runs run with Load and with loadWhole over objs and compares what it
// printed and its exit code.
func compareLoads(t *testing.T, objs []runtime.Object, run func(*factory.Factory) result) {
	t.Helper()
	fast, _ := kubeClients(objs...)
	whole, _ := kubeClients(objs...)
	setLoad(t, whole, loadWhole)
	want := run(whole)
	if want.code != factory.ExitOK && want.code != factory.ExitDoesNotFit {
		t.Fatalf("with the whole cluster: exit %d, stderr %q", want.code, want.err)
	}
	if diff := cmp.Diff(want, run(fast), cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("the answer from what the question needs differs from the whole cluster's (-whole +needed):\n%s", diff)
	}
}

// What Load reads from an API server (Nodes from a WatchList, else a list; pods,
// slices and claims as protobuf streams, decoded by hand) is what it reads through a
// clientset, pods listed node by node or all at once (in one list, or namespace by
// namespace where namespaces may be listed).
func TestLoadClusterFromAnAPIServer(t *testing.T) {
	objs := mixedCluster(t)
	questions := map[string]simulate.Question{"pinned": {}, "templated": {}, "mig": {FreeDevices: true}}
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			if q, ok := questions[p.Name]; ok {
				q.Pods = []*corev1.Pod{p}
				questions[p.Name] = q
			}
		}
	}
	defer func(limit int) { simulate.MaxNodeLists = limit }(simulate.MaxNodeLists)
	namespaces := map[string]bool{}
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			namespaces[p.Namespace] = true
		}
	}
	if len(namespaces) < 2 {
		t.Fatalf("the cluster's pods are in %d namespaces: the lists by namespace need two", len(namespaces))
	}
	for _, watchList := range []bool{true, false} {
		resources := []prototest.Resource{prototest.Nodes, prototest.Pods, prototest.ResourceSlices, prototest.ResourceClaims, deviceClasses}
		if !watchList { // and namespaces served: the pods of every node are listed namespace by namespace
			resources = append(resources, prototest.Namespaces)
		}
		server := prototest.NewServer(t, prototest.Options{NoWatchList: !watchList}, resources...)
		for _, o := range objs {
			if _, template := o.(*resourcev1.ResourceClaimTemplate); !template {
				server.Set(o)
			}
		}
		if !watchList {
			for ns := range namespaces {
				server.Set(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			}
		}
		for name, q := range questions {
			for _, limit := range []int{1000, 0} {
				simulate.MaxNodeLists = limit
				fake, _ := kubeClients(objs...)
				want, err := simulate.Load(t.Context(), fake, q)
				if err != nil {
					t.Fatal(err)
				}
				got, err := simulate.Load(t.Context(), &factory.Factory{Base: server.Config(), Warnings: io.Discard}, q)
				if err != nil {
					t.Fatalf("%s, WatchList %t, %d node lists: %v", name, watchList, limit, err)
				}
				if diff := cmp.Diff(sortedLoad(want), sortedLoad(got), equalObjects, cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ResourceVersion"),
					cmp.AllowUnexported(simulate.Loaded{}, simulate.Rejection{}, capacity.Usage{})); diff != "" {
					t.Errorf("%s, WatchList %t, %d node lists (-clientset +API server):\n%s", name, watchList, limit, diff)
				}
			}
		}
	}
}

var deviceClasses = prototest.Resource{GroupVersionKind: resourcev1.SchemeGroupVersion.WithKind("DeviceClass"), Name: "deviceclasses"}

// sortedLoad sorts what l holds by name, for comparing what was read in another order.
func sortedLoad(l simulate.Loaded) simulate.Loaded {
	byName := func(a, b metav1.Object) int {
		return gocmp.Compare(a.GetNamespace()+"/"+a.GetName(), b.GetNamespace()+"/"+b.GetName())
	}
	c := l.Cluster
	slices.SortFunc(c.Nodes, func(a, b *corev1.Node) int { return byName(a, b) })
	slices.SortFunc(c.Pods, func(a, b *corev1.Pod) int { return byName(a, b) })
	slices.SortFunc(c.Slices, func(a, b *resourcev1.ResourceSlice) int { return byName(a, b) })
	slices.SortFunc(c.Claims, func(a, b *resourcev1.ResourceClaim) int { return byName(a, b) })
	slices.SortFunc(c.Classes, func(a, b *resourcev1.DeviceClass) int { return byName(a, b) })
	return l
}

// setLoad makes Load read the cluster with load for c until the test ends.
func setLoad(t *testing.T, c *factory.Factory, load func(context.Context, *factory.Factory, simulate.Question) (simulate.Loaded, error)) {
	testLoads.Store(c, load)
	t.Cleanup(func() { testLoads.Delete(c) })
}

// equalObjects compares decoded objects: quantities by value, nil and empty alike, without
// the type (a list's items do not carry it).
var equalObjects = cmp.Options{cmpopts.EquateEmpty(), cmpopts.IgnoreTypes(metav1.TypeMeta{}),
	cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })}
