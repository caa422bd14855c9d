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

package gpunode

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	applyv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/applyconfiguration/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned/fake"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// fixture is a controller over caches that the test fills by hand: events are delivered
// through nodecache.Events, and syncs run one key at a time.
type fixture struct {
	t       *testing.T
	ctx     context.Context
	client  *fake.Clientset
	nodes   cache.SharedIndexInformer
	events  *nodecache.Events
	records *Records
	clock   *clocktesting.FakePassiveClock
	metrics *metrics.Metrics
	seed    map[string]homelabv1.GpuNodeEntry
	c       *Controller
}

func newFixture(t *testing.T, nodes []*corev1.Node, records ...*homelabv1.GpuNode) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	var objs []runtime.Object
	for _, r := range records {
		objs = append(objs, r)
	}
	f := &fixture{t: t, ctx: ctx, client: fake.NewClientset(objs...), events: &nodecache.Events{},
		clock: clocktesting.NewFakePassiveClock(t0.Add(123 * time.Millisecond)), metrics: metrics.New(),
		seed: map[string]homelabv1.GpuNodeEntry{}}
	f.nodes = nodecache.NewNodeInformer(k8sfake.NewClientset().CoreV1().Nodes(), 0)
	f.records = NewRecordInformer(f.client.HomelabV1().GpuNodes(), 0)
	cc := &controller.Context{Nodes: f.nodes, NodeEvents: f.events, Metrics: f.metrics, Clock: f.clock}
	c, _, err := NewController(ctx, cc, Options{Client: f.client.HomelabV1().GpuNodes(), Records: f.records,
		Seed: func(name string) (homelabv1.GpuNodeEntry, bool) { e, ok := f.seed[name]; return e, ok }})
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	c.listed.Store(true) // as once running: events queue their names
	for _, n := range nodes {
		f.setNode(n)
	}
	f.refreshRecords()
	return f
}

// setNode puts a node into the node cache as the node informer keeps it.
func (f *fixture) setNode(n *corev1.Node) {
	f.t.Helper()
	var obj any = n
	if !inventory.IsGPUNode(n) {
		obj = &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: n.Name, ResourceVersion: n.ResourceVersion}}
	}
	if err := f.nodes.GetIndexer().Update(obj); err != nil {
		f.t.Fatal(err)
	}
}

// updateNode changes a node in the cache and delivers the update event.
func (f *fixture) updateNode(old, cur *corev1.Node) {
	f.t.Helper()
	oldObj, _, _ := f.nodes.GetIndexer().GetByKey(old.Name)
	f.setNode(cur)
	curObj, _, _ := f.nodes.GetIndexer().GetByKey(cur.Name)
	f.events.OnUpdate(oldObj, curObj)
}

// refreshRecords makes the record cache what the API server holds, as the informer would.
func (f *fixture) refreshRecords() {
	f.t.Helper()
	list, err := f.client.HomelabV1().GpuNodes().List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var objs []any
	for i := range list.Items {
		r, _ := TrimRecord(list.Items[i].DeepCopy())
		objs = append(objs, r)
	}
	if err := f.records.Informer().GetIndexer().Replace(objs, list.ResourceVersion); err != nil {
		f.t.Fatal(err)
	}
}

// sync syncs one node, refreshes the record cache and returns the writes the sync made.
func (f *fixture) sync(name string) []core.Action {
	f.t.Helper()
	f.client.ClearActions()
	if err := f.c.syncHandler(f.ctx, cache.ObjectName{Name: name}); err != nil {
		f.t.Fatalf("sync of %s: %v", name, err)
	}
	actions := f.client.Actions()
	f.refreshRecords()
	return actions
}

// syncQueued syncs every queued key and returns the writes.
func (f *fixture) syncQueued() []core.Action {
	f.t.Helper()
	var actions []core.Action
	for f.c.queue.Len() > 0 {
		key, _ := f.c.queue.Get()
		actions = append(actions, f.sync(key.Name)...)
		f.c.queue.Done(key)
	}
	return actions
}

