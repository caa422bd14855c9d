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

// Command scale measures the operator against a real kube-apiserver with a realistic fleet:
// memory, start-up time, CPU under churn, status writes and change-to-status latency; with
// --plugin, also the time and memory of `kubectl gpuinv` and `kubectl gpuinv scan` on the same
// fleet; with --pods, the allocation phase: pods bound to the fleet's nodes, the operator's
// start, memory and CPU with them, a plain Pod informer's memory beside it, `kubectl gpuinv
// free` and `who`; with --plugin, first, the fleet phase: `kubectl gpuinv --all-contexts` over
// several kube-apiservers (fleet.go); with --quota-queues, the quota phase: Kueue's objects
// beside the fleet (quota.go); after the allocation phase, unless --usage-window is 0, the
// usage phase: a real Prometheus with DCGM history for the pods' GPUs (usage.go). It prints
// the table of the README's "Performance" section. `make bench` runs it; `make bench-large`, its first phases on 20,000 nodes.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/follow"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/statuswriter"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

func main() {
	n := flag.Int("nodes", 5000, "Nodes in the fleet (half of them GPU nodes).")
	rate := flag.Float64("churn", 50, "Changes per second during the churn phase: Ready flips, and on DRA nodes as many slice republishes.")
	churnFor := flag.Duration("churn-duration", 30*time.Second, "Length of the churn phase.")
	operator := flag.String("operator", "bin/gpu-inventory-operator", "Operator binary.")
	probes := flag.Int("probes", 20, "Latency probes per phase.")
	flag.StringVar(&profileDir, "profile-dir", "", "Write the operator's heap profiles (after sync and each phase), CPU profiles (during each churn, at the allocation start), log (-v=4) and each probe's latency here, and the API server's CPU profiles at the allocation start and during `who -A`.")
	flag.StringVar(&pluginBinary, "plugin", "", "kubectl-gpuinv binary: after the churn, measure the plugin reading the inventory and scanning the nodes (empty: skip).")
	flag.IntVar(&pluginRuns, "plugin-runs", 5, "Runs of each plugin command.")
	flag.DurationVar(&quietGap, "quiet-gap", 5*time.Second, "Pause before each quiet-phase probe; keep it above four times the operator's --min-sync-interval (the ConfigMap's interval).")
	flag.StringVar(&operatorEnv, "operator-env", "", "More environment for the operator, space-separated NAME=value pairs (e.g. GOGC=40).")
	flag.StringVar(&operatorArgs, "operator-args", "", "More flags for the operator, space-separated (e.g. --min-sync-interval=1s).")
	flag.DurationVar(&hostileFor, "hostile-duration", time.Minute, "Length of the hostile phase, after the others: GPU nodes rewrite a 64 KiB Ready message and random GPU labels (0: skip).")
	flag.IntVar(&hostileNodes, "hostile-nodes", 50, "GPU nodes that write in the hostile phase.")
	flag.Float64Var(&hostileRate, "hostile-rate", 10, "Writes per second of each hostile node.")
	flag.IntVar(&inventoryCount, "inventories", 1000, "GpuInventories over a few hundred GPU nodes each, created after the hostile phase (0: skip).")
	flag.DurationVar(&flipFor, "flip-duration", 10*time.Second, "Length of the phase of Ready flips only (at --churn per second), after the churn: it must cost no GpuNode record write.")
	flag.DurationVar(&republishFor, "republish-duration", 10*time.Second, "Length of the phase of Ready flips and slice republishes (at --churn per second, on DRA nodes half of them republishes), after the flips.")
	flag.Float64Var(&relabelRate, "relabel-rate", 50, "GPU nodes a second whose driver version changes in the relabel phase (each a record write).")
	flag.DurationVar(&relabelFor, "relabel-duration", 20*time.Second, "Length of the relabel phase (0: skip).")
	flag.Float64Var(&draShare, "dra-share", 0.5, "Share of the GPU nodes run by NVIDIA's DRA driver: no GFD label, one ResourceSlice of eight H100s each.")
	flag.DurationVar(&outageFor, "outage-duration", 2*time.Minute, "The last phase: every GPU node labelled by GPU Feature Discovery loses its labels, the operator restarts halfway, the labels come back after this (0: skip).")
	flag.IntVar(&podTotal, "pods", 0, "Pods of the allocation phase, the very last: the operator restarts with them in place, then they churn (0: skip).")
	flag.IntVar(&gpuPodTotal, "gpu-pods", 0, "Of --pods, pods that ask for GPUs: 1 % of them wait unscheduled, 1 % have finished, the rest are bound to free shares of the GPU nodes.")
	flag.Float64Var(&podChurnRate, "pod-churn", 100, "Pod creations and deletions a second (half each) in the allocation phase, GPU pods in their share of --pods.")
	flag.DurationVar(&podChurnFor, "pod-churn-duration", 30*time.Second, "Length of the allocation phase's pod churn.")
	flag.IntVar(&podWorkers, "pod-workers", 64, "Parallel creations of the allocation phase's pods.")
	flag.IntVar(&quotaQueues, "quota-queues", 1000, "ClusterQueues of the quota phase, after the last phases and before the allocation phase: Kueue's CRDs installed while the operator runs, --quota-flavors ResourceFlavors, the queues in cohorts, a LocalQueue each, --quota-workloads Workloads; the operator's memory and quiet status writes with them, and `kubectl gpuinv quota` (0: skip).")
	flag.IntVar(&quotaFlavors, "quota-flavors", 100, "ResourceFlavors of the quota phase, by GPU product, zone and node pool (at least 5: one per GPU model of the fleet).")
	flag.IntVar(&quotaWorkloads, "quota-workloads", 10000, "Kueue Workloads of the quota phase, spread over its LocalQueues.")
	flag.IntVar(&fleetContexts, "fleet-contexts", 10, "Clusters of the fleet phase, the first (needs --plugin): as many kube-apiservers on one etcd, each a kubeconfig context with a GpuInventory, read by `kubectl gpuinv --all-contexts` (0: skip).")
	flag.IntVar(&fleetGPUNodes, "fleet-gpu-nodes", 1000, "GPU nodes that each fleet-phase inventory covers (it lists at most 500 of them, as the operator does).")
	flag.BoolVar(&fleetOnly, "fleet-only", false, "Run the fleet phase alone.")
	flag.DurationVar(&usageWindow, "usage-window", time.Hour, "The usage phase, after the allocation phase (needs --gpu-pods): a real Prometheus with this much DCGM history backfilled, the operator's --idle-window (at least 1h; 0: skip).")
	flag.DurationVar(&usageQuiet, "usage-quiet", 5*time.Minute, "The usage phase's quiet period: the operator's readings (one a minute) whose status writes, RSS and CPU are counted.")
	flag.BoolVar(&hold, "hold", false, "After the last phase, keep the API server and the operator running until interrupted, for experiments against them (its kubeconfig is printed).")
	flag.Parse()
	if fleetOnly && (pluginBinary == "" || fleetContexts <= 0) {
		fmt.Fprintln(os.Stderr, "scale: --fleet-only needs --plugin and --fleet-contexts above 0")
		os.Exit(2)
	}
	if quotaQueues > 0 && (quotaFlavors < len(fixtures.GPUModels) || quotaWorkloads < 0) {
		fmt.Fprintf(os.Stderr, "scale: the quota phase needs --quota-flavors of at least %d (one per GPU model) and --quota-workloads of 0 or more\n", len(fixtures.GPUModels))
		os.Exit(2)
	}
	if pluginBinary != "" && fleetContexts > 0 {
		if err := fleetPhase(context.Background(), fleetContexts, fleetGPUNodes); err != nil {
			fmt.Fprintf(os.Stderr, "scale: fleet phase: %v\n", err)
			os.Exit(1)
		}
	}
	if fleetOnly {
		return
	}
	if usageWindow != 0 && (usageWindow < time.Hour || usageWindow%time.Minute != 0 || usageQuiet < time.Minute) {
		fmt.Fprintln(os.Stderr, "scale: --usage-window must be whole minutes, at least 1h (or 0: skip), and --usage-quiet at least 1m")
		os.Exit(2)
	}
	if err := run(*n, *rate, *churnFor, *operator, *probes); err != nil {
		fmt.Fprintf(os.Stderr, "scale: %v\n", err)
		os.Exit(1)
	}
}

