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

package nodecache

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/intern"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
)

// The trimmed node the cache holds gives exactly the entry the whole node gives, and keeps
// what selectors read.
func TestTrimmedNodesGiveTheSameInventory(t *testing.T) {
	nodes := fixtures.HomeLab()
	for i := range 20 {
		n, lbls := fixtures.FleetNode(i)
		for k, v := range lbls {
			n.Labels[k] = v
		}
		n.Spec.Unschedulable = i%7 == 0
		if i%5 == 0 {
			n.Spec.Taints = []corev1.Taint{{Key: inventory.TaintUnreachable, Effect: corev1.TaintEffectNoExecute}}
		}
		nodes = append(nodes, n)
	}
	trimmer := NewNodeTrimmer([]string{"topology.kubernetes.io/zone"})
	var trimmed []*corev1.Node
	for _, n := range nodes {
		obj, err := trimmer.Trim(n)
		if err != nil {
			t.Fatal(err)
		}
		tn := obj.(*corev1.Node)
		if len(tn.Status.Images) != 0 || len(tn.ManagedFields) != 0 || len(tn.Status.Addresses) != 0 {
			t.Errorf("%s: trimmed node still carries images, managedFields or addresses", tn.Name)
		}
		if zone := n.Labels["topology.kubernetes.io/zone"]; tn.Labels["topology.kubernetes.io/zone"] != zone {
			t.Errorf("%s: selector label dropped", tn.Name)
		}
		sel := labels.SelectorFromSet(labels.Set{"topology.kubernetes.io/zone": "us-east-1a"})
		if sel.Matches(labels.Set(n.Labels)) != sel.Matches(labels.Set(tn.Labels)) {
			t.Errorf("%s: the selector matches differently after trimming", tn.Name)
		}
		trimmed = append(trimmed, tn)
	}
	full, _ := inventory.Compute(nodes, nil, time.Time{})
	fromTrimmed, _ := inventory.Compute(trimmed, nil, time.Time{})
	if diff := cmp.Diff(full.Nodes, fromTrimmed.Nodes); diff != "" {
		t.Errorf("entries differ after trimming (-full +trimmed):\n%s", diff)
	}
	if full.Hash != fromTrimmed.Hash {
		t.Error("hash differs after trimming")
	}
}

// The node informer caches a GPU node as a Node and any other node as its name and
// resourceVersion; NodeLister lists only the Nodes; the handlers never hear of a node that
// is no GPU node before and after an update, and hear once of a GPU node that stops being
// one.
func TestNodeCacheKeepsOtherNodesAsMetadata(t *testing.T) {
	t.Run("fake clientset", func(t *testing.T) { testNodeCacheKeepsOtherNodesAsMetadata(t, fakeNodeSource) })
	t.Run("API server", func(t *testing.T) { testNodeCacheKeepsOtherNodesAsMetadata(t, serverNodeSource) })
}

// nodeSource is where a node cache reads nodes from.
type nodeSource struct {
	client NodesClient
	// update writes n, its status only with status.
	update func(t *testing.T, n *corev1.Node, status bool)
	// resourceVersion is the stored node's.
	resourceVersion func(name string) string
}

