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

package main

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/follow"
)

// hostileKeys are the GPU Feature Discovery labels a hostile node rewrites with every write.
var hostileKeys = []string{"nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/gpu.memory", "nvidia.com/gpu.family",
	"nvidia.com/gpu.compute.major", "nvidia.com/gpu.compute.minor", "nvidia.com/gpu.machine", "nvidia.com/gpu.replicas"}

// malformedValues are label values the API server accepts and the operator cannot read as
// the numbers they should be.
var malformedValues = []string{"abc", "1.5", "0x1F", "8188MiB", "1e400", "99999999999999999999", "2147483647",
	"9223372036854775808", "4294967296", "0", "00000000", "1_000", "NaN", "Inf", "true", "8.0.0.0"}

const (
	hostileMessageBytes = 64 << 10
	untouchedInventory  = "scale-untouched"
	// hostileMarker marks the hostile nodes for the untouched inventory's selector. A selector
	// on kubernetes.io/hostname would make the node cache keep every node's hostname, so that
	// no two nodes share a label set: memory of the inventory's, not of the attack's.
	hostileMarker  = "scale.gpuinv.example/hostile"
	hostileWorkers = 32
)

// hostileResult is what the hostile phase measured.
type hostileResult struct {
	nodes        int
	asked        float64 // writes per second asked for, all nodes together
	writes       int64
	failed       int64
	firstFailure error
	duration     time.Duration
	operatorCPU  float64 // share of a core during the attack
	beforeRSS    float64 // KiB, just before the attack
	peakRSS      float64 // KiB
	settledRSS   float64 // KiB
	settleTook   time.Duration
	quietRSS     float64 // KiB: the quiet phase's steady RSS, the settled figure's target
	untouched    totals  // expected for the untouched GPU nodes
	wrongStates  int     // states of the untouched inventory that did not show untouched
	firstWrong   string
	statesSeen   int
	whole        totals // expected for the whole fleet once the nodes are restored
	restoreErr   error  // the whole fleet's report not right after the restore
}

// mistakes are what the reports got wrong.
func (r *hostileResult) mistakes() []error {
	var out []error
	if r.wrongStates > 0 {
		out = append(out, fmt.Errorf("the inventory of the untouched nodes showed %d wrong states, first %s (want %s)", r.wrongStates, r.firstWrong, r.untouched))
	}
	if r.restoreErr != nil {
		out = append(out, fmt.Errorf("after the hostile nodes were restored: %w", r.restoreErr))
	}
	return out
}

// hostilePhase makes --hostile-nodes GPU nodes of the fleet rewrite a 64 KiB Ready message
// and random GPU labels, --hostile-rate times a second each for --hostile-duration, then
// restores them, and measures the operator's memory meanwhile and once it settled. The report
// is correct when an inventory of every other node shows the fixture's figures throughout,
// and the cluster-wide inventory shows them for the whole fleet once the nodes are restored;
// a wrong report fails the run (mistakes), the phases after it still run.
func hostilePhase(ctx context.Context, h *harness) (result, error) {
	nodes, pid := h.o.hostileNodes, h.op.pid
	res := &hostileResult{nodes: nodes, asked: float64(nodes) * h.o.hostileRate, quietRSS: h.quietRSS, whole: expectTotals(h.fleet, labels.Everything())}
	hostile := chooseHostile(h.fleet, nodes)
	names := make([]string, len(hostile))
	for i, n := range hostile {
		names[i] = n.name
	}
	var err error
	if res.untouched, err = createUntouchedInventory(ctx, h, names); err != nil {
		return nil, err
	}

	// Follow the untouched inventory from before the attack until the restored fleet is seen.
	followCtx, stopFollowing := context.WithCancel(ctx)
	var following sync.WaitGroup
	following.Go(func() { followUntouched(followCtx, h, res) })

	res.beforeRSS = pid.RSS()
	pid.ResetPeak()
	sampleCtx, stopSampling := context.WithCancel(ctx)
	peak := make(chan float64)
	go func() { peak <- pid.PeakUntil(sampleCtx) }()
	cpu0 := pid.CPUTicks()
	res.writes, res.failed, res.duration, res.firstFailure = attack(ctx, h.kube, names, res.asked, h.o.hostileFor)
	res.operatorCPU = pid.CoreShare(cpu0, res.duration)
	fmt.Fprintf(os.Stderr, "hostile: %d writes in %s (%.0f/s, %d failed)\n", res.writes, res.duration.Round(time.Second), float64(res.writes)/res.duration.Seconds(), res.failed)

	if err := restoreHostile(ctx, h.kube, hostile); err != nil {
		stopSampling()
		stopFollowing()
		return nil, err
	}
	res.restoreErr = waitTotals(ctx, h.watcher, homelabv1.DefaultInventoryName, res.whole, 2*time.Minute)
	stopSampling()
	res.peakRSS = max(<-peak, pid.Peak())
	stopFollowing()
	following.Wait()

	fmt.Fprintf(os.Stderr, "hostile: waiting for the operator's RSS to settle (%.0f MiB now)\n", pid.RSS()/1024)
	res.settledRSS, res.settleTook = pid.Settle(ctx, h.quietRSS+hostileSettleKiB, 4*time.Minute)
	h.prof.heap("hostile-heap.pprof") // what stayed, beside heap.pprof of the quiet phase
	if res.failed > 0 {
		fmt.Fprintf(os.Stderr, "first failed hostile write: %v\n", res.firstFailure)
	}

	if err := h.gpu.HomelabV1().GpuInventories().Delete(ctx, untouchedInventory, metav1.DeleteOptions{}); err != nil {
		return nil, fmt.Errorf("delete inventory %s: %w", untouchedInventory, err)
	}
	if err := markHostile(ctx, h.kube, names, nil); err != nil {
		return nil, err
	}
	return res, nil
}