var (
	hold         bool
	profileDir   string
	pluginBinary string
	pluginRuns   int
	operatorArgs string
	operatorEnv  string
	quietGap     time.Duration
	hostileFor   time.Duration
	hostileNodes int
	hostileRate  float64
	// inventoryCount is the number of inventories of the last phase.
	inventoryCount int
	flipFor        time.Duration
	republishFor   time.Duration
	relabelRate    float64
	relabelFor     time.Duration
	outageFor      time.Duration
	draShare       float64
	probeLog       *os.File // with --profile-dir: each probe's start and latency
)

// profilePhase fetches, with --profile-dir, a CPU profile of a phase that lasts d (ending a
// second before it) and, unless allocsFile is empty, what it allocated; wait on wg.
func profilePhase(wg *sync.WaitGroup, d time.Duration, cpuFile, allocsFile string) {
	seconds := max(1, int(d.Seconds())-1)
	wg.Go(func() { fetchProfile(pprofAddr, fmt.Sprintf("/debug/pprof/profile?seconds=%d", seconds), cpuFile) })
	if allocsFile != "" {
		wg.Go(func() { fetchProfile(pprofAddr, fmt.Sprintf("/debug/pprof/allocs?seconds=%d", seconds), allocsFile) })
	}
}

// profileStart saves a CPU profile of the next operator's first d, from the moment its
// pprof endpoint answers.
func profileStart(wg *sync.WaitGroup, d time.Duration, cpuFile string) {
	if profileDir == "" {
		return
	}
	wg.Go(func() {
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := http.Get("http://" + pprofAddr + "/debug/pprof/")
			if err == nil {
				resp.Body.Close()
				break
			}
			if time.Now().After(deadline) {
				fmt.Fprintf(os.Stderr, "profile of the start: %v\n", err)
				return
			}
			time.Sleep(10 * time.Millisecond) // the operator has not started listening yet
		}
		fetchProfile(pprofAddr, fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds())), cpuFile)
	})
}