// fakeNodeSource is a fake clientset holding nodes.
func fakeNodeSource(t *testing.T, nodes ...*corev1.Node) nodeSource {
	var objs []k8sruntime.Object
	for _, n := range nodes {
		objs = append(objs, n.DeepCopy())
	}
	client := k8sfake.NewClientset(objs...)
	return nodeSource{client: prototest.ListOnly[*corev1.NodeList]{ListWatcher: client.CoreV1().Nodes()},
		update: func(t *testing.T, n *corev1.Node, status bool) {
			t.Helper()
			write := client.CoreV1().Nodes().Update
			if status {
				write = client.CoreV1().Nodes().UpdateStatus
			}
			if _, err := write(context.Background(), n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		},
		resourceVersion: func(name string) string {
			n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return n.ResourceVersion
		},
	}
}

// serverNodeSource is a fake API server holding nodes, read by a client that trims nodes as
// it decodes them, as the operator's node client does.
func serverNodeSource(t *testing.T, nodes ...*corev1.Node) nodeSource {
	server := prototest.NewServer(t, prototest.Options{}, prototest.Nodes)
	for _, n := range nodes {
		server.Set(n)
	}
	rc, err := kubeproto.NewClient(server.Config(), NewNodeTrimmer(nil).Codec())
	if err != nil {
		t.Fatal(err)
	}
	return nodeSource{client: kubeclient.Nodes(rc),
		update: func(t *testing.T, n *corev1.Node, _ bool) { server.Apply(watch.Modified, n) },
		resourceVersion: func(name string) string {
			for _, n := range prototest.Stored[corev1.Node](server, "") {
				if n.Name == name {
					return n.ResourceVersion
				}
			}
			t.Fatalf("node %s not stored", name)
			return ""
		},
	}
}

func testNodeCacheKeepsOtherNodesAsMetadata(t *testing.T, source func(*testing.T, ...*corev1.Node) nodeSource) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gpuNode, gpuLabels := fixtures.FleetNode(0)
	for k, v := range gpuLabels {
		gpuNode.Labels[k] = v
	}
	cpuNode, _ := fixtures.FleetNode(1)
	nodes := source(t, gpuNode, cpuNode)
	informer := NewNodeInformer(nodes.client, 0)
	calls := make(chan [2]any, 10)
	if _, err := informer.AddEventHandler(NodeHandler(inventory.NewEntryCache().Forget, func(old, cur any) {
		if old != nil { // adds are not what this test is about
			calls <- [2]any{old, cur}
		}
	})); err != nil {
		t.Fatal(err)
	}
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the node cache did not sync")
	}

	cached, _, _ := informer.GetIndexer().GetByKey(cpuNode.Name)
	wantCached := &otherNode{kubeproto.Compact{Name: cpuNode.Name, ResourceVersion: nodes.resourceVersion(cpuNode.Name)}}
	if diff := cmp.Diff(wantCached, cached); diff != "" {
		t.Errorf("CPU node cached as (-want +got):\n%s", diff)
	}
	if cached, _, _ := informer.GetIndexer().GetByKey(gpuNode.Name); reflect.TypeOf(cached) != reflect.TypeOf(&corev1.Node{}) {
		t.Errorf("GPU node cached as %T; want a Node", cached)
	}
	listed, err := NewNodeLister(informer).List(labels.Everything())
	if err != nil || len(listed) != 1 || listed[0].Name != gpuNode.Name {
		t.Errorf("NodeLister.List = %v, %v; want only the GPU node", listed, err)
	}

	// A heartbeat of the CPU node, then the GPU node loses every GPU sign: the handlers hear
	// of the second only (one informer delivers its events in order).
	cpuNode.Status.Conditions[0].Message = "heartbeat"
	nodes.update(t, cpuNode, true)
	for k := range gpuLabels {
		delete(gpuNode.Labels, k)
	}
	delete(gpuNode.Status.Capacity, inventory.ResourceGPU)
	nodes.update(t, gpuNode, false)
	select {
	case call := <-calls:
		old, isNode := call[0].(*corev1.Node)
		if _, nowMetadata := call[1].(*otherNode); !isNode || old.Name != gpuNode.Name || !nowMetadata {
			t.Errorf("the handlers heard first of %T -> %T; want the GPU node becoming metadata", call[0], call[1])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handlers did not hear of the GPU node that lost its GPU signs")
	}
	if listed, _ := NewNodeLister(informer).List(labels.Everything()); len(listed) != 0 {
		t.Errorf("NodeLister.List after the change = %v; want no node", listed)
	}
}