func (f *fixture) record(name string) *homelabv1.GpuNode {
	f.t.Helper()
	r, err := f.client.HomelabV1().GpuNodes().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("record %s: %v", name, err)
	}
	return r
}

func (f *fixture) writes(outcome string) float64 {
	return testutil.ToFloat64(f.metrics.GpuNodeWrites.WithLabelValues(outcome))
}

// gpuNode is a Ready node as GPU Feature Discovery and the device plugin label it.
func gpuNode(name, product string, count int) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1", Labels: map[string]string{
			inventory.LabelProduct: product, inventory.LabelCount: strconv.Itoa(count), inventory.LabelMemory: "81559",
			inventory.LabelFamily: "hopper", "nvidia.com/gpu.deploy.device-plugin": "true",
			"kubernetes.io/hostname": name,
		}},
		Status: corev1.NodeStatus{
			Capacity:   corev1.ResourceList{inventory.ResourceGPU: *resource.NewQuantity(int64(count), resource.DecimalSI)},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

// changed returns a copy of n at the next resourceVersion, changed by edit.
func changed(n *corev1.Node, edit func(*corev1.Node)) *corev1.Node {
	c := n.DeepCopy()
	rv, _ := strconv.Atoi(n.ResourceVersion)
	c.ResourceVersion = strconv.Itoa(rv + 1)
	edit(c)
	return c
}

// withoutGFDLabels is the node after GFD's labels vanished: the GPU Operator's deploy label
// and the device plugin's capacity remain, so it is still a GPU node.
func withoutGFDLabels(n *corev1.Node) *corev1.Node {
	return changed(n, func(c *corev1.Node) {
		for _, k := range []string{inventory.LabelProduct, inventory.LabelCount, inventory.LabelMemory, inventory.LabelFamily} {
			delete(c.Labels, k)
		}
	})
}

// unknownGPUs strips a node of every GPU fact: GFD's labels and the nvidia.com/gpu capacity.
func unknownGPUs(n *corev1.Node) *corev1.Node {
	return changed(withoutGFDLabels(n), func(c *corev1.Node) { c.Status.Capacity = nil })
}

func onlyVerbs(actions []core.Action) []string {
	var verbs []string
	for _, a := range actions {
		verbs = append(verbs, a.GetVerb())
	}
	return verbs
}

func wantWrites(t *testing.T, what string, actions []core.Action, verbs ...string) {
	t.Helper()
	if diff := cmp.Diff(verbs, onlyVerbs(actions)); diff != "" {
		t.Fatalf("%s: API calls (-want +got):\n%s", what, diff)
	}
}

func TestRecordIsCreatedWhenANodeFirstShowsGPUFacts(t *testing.T) {
	f := newFixture(t, []*corev1.Node{gpuNode("dgx-1", "NVIDIA-H100-80GB-HBM3", 8)})
	wantWrites(t, "first sync", f.sync("dgx-1"), "patch")

	r := f.record("dgx-1")
	seen := metav1.NewTime(t0)
	want := homelabv1.GpuNodeSpec{Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8, GpuMemoryMiB: 81559, Family: "hopper",
		WorkloadConfig: homelabv1.DefaultWorkloadConfig, Source: homelabv1.SourceGPUFeatureDiscovery, LastSeen: &seen}
	if diff := cmp.Diff(want, r.Spec); diff != "" {
		t.Errorf("record spec (-want +got):\n%s", diff)
	}
	if got := r.Annotations[homelabv1.IdentityHashAnnotation]; got != inventory.IdentityHash(want) {
		t.Errorf("identity hash annotation = %q, want %q", got, inventory.IdentityHash(want))
	}
	if len(r.Labels) != 0 {
		t.Errorf("labels = %v, want none", r.Labels)
	}
	wantOwner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "dgx-1", UID: "uid-dgx-1"}}
	if diff := cmp.Diff(wantOwner, r.OwnerReferences); diff != "" {
		t.Errorf("owner references (-want +got): the garbage collector could not delete the record with its node\n%s", diff)
	}
	if !managedBy(r, homelabv1.FieldManager) {
		t.Errorf("managedFields %v: want the operator's field manager", r.ManagedFields)
	}
	if got := f.writes(metrics.GpuNodeCreated); got != 1 {
		t.Errorf("created writes = %v, want 1", got)
	}
	if got := f.c.Record("dgx-1"); got == nil || got.Spec.Product != want.Product || len(got.ManagedFields) != 0 {
		t.Errorf("Record(dgx-1) = %+v; want the cached record, without managedFields", got)
	}
}