// profileAPIServer saves a CPU profile of the API server's next d.
func profileAPIServer(wg *sync.WaitGroup, config *rest.Config, d time.Duration, file string) {
	if profileDir == "" {
		return
	}
	wg.Go(func() {
		client, err := rest.HTTPClientFor(config)
		if err != nil {
			fmt.Fprintf(os.Stderr, "profile of the API server: %v\n", err)
			return
		}
		resp, err := client.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", config.Host, int(d.Seconds())))
		if err != nil {
			fmt.Fprintf(os.Stderr, "profile of the API server: %v\n", err)
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		_ = os.WriteFile(filepath.Join(profileDir, file), data, 0o644)
	})
}

// fetchProfile saves a profile from the operator's pprof endpoint.
func fetchProfile(addr, path, file string) {
	if profileDir == "" {
		return
	}
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "profile %s: %v\n", path, err)
		return
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	_ = os.WriteFile(filepath.Join(profileDir, file), data, 0o644)
}

// pprofAddr is where the operator serves pprof with --profile-dir.
const pprofAddr = "127.0.0.1:16060"

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "**missed**"
}

// measurePlugins runs the plugin, once the status has settled after the churn.
func measurePlugins(ctx context.Context, env *testenv.Env, gpu, watcher versioned.Interface, n int) error {
	if err := settle(ctx, watcher, "cluster", 2*time.Second, 30*time.Second); err != nil {
		return err
	}
	kubeconfig := env.KubeconfigPath()
	show, err := measurePlugin(env.Dir, pluginBinary, kubeconfig, pluginRuns)
	if err != nil {
		return err
	}
	scanned, err := measurePlugin(env.Dir, pluginBinary, kubeconfig, pluginRuns, "scan")
	if err != nil {
		return err
	}
	agree, err := scanAgrees(ctx, gpu, pluginBinary, kubeconfig)
	if err != nil {
		return err
	}
	fmt.Printf("\n`kubectl gpuinv` on the same fleet (%d runs each, output to /dev/null; median wall time, largest max RSS)\n\n", pluginRuns)
	fmt.Println("| command | wall time | max RSS | target |")
	fmt.Println("|---|---|---|---|")
	fmt.Printf("| `kubectl gpuinv` (reads the GpuInventory) | %s | %s | ≤ 0.3 s, ≤ 40 MiB |\n", show.wall(), show.rss())
	fmt.Printf("| `kubectl gpuinv scan` (lists the %d nodes) | %s | %s | ≤ 2 s, ≤ 150 MiB |\n", n, scanned.wall(), scanned.rss())
	fmt.Printf("\n`kubectl gpuinv scan` equals the operator's status: %s\n", agree)
	return nil
}