// createUntouchedInventory marks the hostile nodes (names), creates the inventory of every
// other node and returns its totals once its status and the cluster's have settled.
func createUntouchedInventory(ctx context.Context, h *harness, names []string) (totals, error) {
	sel := labels.NewSelector()
	req, err := labels.NewRequirement("kubernetes.io/hostname", selection.NotIn, names)
	if err != nil {
		return totals{}, err
	}
	sel = sel.Add(*req)
	untouched := expectTotals(h.fleet, sel)
	if err := markHostile(ctx, h.kube, names, ptr.To("true")); err != nil {
		return totals{}, err
	}
	inv := &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: untouchedInventory},
		Spec: homelabv1.GpuInventorySpec{Note: "every node but the hostile ones", NodeSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: hostileMarker, Operator: metav1.LabelSelectorOpDoesNotExist}}}}}
	if _, err := h.gpu.HomelabV1().GpuInventories().Create(ctx, inv, metav1.CreateOptions{}); err != nil {
		return totals{}, fmt.Errorf("create inventory %s: %w", untouchedInventory, err)
	}
	if err := waitTotals(ctx, h.watcher, untouchedInventory, untouched, 2*time.Minute); err != nil {
		return totals{}, err
	}
	if err := settle(ctx, h.watcher, "cluster", 2*time.Second, 30*time.Second); err != nil {
		return totals{}, err
	}
	return untouched, nil
}

// followUntouched counts, until ctx ends, the states of the untouched inventory and those
// that do not show res.untouched, keeping the first of them.
func followUntouched(ctx context.Context, h *harness, res *hostileResult) {
	_ = follow.Inventory(ctx, h.watcher.HomelabV1().GpuInventories(), untouchedInventory, func(gi *homelabv1.GpuInventory, deleted bool) (bool, error) {
		res.statesSeen++
		if deleted || !synced(gi, res.untouched) {
			res.wrongStates++
			if res.firstWrong == "" {
				res.firstWrong = "deleted"
				if !deleted {
					res.firstWrong = statusTotals(gi.Status).String()
				}
			}
		}
		return false, nil
	})
}

// markHostile sets the hostile marker on the nodes to value, or removes it (nil).
func markHostile(ctx context.Context, kube kubernetes.Interface, nodes []string, value *string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{hostileMarker: value}}})
	if err != nil {
		return err
	}
	for _, name := range nodes {
		if _, err := kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("mark hostile node %s: %w", name, err)
		}
	}
	return nil
}

// chooseHostile picks count GPU nodes spread over the fleet (so over every model), never the
// first (the probes' marker).
func chooseHostile(fleet []fleetNode, count int) []fleetNode {
	count = min(count, len(fleet)-1)
	step := (len(fleet) - 1) / count
	out := make([]fleetNode, count)
	for k := range count {
		out[k] = fleet[1+k*step]
	}
	return out
}

