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
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/simulate"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// selectGPUs is the CEL selector of NVIDIA's gpu.nvidia.com DeviceClass.
const selectGPUs = `device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"`

// kubeClients serve objs from a client-go fake clientset.
func kubeClients(objs ...runtime.Object) (*factory.Factory, *fake.Clientset) {
	kube := fake.NewClientset(objs...)
	return &factory.Factory{FakeKube: fakeKube{kube}, Warnings: io.Discard}, kube
}

// schedNode is a node labelled pool, with gpus nvidia.com/gpu from the device plugin (none
// when 0).
func schedNode(name, pool string, gpus int64) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name, "pool": pool}}}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceCPU: resource.MustParse("64")}
	if gpus > 0 {
		n.Status.Allocatable[allocation.ResourceGPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	n.Status.Capacity = n.Status.Allocatable
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"cuda:12"}, SizeBytes: 1 << 30}}
	return n
}

// gpuClass is NVIDIA's gpu.nvidia.com DeviceClass; it serves nvidia.com/gpu where no device
// plugin does when extended is true (KEP-5004).
func gpuClass(extended bool) *resourcev1.DeviceClass {
	c := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.nvidia.com"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: selectGPUs}}}}}
	if extended {
		c.Spec.ExtendedResourceName = ptr.To(allocation.ResourceGPU)
	}
	return c
}

// draSlices are the ResourceSlices of eight H100s on dra-h100-1.
func draSlices(t *testing.T) []runtime.Object {
	t.Helper()
	slices, err := dra.Slices(dra.H100)
	if err != nil {
		t.Fatal(err)
	}
	var out []runtime.Object
	for _, s := range slices {
		out = append(out, s)
	}
	return out
}

// withClaim gives the pod the claim named claim.
func withClaim(p *corev1.Pod, claim string) *corev1.Pod {
	p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "gpus", ResourceClaimName: ptr.To(claim)})
	return p
}

// whyCluster is a cluster where ml/trainer (4 nvidia.com/gpu, pool=train) waits:
//   - cordoned is cordoned, tainted has a taint it does not tolerate, infer-1 is in another pool;
//   - gpu-a has 2 of 8 GPUs free (ml/train-a holds 6; ml/done-a finished);
//   - gpu-b has 3 free (serving/infer-b holds 4, serving/old-b 1 while it terminates);
//   - dra-h100-1 serves nvidia.com/gpu through DRA: ml/dra-job's claim holds 6 of its 8 H100s,
//     monitoring/dcgm's claim watches all 8 with admin access (holding none).
func whyCluster(t *testing.T) []runtime.Object {
	cordoned := schedNode("cordoned", "train", 8)
	cordoned.Spec.Unschedulable = true
	tainted := schedNode("tainted", "train", 8)
	tainted.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "inference", Effect: corev1.TaintEffectNoSchedule}}
	trainer := gpuPod("ml", "trainer", "", statusTime, allocation.ResourceGPU, 4)
	trainer.Status.Phase = corev1.PodPending
	trainer.Spec.NodeSelector = map[string]string{"pool": "train"}
	done := gpuPod("ml", "done-a", "gpu-a", statusTime, allocation.ResourceGPU, 2)
	done.Status.Phase = corev1.PodSucceeded
	old := gpuPod("serving", "old-b", "gpu-b", statusTime, allocation.ResourceGPU, 1)
	old.DeletionTimestamp = &metav1.Time{Time: now}
	objs := []runtime.Object{
		cordoned, tainted, schedNode("infer-1", "inference", 8), schedNode("gpu-a", "train", 8), schedNode("gpu-b", "train", 8),
		schedNode("dra-h100-1", "train", 0), gpuClass(true),
		trainer, done, old,
		gpuPod("ml", "train-a", "gpu-a", statusTime, allocation.ResourceGPU, 6),
		gpuPod("serving", "infer-b", "gpu-b", statusTime, allocation.ResourceGPU, 4),
		withClaim(gpuPod("ml", "dra-job", "dra-h100-1", statusTime), "dra-job-gpus"),
		withClaim(gpuPod("monitoring", "dcgm", "dra-h100-1", statusTime), "dcgm"),
		gpuClaim("ml", "dra-job-gpus", statusTime, [][2]string{{"dra-h100-1", "gpu-0"}, {"dra-h100-1", "gpu-1"}, {"dra-h100-1", "gpu-2"},
			{"dra-h100-1", "gpu-3"}, {"dra-h100-1", "gpu-4"}, {"dra-h100-1", "gpu-5"}}, "dra-job"),
		adminClaim("monitoring", "dcgm", "dra-h100-1", 8),
	}
	objs = append(objs, schedulerEvents(trainer)...)
	return append(objs, draSlices(t)...)
}

