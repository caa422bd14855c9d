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
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// Someone with rights on the operator's namespace filled its ConfigMap: foreign keys, a
// forged entry and 900 KiB of binaryData (with which no update of the 1 MiB object could
// add the home lab's entries). The operator drops what it did not write and says so.
func TestConfigMapFilledBySomeoneElse(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	ctx := context.Background()
	_, err := c.kube.CoreV1().ConfigMaps(operatorNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: homelabv1.NodeStatusConfigMapName, Namespace: operatorNamespace},
		Data: map[string]string{"hello": "world",
			"nuc9": `{"name":"nuc9","ready":true,"gpuCount":8,"product":"NVIDIA-H100","forged":true}`},
		BinaryData: map[string][]byte{"blob": make([]byte, 900<<10)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startOperator(t, c.env.Config, testOptions())
	eventually(t, 20*time.Second, "the ConfigMap holds the home lab only", func() error {
		cm, err := c.kube.CoreV1().ConfigMaps(operatorNamespace).Get(ctx, homelabv1.NodeStatusConfigMapName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(cm.Data) != 4 || len(cm.BinaryData) != 0 || cm.Data["nuc1"] == "" {
			return fmt.Errorf("%d data keys, %d binaryData keys", len(cm.Data), len(cm.BinaryData))
		}
		return nil
	})
	eventually(t, 20*time.Second, "an event about the dropped content", func() error {
		events, err := c.kube.CoreV1().Events(operatorNamespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("reason", "ForeignContentDropped").String()})
		if err != nil {
			return err
		}
		for _, ev := range events.Items {
			if ev.InvolvedObject.Kind == "ConfigMap" && strings.Contains(ev.Message, "hello") && strings.Contains(ev.Message, "1 binaryData keys") {
				return nil
			}
		}
		return fmt.Errorf("%d ForeignContentDropped events, none on the ConfigMap naming the dropped key", len(events.Items))
	})
}

// A 1.3 MB note would push the object past etcd's limit once the status is added; the CRD
// refuses it with a validation error that says why.
func TestHugeNoteIsRefusedClearly(t *testing.T) {
	c := startCluster(t)
	startOperator(t, c.env.Config, testOptions())
	c.waitTotals(t, "cluster", totals{}) // the CRD is installed and the default inventory synced
	_, err := c.gpu.HomelabV1().GpuInventories().Create(context.Background(), &homelabv1.GpuInventory{
		ObjectMeta: metav1.ObjectMeta{Name: "noted"},
		Spec:       homelabv1.GpuInventorySpec{Note: strings.Repeat("n", 1300<<10)},
	}, metav1.CreateOptions{})
	if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.note") || !strings.Contains(err.Error(), "4096") {
		t.Fatalf("create with a 1.3 MB note: %v; want a validation error naming spec.note and its 4096 limit", err)
	}
}

