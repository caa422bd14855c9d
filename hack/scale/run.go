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
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventorycache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// run is the scale run: a fleet of n nodes on a fresh API server, the operator's first start
// on it, then a restart and the phases measured against the restarted operator, its table,
// the plugin's, and the last phases with theirs.
func run(n int, rate float64, churnFor time.Duration, operator string, probes int) error {
	ctx := context.Background()
	env, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		return err
	}
	defer env.Stop()
	c, err := connect(env.Config)
	if err != nil {
		return err
	}
	fleet, err := createFleet(ctx, c.kube, n)
	if err != nil {
		return err
	}
	logPath := filepath.Join(env.Dir, "logs", "operator.log")
	launch, closeLogs, err := newLauncher(logPath, env.KubeconfigPath(), operator)
	if err != nil {
		return err
	}
	defer closeLogs()
	h := &harness{kube: c.protobuf, gpu: c.gpu, watcher: c.watcher, fleet: fleet, launcher: launch}
	f := &figures{runSettings: runSettings{n: n, rate: rate, churnFor: churnFor, probes: probes}, gpuNodes: int32((n + 1) / 2)}

	// The first start is on an empty cluster: the operator installs both CRDs and creates the
	// default inventory, and creates every record at its default client rate.
	if h.op, err = h.launcher.start(); err != nil {
		return err
	}
	defer func() { h.op.stop() }()
	if f.empty, err = firstStart(ctx, h, c.apiext, f.gpuNodes, logPath); err != nil {
		return err
	}

	// What is measured from here on is an operator restart, as on every upgrade, reschedule
	// or leader change: the CRDs, the inventory and every record exist.
	if f.firstStatus, _, err = restartOperator(ctx, h, "restart with the records in place"); err != nil {
		return fmt.Errorf("operator log %s: %w", logPath, err)
	}
	writes, err := countStatusWrites(ctx, h)
	if err != nil {
		return err
	}
	if f.quiet, err = quietPhase(ctx, h, c.kube, writes, probes); err != nil {
		return err
	}
	if f.churn, err = churnPhase(ctx, h, c.kube, writes, f.runSettings); err != nil {
		return err
	}
	if f.single, err = singleChangePhases(ctx, h, f.runSettings, int(f.gpuNodes)); err != nil {
		return err
	}
	if f.totalGpuNodes, f.statusBytes, err = statusSize(ctx, c.gpu); err != nil {
		return err
	}
	printFigures(f, draNodes(h.fleet))

	if pluginBinary != "" && pluginRuns > 0 {
		if err := measurePlugins(ctx, env, c.gpu, c.watcher, n); err != nil {
			return err
		}
	}
	h.quietRSS = f.quiet.rss
	err = lastPhases(ctx, h)
	if quotaQueues > 0 {
		err = errors.Join(err, quotaPhase(ctx, h, env))
	}
	if podTotal > 0 {
		allocErr := allocationPhase(ctx, h, env, n)
		if allocErr == nil && gpuPodTotal > 0 && usageWindow > 0 {
			allocErr = usagePhase(ctx, h, env) // on the allocation phase's pods
		}
		err = errors.Join(err, allocErr)
	}
	if hold {
		holdUntilInterrupted(ctx, env)
	}
	return err
}

// runSettings are run's arguments that its phases read.
type runSettings struct {
	n        int // nodes in the fleet
	rate     float64
	churnFor time.Duration
	probes   int // latency probes per phase
}

// figures are what run measures before the last phases: the rows of its table.
type figures struct {
	runSettings
	gpuNodes      int32 // GPU nodes generated: half the fleet
	empty         *emptyStart
	firstStatus   time.Duration // from the restart to its first complete status
	quiet         *quietResult
	churn         *churnResult
	single        *singleChanges
	totalGpuNodes int32 // the status's count after the phases
	statusBytes   int   // the inventory as the API server sends it
}

// clients are run's connections to the API server, none rate-limited on the client side.
type clients struct {
	kube     kubernetes.Interface // JSON
	protobuf kubernetes.Interface
	gpu      versioned.Interface
	// watcher reads inventories without their node list, as the operator's informer does,
	// so that decoding them takes little of the 2 cores being measured.
	watcher versioned.Interface
	apiext  apiextensionsclient.Interface
}

