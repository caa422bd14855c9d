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

package gpuinventory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned/fake"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
)

var (
	t0 = time.Date(2026, 7, 10, 15, 50, 0, 0, time.UTC)
	t1 = t0.Add(time.Hour)
)

// fixture follows sample-controller: objects are seeded into the informer indexers, the sync
// handler runs without goroutines, and the API actions it made are checked.
type fixture struct {
	t           *testing.T
	ctx         context.Context
	client      *fake.Clientset
	writer      *recordingWriter
	metrics     *metrics.Metrics
	controller  *Controller
	recorder    *record.FakeRecorder
	nodeIndexer cache.Indexer
	// invIndexer is the GpuInventory informer's cache.
	invIndexer cache.Indexer
}

func newFixture(t *testing.T, nodes []*corev1.Node, inventories ...*homelabv1.GpuInventory) *fixture {
	return newFixtureWith(t, nil, nodes, inventories...)
}

// newFixtureWith is newFixture with a context that configure completes (nil: none).
func newFixtureWith(t *testing.T, configure func(*controller.Context, *Options), nodes []*corev1.Node, inventories ...*homelabv1.GpuInventory) *fixture {
	_, ctx := ktesting.NewTestContext(t)
	var objs []runtime.Object
	for _, gi := range inventories {
		objs = append(objs, gi)
	}
	client := fake.NewClientset(objs...)
	kubeFactory := kubeinformers.NewSharedInformerFactory(k8sfake.NewClientset(), 0)
	invInformer := NewInformer(client.HomelabV1().GpuInventories(), 0)
	recorder := record.NewFakeRecorder(100)
	writer := &recordingWriter{client: client}
	m := metrics.New()
	cc := &controller.Context{Nodes: kubeFactory.Core().V1().Nodes().Informer(), Metrics: m,
		Recorder: recorder, Clock: clocktesting.NewFakePassiveClock(t1)}
	opts := Options{Writer: writer, Client: client.HomelabV1().GpuInventories(), Inventories: invInformer, ResyncPeriod: time.Minute}
	if configure != nil {
		configure(cc, &opts)
	}
	c, _, err := NewController(ctx, cc, opts)
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	f := &fixture{t: t, ctx: ctx, client: client, writer: writer, metrics: m, controller: c, recorder: recorder,
		nodeIndexer: kubeFactory.Core().V1().Nodes().Informer().GetIndexer(),
		invIndexer:  invInformer.Informer().GetIndexer()}
	for _, n := range nodes {
		if err := f.nodeIndexer.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	for _, gi := range inventories {
		if err := f.invIndexer.Add(gi); err != nil {
			t.Fatal(err)
		}
		c.indexSelector(gi) // as the informer's add handler does
	}
	return f
}

// recordingWriter is the status writer of the unit tests: it records each status and stores
// it in the fake clientset's tracker under a new resourceVersion, as the API server would.
// The real writer is tested against an API server (pkg/statuswriter, pkg/integration).
type recordingWriter struct {
	client  *fake.Clientset
	written []homelabv1.GpuInventoryStatus
	version int
	fail    error
}

func (w *recordingWriter) ApplyStatus(ctx context.Context, name string, status homelabv1.GpuInventoryStatus) (string, error) {
	if w.fail != nil {
		return "", w.fail
	}
	gi, err := w.client.Tracker().Get(homelabv1.SchemeGroupVersion.WithResource("gpuinventories"), "", name)
	if err != nil {
		return "", err
	}
	stored := gi.(*homelabv1.GpuInventory).DeepCopy()
	w.version++
	stored.ResourceVersion = fmt.Sprintf("written-%d", w.version)
	stored.Status = status
	if err := w.client.Tracker().Update(homelabv1.SchemeGroupVersion.WithResource("gpuinventories"), stored, ""); err != nil {
		return "", err
	}
	w.written = append(w.written, status)
	return stored.ResourceVersion, nil
}

// sync runs the sync handler once for name and returns the API actions it made other than
// status writes.
func (f *fixture) sync(name string) []core.Action {
	f.t.Helper()
	f.client.ClearActions()
	f.writer.written = nil
	if err := f.controller.syncHandler(f.ctx, cache.ObjectName{Name: name}); err != nil {
		f.t.Fatalf("sync %s: %v", name, err)
	}
	return f.client.Actions()
}

// appliedStatus checks that the last sync made no API call other than exactly one status
// write (actions are the calls it made) and returns the status written.
func (f *fixture) appliedStatus(actions []core.Action, name string) homelabv1.GpuInventoryStatus {
	f.t.Helper()
	if len(actions) != 0 {
		f.t.Fatalf("want no API call besides the status write, got %v", actions)
	}
	if len(f.writer.written) != 1 {
		f.t.Fatalf("want exactly one status write of %s, got %d", name, len(f.writer.written))
	}
	return f.writer.written[0]
}

// gauge reads a gauge of the controller's metrics as /metrics serves it, by its label values
// in the order of the labels' names; false when there is no such series.
func (f *fixture) gauge(name string, labels ...string) (float64, bool) {
	f.t.Helper()
	families, err := f.metrics.Registry.Gather()
	if err != nil {
		f.t.Fatalf("gather metrics: %v", err)
	}
	for _, family := range families {
		if family.GetName() != name {
			continue
		}
		for _, m := range family.GetMetric() {
			got := make([]string, len(m.GetLabel()))
			for i, l := range m.GetLabel() {
				got[i] = l.GetValue()
			}
			if slices.Equal(got, labels) {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// counter reads a counter of the controller's metrics.
func (f *fixture) counter(vec *prometheus.CounterVec, labels ...string) int {
	return int(testutil.ToFloat64(vec.WithLabelValues(labels...)))
}

func gpuInventory(name string, generation int64, status homelabv1.GpuInventoryStatus) *homelabv1.GpuInventory {
	return &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: generation}, Status: status}
}

// storedStatus is what the controller would have written for nodes at generation, at t0.
func storedStatus(nodes []*corev1.Node, generation int64) homelabv1.GpuInventoryStatus {
	content, _ := inventory.Compute(nodes, nil, t0)
	cond := inventory.DegradedCondition(content, generation)
	cond.LastTransitionTime = metav1.NewTime(t0)
	observed := metav1.NewTime(t0)
	return homelabv1.GpuInventoryStatus{
		ObservedGeneration: generation, ObservedAt: &observed, InventoryHash: content.Hash,
		TotalGpuNodes: content.TotalGpuNodes, ReadyGpuNodes: content.ReadyGpuNodes,
		TotalGpus: content.TotalGpus, ReadyGpus: content.ReadyGpus,
		Nodes: content.Nodes, Conditions: []metav1.Condition{cond},
	}
}

func setReady(node *corev1.Node, status corev1.ConditionStatus) *corev1.Node {
	node = node.DeepCopy()
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
	return node
}

func TestUnchangedInventoryWritesNothing(t *testing.T) {
	nodes := fixtures.HomeLab()
	f := newFixture(t, nodes, gpuInventory("cluster", 1, storedStatus(nodes, 1)))
	if actions := f.sync("cluster"); len(actions) != 0 {
		t.Errorf("status is current: want no API call, got %v", actions)
	}
	written, skipped := f.counter(f.metrics.StatusWrites, "cluster", "written"), f.counter(f.metrics.StatusWrites, "cluster", "skipped")
	if written != 0 || skipped != 1 {
		t.Errorf("writes %d skipped %d, want 0 and 1", written, skipped)
	}
}

func TestNewInventoryGetsTheHomeLabReport(t *testing.T) {
	f := newFixture(t, fixtures.HomeLab(), gpuInventory("cluster", 1, homelabv1.GpuInventoryStatus{}))
	got := f.appliedStatus(f.sync("cluster"), "cluster")

	want := []homelabv1.GpuNodeEntry{
		{Name: "nuc1", Product: "NVIDIA-GeForce-RTX-4070-Laptop-GPU-SHARED", GpuCount: 1, GpuMemoryMiB: 8188, WorkloadConfig: "vm-passthrough"},
		{Name: "nuc2", WorkloadConfig: "vm-passthrough"},
		{Name: "omen", WorkloadConfig: "vm-passthrough"},
		{Name: "omen2", WorkloadConfig: "container"},
	}
	if diff := cmp.Diff(want, inventory.ReportFields(got.Nodes)); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if got.TotalGpuNodes != 4 || got.ReadyGpuNodes != 0 || got.TotalGpus != 1 || got.ReadyGpus != 0 {
		t.Errorf("totals %d/%d nodes, %d/%d GPUs; want 4/0 nodes, 1/0 GPUs", got.TotalGpuNodes, got.ReadyGpuNodes, got.TotalGpus, got.ReadyGpus)
	}
	if got.ObservedGeneration != 1 || got.ObservedAt == nil || !got.ObservedAt.Time.Equal(t1) {
		t.Errorf("observedGeneration %d, observedAt %v; want 1 and %s", got.ObservedGeneration, got.ObservedAt, t1)
	}
	if len(got.Conditions) != 4 || got.Conditions[0].Status != metav1.ConditionTrue ||
		got.Conditions[0].Message != "4 of 4 GPU nodes are not Ready: nuc1, nuc2, omen, omen2" {
		t.Errorf("conditions = %+v, want Degraded=True naming all four nodes", got.Conditions)
	}
	if written := f.counter(f.metrics.StatusWrites, "cluster", "written"); written != 1 {
		t.Errorf("status writes = %d, want 1", written)
	}
}

func TestChangedContentWritesOnceAndMovesObservedAt(t *testing.T) {
	nodes := fixtures.HomeLab()
	stored := storedStatus(nodes, 1)
	nodes[0] = setReady(nodes[0], corev1.ConditionTrue) // nuc1 came back
	f := newFixture(t, nodes, gpuInventory("cluster", 1, stored))

	got := f.appliedStatus(f.sync("cluster"), "cluster")
	if got.ReadyGpuNodes != 1 || got.ReadyGpus != 1 || !got.Nodes[0].Ready {
		t.Errorf("after nuc1 turned Ready: %d ready nodes, %d ready GPUs, nuc1 ready=%v; want 1, 1, true", got.ReadyGpuNodes, got.ReadyGpus, got.Nodes[0].Ready)
	}
	if !got.ObservedAt.Time.Equal(t1) {
		t.Errorf("observedAt = %v, want %s: the content changed", got.ObservedAt, t1)
	}
	if cond := got.Conditions[0]; cond.Status != metav1.ConditionTrue || !cond.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("Degraded stays True, so lastTransitionTime must stay %s; got %s at %s", t0, cond.Status, cond.LastTransitionTime)
	}
	if got.Conditions[0].Message != "3 of 4 GPU nodes are not Ready: nuc2, omen, omen2" {
		t.Errorf("Degraded message = %q", got.Conditions[0].Message)
	}
}

func TestDegradedTransitionMovesLastTransitionTime(t *testing.T) {
	nodes := fixtures.HomeLab()
	stored := storedStatus(nodes, 1)
	for i := range nodes {
		nodes[i] = setReady(nodes[i], corev1.ConditionTrue)
	}
	f := newFixture(t, nodes, gpuInventory("cluster", 1, stored))
	got := f.appliedStatus(f.sync("cluster"), "cluster")
	cond := got.Conditions[0]
	if cond.Status != metav1.ConditionFalse || cond.Reason != homelabv1.ReasonAllGPUNodesReady || !cond.LastTransitionTime.Time.Equal(t1) {
		t.Errorf("Degraded = %s/%s at %s, want False/%s at %s", cond.Status, cond.Reason, cond.LastTransitionTime, homelabv1.ReasonAllGPUNodesReady, t1)
	}
}

func TestGenerationBumpWritesOnceAndKeepsObservedAt(t *testing.T) {
	nodes := fixtures.HomeLab()
	f := newFixture(t, nodes, gpuInventory("cluster", 2, storedStatus(nodes, 1)))
	got := f.appliedStatus(f.sync("cluster"), "cluster")
	if got.ObservedGeneration != 2 || got.Conditions[0].ObservedGeneration != 2 {
		t.Errorf("observedGeneration %d (condition %d), want 2", got.ObservedGeneration, got.Conditions[0].ObservedGeneration)
	}
	if !got.ObservedAt.Time.Equal(t0) {
		t.Errorf("observedAt = %v, want %s: only the generation changed, not the content", got.ObservedAt, t0)
	}
	// The next sync sees its own write and is quiet.
	f2 := newFixture(t, nodes, gpuInventory("cluster", 2, got))
	if actions := f2.sync("cluster"); len(actions) != 0 {
		t.Errorf("second sync after the write: want no API call, got %v", actions)
	}
}

func TestNodeSelectorLimitsTheInventory(t *testing.T) {
	nodes := fixtures.HomeLab()
	nodes[0].Labels["pool"] = "laptops" // nuc1
	gi := gpuInventory("laptops", 1, homelabv1.GpuInventoryStatus{})
	gi.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "laptops"}}
	f := newFixture(t, nodes, gi)
	got := f.appliedStatus(f.sync("laptops"), "laptops")
	if len(got.Nodes) != 1 || got.Nodes[0].Name != "nuc1" || got.TotalGpuNodes != 1 {
		t.Errorf("selector pool=laptops: nodes %+v, total %d; want only nuc1", got.Nodes, got.TotalGpuNodes)
	}
}