// A node selector with a 40 KiB value is invalid: the inventory says so in a Degraded
// condition whose message is cut to fit the CRD's limits, the status is written once and not
// retried, and fixing the selector brings the report back.
func TestHugeSelectorValueIsReportedNotRetried(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	opts := testOptions()
	opts.ResyncPeriod = time.Second // the invalid inventory is examined again every second
	op := startOperator(t, c.env.Config, opts)
	c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})
	ctx := context.Background()
	gi, err := c.gpu.HomelabV1().GpuInventories().Create(ctx, &homelabv1.GpuInventory{
		ObjectMeta: metav1.ObjectMeta{Name: "huge-selector"},
		Spec: homelabv1.GpuInventorySpec{NodeSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{"pool": strings.Repeat("p", 40<<10)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create with a 40 KiB selector value: %v", err)
	}
	var degraded *metav1.Condition
	eventually(t, 20*time.Second, "the invalid selector reported", func() error {
		got, err := c.gpu.HomelabV1().GpuInventories().Get(ctx, gi.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if degraded = findCondition(got, homelabv1.ConditionDegraded); degraded == nil || degraded.Reason != homelabv1.ReasonInvalidNodeSelector {
			return fmt.Errorf("conditions %+v", got.Status.Conditions)
		}
		return nil
	})
	if len(degraded.Message) > 1100 || !strings.Contains(degraded.Message, "invalid node selector") {
		t.Errorf("Degraded message of %d bytes (%.80q...); want the reason, cut to about 1 KiB", len(degraded.Message), degraded.Message)
	}
	writes := counted(op.Metrics().StatusWrites, map[string]string{"inventory": gi.Name, "outcome": "written"})
	eventually(t, 20*time.Second, "the invalid inventory examined again at resyncs", func() error {
		if got := counted(op.Metrics().StatusWrites, map[string]string{"inventory": gi.Name, "outcome": "skipped"}); got < 3 {
			return fmt.Errorf("%d skipped syncs", got)
		}
		return nil
	})
	if got := counted(op.Metrics().StatusWrites, map[string]string{"inventory": gi.Name, "outcome": "written"}); got != writes || writes != 1 {
		t.Errorf("%d status writes, then %d; want 1, and no more while the selector stays invalid", writes, got)
	}

	fixed := []byte(`{"spec":{"nodeSelector":{"matchLabels":null}}}`)
	if _, err := c.gpu.HomelabV1().GpuInventories().Patch(ctx, gi.Name, types.MergePatchType, fixed, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitTotals(t, gi.Name, totals{Nodes: 4, Gpus: 1})
}

// A sync that panics (injected through the test hook) is recovered and retried: the
// operator keeps running, counts the panic, and the inventory gets its status.
func TestPanickingSyncIsRecovered(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	opts := testOptions()
	var panicked atomic.Bool
	opts.BeforeInventorySync = func(name string) {
		if name == "cluster" && panicked.CompareAndSwap(false, true) {
			panic("injected by the test")
		}
	}
	op := startOperator(t, c.env.Config, opts)
	c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})
	if got := counted(op.Metrics().SyncPanics, nil); got != 1 {
		t.Errorf("sync_panics_total = %d, want 1", got)
	}
	select {
	case err := <-op.done:
		t.Fatalf("the operator stopped: %v", err)
	default:
	}
}

// One GPU node's kubelet rewrites its Ready condition with a new message of nearly 1 MiB,
// again and again (NodeRestriction lets it). The report never carries the message, every
// node keeps its right place in it, and the operator's memory does not grow with the
// messages written.
func TestReadyMessageOfOneMiBWrittenManyTimes(t *testing.T) {
	const (
		messages      = 60
		beforeMeasure = 6              // the first writes, after which the heap is measured
		messageBytes  = 1<<20 - 64<<10 // under the API server's request size limit
		maxHeapGrowth = 8 << 20
		maxSyncs      = 10 // of both controllers, resyncs included
	)
	c := startCluster(t)
	c.loadHomeLab(t)
	op := startOperator(t, c.env.Config, testOptions())
	c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})

	ctx := context.Background()
	node, err := c.kube.CoreV1().Nodes().Get(ctx, "nuc1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// writeReady writes nuc1's Ready condition with the i-th message, as its kubelet would.
	writeReady := func(i int, status corev1.ConditionStatus) {
		t.Helper()
		message := readyMessage(i, messageBytes)
		for j := range node.Status.Conditions {
			if cond := &node.Status.Conditions[j]; cond.Type == corev1.NodeReady {
				cond.Status, cond.Message, cond.LastHeartbeatTime = status, message, metav1.Now()
			}
		}
		node, err = c.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{FieldManager: "kubelet"})
		if err != nil {
			t.Fatalf("write Ready message %d of nuc1: %v", i, err)
		}
		if got := readyConditionMessage(node); got != message {
			t.Fatalf("the API server kept a Ready message of %d bytes for write %d, want the %d written", len(got), i, len(message))
		}
	}
	// The operator reads only the Ready status, so the messages change nothing it shows: a
	// change of readiness written after them, once reported, shows that it has read them all
	// (a watch delivers in order).
	reported := func(ready bool) {
		t.Helper()
		want := totals{Nodes: 4, Gpus: 1}
		if ready {
			want.ReadyNodes, want.ReadyGpus = 1, 1
		}
		c.waitTotals(t, "cluster", want)
		eventually(t, 20*time.Second, fmt.Sprintf("nuc1 ready=%t in the ConfigMap", ready), func() error {
			entries, err := c.configMapEntries()
			if err != nil {
				return err
			}
			if e, ok := entries["nuc1"]; !ok || e.Ready != ready {
				return fmt.Errorf("nuc1 entry %+v (present %t)", e, ok)
			}
			return nil
		})
	}

	for i := range beforeMeasure - 1 {
		writeReady(i, corev1.ConditionFalse)
	}
	writeReady(beforeMeasure-1, corev1.ConditionTrue)
	reported(true)
	heapBefore := liveHeap()
	syncsBefore, writesBefore := counted(op.Metrics().Syncs, nil), statusWrites(op)
	for i := beforeMeasure; i < messages-1; i++ {
		writeReady(i, corev1.ConditionTrue)
	}
	writeReady(messages-1, corev1.ConditionFalse)
	reported(false)
	heapAfter := liveHeap()
	syncs, statusWritten := counted(op.Metrics().Syncs, nil)-syncsBefore, statusWrites(op)-writesBefore
	written := (messages - beforeMeasure) * messageBytes
	t.Logf("live heap %d KiB after %d Ready messages, %d KiB after %d more (%d MiB written); %d syncs, %d status writes",
		heapBefore>>10, beforeMeasure, heapAfter>>10, messages-beforeMeasure, written>>20, syncs, statusWritten)
	if growth := int64(heapAfter) - int64(heapBefore); growth > maxHeapGrowth {
		t.Errorf("the live heap grew by %d KiB while nuc1 wrote %d MiB of Ready messages, want at most %d KiB",
			growth>>10, written>>20, maxHeapGrowth>>10)
	}
	// Only the change of readiness is work: a message alone reaches no queue.
	if syncs > maxSyncs || statusWritten > 2 {
		t.Errorf("%d syncs and %d status writes after %d Ready messages and one change of readiness, want at most %d and 2",
			syncs, statusWritten, messages-beforeMeasure, maxSyncs)
	}

	// The report is the home lab's, whole, and carries no copy of a message.
	gi := c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})
	if got := listedNames(gi.Status.Nodes); !slices.Equal(got, []string{"nuc1", "nuc2", "omen", "omen2"}) {
		t.Errorf("status.nodes lists %v, want the four GPU nodes of the home lab", got)
	}
	if nuc1 := nodeEntry(t, gi, "nuc1"); nuc1.Ready || nuc1.GpuCount != 1 || !slices.Contains(nuc1.Conditions, inventory.NodeNotReady) {
		t.Errorf("nuc1 = %+v, want NotReady with its 1 GPU", nuc1)
	}
	raw, err := c.gpu.HomelabV1().RESTClient().Get().Resource("gpuinventories").Name("cluster").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	assertNoMessageCopy(t, "the GpuInventory", string(raw), 16<<10)
	cm, err := c.kube.CoreV1().ConfigMaps(operatorNamespace).Get(ctx, homelabv1.NodeStatusConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for key, value := range cm.Data {
		assertNoMessageCopy(t, "ConfigMap entry "+key, value, 4<<10)
	}
	events, err := c.kube.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		assertNoMessageCopy(t, "event "+ev.Reason, ev.Message, 4<<10)
	}
}

