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
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
)

// The oracle: for every node of a table of cluster states and every N, "a pod of N GPUs (of
// this kind) fits here" as the project answers it (pkg/capacity, which why and fit use, and
// the operator's status) equals what the real kube-scheduler does with a probe pod pinned to
// that node: bind it, or leave it pending. The scheduler binds every pod and allocates every
// claim here; the test writes no nodeName and no allocation.

const (
	oracleNS   = "oracle"
	oracleGPU  = corev1.ResourceName("nvidia.com/gpu")
	oracleMIG  = corev1.ResourceName("nvidia.com/mig-1g.10gb")
	gpuClass   = "gpu.nvidia.com"
	migClass   = "mig.nvidia.com"
	poolToler  = "nvidia.com/gpu" // the GPU pool's node taint key
	maxProbedN = 8
)

// oracleProbe is one kind of question asked of one node: a pod of N units of a device-plugin
// (or DRA-backed) extended resource, or a pod with a claim of N devices of a DRA class.
type oracleProbe struct {
	node     string
	resource corev1.ResourceName // set: N of this extended resource
	class    string              // set: a claim of N devices of this class
	cel      string              // the claim's extra selector
	memory   string              // the claim asks each device for this much memory
	tolerate bool                // the pod tolerates the GPU pool's node taint
	// status is the operator's answer from the node's entry; nil where the status has no
	// figure for this kind of question (a class probe with a CEL selector the status does not
	// count by: a product no node has, a share of a given size).
	status func(e *homelabv1.GpuNodeEntry, n int64) bool
	limit  int64 // probe N up to this (default maxProbedN)
}

func (p oracleProbe) String() string {
	s := p.node + "/"
	if p.resource != "" {
		s += string(p.resource)
	} else {
		s += "claim:" + p.class
	}
	if p.cel != "" {
		s += "~selector"
	}
	if p.memory != "" {
		s += "~" + p.memory
	}
	if p.tolerate {
		s += "+toleration"
	}
	return s
}

// wholeFree is the status's answer for whole GPUs: freeGpus, taints permitting.
func wholeFree(tolerate bool) func(*homelabv1.GpuNodeEntry, int64) bool {
	return func(e *homelabv1.GpuNodeEntry, n int64) bool {
		return int64(e.FreeGpus) >= n && (tolerate || len(e.Taints) == 0)
	}
}

// unitsFree is the status's answer for units of a device-plugin resource or DRA partitions
// of a profile: free[], on a node that can take pods, taints permitting.
func unitsFree(res corev1.ResourceName) func(*homelabv1.GpuNodeEntry, int64) bool {
	return func(e *homelabv1.GpuNodeEntry, n int64) bool {
		i := slices.IndexFunc(e.Free, func(f homelabv1.ResourceFree) bool { return f.Resource == string(res) })
		return i >= 0 && int64(e.Free[i].Free) >= n && e.Ready && !slices.Contains(e.Conditions, "Cordoned") && len(e.Taints) == 0
	}
}