func managedBy(r *homelabv1.GpuNode, manager string) bool {
	for _, m := range r.ManagedFields {
		if m.Manager == manager && m.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

func TestNodesThatAreNoGPUNodeOrWereNeverLabelledGetNoRecord(t *testing.T) {
	cpu := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-1", UID: "uid-cpu-1", ResourceVersion: "1"}}
	unlabelled := unknownGPUs(gpuNode("gpu-new", "x", 1))
	f := newFixture(t, []*corev1.Node{cpu, unlabelled})
	cached, _, _ := f.nodes.GetIndexer().GetByKey("cpu-1")
	f.events.OnAdd(cached, false)
	if f.c.queue.Len() != 0 {
		t.Errorf("a node that is no GPU node was queued")
	}
	wantWrites(t, "CPU node", f.sync("cpu-1"))
	wantWrites(t, "GPU node never labelled (unknown, not missing)", f.sync("gpu-new"))
}

// A Ready flip or a heartbeat is no identity: it queues nothing, and a sync writes nothing.
func TestReadyFlipCostsNoWrite(t *testing.T) {
	node := gpuNode("dgx-1", "NVIDIA-H100-80GB-HBM3", 8)
	f := newFixture(t, []*corev1.Node{node})
	f.sync("dgx-1")

	notReady := changed(node, func(n *corev1.Node) {
		n.Status.Conditions[0].Status = corev1.ConditionFalse
		n.Spec.Unschedulable = true
		n.Spec.Taints = []corev1.Taint{{Key: inventory.TaintUnreachable, Effect: corev1.TaintEffectNoSchedule}}
	})
	f.updateNode(node, notReady)
	if n := f.c.queue.Len(); n != 0 {
		t.Errorf("a Ready flip queued %d keys, want none", n)
	}
	f.clock.SetTime(t0.Add(time.Hour))
	wantWrites(t, "sync after a Ready flip", f.sync("dgx-1"))
	if got := f.writes(metrics.GpuNodeSkipped); got != 1 {
		t.Errorf("skipped = %v, want 1", got)
	}
}

func TestRelabelUpdatesTheRecord(t *testing.T) {
	node := gpuNode("dgx-1", "NVIDIA-H100-80GB-HBM3", 8)
	f := newFixture(t, []*corev1.Node{node})
	f.sync("dgx-1")

	f.clock.SetTime(t0.Add(time.Hour))
	relabelled := changed(node, func(n *corev1.Node) { n.Labels[inventory.LabelProduct] = "NVIDIA-H200" })
	f.updateNode(node, relabelled)
	wantWrites(t, "after relabelling", f.syncQueued(), "patch")
	r := f.record("dgx-1")
	if r.Spec.Product != "NVIDIA-H200" || r.Spec.LastSeen == nil || !r.Spec.LastSeen.Time.Equal(t0.Add(time.Hour)) {
		t.Errorf("record = %+v, want product NVIDIA-H200 last seen at %v", r.Spec, t0.Add(time.Hour))
	}
	if r.Annotations[homelabv1.IdentityHashAnnotation] != inventory.IdentityHash(r.Spec) {
		t.Error("identity hash annotation does not match the new identity")
	}
	if got := f.writes(metrics.GpuNodeUpdated); got != 1 {
		t.Errorf("updated writes = %v, want 1", got)
	}
}

// GFD's labels vanish: the record keeps the last-known facts, marked missing since then,
// with one write; nothing more is written while they stay away; their return clears it.
func TestVanishedLabelsMarkTheRecordMissingOnce(t *testing.T) {
	node := gpuNode("dgx-1", "NVIDIA-H100-80GB-HBM3", 8)
	f := newFixture(t, []*corev1.Node{node})
	f.sync("dgx-1")

	vanishedAt := t0.Add(2 * time.Hour)
	f.clock.SetTime(vanishedAt)
	unlabelled := withoutGFDLabels(node)
	f.updateNode(node, unlabelled)
	f.clock.SetTime(vanishedAt.Add(5 * time.Second)) // the sync runs a little later
	// The cache keeps the record's summary: the whole record is read, then written.
	wantWrites(t, "labels vanished", f.syncQueued(), "get", "patch")
	r := f.record("dgx-1")
	if r.Spec.Product != "NVIDIA-H100-80GB-HBM3" || r.Spec.GpuCount != 8 || r.Spec.GpuMemoryMiB != 81559 {
		t.Errorf("record = %+v, want the last-known facts", r.Spec)
	}
	if r.Spec.MissingSince == nil || !r.Spec.MissingSince.Time.Equal(vanishedAt.Add(5*time.Second)) {
		t.Errorf("missingSince = %v, want %v", r.Spec.MissingSince, vanishedAt.Add(5*time.Second))
	}
	if r.Spec.LastSeen == nil || !r.Spec.LastSeen.Time.Equal(vanishedAt) {
		t.Errorf("lastSeen = %v, want %v (the labels were there until that event)", r.Spec.LastSeen, vanishedAt)
	}
	if got := f.writes(metrics.GpuNodeMissing); got != 1 {
		t.Errorf("missing writes = %v, want 1", got)
	}

	// Hours later, a Ready flip and a resync of the same key: no write.
	f.clock.SetTime(vanishedAt.Add(3 * time.Hour))
	unreachable := changed(unlabelled, func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown })
	f.updateNode(unlabelled, unreachable)
	wantWrites(t, "still missing", append(f.syncQueued(), f.sync("dgx-1")...))
	if got := f.record("dgx-1").Spec.MissingSince; !got.Time.Equal(vanishedAt.Add(5 * time.Second)) {
		t.Errorf("missingSince moved to %v", got)
	}

	// The labels come back.
	back := changed(unreachable, func(n *corev1.Node) {
		for k, v := range node.Labels {
			n.Labels[k] = v
		}
	})
	f.updateNode(unreachable, back)
	wantWrites(t, "labels back", f.syncQueued(), "patch")
	if r := f.record("dgx-1"); r.Spec.MissingSince != nil || !r.Spec.LastSeen.Time.Equal(vanishedAt.Add(3*time.Hour)) {
		t.Errorf("record after the labels came back = %+v, want no missingSince, last seen now", r.Spec)
	}
}

// The cache keeps a summary of a DRA node's record while the node's slices list its devices;
// when the slices vanish, the record is marked missing with its devices, read from the API
// server, and the cache keeps that memory whole.
func TestRecordMarkedMissingKeepsTheDevicesTheCacheDropped(t *testing.T) {
	node := withoutGFDLabels(gpuNode("dgx-1", "NVIDIA-H100-80GB-HBM3", 2))
	spec := homelabv1.GpuNodeSpec{Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 2, GpuMemoryMiB: 81559, Source: homelabv1.SourceDRA,
		Devices: []homelabv1.GpuDevice{{Name: "gpu-0", Type: "gpu", UUID: "GPU-a"}, {Name: "gpu-1", Type: "gpu", UUID: "GPU-b"}}}
	record := &homelabv1.GpuNode{ObjectMeta: metav1.ObjectMeta{Name: "dgx-1",
		Annotations:     map[string]string{homelabv1.IdentityHashAnnotation: inventory.IdentityHash(spec)},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "dgx-1", UID: node.UID}}},
		Spec: spec}
	f := newFixture(t, []*corev1.Node{node}, record)
	if cached := f.c.Record("dgx-1"); cached == nil || !Summarized(cached) || cached.Spec.Devices != nil {
		t.Fatalf("cached record = %+v, want its summary", cached)
	}

	wantWrites(t, "slices vanished", f.sync("dgx-1"), "get", "patch")
	r := f.record("dgx-1")
	if r.Spec.MissingSince == nil || r.Spec.Source != homelabv1.SourceDRA {
		t.Errorf("record = %+v, want the last-known facts marked missing", r.Spec)
	}
	if diff := cmp.Diff(spec.Devices, r.Spec.Devices); diff != "" {
		t.Errorf("devices of the record marked missing (-want +got):\n%s", diff)
	}
	if cached := f.c.Record("dgx-1"); Summarized(cached) || len(cached.Spec.Devices) != 2 {
		t.Errorf("the cache keeps %d devices of the missing record (summarized: %v), want 2", len(cached.Spec.Devices), Summarized(cached))
	}
	wantWrites(t, "still missing", f.sync("dgx-1"))
}