// readyMessageFiller fills each Ready message; a report quoting more than a cut message
// would hold a run of it.
const readyMessageFiller = "container runtime network not ready: "

// readyMessage is the i-th distinct Ready message, size bytes long.
func readyMessage(i, size int) string {
	prefix := fmt.Sprintf("PLEG is not healthy (write %d): ", i)
	return prefix + strings.Repeat(readyMessageFiller, (size-len(prefix))/len(readyMessageFiller)+1)[:size-len(prefix)]
}

func readyConditionMessage(node *corev1.Node) string {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Message
		}
	}
	return ""
}

// assertNoMessageCopy fails when what holds more than 1 KiB of a Ready message, or is over
// maxBytes in all.
func assertNoMessageCopy(t *testing.T, what, s string, maxBytes int) {
	t.Helper()
	if run := strings.Repeat(readyMessageFiller, 1<<10/len(readyMessageFiller)+1); strings.Contains(s, run) {
		t.Errorf("%s holds more than 1 KiB of a node's Ready message", what)
	}
	if len(s) > maxBytes {
		t.Errorf("%s is %d bytes, want at most %d", what, len(s), maxBytes)
	}
}

// liveHeap returns the bytes of live objects in the test process, where the operator runs.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A NotReady GPU node carries thousands of nvidia.com/mig-<profile>.count and .memory labels,
// hundreds with malformed values. Its entry is bounded, so it cannot push the other GPU
// nodes out of status.nodes and the ConfigMap (it is named to come first), and it still
// shows as NotReady.
func TestThousandsOfMIGLabelsOnANotReadyNode(t *testing.T) {
	const (
		hostile       = "a100-mig-hostile" // before every home-lab node in name order
		maxMIGDevices = 16                 // listed per node (pkg/inventory)
		maxWarnings   = 8                  // per node (pkg/inventory)
		maxEntryBytes = 8 << 10
	)
	c := startCluster(t)
	c.loadHomeLab(t)
	op := startOperator(t, c.env.Config, testOptions())
	c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})

	node := migLabelledNode(hostile, 3000, 500, 500)
	if err := testenv.CreateNodes(context.Background(), c.kube, []*corev1.Node{node}); err != nil {
		t.Fatal(err)
	}
	t.Logf("node %s has %d labels", hostile, len(node.Labels))

	gi := c.waitTotals(t, "cluster", totals{Nodes: 5, Gpus: 1 + 8})
	want := []string{hostile, "nuc1", "nuc2", "omen", "omen2"}
	if got := listedNames(gi.Status.Nodes); !slices.Equal(got, want) || gi.Status.ListedNodes != int32(len(want)) {
		t.Errorf("status.nodes lists %v (listedNodes %d), want %v", got, gi.Status.ListedNodes, want)
	}
	if truncated := meta.FindStatusCondition(gi.Status.Conditions, homelabv1.ConditionTruncated); truncated == nil || truncated.Status != metav1.ConditionFalse {
		t.Errorf("Truncated = %+v, want False", truncated)
	}
	if nuc1 := nodeEntry(t, gi, "nuc1"); nuc1.Product != nuc1Labels[inventory.LabelProduct] || nuc1.GpuCount != 1 {
		t.Errorf("nuc1 = %+v, want its product and 1 GPU", nuc1)
	}
	checkBoundedMIGEntry(t, "status.nodes", nodeEntry(t, gi, hostile), maxMIGDevices, maxWarnings, maxEntryBytes)

	var entries map[string]homelabv1.GpuNodeEntry
	eventually(t, 20*time.Second, "the ConfigMap lists every GPU node", func() error {
		var err error
		if entries, err = c.configMapEntries(); err != nil {
			return err
		}
		if got := slices.Sorted(maps.Keys(entries)); !slices.Equal(got, want) {
			return fmt.Errorf("ConfigMap keys %v, want %v", got, want)
		}
		return nil
	})
	checkBoundedMIGEntry(t, "the ConfigMap", entries[hostile], maxMIGDevices, maxWarnings, maxEntryBytes)
	if nuc1 := entries["nuc1"]; nuc1.Product != nuc1Labels[inventory.LabelProduct] || nuc1.GpuCount != 1 {
		t.Errorf("nuc1 in the ConfigMap = %+v, want its product and 1 GPU", nuc1)
	}
	if lines := strings.Count(op.logs(), "ignoring malformed GPU label"); lines > 5 {
		t.Errorf("the operator logged %d malformed-label lines for one node, want a burst of at most 5", lines)
	}
}