// attack sends status writes to the nodes in turn at rate writes per second for d, from a
// pool of workers: when the API server cannot keep up, the writes wait for a free worker and
// the achieved rate is what it took. A write that fails is counted, not retried; the writes
// in flight at the end complete (cancelling them would only make client-go log each).
func attack(ctx context.Context, kube kubernetes.Interface, nodes []string, rate float64, d time.Duration) (writes, failed int64, took time.Duration, firstFailure error) {
	sending, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var ok, bad atomic.Int64
	var mu sync.Mutex
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := range hostileWorkers {
		wg.Go(func() {
			var seed [32]byte
			binary.LittleEndian.PutUint64(seed[:], uint64(w)+uint64(time.Now().UnixNano()))
			src := rand.NewChaCha8(seed)
			rng := rand.New(src)
			random := make([]byte, hostileMessageBytes/2)
			for k := range jobs {
				_, _ = src.Read(random)
				patch, err := statusPatch(randomLabels(rng), hex.EncodeToString(random))
				if err == nil {
					_, err = kube.CoreV1().Nodes().Patch(ctx, nodes[k], types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "kubelet"}, "status")
				}
				switch {
				case err == nil:
					ok.Add(1)
				case ctx.Err() == nil:
					bad.Add(1)
					mu.Lock()
					if firstFailure == nil {
						firstFailure = fmt.Errorf("node %s: %w", nodes[k], err)
					}
					mu.Unlock()
				}
			}
		})
	}
	start := time.Now()
	pace := time.NewTicker(10 * time.Millisecond)
	defer pace.Stop()
	sent := 0
pacing:
	for {
		select {
		case <-sending.Done():
			break pacing
		case <-pace.C:
		}
		for due := int(time.Since(start).Seconds() * rate); sent < due; sent++ {
			select {
			case jobs <- sent % len(nodes):
			case <-sending.Done():
				break pacing
			}
		}
	}
	close(jobs)
	wg.Wait()
	return ok.Load(), bad.Load(), time.Since(start), firstFailure
}

// randomLabels gives each hostile key a value the API server accepts: a plausible number, a
// huge one, a malformed one or a random string.
func randomLabels(rng *rand.Rand) map[string]*string {
	out := map[string]*string{}
	for _, key := range hostileKeys {
		var v string
		switch rng.IntN(4) {
		case 0:
			v = malformedValues[rng.IntN(len(malformedValues))]
		case 1:
			v = strconv.FormatUint(rng.Uint64(), 10)
		case 2:
			v = strconv.Itoa(rng.IntN(1024))
		default:
			v = randomLabelValue(rng)
		}
		out[key] = &v
	}
	return out
}

// randomLabelValue is 1 to 63 characters of a valid label value, alphanumeric at both ends.
func randomLabelValue(rng *rand.Rand) string {
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	const inner = alnum + "-_."
	n := 1 + rng.IntN(63)
	var b strings.Builder
	for i := range n {
		set := inner
		if i == 0 || i == n-1 {
			set = alnum
		}
		b.WriteByte(set[rng.IntN(len(set))])
	}
	return b.String()
}

// statusPatch is a strategic merge patch of a node's status subresource, as a kubelet may
// send it: its labels (a nil value removes one) and its Ready condition, True with message.
func statusPatch(lbls map[string]*string, message string) ([]byte, error) {
	type condition struct {
		Type              corev1.NodeConditionType `json:"type"`
		Status            corev1.ConditionStatus   `json:"status"`
		Reason            string                   `json:"reason"`
		Message           string                   `json:"message"`
		LastHeartbeatTime metav1.Time              `json:"lastHeartbeatTime"`
	}
	ready := condition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: message, LastHeartbeatTime: metav1.Now().Rfc3339Copy()}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"labels": lbls},
		"status":   map[string]any{"conditions": []condition{ready}},
	})
	if err != nil {
		return nil, fmt.Errorf("encode status patch: %w", err)
	}
	return patch, nil
}

// restoreHostile gives the hostile nodes their generated GPU labels and a kubelet's Ready
// message back.
func restoreHostile(ctx context.Context, kube kubernetes.Interface, hostile []fleetNode) error {
	for _, n := range hostile {
		lbls := map[string]*string{}
		for _, key := range hostileKeys {
			if v, ok := n.labels[key]; ok {
				lbls[key] = &v
			} else {
				lbls[key] = nil
			}
		}
		patch, err := statusPatch(lbls, "kubelet is posting ready status")
		if err != nil {
			return err
		}
		if _, err := kube.CoreV1().Nodes().Patch(ctx, n.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "kubelet"}, "status"); err != nil {
			return fmt.Errorf("restore node %s: %w", n.name, err)
		}
	}
	return nil
}
