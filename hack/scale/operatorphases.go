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
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// emptyStart is what the operator's first start, on an empty cluster, measured.
type emptyStart struct {
	gpuNodes    int32         // GPU nodes generated: half the fleet
	draNodes    int           // of them, DRA nodes
	firstStatus time.Duration // from its start to the first complete status
	records     recordsCreated
	writes      writeCounts // record writes until every record exists
}

// coldStartPhase starts the API server with the fleet and the first operator on it, an
// empty cluster: it waits for the operator to install the CRDs, report every GPU node and
// GPU, and create every record at its default client rate.
func coldStartPhase(ctx context.Context, h *harness) (result, error) {
	if err := h.startCluster(ctx); err != nil {
		return nil, err
	}
	if err := h.startOperator(); err != nil {
		return nil, err
	}
	res := &emptyStart{gpuNodes: int32((h.o.nodes + 1) / 2), draNodes: draNodes(h.fleet)}
	wantGpus := expectTotals(h.fleet, labels.Everything()).Gpus
	recordsDone := make(chan recordsCreated, 1)
	go func() { recordsDone <- waitAllRecords(ctx, h.apiext, h.gpu, h.op.started, int(res.gpuNodes)) }()
	if err := waitCRDEstablished(ctx, h.apiext, homelabv1.CustomResourceDefinitionName, 2*time.Minute); err != nil {
		return nil, fmt.Errorf("operator log %s: %w", h.logPath, err)
	}
	err := watchInventory(ctx, h.watcher, homelabv1.DefaultInventoryName, 2*time.Minute, func(gi *homelabv1.GpuInventory) bool {
		return gi.Status.TotalGpuNodes == res.gpuNodes && gi.Status.TotalGpus == wantGpus // the DRA nodes' GPUs included
	})
	if err != nil {
		return nil, fmt.Errorf("first complete status on an empty cluster (operator log %s): %w", h.logPath, err)
	}
	res.firstStatus, res.records = time.Since(h.op.started), <-recordsDone
	if res.records.err != nil {
		return nil, fmt.Errorf("operator log %s: %w", h.logPath, res.records.err)
	}
	if res.writes, err = recordsCounted(h.op, int64(res.gpuNodes)); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "empty cluster: first complete status after %s, GpuNode CRD established after %s, all %d records after %s (record writes: %s)\n",
		res.firstStatus.Round(time.Millisecond), res.records.crdServed.Round(time.Millisecond), res.gpuNodes, res.records.all.Round(time.Millisecond), res.writes)
	return res, nil
}

// warmStart is the restart's first complete status, from its start.
type warmStart struct{ firstStatus time.Duration }

// warmStartPhase restarts the operator with the CRDs, the inventory and every record in
// place, and counts the default inventory's writes from then on.
func warmStartPhase(ctx context.Context, h *harness) (result, error) {
	took, _, err := restartOperator(ctx, h, "restart with the records in place")
	if err != nil {
		return nil, fmt.Errorf("operator log %s: %w", h.logPath, err)
	}
	if h.statusWrites, err = countStatusWrites(ctx, h); err != nil {
		return nil, err
	}
	return &warmStart{firstStatus: took}, nil
}

// countStatusWrites counts the default inventory's writes from its current state on.
func countStatusWrites(ctx context.Context, h *harness) (*writeCounter, error) {
	current, err := h.gpu.HomelabV1().GpuInventories().Get(ctx, homelabv1.DefaultInventoryName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	writes := &writeCounter{}
	go writes.run(ctx, h.watcher, current.ResourceVersion)
	return writes, nil
}

// quietResult is what the quiet phase measured: no writes, steady memory, latency of single
// changes.
type quietResult struct {
	restartWrites   writeCounts // record writes from the restart until the quiet phase
	statusWrites    int
	records         writeCounts
	cpu             float64 // share of a core
	rss, anon, file float64 // KiB: VmRSS, RssAnon, RssFile
	latency         []time.Duration
	serverApply     []time.Duration // the API server's share: dry-run applies of the status
}

func quietPhase(ctx context.Context, h *harness) (result, error) {
	pid := h.op.pid
	res := &quietResult{}
	var err error
	if res.restartWrites, err = h.op.recordWrites(); err != nil {
		return nil, err
	}
	// The restart's own work (its first syncs, the start's heap handed back) goes on for a
	// few seconds after its first status; the quiet figures are the settled operator's.
	pid.SettleCPU(15 * time.Second)
	start, ticks, wall := h.statusWrites.count(), pid.CPUTicks(), time.Now()
	res.records, err = countWrites(h.op, func() error {
		time.Sleep(10 * time.Second) // measure a quiet period: no change is expected to watch for
		return nil
	})
	if err != nil {
		return nil, err
	}
	res.statusWrites = h.statusWrites.count() - start
	// The two scrapes of the metrics that count the record writes are included.
	res.cpu = pid.CoreShare(ticks, time.Since(wall))
	res.rss, res.anon, res.file = pid.RSS(), pid.KiB("RssAnon"), pid.KiB("RssFile")
	h.quietRSS = res.rss
	h.prof.save("smaps", func() ([]byte, error) { return os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid)) })
	h.prof.heap("heap.pprof")
	if res.latency, err = probe(ctx, h, h.o.probes, "quiet"); err != nil {
		return nil, err
	}
	if res.serverApply, err = dryRunApplies(ctx, h.gpu, h.o.probes); err != nil {
		return nil, err
	}
	return res, nil
}