// adminClaim watches n devices of the pool with admin access.
func adminClaim(namespace, name, pool string, n int) *resourcev1.ResourceClaim {
	var devices [][2]string
	for i := range n {
		devices = append(devices, [2]string{pool, "gpu-" + string(rune('0'+i))})
	}
	c := gpuClaim(namespace, name, statusTime, devices, name)
	c.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
	for i := range c.Status.Allocation.Devices.Results {
		c.Status.Allocation.Devices.Results[i].AdminAccess = ptr.To(true)
	}
	return c
}

// schedulerEvents are the scheduler's events about the pod (the latest 5 minutes ago), one
// about an earlier pod of the same name, and one of another reason.
func schedulerEvents(p *corev1.Pod) []runtime.Object {
	event := func(name, reason, message string, uid string, at time.Time) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: name, CreationTimestamp: metav1.NewTime(at)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: types.UID(uid)},
			Reason:         reason, Message: message, LastTimestamp: metav1.NewTime(at), Count: 1}
	}
	latest := event("trainer.2", "FailedScheduling", "0/6 nodes are available: 1 cannot allocate all claims, 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, 2 Insufficient nvidia.com/gpu. preemption: 0/6 nodes are available: 2 No preemption victims found for incoming pod, 4 Preemption is not helpful for scheduling.",
		string(p.UID), now.Add(-5*time.Minute))
	latest.Series = &corev1.EventSeries{Count: 12, LastObservedTime: metav1.NewMicroTime(now.Add(-5 * time.Minute))}
	return []runtime.Object{
		event("trainer.1", "FailedScheduling", "0/6 nodes are available: an hour ago.", string(p.UID), now.Add(-time.Hour)),
		latest,
		event("trainer.0", "FailedScheduling", "an earlier pod of the same name", "earlier", now.Add(-time.Minute)),
		event("trainer.3", "Preempted", "not the scheduler's verdict", string(p.UID), now),
	}
}

func TestWhyPendingGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"why-pending", nil},
		{"why-pending-json", []string{"-o", "json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := kubeClients(whyCluster(t)...)
			r := runPlugin(context.Background(), c, false, nil, append([]string{"why", "-n", "ml", "trainer"}, tc.args...)...)
			if r.code != factory.ExitOK || r.err != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.err)
			}
			golden(t, tc.name+".golden", r.out)
		})
	}
}

// A pending pod of higher priority: why names the nodes where the scheduler's preemption
// makes room and the pods it would evict, the fewest and least important.
func TestWhyPreemptionGolden(t *testing.T) {
	objs := whyCluster(t)
	for _, o := range objs {
		p, ok := o.(*corev1.Pod)
		if !ok {
			continue
		}
		switch p.Name {
		case "trainer":
			p.Spec.Priority = ptr.To(int32(1000))
		case "train-a":
			p.Spec.Priority = ptr.To(int32(500))
		case "infer-b":
			p.Spec.Priority = ptr.To(int32(100))
			p.Status.StartTime = &metav1.Time{Time: now.Add(-2 * time.Hour)}
		case "old-b":
			p.Spec.Priority = ptr.To(int32(100))
			p.Status.StartTime = &metav1.Time{Time: now.Add(-time.Hour)}
		}
	}
	c, _ := kubeClients(objs...)
	r := runPlugin(context.Background(), c, false, nil, "why", "-n", "ml", "trainer")
	if r.code != factory.ExitOK || r.err != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	golden(t, "why-preempt.golden", r.out)
}