// pluginRun is one run of the plugin: wall time and maximum resident set size.
type pluginRun struct {
	WallSeconds float64 `json:"wallSeconds"`
	CPUSeconds  float64 `json:"cpuSeconds"`
	MaxRSSKiB   int64   `json:"maxRSSKiB"`
	// SpawnerKiB is the peak RSS of the process that started the plugin: the plugin's figure
	// cannot be below it (see hack/scale/measure), so a figure equal to it is an upper bound.
	SpawnerKiB int64 `json:"spawnerKiB"`
	ExitCode   int   `json:"exitCode"`
}

type pluginResults []pluginRun

func (r pluginResults) wall() string {
	walls := make([]float64, len(r))
	for i := range r {
		walls[i] = r[i].WallSeconds
	}
	slices.Sort(walls)
	return fmt.Sprintf("%.2f s (%.2f–%.2f)", walls[len(walls)/2], walls[0], walls[len(walls)-1])
}

func (r pluginResults) rss() string {
	var most, spawner int64
	for _, run := range r {
		most, spawner = max(most, run.MaxRSSKiB), max(spawner, run.SpawnerKiB)
	}
	if most <= spawner {
		return fmt.Sprintf("≤ %.0f MiB", float64(most)/1024)
	}
	return fmt.Sprintf("%.0f MiB", float64(most)/1024)
}

// measurePlugin runs the plugin binary runs times with args, each through hack/scale/measure
// (built into dir): see there why the harness does not start the plugin itself.
func measurePlugin(dir, binary, kubeconfig string, runs int, args ...string) (pluginResults, error) {
	return measurePluginExits(dir, binary, kubeconfig, runs, []int{0}, args...)
}

// measurePluginExits is measurePlugin for a command whose answer may be an exit code other
// than 0 (free's 4: no node has room); any code not in answers is an error.
func measurePluginExits(dir, binary, kubeconfig string, runs int, answers []int, args ...string) (pluginResults, error) {
	measure := filepath.Join(dir, "measure")
	if _, err := os.Stat(measure); err != nil {
		build := exec.Command("go", "build", "-o", measure, "github.com/youngju-dev/gpu-inventory-operator/hack/scale/measure")
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build hack/scale/measure: %w: %s", err, out)
		}
	}
	var out pluginResults
	for range runs {
		cmd := exec.Command(measure, append([]string{binary, "--kubeconfig", kubeconfig}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		data, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w: %s", binary, strings.Join(args, " "), err, stderr.String())
		}
		var run pluginRun
		if err := json.Unmarshal(data, &run); err != nil {
			return nil, fmt.Errorf("measurement of %s %s: %w", binary, strings.Join(args, " "), err)
		}
		if !slices.Contains(answers, run.ExitCode) {
			return nil, fmt.Errorf("%s %s: exit status %d: %s", binary, strings.Join(args, " "), run.ExitCode, stderr.String())
		}
		out = append(out, run)
	}
	return out, nil
}