// At the upgrade, a node without labels gets a record from the memory the older version kept.
func TestUpgradeSeedsRecordsFromTheOldMemory(t *testing.T) {
	missingSince := metav1.NewTime(t0.Add(-time.Hour))
	nodes := []*corev1.Node{
		withoutGFDLabels(gpuNode("in-outage", "x", 1)),
		withoutGFDLabels(gpuNode("just-lost", "x", 1)),
		unknownGPUs(gpuNode("known-nothing", "x", 1)),
		unknownGPUs(gpuNode("not-seeded", "x", 1)),
	}
	f := newFixture(t, nodes)
	f.seed["in-outage"] = homelabv1.GpuNodeEntry{Name: "in-outage", Product: "NVIDIA-A100-SXM4-40GB", GpuCount: 8, GpuMemoryMiB: 40960,
		LabelsMissing: true, LabelsMissingSince: &missingSince, Conditions: []string{"LabelsMissing", "UnhealthyGPUs"},
		Warnings: []string{"a stored warning"}} // the record keeps the identity, not these
	f.seed["just-lost"] = homelabv1.GpuNodeEntry{Name: "just-lost", Product: "NVIDIA-L4", GpuCount: 1, Ready: true,
		Sharing: &homelabv1.GpuSharing{Strategy: "time-slicing", Replicas: 4}}
	f.seed["known-nothing"] = homelabv1.GpuNodeEntry{Name: "known-nothing", Ready: true}
	f.c.startInitialPass() // the nodes are there when the upgraded operator starts

	wantWrites(t, "in an outage", f.sync("in-outage"), "patch")
	want := homelabv1.GpuNodeSpec{Product: "NVIDIA-A100-SXM4-40GB", GpuCount: 8, GpuMemoryMiB: 40960,
		Source: homelabv1.SourceSeeded, MissingSince: &missingSince}
	if diff := cmp.Diff(want, f.record("in-outage").Spec); diff != "" {
		t.Errorf("seeded record in an outage (-want +got):\n%s", diff)
	}
	wantWrites(t, "labels lost while the operator was down", f.sync("just-lost"), "patch")
	now := metav1.NewTime(t0)
	want = homelabv1.GpuNodeSpec{Product: "NVIDIA-L4", GpuCount: 1, Sharing: &homelabv1.GpuSharing{Strategy: "time-slicing", Replicas: 4},
		Source: homelabv1.SourceSeeded, MissingSince: &now}
	if diff := cmp.Diff(want, f.record("just-lost").Spec); diff != "" {
		t.Errorf("seeded record (-want +got):\n%s", diff)
	}
	wantWrites(t, "seed that knows no GPUs", f.sync("known-nothing"))
	wantWrites(t, "no seed", f.sync("not-seeded"))
	if got := f.writes(metrics.GpuNodeSeeded); got != 2 {
		t.Errorf("seeded writes = %v, want 2", got)
	}
	// The seeded records are current from then on.
	wantWrites(t, "second sync", f.sync("in-outage"))
}