// migLabelledNode is a NotReady A100 node with the mixed MIG strategy and labels for valid
// MIG profiles (count and memory), profiles with a malformed count, and profiles with a
// malformed memory.
func migLabelledNode(name string, valid, badCount, badMemory int) *corev1.Node {
	malformed := []string{"abc", "1.5", "0x1F", "8188MiB", "1e400", "99999999999999999999"}
	labels := map[string]string{
		"kubernetes.io/hostname": name, inventory.LabelProduct: "NVIDIA-A100-SXM4-40GB", inventory.LabelCount: "8",
		inventory.LabelMemory: "40960", inventory.LabelMIGCapable: "true", inventory.LabelMIGStrategy: "mixed",
		inventory.LabelMIGConfig: "all-balanced", inventory.LabelMIGState: "success",
	}
	for i := range valid {
		profile := fmt.Sprintf("nvidia.com/mig-1g.%dgb", i+1)
		labels[profile+".count"], labels[profile+".memory"] = strconv.Itoa(1+i%7), "4864"
	}
	for i := range badCount {
		labels[fmt.Sprintf("nvidia.com/mig-2g.%dgb.count", i+1)] = malformed[i%len(malformed)]
	}
	for i := range badMemory {
		profile := fmt.Sprintf("nvidia.com/mig-3g.%dgb", i+1)
		labels[profile+".count"], labels[profile+".memory"] = "1", malformed[i%len(malformed)]
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse,
			Reason: "KubeletNotReady", Message: "PLEG is not healthy"}}},
	}
}