func TestInvalidSelectorIsReportedNotRetried(t *testing.T) {
	gi := gpuInventory("broken", 1, homelabv1.GpuInventoryStatus{})
	gi.Spec.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: "Near"}}}
	f := newFixture(t, fixtures.HomeLab(), gi)
	got := f.appliedStatus(f.sync("broken"), "broken")
	cond := got.Conditions[0]
	if cond.Status != metav1.ConditionTrue || cond.Reason != homelabv1.ReasonInvalidNodeSelector || got.TotalGpuNodes != 0 {
		t.Errorf("Degraded = %s/%s %q with %d nodes; want True/%s and no nodes", cond.Status, cond.Reason, cond.Message, got.TotalGpuNodes, homelabv1.ReasonInvalidNodeSelector)
	}
	stored := gi.DeepCopy()
	stored.Status = got
	if actions := newFixture(t, fixtures.HomeLab(), stored).sync("broken"); len(actions) != 0 {
		t.Errorf("the invalid selector is already reported: want no API call, got %v", actions)
	}
}

// A huge selector value (the API server takes label values of any length in a selector's
// In list) must not put a message into the status that the CRD refuses, and the conditions
// that described the nodes go when no node is read any more.
func TestInvalidSelectorWithAHugeValueIsReportedBounded(t *testing.T) {
	nodes := fixtures.HomeLab()
	stored := storedStatus(nodes, 1)
	stored.Conditions = append(stored.Conditions,
		metav1.Condition{Type: homelabv1.ConditionLabelsMissing, Status: metav1.ConditionTrue, Reason: "LabelsVanished", LastTransitionTime: metav1.NewTime(t0)},
		metav1.Condition{Type: homelabv1.ConditionTruncated, Status: metav1.ConditionTrue, Reason: "TooManyNodes", LastTransitionTime: metav1.NewTime(t0)})
	gi := gpuInventory("broken", 2, stored)
	huge := strings.Repeat("x", 40<<10)
	gi.Spec.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: metav1.LabelSelectorOpIn, Values: []string{huge}}}}
	f := newFixture(t, nodes, gi)
	got := f.appliedStatus(f.sync("broken"), "broken")
	degraded := meta.FindStatusCondition(got.Conditions, homelabv1.ConditionDegraded)
	if degraded == nil || degraded.Reason != homelabv1.ReasonInvalidNodeSelector || len(degraded.Message) > inventory.MaxMessageBytes ||
		!strings.HasSuffix(degraded.Message, "(cut)") {
		t.Fatalf("Degraded = %+v; want InvalidNodeSelector with a message of at most %d bytes, marked as cut", degraded, inventory.MaxMessageBytes)
	}
	if len(got.InventoryHash) > 64 {
		t.Errorf("inventoryHash is %d bytes; want it bounded whatever the selector", len(got.InventoryHash))
	}
	for _, stale := range []string{homelabv1.ConditionLabelsMissing, homelabv1.ConditionTruncated} {
		if meta.FindStatusCondition(got.Conditions, stale) != nil {
			t.Errorf("condition %s kept although no node is read any more", stale)
		}
	}
}