// A node that joins after the start is not seeded: the stored status may remember a node of
// that name that was deleted (its record went with it), and a new node is unknown until
// labelled.
func TestNodeJoiningLaterIsNotSeeded(t *testing.T) {
	f := newFixture(t, nil)
	f.c.startInitialPass()
	f.seed["rejoined"] = homelabv1.GpuNodeEntry{Name: "rejoined", Product: "NVIDIA-L4", GpuCount: 1}
	f.setNode(unknownGPUs(gpuNode("rejoined", "x", 1)))
	wantWrites(t, "a node created without labels yet", f.sync("rejoined"))
}

// A node whose only GPU signal is the device plugin's capacity gets a record of that count;
// when GFD's labels arrive, they replace it.
func TestCapacityAloneMakesADevicePluginRecord(t *testing.T) {
	labelled := gpuNode("bare", "NVIDIA-L4", 2)
	bare := withoutGFDLabels(labelled)
	f := newFixture(t, []*corev1.Node{bare})
	wantWrites(t, "capacity alone", f.sync("bare"), "patch")
	want := homelabv1.GpuNodeSpec{GpuCount: 2, WorkloadConfig: "container", Source: homelabv1.SourceDevicePlugin}
	got := f.record("bare").Spec
	got.LastSeen = nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("record of a bare device-plugin node (-want +got):\n%s", diff)
	}
	labelled = changed(bare, func(n *corev1.Node) { n.Labels = gpuNode("bare", "NVIDIA-L4", 2).Labels })
	f.updateNode(bare, labelled)
	wantWrites(t, "labels arrive", f.syncQueued(), "patch")
	if r := f.record("bare"); r.Spec.Product != "NVIDIA-L4" || r.Spec.Source != homelabv1.SourceGPUFeatureDiscovery {
		t.Errorf("record after GFD labelled the node = %+v", r.Spec)
	}
}