// A kubelet's status update that leaves readiness as it was (a new heartbeat, reason or
// message of the Ready condition) changes nothing the inventory shows, so it reaches no
// controller; one that changes the Ready status does.
func TestOnlyReadinessChangesOfTheReadyConditionReachHandlers(t *testing.T) {
	node, lbls := fixtures.FleetNode(0)
	for k, v := range lbls {
		node.Labels[k] = v
	}
	trimmer := NewNodeTrimmer(nil)
	// kubelet writes node's status as a kubelet does at a time: every heartbeat; the Ready
	// condition's transition time only when its status changes.
	kubelet := func(status corev1.ConditionStatus, reason, message string, at time.Time) *corev1.Node {
		for i := range node.Status.Conditions {
			c := &node.Status.Conditions[i]
			c.LastHeartbeatTime = metav1.NewTime(at)
			if c.Type == corev1.NodeReady {
				if c.Status != status {
					c.LastTransitionTime = metav1.NewTime(at)
				}
				c.Status, c.Reason, c.Message = status, reason, message
			}
		}
		return decodeTrimmed(t, trimmer, node)
	}
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	cni := "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"
	steps := []struct {
		name   string
		node   *corev1.Node
		synced bool
	}{
		{"Ready", kubelet(corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status", at), true},
		{"heartbeat", kubelet(corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status", at.Add(10*time.Second)), false},
		{"NotReady", kubelet(corev1.ConditionFalse, "KubeletNotReady", cni, at.Add(20*time.Second)), true},
		{"NotReady, another message", kubelet(corev1.ConditionFalse, "KubeletNotReady", "PLEG is not healthy: pleg was last seen active 3m0s ago", at.Add(30*time.Second)), false},
		{"Unknown", kubelet(corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status.", at.Add(70*time.Second)), true},
	}
	var calls int
	handler := NodeHandler(inventory.NewEntryCache().Forget, func(_, _ any) { calls++ })
	handler.OnAdd(steps[0].node, true)
	for i, step := range steps[1:] {
		old := steps[i].node
		calls = 0
		handler.OnUpdate(old, step.node)
		if got := calls == 1; got != step.synced {
			t.Errorf("%s after %s: handlers called %d times, want a call: %v", step.name, steps[i].name, calls, step.synced)
		}
		oldEntry, _ := inventory.Entry(old)
		newEntry, _ := inventory.Entry(step.node)
		if shown := !cmp.Equal(oldEntry, newEntry); shown != step.synced {
			t.Errorf("%s after %s: the entry changes: %v; the handlers are called: %v", step.name, steps[i].name, shown, step.synced)
		}
	}
}

// Events hands every event to each handler added to it, in order.
func TestEventsFanOut(t *testing.T) {
	var got []string
	e := &Events{}
	for _, name := range []string{"a", "b"} {
		_, _ = e.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { got = append(got, name+" add") },
			UpdateFunc: func(_, _ any) { got = append(got, name+" update") },
			DeleteFunc: func(any) { got = append(got, name+" delete") },
		})
	}
	e.OnAdd(nil, false)
	e.OnUpdate(nil, nil)
	e.OnDelete(nil)
	want := []string{"a add", "b add", "a update", "b update", "a delete", "b delete"}
	if !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

// A handler's registration with Events has synced only once the one listener has handed it
// every node of the initial list, not when the cache holds them: a controller that waits for
// it sees every node's add before it starts.
func TestEventsRegistrationSyncsWithTheHandler(t *testing.T) {
	src := fakeNodeSource(t, fixtures.Fleet(4)...)
	s := NewSource(src.client, NewNodeTrimmer(nil))
	held := make(chan struct{})
	var added atomic.Int32
	reg, err := s.Events().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) {
		<-held // a slow handler: the listener holds the other nodes meanwhile
		added.Add(1)
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), s.Informer().HasSynced) {
		t.Fatal("cache did not sync")
	}
	if reg.HasSynced() {
		t.Errorf("the registration has synced with %d of 4 nodes handed on", added.Load())
	}
	close(held)
	<-reg.HasSyncedChecker().Done()
	if n := added.Load(); n != 4 || !reg.HasSynced() {
		t.Errorf("synced with %d of 4 nodes handed on (HasSynced %v)", n, reg.HasSynced())
	}
}

// One kubelet that keeps writing new values of its nvidia.com labels cannot grow the tables
// shared by all nodes beyond their byte bounds.
func TestSharedTablesAreBoundedByBytes(t *testing.T) {
	trimmer := NewNodeTrimmer(nil)
	for i := range 3000 {
		labels := map[string]string{inventory.LabelProduct: fmt.Sprintf("NVIDIA-%055d", i)} // a new value each time
		for j := range 100 {
			labels[fmt.Sprintf("nvidia.com/mig-%dg.%dgb.count", j, j)] = fmt.Sprintf("%063d", i) // 10 KB a set
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "liar", Labels: labels}}
		data, err := node.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := trimmer.DecodeNode(data); err != nil {
			t.Fatal(err)
		}
	}
	if got := trimmer.interned.Bytes(); got > intern.MaxBytes {
		t.Errorf("interned %d bytes; want at most %d", got, intern.MaxBytes)
	}
	if got := trimmer.labelSets.bytes; got > maxSharedBytes {
		t.Errorf("shared label sets hold %d bytes; want at most %d", got, maxSharedBytes)
	}
}

// What a kubelet writing ever-new GPU label values leaves behind in the tables is small,
// counted in live heap: the tables' bounds include what their entries cost.
func TestEverNewLabelValuesLeaveLittleBehind(t *testing.T) {
	trimmer := NewNodeTrimmer(nil)
	rng := rand.New(rand.NewPCG(1, 1))
	heap := func() float64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return float64(m.HeapAlloc) / (1 << 20)
	}
	before := heap()
	for i := range 3000 {
		node, labels := fixtures.FleetNode((i % 50) * 2)
		maps.Copy(node.Labels, labels)
		node.Labels[inventory.LabelProduct] = fmt.Sprintf("junk-%d", rng.Int64())
		node.Labels[inventory.LabelCount] = fmt.Sprint(rng.IntN(1000))
		node.Labels[inventory.LabelMemory] = fmt.Sprint(rng.Int64())
		node.Labels["nvidia.com/gpu.family"] = fmt.Sprintf("family-%d", rng.Int64())
		data, err := node.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := trimmer.DecodeNode(data); err != nil {
			t.Fatal(err)
		}
	}
	if kept := heap() - before; kept > 4 {
		t.Errorf("the tables keep %.1f MiB after 3,000 nodes with new values; want under 4 MiB", kept)
	}
	runtime.KeepAlive(trimmer)
}

// The cache keeps the GPU health monitors' conditions beside Ready, type and status only, and
// no other monitor's: NVSentinel rewriting a condition's heartbeat or message leaves the
// cached node unchanged and reaches no controller; a condition turning True (a fatal GPU
// fault) or back does, and shows in the node's entry.
func TestHealthConditionChangesReachHandlersHeartbeatsDoNot(t *testing.T) {
	node, lbls := fixtures.FleetNode(0)
	for k, v := range lbls {
		node.Labels[k] = v
	}
	trimmer := NewNodeTrimmer(nil)
	// nvsentinel writes its conditions as its platform connector does: a new heartbeat each
	// report, the transition time only when the status changes.
	nvsentinel := func(xid corev1.ConditionStatus, message string, at time.Time) *corev1.Node {
		conditions := []corev1.NodeCondition{
			{Type: "GpuMemWatch", Status: corev1.ConditionFalse, Reason: "GpuMemWatchIsHealthy", Message: "No Health Failures"},
			{Type: "SysLogsXIDError", Status: xid, Reason: "SysLogsXIDError" + string(xid), Message: message},
			{Type: "KernelDeadlock", Status: corev1.ConditionFalse, Reason: "KernelHasNoDeadlock", Message: message}, // node-problem-detector
		}
		node.Status.Conditions = slices.DeleteFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type != corev1.NodeReady })
		for _, c := range conditions {
			c.LastHeartbeatTime, c.LastTransitionTime = metav1.NewTime(at), metav1.NewTime(at.Truncate(time.Hour))
			node.Status.Conditions = append(node.Status.Conditions, c)
		}
		return decodeTrimmed(t, trimmer, node)
	}
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		name   string
		node   *corev1.Node
		synced bool
	}{
		{"healthy", nvsentinel(corev1.ConditionFalse, "No Health Failures", at), true},
		{"heartbeat", nvsentinel(corev1.ConditionFalse, "No Health Failures", at.Add(30*time.Second)), false},
		{"fatal XID", nvsentinel(corev1.ConditionTrue, "ErrorCode:79 PCI:0000:1b:00 GPU has fallen off the bus. Recommended Action=RESTART_BM;", at.Add(time.Minute)), true},
		{"another XID message", nvsentinel(corev1.ConditionTrue, "ErrorCode:48 DBE. Recommended Action=RESTART_BM;", at.Add(2*time.Minute)), false},
		{"recovered", nvsentinel(corev1.ConditionFalse, "No Health Failures", at.Add(3*time.Minute)), true},
	}
	want := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
		{Type: "GpuMemWatch", Status: corev1.ConditionFalse}, {Type: "SysLogsXIDError", Status: corev1.ConditionTrue}}
	if diff := cmp.Diff(want, steps[2].node.Status.Conditions); diff != "" {
		t.Errorf("conditions cached (-want +got):\n%s", diff)
	}
	var calls int
	handler := NodeHandler(inventory.NewEntryCache().Forget, func(_, _ any) { calls++ })
	handler.OnAdd(steps[0].node, true)
	for i, step := range steps[1:] {
		old := steps[i].node
		if unchanged := cmp.Equal(old, step.node); unchanged == step.synced {
			t.Errorf("%s after %s: cached node unchanged: %v", step.name, steps[i].name, unchanged)
		}
		calls = 0
		handler.OnUpdate(old, step.node)
		if got := calls == 1; got != step.synced {
			t.Errorf("%s after %s: handlers called %d times, want a call: %v", step.name, steps[i].name, calls, step.synced)
		}
		oldEntry, _ := inventory.Entry(old)
		newEntry, _ := inventory.Entry(step.node)
		if shown := !cmp.Equal(oldEntry, newEntry); shown != step.synced {
			t.Errorf("%s after %s: the entry changes: %v; the handlers are called: %v", step.name, steps[i].name, shown, step.synced)
		}
	}
	if entry, _ := inventory.Entry(steps[2].node); !slices.Contains(entry.Conditions, inventory.NodeXIDError) {
		t.Errorf("the cached node with a fatal XID gives conditions %v; want %s among them", entry.Conditions, inventory.NodeXIDError)
	}
}