// scanAgrees compares the hash and totals of `kubectl gpuinv scan -o json` with the stored status.
func scanAgrees(ctx context.Context, gpu versioned.Interface, binary, kubeconfig string) (string, error) {
	data, err := exec.Command(binary, "--kubeconfig", kubeconfig, "scan", "-o", "json").Output()
	if err != nil {
		return "", fmt.Errorf("scan -o json: %w", err)
	}
	var scanned homelabv1.GpuInventory
	if err := json.Unmarshal(data, &scanned); err != nil {
		return "", fmt.Errorf("decode scan -o json: %w", err)
	}
	stored, err := gpu.HomelabV1().GpuInventories().Get(ctx, "cluster", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	a, b := stored.Status, scanned.Status
	if a.Allocation == nil {
		if a.InventoryHash == b.InventoryHash && a.TotalGpuNodes == b.TotalGpuNodes && a.ReadyGpus == b.ReadyGpus && a.ListedNodes == b.ListedNodes {
			return fmt.Sprintf("yes (same inventory hash, %d GPU nodes, %d ready)", a.TotalGpuNodes, a.ReadyGpuNodes), nil
		}
		return fmt.Sprintf("NO: operator %s %d/%d nodes, scan %s %d/%d nodes", a.InventoryHash, a.ReadyGpuNodes, a.TotalGpuNodes,
			b.InventoryHash, b.ReadyGpuNodes, b.TotalGpuNodes), nil
	}
	// The status carries allocation, which scan (Nodes only) does not compute, so the hashes
	// differ by design: compare what both compute.
	if x, y := countsOf(a), countsOf(b); x != y {
		return fmt.Sprintf("NO: operator %s, scan %s", x, y), nil
	}
	return fmt.Sprintf("yes (same counts and models, %s; the hashes differ by the status's allocation, which scan does not compute)", countsOf(a)), nil
}

// countsOf is the part of a status that the operator and scan both compute.
func countsOf(s homelabv1.GpuInventoryStatus) string {
	out := fmt.Sprintf("%d/%d GPU nodes ready, %d/%d GPUs ready, %d unhealthy, %d unlabeled, %d missing labels, models",
		s.ReadyGpuNodes, s.TotalGpuNodes, s.ReadyGpus, s.TotalGpus, s.UnhealthyGpus, s.UnlabeledGpus, s.LabelsMissingNodes)
	for _, m := range s.Models {
		out += fmt.Sprintf(" %s:%d/%d", m.Product, m.Nodes, m.Gpus)
	}
	return out
}

// settle waits until inventory name has not changed for quiet (at most timeout).
func settle(ctx context.Context, gpu versioned.Interface, name string, quiet, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	gi, err := gpu.HomelabV1().GpuInventories().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	w, err := gpu.HomelabV1().GpuInventories().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: gi.ResourceVersion})
	if err != nil {
		return err
	}
	defer w.Stop()
	timer := time.NewTimer(quiet)
	for {
		select {
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("inventory %s did not settle within %s", name, timeout)
		case _, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("watch ended before the inventory settled")
			}
			timer.Reset(quiet)
		}
	}
}

// probe changes a marker node's product to a new value count times and measures each time
// until the status's model summary shows it, on one watch opened before the first change.
func probe(ctx context.Context, kube kubernetes.Interface, gpu versioned.Interface, count int, phase string) ([]time.Duration, error) {
	gi, err := gpu.HomelabV1().GpuInventories().Get(ctx, "cluster", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	w, err := gpu.HomelabV1().GpuInventories().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=cluster", ResourceVersion: gi.ResourceVersion})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	var out []time.Duration
	marker := fixtures.FleetNodeName(0)
	for k := range count {
		if ctx.Err() != nil {
			break
		}
		if phase == "quiet" {
			// A quiet cluster: no change for longer than the operator's sync intervals
			// (--min-sync-interval, and four times that for the ConfigMap); the previous
			// probe's change is the last one.
			time.Sleep(quietGap)
		}
		product := fmt.Sprintf("PROBE-%s-%d-%d", phase, k, time.Now().UnixNano())
		patch := fmt.Sprintf(`{"metadata":{"labels":{"nvidia.com/gpu.product":%q}}}`, product)
		t0 := time.Now()
		if _, err := kube.CoreV1().Nodes().Patch(ctx, marker, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return nil, err
		}
		latency, err := seen(ctx, w, t0, product)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return nil, fmt.Errorf("probe %d: %w", k, err)
		}
		out = append(out, latency)
		if probeLog != nil {
			// To set against the operator's log of the same run (its sync durations at -v=4).
			fmt.Fprintf(probeLog, "%s probe %d at %s: %s\n", phase, k, t0.UTC().Format("15:04:05.000000"), latency.Round(time.Millisecond))
		}
	}
	return out, nil
}