func connect(config *rest.Config) (*clients, error) {
	bulk := rest.CopyConfig(config)
	bulk.QPS = -1
	watcher, err := inventorycache.NewInformerClient(bulk)
	if err != nil {
		return nil, err
	}
	protobuf := rest.CopyConfig(bulk)
	protobuf.ContentType = "application/vnd.kubernetes.protobuf"
	protobuf.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return &clients{
		kube:     kubernetes.NewForConfigOrDie(bulk),
		protobuf: kubernetes.NewForConfigOrDie(protobuf),
		gpu:      versioned.NewForConfigOrDie(bulk),
		watcher:  versioned.New(watcher),
		apiext:   apiextensionsclient.NewForConfigOrDie(bulk),
	}, nil
}

// createFleet creates the operator's namespace and a fleet of n nodes, half of them GPU
// nodes (--dra-share of those with a ResourceSlice), and returns its GPU nodes as generated.
func createFleet(ctx context.Context, kube kubernetes.Interface, n int) ([]fleetNode, error) {
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gpu-inventory-system"}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := testenv.CreateDRAFleet(ctx, kube, 0, n, 16, draShare); err != nil {
		return nil, err
	}
	fleet := gpuFleet(n, draShare)
	sample, _ := kube.CoreV1().Nodes().Get(ctx, fixtures.FleetNodeName(0), metav1.GetOptions{})
	raw, _ := sample.Marshal()
	fmt.Fprintf(os.Stderr, "created %d nodes in %s (a GPU node is %d bytes of protobuf, %d labels); %d of the %d GPU nodes are DRA nodes, each with a ResourceSlice\n",
		n, time.Since(start).Round(time.Second), len(raw), len(sample.Labels), draNodes(fleet), len(fleet))
	return fleet, nil
}

// newLauncher opens the operator's log at logPath (with --profile-dir, also the probe log)
// and returns the launcher of the operator with run's flags, and what closes the logs (with
// --profile-dir, copying the operator's into it first).
func newLauncher(logPath, kubeconfig, operator string) (*launcher, func(), error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, nil, err
	}
	closeLogs := func() { logFile.Close() }
	args := []string{"--kubeconfig=" + kubeconfig, "--namespace=gpu-inventory-system", "--health-probe-bind-address=127.0.0.1:0"}
	args = append(args, strings.Fields(operatorArgs)...)
	if profileDir != "" {
		args = append(args, "--pprof-bind-address="+pprofAddr, "-v=4") // -v=4 logs every sync with its duration
		if probeLog, err = os.Create(filepath.Join(profileDir, "probes.log")); err != nil {
			logFile.Close()
			return nil, nil, err
		}
		closeLogs = func() {
			data, _ := os.ReadFile(logPath)
			_ = os.WriteFile(filepath.Join(profileDir, "operator.log"), data, 0o644)
			probeLog.Close()
			logFile.Close()
		}
	}
	return &launcher{binary: operator, args: args, env: strings.Fields(operatorEnv), log: logFile}, closeLogs, nil
}

// emptyStart is what the operator's first start, on an empty cluster, measured.
type emptyStart struct {
	firstStatus time.Duration // from its start to the first complete status
	records     recordsCreated
	writes      writeCounts // record writes until every record exists
}

// firstStart waits for the first operator (just started on an empty cluster) to install the
// CRDs, report every GPU node and GPU, and create every record.
func firstStart(ctx context.Context, h *harness, apiext apiextensionsclient.Interface, gpuNodes int32, logPath string) (*emptyStart, error) {
	wantGpus := expectTotals(h.fleet, labels.Everything()).Gpus
	recordsDone := make(chan recordsCreated, 1)
	go func() { recordsDone <- waitAllRecords(ctx, apiext, h.gpu, h.op.started, int(gpuNodes)) }()
	if err := waitCRDEstablished(ctx, apiext, homelabv1.CustomResourceDefinitionName, 2*time.Minute); err != nil {
		return nil, fmt.Errorf("operator log %s: %w", logPath, err)
	}
	err := watchInventory(ctx, h.watcher, homelabv1.DefaultInventoryName, 2*time.Minute, func(gi *homelabv1.GpuInventory) bool {
		return gi.Status.TotalGpuNodes == gpuNodes && gi.Status.TotalGpus == wantGpus // the DRA nodes' GPUs included
	})
	if err != nil {
		return nil, fmt.Errorf("first complete status on an empty cluster (operator log %s): %w", logPath, err)
	}
	res := &emptyStart{firstStatus: time.Since(h.op.started), records: <-recordsDone}
	if res.records.err != nil {
		return nil, fmt.Errorf("operator log %s: %w", logPath, res.records.err)
	}
	if res.writes, err = recordsCounted(h.op, int64(gpuNodes)); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "empty cluster: first complete status after %s, GpuNode CRD established after %s, all %d records after %s (record writes: %s)\n",
		res.firstStatus.Round(time.Millisecond), res.records.crdServed.Round(time.Millisecond), gpuNodes, res.records.all.Round(time.Millisecond), res.writes)
	return res, nil
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