// churnResult is what the churn phase measured.
type churnResult struct {
	counts       testenv.ChurnCounts
	cpu          float64 // share of a core
	statusWrites float64 // a second
	peakRSS      float64 // KiB: VmHWM
	records      writeCounts
	latency      []time.Duration
}

// churnPhase changes the fleet at --churn a second for --churn-duration
// (testenv.ChurnDRA) while it probes the latency, then waits until the churn's rejoins have
// settled (the inventory quiet, every GPU node's record there) for the phases after it.
func churnPhase(ctx context.Context, h *harness) (result, error) {
	o := h.o
	churnCtx, stop := context.WithTimeout(ctx, o.churnFor)
	defer stop()
	pid := h.op.pid
	cpu0, wall0, writes0 := pid.CPUTicks(), time.Now(), h.statusWrites.count()
	records0, err := h.op.recordWrites()
	if err != nil {
		return nil, err
	}
	res := &churnResult{}
	var churnErr error
	var wg sync.WaitGroup
	wg.Go(func() { res.counts, churnErr = testenv.ChurnDRA(churnCtx, h.json, o.nodes, o.churn, o.draShare) })
	// The whole churn, for enough samples to read shares from.
	h.prof.phase(&wg, o.churnFor, "cpu.pprof", "churn-allocs.pprof")
	if res.latency, err = probe(churnCtx, h, o.probes, "churn"); err != nil {
		return nil, err
	}
	wg.Wait()
	if churnErr != nil {
		return nil, churnErr
	}
	wall := time.Since(wall0)
	res.cpu = pid.CoreShare(cpu0, wall)
	res.statusWrites = float64(h.statusWrites.count()-writes0) / wall.Seconds()
	res.peakRSS = pid.Peak()
	records, err := h.op.recordWrites()
	if err != nil {
		return nil, err
	}
	res.records = records.since(records0)

	if err := settle(ctx, h.watcher, homelabv1.DefaultInventoryName, 2*time.Second, 30*time.Second); err != nil {
		return nil, err
	}
	gpuNodes := (o.nodes + 1) / 2
	if err := watchRecords(ctx, h.gpu, time.Minute, func(all map[string]*homelabv1.GpuNode) bool { return len(all) == gpuNodes }); err != nil {
		return nil, fmt.Errorf("records after the churn: %w", err)
	}
	return res, nil
}

// statusSize is the default inventory's GPU node count after the phases above, and its size
// as the API server sends it.
type statusSize struct {
	totalGpuNodes int32
	bytes         int
}

func statusSizePhase(ctx context.Context, h *harness) (result, error) {
	total, size, err := inventorySize(ctx, h.gpu)
	if err != nil {
		return nil, err
	}
	return &statusSize{totalGpuNodes: total, bytes: size}, nil
}

// inventorySize returns the default inventory's GPU node count and its size as the API
// server sends it.
func inventorySize(ctx context.Context, gpu versioned.Interface) (int32, int, error) {
	gi, err := gpu.HomelabV1().GpuInventories().Get(ctx, homelabv1.DefaultInventoryName, metav1.GetOptions{})
	if err != nil {
		return 0, 0, err
	}
	objBytes, err := gpu.HomelabV1().RESTClient().Get().Resource("gpuinventories").Name(homelabv1.DefaultInventoryName).DoRaw(ctx)
	if err != nil {
		return 0, 0, err
	}
	return gi.Status.TotalGpuNodes, len(objBytes), nil
}

// resetPhase brings the fleet back to its generated state for the phases after it.
func resetPhase(ctx context.Context, h *harness) (result, error) {
	reset, err := resetFleet(ctx, h.kube, h.fleet, h.o.draShare)
	if err != nil {
		return nil, err
	}
	whole := expectTotals(h.fleet, labels.Everything())
	if err := waitTotals(ctx, h.watcher, homelabv1.DefaultInventoryName, whole, 2*time.Minute); err != nil {
		return nil, fmt.Errorf("after the fleet reset (%s): %w", reset, err)
	}
	fmt.Fprintf(os.Stderr, "fleet reset: %s; the inventory shows %s\n", reset, whole)
	return nil, nil
}

// holdPhase keeps the API server and the operator running until SIGINT or SIGTERM (--hold).
func holdPhase(ctx context.Context, h *harness) (result, error) {
	fmt.Fprintf(os.Stderr, "holding (interrupt to stop): KUBECONFIG=%s\n", h.env.KubeconfigPath())
	interrupted, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-interrupted.Done()
	return nil, nil
}