func TestMalformedLabelsDoNotFailTheSync(t *testing.T) {
	nodes := fixtures.HomeLab()
	nodes[0].Labels[inventory.LabelCount] = "abc"
	nodes[0].Labels[inventory.LabelMemory] = "99999999999999999999"
	f := newFixture(t, nodes, gpuInventory("cluster", 1, homelabv1.GpuInventoryStatus{}))
	got := f.appliedStatus(f.sync("cluster"), "cluster")
	if got.TotalGpuNodes != 4 || got.Nodes[0].Name != "nuc1" || got.Nodes[0].GpuCount != 0 || got.Nodes[0].GpuMemoryMiB != 0 ||
		got.Nodes[0].Product != "NVIDIA-GeForce-RTX-4070-Laptop-GPU-SHARED" {
		t.Errorf("nuc1 with malformed count and memory: %+v (total %d); want it listed with 0 count and memory", got.Nodes[0], got.TotalGpuNodes)
	}
}

func TestDeletedInventoryIsIgnored(t *testing.T) {
	f := newFixture(t, fixtures.HomeLab())
	if actions := f.sync("gone"); len(actions) != 0 {
		t.Errorf("want no API call for a deleted inventory, got %v", actions)
	}
}

func TestNodeEventsEnqueueTheInventoriesTheyAffect(t *testing.T) {
	all := gpuInventory("all", 1, homelabv1.GpuInventoryStatus{})
	laptops := gpuInventory("laptops", 1, homelabv1.GpuInventoryStatus{})
	laptops.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "laptops"}}
	servers := gpuInventory("servers", 1, homelabv1.GpuInventoryStatus{})
	servers.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "servers"}}
	f := newFixture(t, nil, all, laptops, servers)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "laptops"}}}
	moved := node.DeepCopy()
	moved.Labels["pool"] = "servers"
	f.controller.handleNode(klog.FromContext(f.ctx), node, moved)

	var got []string
	for f.controller.queue.Len() > 0 {
		key, _ := f.controller.queue.Get()
		got = append(got, key.Name)
		f.controller.queue.Done(key)
	}
	want := map[string]bool{"all": true, "laptops": true, "servers": true}
	if len(got) != len(want) {
		t.Fatalf("enqueued %v, want all, laptops and servers (the node left one pool for another)", got)
	}
	for _, name := range got {
		if !want[name] {
			t.Errorf("unexpected key %s", name)
		}
	}
}