// checkBoundedMIGEntry checks the hostile node's entry as where shows it: NotReady, its GPUs
// counted, MIG devices and warnings within their bounds, a few KiB in all.
func checkBoundedMIGEntry(t *testing.T, where string, e homelabv1.GpuNodeEntry, maxDevices, maxWarnings, maxBytes int) {
	t.Helper()
	if e.Ready || !slices.Contains(e.Conditions, inventory.NodeNotReady) || e.GpuCount != 8 {
		t.Errorf("%s: %s is ready=%t with conditions %v and %d GPUs, want NotReady with 8 GPUs", where, e.Name, e.Ready, e.Conditions, e.GpuCount)
	}
	if e.MIG == nil || len(e.MIG.Devices) == 0 || len(e.MIG.Devices) > maxDevices {
		t.Errorf("%s: %s lists MIG %+v, want between 1 and %d devices", where, e.Name, e.MIG, maxDevices)
	}
	if len(e.Warnings) == 0 || len(e.Warnings) > maxWarnings || !strings.Contains(e.Warnings[len(e.Warnings)-1], "more warnings") {
		t.Errorf("%s: %s has %d warnings %q, want at most %d, the last saying how many more", where, e.Name, len(e.Warnings), e.Warnings, maxWarnings)
	}
	if b, _ := json.Marshal(e); len(b) > maxBytes {
		t.Errorf("%s: the entry of %s is %d bytes, want at most %d", where, e.Name, len(b), maxBytes)
	}
}

// configMapEntries reads the gpu-node-status ConfigMap's entries.
func (c *cluster) configMapEntries() (map[string]homelabv1.GpuNodeEntry, error) {
	cm, err := c.kube.CoreV1().ConfigMaps(operatorNamespace).Get(context.Background(), homelabv1.NodeStatusConfigMapName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get ConfigMap: %w", err)
	}
	entries := make(map[string]homelabv1.GpuNodeEntry, len(cm.Data))
	for key, value := range cm.Data {
		var e homelabv1.GpuNodeEntry
		if err := json.Unmarshal([]byte(value), &e); err != nil {
			return nil, fmt.Errorf("ConfigMap entry %s: %w", key, err)
		}
		entries[key] = e
	}
	return entries, nil
}

func listedNames(nodes []homelabv1.GpuNodeEntry) []string {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	return names
}