// dryRunApplies measures the API server's part of a status write: count server-side applies
// of the inventory's current status as the operator sends them (its field manager,
// fieldValidation=Ignore, an answer of metadata only) with dryRun=All, which does everything
// a write does (decoding, merging, validation, encoding the answer) except storing it. One a
// second, as in the quiet phase.
func dryRunApplies(ctx context.Context, gpu versioned.Interface, count int) ([]time.Duration, error) {
	gi, err := gpu.HomelabV1().GpuInventories().Get(ctx, "cluster", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	writer := statuswriter.New(gpu.HomelabV1().RESTClient()).DryRun()
	var out []time.Duration
	for range count {
		time.Sleep(time.Second)
		t0 := time.Now()
		if _, err := writer.ApplyStatus(ctx, gi.Name, gi.Status); err != nil {
			return nil, fmt.Errorf("dry-run apply: %w", err)
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}

// seen waits on w for the status whose models show product and returns the time since t0.
func seen(ctx context.Context, w watch.Interface, t0 time.Time, product string) (time.Duration, error) {
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-timeout.C:
			return 0, errors.New("the status did not show the change within 30s")
		case ev, ok := <-w.ResultChan():
			if !ok {
				return 0, errors.New("the watch ended")
			}
			gi, isInventory := ev.Object.(*homelabv1.GpuInventory)
			if isInventory && slices.ContainsFunc(gi.Status.Models, func(m homelabv1.GpuModel) bool { return m.Product == product }) {
				return time.Since(t0), nil
			}
		}
	}
}

// watchInventory follows inventory name until done accepts a state of it (timeout at most),
// waiting for the CRD, which the operator installs first.
func watchInventory(ctx context.Context, gpu versioned.Interface, name string, timeout time.Duration, done func(*homelabv1.GpuInventory) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := follow.Inventory(ctx, gpu.HomelabV1().GpuInventories(), name, func(gi *homelabv1.GpuInventory, deleted bool) (bool, error) {
			return !deleted && done(gi), nil
		})
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("not reached within %s", timeout)
		case !apierrors.IsNotFound(err):
			return err
		}
		time.Sleep(100 * time.Millisecond) // the CRD is not installed yet
	}
}

// writeCounter counts modifications of the GpuInventory.
type writeCounter struct {
	mu sync.Mutex
	n  int
}

func (w *writeCounter) count() int { w.mu.Lock(); defer w.mu.Unlock(); return w.n }

// run counts the states of the inventory after the one at resourceVersion rv.
func (w *writeCounter) run(ctx context.Context, gpu versioned.Interface, rv string) {
	_ = watchInventory(ctx, gpu, "cluster", 24*time.Hour, func(gi *homelabv1.GpuInventory) bool {
		if gi.ResourceVersion != rv {
			rv = gi.ResourceVersion
			w.mu.Lock()
			w.n++
			w.mu.Unlock()
		}
		return false
	})
}

// readStatus returns a KiB figure from /proc/PID/status.
func readStatus(pid int, field string) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			v, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return v
		}
	}
	return 0
}

// cpuTicks returns utime+stime of a process, in clock ticks.
// settleCPU waits until the process used at most one clock tick in a second, or for at most
// limit.
func settleCPU(pid int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	last := cpuTicks(pid)
	for time.Now().Before(deadline) {
		time.Sleep(time.Second)
		now := cpuTicks(pid)
		if now-last <= 1 {
			return
		}
		last = now
	}
}

func cpuTicks(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return utime + stime
}

func median(d []time.Duration) string {
	if len(d) == 0 {
		return "n/a"
	}
	slices.Sort(d)
	return d[len(d)/2].Round(time.Millisecond).String()
}

func p99(d []time.Duration) string {
	if len(d) == 0 {
		return "n/a"
	}
	slices.Sort(d)
	i := (len(d)*99 + 99) / 100
	if i > len(d) {
		i = len(d)
	}
	return d[i-1].Round(time.Millisecond).String()
}