// events drains the events the fixture's recorder received.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestFirstStatusRecordsNoEvents(t *testing.T) {
	f := newFixture(t, fixtures.HomeLab(), gpuInventory("cluster", 1, homelabv1.GpuInventoryStatus{}))
	f.appliedStatus(f.sync("cluster"), "cluster")
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("a new inventory must not announce every node, got %v", ev)
	}
}

func TestChangesRecordEvents(t *testing.T) {
	nodes := fixtures.HomeLab()
	stored := storedStatus(nodes, 1)
	nodes[0] = setReady(nodes[0], corev1.ConditionTrue) // nuc1 came back
	f := newFixture(t, nodes[1:], gpuInventory("cluster", 1, stored))
	if err := f.nodeIndexer.Add(nodes[0]); err != nil {
		t.Fatal(err)
	}
	if err := f.nodeIndexer.Delete(nodes[3]); err != nil { // omen2 left
		t.Fatal(err)
	}
	f.appliedStatus(f.sync("cluster"), "cluster")
	want := []string{
		"Normal GPUNodeReady GPU node nuc1 is Ready",
		"Warning GPUNodeLeft GPU node omen2 left the inventory (unknown product, 0 GPUs)",
	}
	if diff := cmp.Diff(want, f.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// Labels that vanish keep their last-known values, from the stored status.
func TestVanishedLabelsKeepLastKnownValues(t *testing.T) {
	nodes := fixtures.HomeLab()
	stored := storedStatus(nodes, 1)
	for _, k := range []string{inventory.LabelProduct, inventory.LabelCount, inventory.LabelMemory} {
		delete(nodes[0].Labels, k)
	}
	f := newFixture(t, nodes, gpuInventory("cluster", 1, stored))
	got := f.appliedStatus(f.sync("cluster"), "cluster")
	nuc1 := got.Nodes[0]
	if !nuc1.LabelsMissing || nuc1.Product != "NVIDIA-GeForce-RTX-4070-Laptop-GPU-SHARED" || nuc1.GpuCount != 1 || got.TotalGpus != 1 || got.UnlabeledGpus != 1 {
		t.Errorf("nuc1 = %+v, totals %d GPUs (%d unlabeled); want last-known values kept and counted", nuc1, got.TotalGpus, got.UnlabeledGpus)
	}
	if nuc1.LabelsMissingSince == nil || !nuc1.LabelsMissingSince.Time.Equal(t1) {
		t.Errorf("labelsMissingSince = %v, want %s", nuc1.LabelsMissingSince, t1)
	}
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning LabelsMissing GPU Feature Discovery labels vanished from node nuc1") {
		t.Errorf("events = %v, want one LabelsMissing warning for nuc1", ev)
	}
	labelsMissing := meta.FindStatusCondition(got.Conditions, homelabv1.ConditionLabelsMissing)
	if labelsMissing == nil || labelsMissing.Status != metav1.ConditionTrue {
		t.Errorf("LabelsMissing condition = %+v, want True", labelsMissing)
	}
}

func TestStatusNodesAreBounded(t *testing.T) {
	var nodes []*corev1.Node
	for i := range 30 {
		n := fixtures.HomeLab()[4].DeepCopy() // cp1, Ready
		n.Name = fmt.Sprintf("gpu-%02d", i)
		n.Labels = map[string]string{inventory.LabelProduct: "NVIDIA-L4", inventory.LabelCount: "1"}
		nodes = append(nodes, n)
	}
	nodes[17] = setReady(nodes[17], corev1.ConditionFalse)
	f := newFixture(t, nil, gpuInventory("cluster", 1, homelabv1.GpuInventoryStatus{}))
	f.controller.maxStatusNodes = 10
	for _, n := range nodes {
		if err := f.nodeIndexer.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	got := f.appliedStatus(f.sync("cluster"), "cluster")
	if len(got.Nodes) != 10 || got.ListedNodes != 10 || got.TotalGpuNodes != 30 || got.TotalGpus != 30 {
		t.Fatalf("listed %d (%d), totals %d nodes %d GPUs; want 10 listed of 30", len(got.Nodes), got.ListedNodes, got.TotalGpuNodes, got.TotalGpus)
	}
	found := false
	for _, n := range got.Nodes {
		found = found || n.Name == "gpu-17"
	}
	if !found {
		t.Errorf("the NotReady node gpu-17 must be listed first")
	}
}

// Readiness needs the caches and one successful sync; an inventory that cannot be synced
// does not hold the others (or a rollout) back.
func TestSyncedNeedsProgressNotEveryInventory(t *testing.T) {
	nodes := fixtures.HomeLab()
	f := newFixture(t, nodes, gpuInventory("a", 1, storedStatus(nodes, 1)), gpuInventory("b", 1, homelabv1.GpuInventoryStatus{}))
	f.controller.nodesSynced = func() bool { return false }
	f.controller.inventoriesSynced = func() bool { return true }
	f.sync("a")
	if f.controller.Synced() {
		t.Fatal("ready before the node cache synced")
	}
	f.controller.nodesSynced = func() bool { return true }
	f.writer.fail = errors.New("the status of b can never be written")
	if err := f.controller.syncHandler(f.ctx, cache.ObjectName{Name: "b"}); err == nil {
		t.Fatal("sync of b: want the write's error")
	}
	if !f.controller.Synced() {
		t.Fatal("not ready although inventory a was synced: one failing inventory must not hold readiness")
	}
}

func TestSyncedBeforeAnyProgress(t *testing.T) {
	f := newFixture(t, fixtures.HomeLab(), gpuInventory("a", 1, homelabv1.GpuInventoryStatus{}))
	f.controller.nodesSynced = func() bool { return true }
	f.controller.inventoriesSynced = func() bool { return true }
	if f.controller.Synced() {
		t.Fatal("ready before any inventory was synced")
	}
	none := newFixture(t, fixtures.HomeLab())
	none.controller.nodesSynced = func() bool { return true }
	none.controller.inventoriesSynced = func() bool { return true }
	if !none.controller.Synced() {
		t.Fatal("not ready with synced caches and no inventory to sync")
	}
}

// withoutNodes is gi as the operator's informer client decodes it: status.nodes left out.
func withoutNodes(gi *homelabv1.GpuInventory) *homelabv1.GpuInventory {
	gi = gi.DeepCopy()
	gi.Status.ListedNodes = int32(len(gi.Status.Nodes))
	gi.Status.Nodes = nil
	return gi
}

// The informer's objects come without status.nodes: the controller reads the list back once
// (last-known labels and events need it), then remembers the list it wrote for the
// resourceVersion the write produced, and reads again only when the object moved on without
// it (someone else's write).
func TestNodeListIsReadBackOnlyWhenNotRemembered(t *testing.T) {
	nodes := fixtures.HomeLab()
	stored := storedStatus(nodes, 1)
	stored.ListedNodes = int32(len(stored.Nodes))
	for _, k := range []string{inventory.LabelProduct, inventory.LabelCount, inventory.LabelMemory} {
		delete(nodes[0].Labels, k) // nuc1's labels vanished: only the stored list knows them
	}
	full := gpuInventory("cluster", 1, stored)
	f := newFixture(t, nodes, full)
	if err := f.invIndexer.Update(withoutNodes(full)); err != nil {
		t.Fatal(err)
	}

	actions := f.sync("cluster")
	if len(actions) != 1 || actions[0].GetVerb() != "get" || len(f.writer.written) != 1 {
		t.Fatalf("first sync: want a get of the whole inventory, then the status write; got %v and %d writes", actions, len(f.writer.written))
	}
	written, err := f.client.HomelabV1().GpuInventories().Get(f.ctx, "cluster", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if nuc1 := written.Status.Nodes[0]; !nuc1.LabelsMissing || nuc1.Product != "NVIDIA-GeForce-RTX-4070-Laptop-GPU-SHARED" {
		t.Errorf("nuc1 = %+v, want its last-known product from the stored list", nuc1)
	}
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning LabelsMissing GPU Feature Discovery labels vanished from node nuc1") {
		t.Errorf("events = %v, want one LabelsMissing warning for nuc1", ev)
	}

	// The echo of that write, and then a node change: no read, and the events compare
	// with the list the controller wrote.
	if err := f.invIndexer.Update(withoutNodes(written)); err != nil {
		t.Fatal(err)
	}
	if err := f.nodeIndexer.Update(setReady(nodes[2], corev1.ConditionTrue)); err != nil { // omen came back
		t.Fatal(err)
	}
	got := f.appliedStatus(f.sync("cluster"), "cluster")
	if nuc1 := got.Nodes[0]; !nuc1.LabelsMissing || nuc1.Product != "NVIDIA-GeForce-RTX-4070-Laptop-GPU-SHARED" {
		t.Errorf("second sync: nuc1 = %+v, want the last-known product kept from memory", nuc1)
	}
	if ev := f.events(); len(ev) != 1 || ev[0] != "Normal GPUNodeReady GPU node omen is Ready" {
		t.Errorf("second sync: events = %v, want one GPUNodeReady for omen", ev)
	}
	if reads := f.counter(f.metrics.StatusReads, "cluster"); reads != 1 {
		t.Errorf("status reads = %d, want 1 (the first sync only)", reads)
	}

	// Someone else wrote the status: the object has a resourceVersion the controller did
	// not produce, so its list is read again.
	other := withoutNodes(written)
	other.ResourceVersion = "someone-else"
	other.Status.InventoryHash = "theirs"
	if err := f.invIndexer.Update(other); err != nil {
		t.Fatal(err)
	}
	if actions := f.sync("cluster"); len(actions) != 1 || actions[0].GetVerb() != "get" || len(f.writer.written) != 1 {
		t.Errorf("after another writer: want a get, then the status write; got %v and %d writes", actions, len(f.writer.written))
	}
}

func TestSelectorsAreParsedOncePerGeneration(t *testing.T) {
	s := newSelectors()
	gi := gpuInventory("laptops", 1, homelabv1.GpuInventoryStatus{})
	gi.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "laptops"}}
	if _, err := s.get(gi); err != nil {
		t.Fatal(err)
	}
	// The same generation is not parsed again (a spec edited in place shows it).
	same := gi.DeepCopy()
	same.Spec.NodeSelector.MatchLabels["pool"] = "desktops"
	if sel, _ := s.get(same); !sel.Matches(labels.Set{"pool": "laptops"}) {
		t.Errorf("generation 1 parsed again: %s", sel)
	}
	changed := gi.DeepCopy()
	changed.Generation = 2
	changed.Spec.NodeSelector.MatchLabels["pool"] = "servers"
	sel, _ := s.get(changed)
	if !sel.Matches(labels.Set{"pool": "servers"}) || sel.Matches(labels.Set{"pool": "laptops"}) {
		t.Errorf("after a spec change the selector is %s; want pool=servers", sel)
	}
}