// A writer of ever-new health condition types cannot grow a cached node beyond the bound,
// and cannot push its Ready condition out; Trim and the decoder agree on what is kept.
func TestKeptHealthConditionsAreBounded(t *testing.T) {
	node, lbls := fixtures.FleetNode(0)
	for k, v := range lbls {
		node.Labels[k] = v
	}
	var flood []corev1.NodeCondition
	for i := range 500 {
		flood = append(flood, corev1.NodeCondition{Type: corev1.NodeConditionType(fmt.Sprintf("GpuNew%dWatch", i)), Status: corev1.ConditionTrue})
	}
	node.Status.Conditions = append(flood, node.Status.Conditions...) // Ready comes last
	trimmer := NewNodeTrimmer(nil)
	got := decodeTrimmed(t, trimmer, node)
	want, _ := trimmer.Trim(node)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoder differs from Trim (-Trim +decoder):\n%s", diff)
	}
	if n := len(got.Status.Conditions); n != maxHealthConditions+1 {
		t.Errorf("%d conditions kept; want %d health conditions and Ready", n, maxHealthConditions)
	}
	if !inventory.IsReady(got) {
		t.Error("Ready was pushed out by the health conditions")
	}
}

// decodeTrimmed is n as trimmer decodes its message.
func decodeTrimmed(t *testing.T, trimmer *NodeTrimmer, n *corev1.Node) *corev1.Node {
	t.Helper()
	data, err := n.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := trimmer.DecodeNode(data)
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	return got
}