// A seed anyone could have edited is bounded as the record's schema requires.
func TestSeedIsBounded(t *testing.T) {
	f := newFixture(t, []*corev1.Node{withoutGFDLabels(gpuNode("n", "x", 1))})
	f.seed["n"] = homelabv1.GpuNodeEntry{Name: "n", Product: strings.Repeat("p", 1000), GpuCount: 2, GpuMemoryMiB: -5}
	f.c.startInitialPass()
	f.sync("n")
	if r := f.record("n"); len(r.Spec.Product) > 128 || r.Spec.GpuMemoryMiB != 0 || r.Spec.GpuCount != 2 {
		t.Errorf("seeded spec = product of %d bytes, %d GPUs, %d MiB; want at most 128 bytes, 2 GPUs, 0 MiB",
			len(r.Spec.Product), r.Spec.GpuCount, r.Spec.GpuMemoryMiB)
	}
}

func TestRecordIsDeletedWithItsNode(t *testing.T) {
	node := gpuNode("dgx-1", "NVIDIA-H100-80GB-HBM3", 8)
	f := newFixture(t, []*corev1.Node{node})
	f.sync("dgx-1")

	if err := f.nodes.GetIndexer().Delete(node); err != nil {
		t.Fatal(err)
	}
	f.events.OnDelete(node)
	wantWrites(t, "node deleted", f.syncQueued(), "delete")
	if _, err := f.client.HomelabV1().GpuNodes().Get(f.ctx, "dgx-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("record of the deleted node: %v, want NotFound", err)
	}
	if got := f.writes(metrics.GpuNodeDeleted); got != 1 {
		t.Errorf("deleted writes = %v, want 1", got)
	}
	// The garbage collector was first: nothing to do.
	wantWrites(t, "again", f.sync("dgx-1"))
}