func TestFitMatchesTheScheduler(t *testing.T) {
	c := startSchedulingCluster(t)
	c.ensureNamespace(t, oracleNS)
	probes := c.buildOracleCluster(t)
	startOperator(t, c.env.Config, testOptions())
	snapshot := c.snapshot(t)
	gi := c.waitInventory(t, "every holder counted", func(gi *homelabv1.GpuInventory) error {
		return holdersCounted(gi, snapshot)
	})
	entries := map[string]*homelabv1.GpuNodeEntry{}
	for i := range gi.Status.Nodes {
		entries[gi.Status.Nodes[i].Name] = &gi.Status.Nodes[i]
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	byNode := map[string][]oracleProbe{}
	for _, p := range probes {
		byNode[p.node] = append(byNode[p.node], p)
	}
	for node, ps := range byNode {
		wg.Go(func() {
			for _, p := range ps {
				for _, msg := range c.askScheduler(t, snapshot, entries[node], p) {
					mu.Lock()
					t.Error(msg)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	c.whySaysWhatTheSchedulerSays(t)
	c.fitAgreesWithTheScheduler(t)
}

// whySaysWhatTheSchedulerSays: for a pod no node can take, `kubectl gpuinv why` gives the
// scheduler's FailedScheduling event word for word: the reasons with their counts, and
// preemption's.
func (c *cluster) whySaysWhatTheSchedulerSays(t *testing.T) {
	t.Helper()
	pod := withResources(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: oracleNS, Name: "too-big"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "big"}}}}, oracleGPU, 12)
	c.createPod(t, pod)
	ev := c.waitFailedScheduling(t, pod, "nodes are available")
	r := runPlugin(context.Background(), c.env.KubeconfigPath(), "why", "-n", oracleNS, "too-big", "-o", "json")
	if r.code != 0 {
		t.Fatalf("why: exit %d, stderr %s", r.code, r.err)
	}
	var got struct {
		Message    string `json:"message"`
		Preemption struct {
			Message string `json:"message"`
		} `json:"preemption"`
	}
	if err := json.Unmarshal([]byte(r.out), &got); err != nil {
		t.Fatalf("why -o json: %v\n%s", err, r.out)
	}
	if whole := got.Message + " " + got.Preemption.Message; whole != ev.Message {
		t.Errorf("why says\n  %s\nthe scheduler's event says\n  %s", whole, ev.Message)
	}
	t.Logf("why and the scheduler: %s", ev.Message)
}

// fitAgreesWithTheScheduler: `kubectl gpuinv fit -f` on a Deployment's replicas says what the
// scheduler then does with the same pods (created by hand: no Deployment controller runs here).
func (c *cluster) fitAgreesWithTheScheduler(t *testing.T) {
	t.Helper()
	for _, tc := range []struct {
		node           string
		replicas, gpus int64
		fits           bool
	}{
		{"or-dp", 2, 4, false}, // 4 free
		{"or-dra", 2, 3, true}, // 6 free through DRA (KEP-5004)
		{"or-ts", 3, 4, false}, // 11 replicas free: two pods of 4 fit, not three
	} {
		name := fmt.Sprintf("fit-%s-%dx%d", tc.node, tc.replicas, tc.gpus)
		file := filepath.Join(t.TempDir(), name+".yaml")
		deployment := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  replicas: %[3]d
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      nodeSelector: {kubernetes.io/hostname: %[4]s}
      containers:
      - name: main
        image: trainer
        resources: {limits: {nvidia.com/gpu: %[5]d}}
`, name, oracleNS, tc.replicas, tc.node, tc.gpus)
		if err := os.WriteFile(file, []byte(deployment), 0o600); err != nil {
			t.Fatal(err)
		}
		r := runPlugin(context.Background(), c.env.KubeconfigPath(), "fit", "-f", file)
		if fits := r.code == 0; fits != tc.fits || r.code > 1 {
			t.Errorf("fit -f %s: exit %d, want fits=%v; stdout:\n%s\nstderr: %s", name, r.code, tc.fits, r.out, r.err)
		}
		bound := 0
		for i := range tc.replicas {
			p := withResources(pinned(tc.node, fmt.Sprintf("%s-%d", name, i), "", 0), oracleGPU, tc.gpus)
			c.createPod(t, p)
			if b, _ := c.verdict(t, p); b {
				bound++
			}
		}
		if scheduled := int64(bound) == tc.replicas; scheduled != tc.fits {
			t.Errorf("%s: the scheduler bound %d of %d replicas; fit said fits=%v", name, bound, tc.replicas, tc.fits)
		}
	}
}

// askScheduler probes N = 1..limit on the probe's node and returns a message for each N
// where an answer of the project differs from the scheduler's.
func (c *cluster) askScheduler(t *testing.T, snapshot *capacity.Snapshot, entry *homelabv1.GpuNodeEntry, p oracleProbe) []string {
	var out []string
	var boundUpTo int64
	defer func() { t.Logf("%s: the scheduler bound a probe of N=1..%d", p, boundUpTo) }()
	limit := p.limit
	if limit == 0 {
		limit = maxProbedN
	}
	for n := int64(1); n <= limit; n++ {
		pod, template := oracleProbePod(p, n)
		var templates map[string]*resourcev1.ResourceClaimTemplate
		if template != nil {
			templates = map[string]*resourcev1.ResourceClaimTemplate{template.Name: template}
		}
		claims, err := snapshot.PodClaims(pod, templates)
		if err != nil {
			return append(out, fmt.Sprintf("%s N=%d: %v", p, n, err))
		}
		r, err := snapshot.Fit(pod, claims, p.node)
		if err != nil {
			return append(out, fmt.Sprintf("%s N=%d: capacity: %v", p, n, err))
		}
		bound, why := c.probe(t, pod, template)
		if bound {
			boundUpTo = n
		}
		if r.Fits() != bound {
			out = append(out, fmt.Sprintf("%s N=%d: capacity says fits=%v %q, the scheduler bound=%v (%s)", p, n, r.Fits(), r.Reasons, bound, why))
		}
		if p.status == nil {
			continue
		}
		if entry == nil {
			out = append(out, fmt.Sprintf("%s: no entry in the status", p))
			return out
		}
		if got := p.status(entry, n); got != bound {
			out = append(out, fmt.Sprintf("%s N=%d: the status (free %d, free units %v, taints %v, conditions %v) says fits=%v, the scheduler bound=%v (%s)",
				p, n, entry.FreeGpus, entry.Free, entry.Taints, entry.Conditions, got, bound, why))
		}
	}
	return out
}

// oracleProbePod is the probe pod for N (and the claim template it uses, for a class probe),
// pinned to the probe's node by its hostname label.
func oracleProbePod(p oracleProbe, n int64) (*corev1.Pod, *resourcev1.ResourceClaimTemplate) {
	name := fmt.Sprintf("probe-%s-%d", strings.NewReplacer("/", "-", ".", "-", ":", "-", "+", "-", "~", "-").Replace(strings.ToLower(p.String())), n)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: oracleNS, Name: name, UID: types.UID(name)},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/hostname": p.node},
			Containers:   []corev1.Container{{Name: "main", Image: "probe"}},
		},
	}
	if p.tolerate {
		pod.Spec.Tolerations = []corev1.Toleration{{Key: poolToler, Operator: corev1.TolerationOpExists}}
	}
	if p.resource != "" {
		q := *resource.NewQuantity(n, resource.DecimalSI)
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{p.resource: q}, Limits: corev1.ResourceList{p.resource: q}}
		return pod, nil
	}
	template := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: oracleNS, Name: name},
		Spec:       resourcev1.ResourceClaimTemplateSpec{Spec: claimSpec(p.class, p.cel, n)},
	}
	if p.memory != "" {
		template.Spec.Spec = *withMemory(template.Spec.Spec, p.memory)
	}
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: &template.Name}}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpus"}}
	return pod, template
}

// claimSpec asks for n devices of class, with the extra CEL selector when not "".
func claimSpec(class, cel string, n int64) resourcev1.ResourceClaimSpec {
	req := &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: n}
	if cel != "" {
		req.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: cel}}}
	}
	return resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpus", Exactly: req}}}}
}

// probe creates the pod (and its template), waits for the scheduler's verdict, and removes
// what it created, waiting until a claim it got is released so that the next probe sees the
// node as before.
func (c *cluster) probe(t *testing.T, pod *corev1.Pod, template *resourcev1.ResourceClaimTemplate) (bound bool, why string) {
	ctx := context.Background()
	pod = pod.DeepCopy()
	pod.UID = ""
	if template != nil {
		if _, err := c.kube.ResourceV1().ResourceClaimTemplates(oracleNS).Create(ctx, template, metav1.CreateOptions{}); err != nil {
			t.Errorf("create template %s: %v", template.Name, err)
			return false, err.Error()
		}
	}
	if _, err := c.kube.CoreV1().Pods(oracleNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Errorf("create probe %s: %v", pod.Name, err)
		return false, err.Error()
	}
	bound, got := c.verdict(t, pod)
	why = scheduledMessage(got)
	c.removeProbe(t, got)
	if template != nil {
		_ = c.kube.ResourceV1().ResourceClaimTemplates(oracleNS).Delete(ctx, template.Name, metav1.DeleteOptions{})
	}
	return bound, why
}

// verdict waits until the scheduler bound the pod or found it unschedulable.
func (c *cluster) verdict(t *testing.T, pod *corev1.Pod) (bool, *corev1.Pod) {
	got := waitFor(t, time.Minute, "the scheduler's verdict on "+pod.Name, named(c.kube.CoreV1().RESTClient(), "pods", pod.Namespace, pod.Name),
		func(p *corev1.Pod) bool {
			i := slices.IndexFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled })
			return p.Spec.NodeName != "" || i >= 0 && p.Status.Conditions[i].Reason == corev1.PodReasonUnschedulable
		})
	return got.Spec.NodeName != "", got
}

// removeProbe deletes the probe at once, then the claims made for it, as the garbage
// collector would (they are the pod's), and waits until they are gone: the ResourceClaim
// controller releases them first, so their devices are free again.
func (c *cluster) removeProbe(t *testing.T, pod *corev1.Pod) {
	ctx := context.Background()
	if err := c.kube.CoreV1().Pods(oracleNS).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete probe %s: %v", pod.Name, err)
	}
	waitGone(t, c.kube, pod)
	var claims []string
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.ResourceClaimName != nil {
			claims = append(claims, *st.ResourceClaimName)
		}
	}
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil {
		claims = append(claims, st.ResourceClaimName)
	}
	for _, name := range claims {
		if err := c.kube.ResourceV1().ResourceClaims(oracleNS).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete claim %s: %v", name, err)
		}
		eventually(t, time.Minute, "claim "+name+" gone", func() error {
			_, err := c.kube.ResourceV1().ResourceClaims(oracleNS).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there (%v)", err)
		})
	}
}

// waitGone waits until the pod no longer exists.
func waitGone(t *testing.T, kube kubernetes.Interface, pod *corev1.Pod) {
	t.Helper()
	eventually(t, 30*time.Second, "pod "+pod.Name+" gone", func() error {
		_, err := kube.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

// snapshot lists what the scheduler decides on, as `why` and `fit` do.
func (c *cluster) snapshot(t *testing.T) *capacity.Snapshot {
	t.Helper()
	ctx := context.Background()
	nodes, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := c.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "status.phase!=Succeeded,status.phase!=Failed"})
	if err != nil {
		t.Fatal(err)
	}
	sl, err := c.kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := c.kube.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	classes, err := c.kube.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cl capacity.Cluster
	for i := range nodes.Items {
		cl.Nodes = append(cl.Nodes, &nodes.Items[i])
	}
	for i := range pods.Items {
		cl.Pods = append(cl.Pods, &pods.Items[i])
	}
	for i := range sl.Items {
		cl.Slices = append(cl.Slices, &sl.Items[i])
	}
	for i := range claims.Items {
		cl.Claims = append(cl.Claims, &claims.Items[i])
	}
	for i := range classes.Items {
		cl.Classes = append(cl.Classes, &classes.Items[i])
	}
	return capacity.NewSnapshot(cl)
}

// holdersCounted reports whether the status counts, on every node, the pods the snapshot
// has bound there that hold GPU resources or allocated claims.
func holdersCounted(gi *homelabv1.GpuInventory, s *capacity.Snapshot) error {
	for _, name := range s.Nodes() {
		want := int32(0)
		for _, p := range s.PodsOn(name) {
			if holdsGPU(p) {
				want++
			}
		}
		i := slices.IndexFunc(gi.Status.Nodes, func(e homelabv1.GpuNodeEntry) bool { return e.Name == name })
		if i < 0 {
			if want > 0 {
				return fmt.Errorf("node %s: no entry", name)
			}
			continue
		}
		if got := gi.Status.Nodes[i].GpuPods; got != want {
			return fmt.Errorf("node %s: %d GPU pods counted, want %d", name, got, want)
		}
	}
	return nil
}

// holdsGPU: the pod requests an NVIDIA resource or uses a claim.
func holdsGPU(p *corev1.Pod) bool {
	for name := range capacity.Requests(p) {
		if strings.HasPrefix(string(name), "nvidia.com/") {
			return true
		}
	}
	return len(p.Spec.ResourceClaims) > 0 && p.Namespace != "oracle-admin"
}

// renamedSlices are a DRA fixture's slices, published for node (the pool named after it).
func renamedSlices(t *testing.T, fixture, node string) []*resourcev1.ResourceSlice {
	t.Helper()
	in, err := dra.Slices(fixture)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range in {
		s.Name = fmt.Sprintf("%s-%d", node, i)
		s.Spec.NodeName = ptr.To(node)
		s.Spec.Pool.Name = node
	}
	return in
}