// The answer's counts are the scheduler's; the nearest nodes lack the fewest GPUs; their
// holders are listed, terminating ones marked, admin access holding nothing.
func TestWhyPendingAnswer(t *testing.T) {
	c, kube := kubeClients(whyCluster(t)...)
	r := runPlugin(context.Background(), c, false, nil, "why", "-n", "ml", "trainer", "-o", "json")
	if r.code != factory.ExitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	var a printer.Why
	if err := json.Unmarshal([]byte(r.out), &a); err != nil {
		t.Fatal(err)
	}
	if a.State != printer.WhyPending || a.Diagnosis == nil {
		t.Fatalf("state %q, diagnosis %v; want Pending with a diagnosis", a.State, a.Diagnosis)
	}
	wantMessage := "0/6 nodes are available: 1 cannot allocate all claims, 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, 2 Insufficient nvidia.com/gpu."
	if a.Message != wantMessage {
		t.Errorf("message:\n%s\nwant:\n%s", a.Message, wantMessage)
	}
	if a.Scheduler == nil || !strings.HasPrefix(a.Scheduler.Message, wantMessage[:len(wantMessage)-1]) || a.Scheduler.Count != 12 {
		t.Errorf("scheduler event %+v, want the latest FailedScheduling of this pod (12 times), which agrees", a.Scheduler)
	}
	counts := map[string]int{}
	for _, rc := range a.Reasons {
		counts[rc.Reason] = rc.Count
	}
	wantCounts := map[string]int{"cannot allocate all claims": 1, "node(s) didn't match Pod's node affinity/selector": 1,
		"node(s) had untolerated taint(s)": 1, "node(s) were unschedulable": 1, "Insufficient nvidia.com/gpu": 2}
	if diff := cmp.Diff(wantCounts, counts); diff != "" {
		t.Errorf("reason counts (-want +got):\n%s", diff)
	}
	var order []string
	holders := map[string]bool{}
	for _, n := range a.Nearest {
		order = append(order, n.Node)
		for _, h := range n.Holders {
			holders[h.Namespace+"/"+h.Pod] = h.Terminating
		}
	}
	if diff := cmp.Diff([]string{"gpu-b", "dra-h100-1", "gpu-a"}, order); diff != "" {
		t.Errorf("nearest nodes (-want +got):\n%s", diff)
	}
	wantHolders := map[string]bool{"serving/infer-b": false, "serving/old-b": true, "ml/dra-job": false, "ml/train-a": false}
	if diff := cmp.Diff(wantHolders, holders); diff != "" {
		t.Errorf("holders, terminating (-want +got):\n%s", diff)
	}
	for _, action := range kube.Actions() {
		if action.GetVerb() != "list" && action.GetVerb() != "get" {
			t.Errorf("why wrote: %s %s", action.GetVerb(), action.GetResource().Resource)
		}
	}
	assertListOptions(t, kube)
}

// assertListOptions checks the pods are listed as the scheduler's informer lists them, node by
// node for the nodes the node-only filters leave, and the events of the pod only.
func assertListOptions(t *testing.T, kube *fake.Clientset) {
	t.Helper()
	selectors := map[string][]string{}
	for _, action := range kube.Actions() {
		if l, ok := action.(clienttesting.ListAction); ok {
			selectors[l.GetResource().Resource] = append(selectors[l.GetResource().Resource], l.GetListRestrictions().Fields.String())
		}
	}
	var want []string
	for _, node := range []string{"dra-h100-1", "gpu-a", "gpu-b"} {
		want = append(want, fields.ParseSelectorOrDie("spec.nodeName="+node+",status.phase!=Succeeded,status.phase!=Failed").String())
	}
	got := selectors["pods"]
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pods listed with field selectors (-want +got):\n%s", diff)
	}
	if got := selectors["events"]; !slices.Equal(got, []string{"involvedObject.name=trainer,involvedObject.namespace=ml,involvedObject.uid=ml-trainer"}) {
		t.Errorf("events listed with field selectors %q", got)
	}
	for _, r := range []string{"nodes", "resourceslices", "resourceclaims", "deviceclasses"} {
		if len(selectors[r]) != 1 {
			t.Errorf("%s were listed %d times, want once", r, len(selectors[r]))
		}
	}
}