// A node that stops being a GPU node (GFD's DaemonSet deleted can take even
// nvidia.com/gpu.present) keeps its record: it is the only memory of its GPUs.
func TestNodeThatIsNoGPUNodeAnyMoreKeepsItsRecord(t *testing.T) {
	node := gpuNode("dgx-1", "NVIDIA-H100-80GB-HBM3", 8)
	f := newFixture(t, []*corev1.Node{node})
	f.sync("dgx-1")
	bare := changed(node, func(n *corev1.Node) {
		n.Labels = map[string]string{"kubernetes.io/hostname": "dgx-1"}
		n.Status.Capacity = nil
	})
	f.updateNode(node, bare)
	wantWrites(t, "no GPU node any more", f.syncQueued())
	if r := f.record("dgx-1"); r.Spec.Product != "NVIDIA-H100-80GB-HBM3" {
		t.Errorf("record = %+v, want it kept as it was", r.Spec)
	}
	// Deleted later as a plain node: the record goes with it.
	if err := f.nodes.GetIndexer().Delete(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "dgx-1"}}); err != nil {
		t.Fatal(err)
	}
	f.events.OnDelete(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "dgx-1"}})
	wantWrites(t, "plain node deleted", f.syncQueued(), "delete")
}

// Someone deletes a record: it is put back, also for a node whose labels are gone (from the
// deleted record's last state).
func TestRecordDeletedBySomeoneIsRecreated(t *testing.T) {
	labelled := gpuNode("dgx-1", "NVIDIA-H100-80GB-HBM3", 8)
	missing := gpuNode("dgx-2", "NVIDIA-A100-SXM4-40GB", 4)
	f := newFixture(t, []*corev1.Node{labelled, missing})
	f.sync("dgx-1")
	f.sync("dgx-2")
	unlabelled := withoutGFDLabels(missing)
	f.updateNode(missing, unlabelled)
	f.syncQueued()
	before := f.record("dgx-2").Spec

	for _, name := range []string{"dgx-1", "dgx-2"} {
		last := f.records.Lister()
		r, _ := last.Get(name)
		if err := f.client.HomelabV1().GpuNodes().Delete(f.ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := f.records.Informer().GetIndexer().Delete(r); err != nil {
			t.Fatal(err)
		}
		f.c.recordDeleted(r)
	}
	wantWrites(t, "records deleted", f.syncQueued(), "patch", "patch")
	if r := f.record("dgx-1"); r.Spec.Product != "NVIDIA-H100-80GB-HBM3" || r.OwnerReferences[0].UID != "uid-dgx-1" {
		t.Errorf("recreated record = %+v", r)
	}
	if diff := cmp.Diff(before, f.record("dgx-2").Spec); diff != "" {
		t.Errorf("recreated record of the node without labels (-before +after):\n%s", diff)
	}
}

// The echo of the controller's own write queues nothing; someone's edit queues the node,
// and the operator's truth is written back, including over fields another manager owns.
func TestEditedRecordIsPutBack(t *testing.T) {
	node := gpuNode("dgx-1", "NVIDIA-H100-80GB-HBM3", 8)
	f := newFixture(t, []*corev1.Node{node})
	f.sync("dgx-1")
	ours := f.record("dgx-1")
	f.c.recordUpdated(ours, ours)
	if f.c.queue.Len() != 0 {
		t.Fatal("the echo of the controller's own write was queued")
	}
	want := ours.Spec

	edit := applyv1.GpuNode("dgx-1").WithSpec(applyv1.GpuNodeSpec().WithProduct("fake").WithGpuCount(-3).
		WithSharing(applyv1.GpuSharing().WithStrategy("mps").WithReplicas(99)))
	edited, err := f.client.HomelabV1().GpuNodes().Apply(f.ctx, edit, metav1.ApplyOptions{FieldManager: "kubectl", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	f.refreshRecords()
	f.c.recordUpdated(ours, edited)
	if f.c.queue.Len() != 1 {
		t.Fatal("an edited record was not queued")
	}
	f.syncQueued()
	if diff := cmp.Diff(want, f.record("dgx-1").Spec); diff != "" {
		t.Errorf("record after the edit was put back (-want +got):\n%s", diff)
	}
	wantWrites(t, "put back", f.sync("dgx-1"))
}

func TestAPIErrorIsReturnedForRetryWithContext(t *testing.T) {
	f := newFixture(t, []*corev1.Node{gpuNode("dgx-1", "NVIDIA-H100-80GB-HBM3", 8)})
	f.client.PrependReactor("patch", "gpunodes", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(homelabv1.Resource("gpunodes"), "dgx-1", errors.New("RBAC"))
	})
	err := f.c.syncHandler(f.ctx, cache.ObjectName{Name: "dgx-1"})
	if err == nil || !strings.Contains(err.Error(), "apply GpuNode dgx-1") || !apierrors.IsForbidden(err) {
		t.Errorf("sync error = %v; want the API error with the record's name", err)
	}
}

// A node that rewrites its GPU labels over and over (its kubelet may) gets two record writes
// at once, then waits for its next token: it cannot spend the records' write rate.
func TestNodeRewritingItsLabelsIsSpaced(t *testing.T) {
	node := gpuNode("liar", "NVIDIA-H100-80GB-HBM3", 8)
	f := newFixture(t, []*corev1.Node{node})
	f.sync("liar") // created: one token spent
	writes := 0
	prev := node
	for i := range 10 {
		cur := changed(prev, func(n *corev1.Node) { n.Labels[inventory.LabelProduct] = fmt.Sprintf("NVIDIA-H100-%d", i) })
		f.updateNode(prev, cur)
		for _, a := range f.syncQueued() {
			if a.GetVerb() == "patch" {
				writes++
			}
		}
		prev = cur
	}
	if writes != RelabelBurst-1 {
		t.Errorf("%d writes for 10 relabels at once after the create; want %d (the rest waits for the next token)", writes, RelabelBurst-1)
	}
}

// The initial pass over a large fleet is fed to the queue a batch at a time, a node an event
// had synced meanwhile is not synced again, and every node gets its record; once done, the
// controller keeps nothing of the pass.
func TestInitialPassIsFedToTheQueue(t *testing.T) {
	const n = initialBatch + 44
	var nodes []*corev1.Node
	for i := range n {
		nodes = append(nodes, gpuNode(fmt.Sprintf("gpu-%03d", i), "NVIDIA-L4", 1))
	}
	f := newFixture(t, nodes)
	f.c.startInitialPass()
	early := cache.ObjectName{Name: f.c.backlog[0]} // not queued yet
	if err := f.c.syncHandler(f.ctx, early); err != nil {
		t.Fatalf("sync of %s on its event: %v", early.Name, err)
	}
	synced := 1
	for f.c.queue.Len() > 0 {
		if l := f.c.queue.Len(); l > initialBatch {
			t.Fatalf("the queue holds %d names of the initial pass, want at most %d", l, initialBatch)
		}
		key, _ := f.c.queue.Get()
		if key == early {
			t.Errorf("%s was queued again after its event had it synced", key.Name)
		}
		if err := f.c.syncHandler(f.ctx, key); err != nil {
			t.Fatalf("sync of %s: %v", key.Name, err)
		}
		f.c.queue.Done(key)
		synced++
	}
	records, err := f.client.HomelabV1().GpuNodes().List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if synced != n || len(records.Items) != n {
		t.Errorf("synced %d names and wrote %d records, want %d of each", synced, len(records.Items), n)
	}
	if !f.c.initialDone.Load() || f.c.pending != nil || f.c.backlog != nil {
		t.Errorf("after the pass: done %v, %d pending, %d in the backlog; want done and nothing kept", f.c.initialDone.Load(), len(f.c.pending), len(f.c.backlog))
	}
}

// Events before the initial pass queue nothing: the pass lists what they were about.
func TestEventsBeforeTheInitialPassQueueNothing(t *testing.T) {
	f := newFixture(t, []*corev1.Node{gpuNode("gpu-a", "NVIDIA-L4", 1)})
	f.c.listed.Store(false) // as at start, before the caches have synced
	obj, _, _ := f.nodes.GetIndexer().GetByKey("gpu-a")
	f.events.OnAdd(obj, true)
	if l := f.c.queue.Len(); l != 0 {
		t.Fatalf("an event before the initial pass queued %d names, want none", l)
	}
	f.c.startInitialPass()
	wantWrites(t, "the initial pass", f.syncQueued(), "patch")
}