// A node that keeps changing a malformed value costs a bounded memory and log, and its
// memory goes with the node.
func TestWarningsAreBoundedPerNode(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	var lines int
	logger = logger.WithSink(countingSink{LogSink: logger.GetSink(), count: &lines})
	w := newWarnings()
	for i := range 1000 {
		w.log(logger, []inventory.Warning{{Node: "bad", Label: inventory.LabelCount, Value: fmt.Sprintf("abc%d", i), Reason: "not a whole number"}})
		w.log(logger, []inventory.Warning{{Node: "bad", Label: fmt.Sprintf("nvidia.com/mig-%d.count", i), Value: "x", Reason: "not a whole number"}})
	}
	if lines > warningBurst {
		t.Errorf("%d log lines for one node's 2,000 malformed values; want at most %d", lines, warningBurst)
	}
	if got := len(w.nodes["bad"].values); got > maxWarnedLabelsPerNode {
		t.Errorf("%d labels remembered for one node; want at most %d", got, maxWarnedLabelsPerNode)
	}
	w.log(logger, []inventory.Warning{{Node: "good", Label: inventory.LabelCount, Value: "x"}})
	if lines != warningBurst+1 {
		t.Errorf("another node's first warning was not logged (%d lines)", lines)
	}
	w.forgetNode("bad")
	if _, ok := w.nodes["bad"]; ok || len(w.nodes) != 1 {
		t.Errorf("nodes remembered after bad went: %v", w.nodes)
	}
}

// countingSink counts the lines logged through it.
type countingSink struct {
	logr.LogSink
	count *int
}

func (s countingSink) Info(level int, msg string, kv ...any) {
	*s.count++
	s.LogSink.Info(level, msg, kv...)
}

func (s countingSink) WithValues(kv ...any) logr.LogSink {
	return countingSink{LogSink: s.LogSink.WithValues(kv...), count: s.count}
}