func quietPhase(ctx context.Context, h *harness, kube kubernetes.Interface, writes *writeCounter, probes int) (*quietResult, error) {
	pid := h.op.pid
	res := &quietResult{}
	var err error
	if res.restartWrites, err = h.op.recordWrites(); err != nil {
		return nil, err
	}
	// The restart's own work (its first syncs, the start's heap handed back) goes on for a
	// few seconds after its first status; the quiet figures are the settled operator's.
	settleCPU(pid, 15*time.Second)
	start, ticks, wall := writes.count(), cpuTicks(pid), time.Now()
	res.records, err = countWrites(h.op, func() error {
		time.Sleep(10 * time.Second) // measure a quiet period: no change is expected to watch for
		return nil
	})
	if err != nil {
		return nil, err
	}
	res.statusWrites = writes.count() - start
	// Clock ticks are 1/100 s. The two scrapes of the metrics that count the record writes are included.
	res.cpu = float64(cpuTicks(pid)-ticks) / 100 / time.Since(wall).Seconds()
	res.rss, res.anon, res.file = readStatus(pid, "VmRSS"), readStatus(pid, "RssAnon"), readStatus(pid, "RssFile")
	if profileDir != "" {
		smaps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
		_ = os.WriteFile(filepath.Join(profileDir, "smaps"), smaps, 0o644)
	}
	fetchProfile(pprofAddr, "/debug/pprof/heap", "heap.pprof")
	if res.latency, err = probe(ctx, kube, h.watcher, probes, "quiet"); err != nil {
		return nil, err
	}
	if res.serverApply, err = dryRunApplies(ctx, h.gpu, probes); err != nil {
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

// churnPhase changes the fleet at s.rate a second for s.churnFor (testenv.ChurnDRA) while it
// probes the latency.
func churnPhase(ctx context.Context, h *harness, kube kubernetes.Interface, writes *writeCounter, s runSettings) (*churnResult, error) {
	churnCtx, stop := context.WithTimeout(ctx, s.churnFor)
	defer stop()
	pid := h.op.pid
	cpu0, wall0, writes0 := cpuTicks(pid), time.Now(), writes.count()
	records0, err := h.op.recordWrites()
	if err != nil {
		return nil, err
	}
	res := &churnResult{}
	var churnErr error
	var wg sync.WaitGroup
	wg.Go(func() { res.counts, churnErr = testenv.ChurnDRA(churnCtx, kube, s.n, s.rate, draShare) })
	// The whole churn, for enough samples to read shares from.
	profilePhase(&wg, s.churnFor, "cpu.pprof", "churn-allocs.pprof")
	if res.latency, err = probe(churnCtx, kube, h.watcher, s.probes, "churn"); err != nil {
		return nil, err
	}
	wg.Wait()
	if churnErr != nil {
		return nil, churnErr
	}
	wall := time.Since(wall0)
	res.cpu = float64(cpuTicks(pid)-cpu0) / 100 / wall.Seconds() // clock ticks are 1/100 s
	res.statusWrites = float64(writes.count()-writes0) / wall.Seconds()
	res.peakRSS = readStatus(pid, "VmHWM")
	records, err := h.op.recordWrites()
	if err != nil {
		return nil, err
	}
	res.records = records.since(records0)
	return res, nil
}

// singleChanges is what the phases after the churn, each of one kind of change, measured
// (nil: skipped).
type singleChanges struct {
	onlyFlips   *flipResult
	republished *flipResult
	relabel     *relabelResult
}

// singleChangePhases runs Ready flips only, then flips and republishes, then relabels: once
// the churn's rejoins have settled (the inventory quiet, every GPU node's record there).
func singleChangePhases(ctx context.Context, h *harness, s runSettings, gpuNodes int) (*singleChanges, error) {
	if err := settle(ctx, h.watcher, homelabv1.DefaultInventoryName, 2*time.Second, 30*time.Second); err != nil {
		return nil, err
	}
	if err := watchRecords(ctx, h.gpu, time.Minute, func(all map[string]*homelabv1.GpuNode) bool { return len(all) == gpuNodes }); err != nil {
		return nil, fmt.Errorf("records after the churn: %w", err)
	}
	res := &singleChanges{}
	var err error
	if flipFor > 0 {
		if res.onlyFlips, err = flipPhase(ctx, h, s.n, s.rate, flipFor, 0); err != nil {
			return nil, err
		}
	}
	if republishFor > 0 && draShare > 0 {
		if res.republished, err = flipPhase(ctx, h, s.n, s.rate, republishFor, draShare); err != nil {
			return nil, err
		}
	}
	if relabelFor > 0 {
		if res.relabel, err = relabelPhase(ctx, h, relabelRate, relabelFor); err != nil {
			return nil, fmt.Errorf("relabel phase: %w", err)
		}
	}
	return res, nil
}

// statusSize returns the default inventory's GPU node count and its size as the API server
// sends it.
func statusSize(ctx context.Context, gpu versioned.Interface) (int32, int, error) {
	gi, err := gpu.HomelabV1().GpuInventories().Get(ctx, "cluster", metav1.GetOptions{})
	if err != nil {
		return 0, 0, err
	}
	objBytes, err := gpu.HomelabV1().RESTClient().Get().Resource("gpuinventories").Name("cluster").DoRaw(ctx)
	if err != nil {
		return 0, 0, err
	}
	return gi.Status.TotalGpuNodes, len(objBytes), nil
}

// holdUntilInterrupted keeps the API server and the operator running until SIGINT or
// SIGTERM (--hold).
func holdUntilInterrupted(ctx context.Context, env *testenv.Env) {
	fmt.Fprintf(os.Stderr, "holding (interrupt to stop): KUBECONFIG=%s\n", env.KubeconfigPath())
	interrupted, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-interrupted.Done()
}

// printFigures prints run's table and the figures below it; dra is the fleet's DRA nodes.
func printFigures(f *figures, dra int) {
	q, c, e := f.quiet, f.churn, f.empty
	fmt.Printf("\nN=%d nodes (%d GPU nodes), churn %.0f flips/s for %s (%d flips), %d probes per phase\n", f.n, f.totalGpuNodes, f.rate, f.churnFor, c.counts.Changes, f.probes)
	fmt.Printf("DRA: %d of the GPU nodes (--dra-share %g) have no GFD label and one ResourceSlice of 8 devices; the churn's %d changes include %d slice republishes (%d of them adding or removing a device taint)\n\n",
		dra, draShare, c.counts.Changes, c.counts.Republishes, c.counts.Taints)
	fmt.Println("| figure | measured | target |")
	fmt.Println("|---|---|---|")
	fmt.Printf("| steady RSS after sync (with %d records) | %.1f MiB | ≤ 48 MiB |\n", f.gpuNodes, q.rss/1024)
	fmt.Printf("| peak RSS | %.0f MiB | ≤ 96 MiB |\n", c.peakRSS/1024)
	fmt.Printf("| start to first complete status on an empty cluster (the operator installs both CRDs) | %.2f s | ≤ 2.5 s: %s |\n", e.firstStatus.Seconds(), verdict(e.firstStatus <= 2500*time.Millisecond))
	fmt.Printf("| start on an empty cluster to all %d GpuNode records (default `--gpunode-qps`) | %.1f s (CRD established at %.1f s; %s) | ≤ 60 s: %s |\n",
		f.gpuNodes, e.records.all.Seconds(), e.records.crdServed.Seconds(), e.writes, verdict(e.records.all <= time.Minute))
	fmt.Printf("| start to first complete status (CRDs, inventory and %d records exist) | %.2f s | ≤ 2 s: %s |\n", f.gpuNodes, f.firstStatus.Seconds(), verdict(f.firstStatus <= 2*time.Second))
	fmt.Printf("| record writes from that start until the quiet phase | %d (%s) | 0: %s |\n", q.restartWrites.writes(), q.restartWrites, verdict(q.restartWrites.writes() == 0))
	fmt.Printf("| CPU under the churn (%.0f changes/s: Ready flips, every tenth a relabel, every 25th a node leaving and joining, slice republishes) | %.1f %% of a core | (the target is for flips and republishes, below) |\n", f.rate, c.cpu*100)
	fmt.Printf("| slice republishes under churn (generation+1, same devices; device taint toggles) | %d (%d) | |\n", c.counts.Republishes, c.counts.Taints)
	fmt.Printf("| status writes while quiet (10 s) | %d | 0 |\n", q.statusWrites)
	fmt.Printf("| CPU while quiet (10 s, once settled: the fixed part of the figures under churn) | %.1f %% of a core | |\n", q.cpu*100)
	fmt.Printf("| record writes while quiet (10 s) | %d (%s) | 0: %s |\n", q.records.writes(), q.records, verdict(q.records.writes() == 0))
	printSingleChanges(f.single, f.rate, c.records)
	fmt.Printf("| status writes/s under churn | %.1f | ≤ 2 per inventory |\n", c.statusWrites)
	fmt.Printf("| change -> status, p99 | %s quiet, %s under churn | ≤ 200 ms quiet, ≤ 1.5 s under churn |\n", p99(q.latency), p99(c.latency))
	fmt.Printf("| status size | %.0f KiB at %d GPU nodes | ≤ 256 KiB at any size |\n", float64(f.statusBytes)/1024, f.totalGpuNodes)
	fmt.Printf("\nsteady RSS: %.0f MiB anonymous (heap, stacks, runtime), %.0f MiB of mapped files (the binary)\n", q.anon/1024, q.file/1024)
	fmt.Printf("change -> status: median %s quiet, %s under churn\n", median(q.latency), median(c.latency))
	fmt.Printf("the API server's share: a dry-run apply of the same status takes median %s, p99 %s\n", median(q.serverApply), p99(q.serverApply))
}

// printSingleChanges prints the rows of the phases after the churn, and the churn's record
// writes among them.
func printSingleChanges(s *singleChanges, rate float64, churnRecords writeCounts) {
	if f := s.onlyFlips; f != nil {
		fmt.Printf("| record writes while %.0f GPU nodes/s flip Ready (flips only, %d in %s, and 2 s after) | %d (%s) | 0: %s |\n",
			rate, f.flips, f.took.Round(time.Second), f.writes.writes(), f.writes, verdict(f.writes.writes() == 0))
		fmt.Printf("| CPU while %.0f GPU nodes/s flip Ready, nothing else changing (%d flips in %s) | %.1f %% of a core | ≤ 5 %% of a core: %s |\n",
			rate, f.flips, f.took.Round(time.Second), f.cpu*100, verdict(f.cpu <= 0.05))
	}
	if f := s.republished; f != nil {
		fmt.Printf("| CPU under %.0f changes/s spread over Ready flips and slice republishes, nothing else changing (%d changes in %s, %d of them republishes, %d taint toggles) | %.1f %% of a core | ≤ 5 %% of a core: %s |\n",
			rate, f.flips, f.took.Round(time.Second), f.counts.Republishes, f.counts.Taints, f.cpu*100, verdict(f.cpu <= 0.05))
		fmt.Printf("| record writes under those flips and republishes (a taint toggle changes a node's health, as does the first republish of a node the churn left tainted) | %d (%s) | |\n", f.writes.writes(), f.writes)
	}
	fmt.Printf("| record writes under churn (its relabels are GFD's timestamp, its republishes the slice's generation; its rejoins and the probes change identities, its taint toggles health) | %d (%s) | |\n", churnRecords.writes(), churnRecords)
	if r := s.relabel; r != nil {
		// The writes happen between the first relabel and the last record showing it.
		perSec := float64(r.writes.writes()) / r.synced.Seconds()
		fmt.Printf("| relabel (driver version of distinct GPU nodes): %d nodes in %s, %.1f nodes/s; record writes until every record shows it (%s) | %d (%s), %.1f/s over those %s, %.2f per relabelled node | ≤ 50/s, ≤ 1 per node: %s |\n",
			r.nodes, r.took.Round(100*time.Millisecond), float64(r.nodes)/r.took.Seconds(), r.synced.Round(100*time.Millisecond),
			r.writes.writes(), r.writes, perSec, r.synced.Round(100*time.Millisecond), float64(r.writes.writes())/float64(max(1, r.nodes)), verdict(perSec <= 50 && r.writes.writes() <= int64(r.nodes)))
	}
}