func TestWhyGatedGolden(t *testing.T) {
	p := gpuPod("ml", "queued", "", statusTime, allocation.ResourceGPU, 8)
	p.Status.Phase = corev1.PodPending
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}, {Name: "example.com/budget"}}
	c, kube := kubeClients(p)
	r := runPlugin(context.Background(), c, false, nil, "why", "-n", "ml", "queued")
	if r.code != factory.ExitOK || r.err != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	golden(t, "why-gated.golden", r.out)
	if n := len(kube.Actions()); n != 1 {
		t.Errorf("%d API calls for a gated pod, want 1 (its GET)", n)
	}
}

// A running pod: its node, its device-plugin GPUs, its claims' devices (one with admin access).
func TestWhyRunningGolden(t *testing.T) {
	p := withClaim(gpuPod("ml", "infer-0", "hybrid-1", statusTime, allocation.ResourceGPU, 1), "gpu-monitor")
	p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "h100", ResourceClaimTemplateName: ptr.To("one-h100")})
	p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "h100", ResourceClaimName: ptr.To("infer-0-h100-x7k2p")}}
	p.Spec.ResourceClaims[0].Name = "monitor"
	objs := []runtime.Object{p,
		gpuClaim("ml", "infer-0-h100-x7k2p", statusTime, [][2]string{{"hybrid-1", "gpu-6"}}, "infer-0"),
		adminClaim("ml", "gpu-monitor", "hybrid-1", 2),
	}
	for _, args := range [][]string{nil, {"-o", "json"}} {
		c, _ := kubeClients(objs...)
		r := runPlugin(context.Background(), c, false, nil, append([]string{"why", "infer-0", "-n", "ml"}, args...)...)
		if r.code != factory.ExitOK || r.err != "" {
			t.Fatalf("exit %d, stderr %q", r.code, r.err)
		}
		name := "why-running.golden"
		if args != nil {
			name = "why-running-json.golden"
		}
		golden(t, name, r.out)
	}
}

func TestWhyErrors(t *testing.T) {
	c, _ := kubeClients()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"why", "nope"}, "error: pod \"nope\" not found in namespace \"default\": `kubectl get pods -n default` lists its pods, -n picks another namespace\n"},
		{[]string{"why"}, "error: why takes one pod name, got 0 arguments\nSee 'kubectl gpuinv --help' for usage.\n"},
		{[]string{"why", "a", "-o", "wide"}, "error: unknown output format \"wide\": use json or yaml\nSee 'kubectl gpuinv --help' for usage.\n"},
	} {
		r := runPlugin(context.Background(), c, false, nil, tc.args...)
		if r.code != factory.ExitError || r.err != tc.want || r.out != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit 1 and %q", tc.args, r.code, r.err, r.out, tc.want)
		}
	}
}

// why hands kubectl's --disable-compression, when given, to its reads of the cluster (what
// the reads then ask an API server for: TestFitReadsUncompressedUnlessAsked).
func TestWhyKeepsAGivenCompressionFlag(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		set   bool
	}{{nil, false}, {[]string{"--disable-compression=false"}, true}, {[]string{"--disable-compression"}, true}} {
		c, _ := kubeClients(whyCluster(t)...)
		var asked []bool
		setLoad(t, c, func(ctx context.Context, c *factory.Factory, q simulate.Question) (simulate.Loaded, error) {
			asked = append(asked, q.CompressionSet)
			return loadWhole(ctx, c, q)
		})
		r := runPlugin(context.Background(), c, false, nil, append([]string{"why", "-n", "ml", "trainer"}, tc.flags...)...)
		if r.code != factory.ExitOK || !slices.Equal(asked, []bool{tc.set}) {
			t.Errorf("why %v: exit %d (stderr %q), the reads were told the flag was given: %v, want [%t]", tc.flags, r.code, r.err, asked, tc.set)
		}
	}
}
