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
	"bufio"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/youngju-dev/gpu-inventory-operator/hack/scale/proc"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/usage"
)

const (
	usageScrape    = time.Minute      // the history's step and Prometheus' scrape interval
	usageInterval  = time.Minute      // the operator's default --usage-interval, the least it allows
	usageIdleAfter = 30 * time.Minute // below the window: the idle holders count in idleGpus from the first reading
	usageBaseline  = time.Minute      // the RSS window without usage
	usageSettle    = 2                // readings after the first before the quiet period
	usageRuns      = 3                // the harness's own readings and queries
	usageReadings  = `gpu_inventory_usage_reading_duration_seconds_count{result="ok"}`
	usageIdle      = 0.01 // the utilisation of an idle pod's GPUs
	usageBusy      = 0.62 // and of a busy one's
	usageQueryPath = "/api/v1/query"
)

// usageResult is what the usage phase measured.
type usageResult struct {
	pods, devices, idleDevices, series int
	historyBytes                       int64
	historyWrite, backfill, promStart  time.Duration
	promtoolKiB                        int64
	before, after                      proc.Window   // steady RSS without usage, and with it over the quiet period
	heapBefore, heapAfter              float64       // MiB: go_memstats_heap_inuse_bytes at the end of each window
	firstUsage, wholeWindow            time.Duration // restart to the first status with usage, and to the whole window's
	quietWrites                        int
	quietRecords                       writeCounts
	readings                           float64            // the operator's readings in the quiet period
	queriesPerReading                  float64            // Prometheus' instant queries per reading, quiet period
	promPerReading                     time.Duration      // Prometheus' time answering one reading's queries
	cpuPerReading                      float64            // the operator's CPU seconds per reading, quiet period
	chunks                             []time.Duration    // a new usage.Reader's readings of the window's past
	reader                             []time.Duration    // its readings after, a minute apart
	queries                            [5][]time.Duration // Now, then Held, Idle, FirstSeen, LastBusy over a chunk, each answered and read whole
	answerBytes                        int
	promRSS                            float64 // MiB
	status                             *homelabv1.GpuUsage
	unknown                            string // the UsageUnknown condition, when True
}

// usagePhase runs after the allocation phase, on its pods: a DCGM exporter double reports a
// device per GPU unit each running GPU pod holds (a third of the pods idle, the rest busy,
// unchanging), a real Prometheus scrapes it with --usage-window of its history backfilled
// by promtool, and the operator is restarted with --prometheus-url. It measures the steady
// RSS without and with usage, the status writes of a quiet period of readings, the time of a
// reading and Prometheus' answers.
func usagePhase(ctx context.Context, h *harness) (result, error) {
	res := &usageResult{}
	x, err := startUsageExporter(ctx, h, res)
	if err != nil {
		return nil, err
	}
	defer x.Close()
	dir := filepath.Join(h.env.Dir, "prometheus")
	defer os.RemoveAll(dir)
	if err := backfillUsage(ctx, dir, x, h.o.usageWindow, res); err != nil {
		return nil, err
	}
	start := time.Now()
	prom, err := testenv.StartPrometheus(ctx, testenv.PrometheusOptions{Dir: dir, Targets: []testenv.ScrapeTarget{{Addr: x.Addr()}},
		ScrapeInterval: usageScrape, StartTimeout: 5 * time.Minute})
	if err != nil {
		return nil, err
	}
	defer prom.Stop()
	res.promStart = time.Since(start)
	fmt.Fprintf(os.Stderr, "usage: %d devices of %d pods, %s of history in %s, backfilled in %s, Prometheus up in %s\n",
		res.devices, res.pods, h.o.usageWindow, res.historyWrite.Round(time.Second), res.backfill.Round(time.Second), res.promStart.Round(time.Second))

	if err := measureUsage(ctx, h, prom, res); err != nil {
		return nil, err
	}
	if err := measureUsageReads(ctx, prom, h.o.usageWindow, res); err != nil {
		return nil, err
	}
	return res, nil
}

// startUsageExporter starts the DCGM exporter double with the devices of the running GPU
// pods.
func startUsageExporter(ctx context.Context, h *harness, res *usageResult) (*testenv.DCGMExporter, error) {
	gpus, pods, err := usageDevices(ctx, h.kube, h.fleet)
	if err != nil {
		return nil, err
	}
	if len(gpus) == 0 {
		return nil, fmt.Errorf("no running pod holds GPUs of the device plugin: the phase needs --pods and --gpu-pods")
	}
	res.pods, res.devices = pods, len(gpus)
	for _, g := range gpus {
		if g.Util == usageIdle {
			res.idleDevices++
		}
	}
	return testenv.StartDCGMExporter(gpus...)
}

// usageDevices returns a DCGM device for each GPU unit (a whole GPU, MIG device or
// time-sliced replica) that a running GPU pod of the allocation phase holds, and the pods.
// A time-sliced replica is a device of its own, with a UUID of its own: the double reports
// a device once.
func usageDevices(ctx context.Context, kube kubernetes.Interface, fleet []fleetNode) ([]testenv.DCGMGPU, int, error) {
	byName := map[string]fleetNode{}
	for _, n := range fleet {
		byName[n.name] = n
	}
	next := map[string]int{} // a node's units handed out
	var out []testenv.DCGMGPU
	pods := 0
	for k := range gpuNamespaces {
		ns := fmt.Sprintf("ml-%02d", k)
		list, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, 0, fmt.Errorf("list the pods of %s: %w", ns, err)
		}
		for i := range list.Items {
			pod := &list.Items[i]
			n, onGPUNode := byName[pod.Spec.NodeName]
			resource, count := heldUnits(pod)
			if !onGPUNode || count == 0 || pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
				continue
			}
			pods++
			util := usageBusy
			if idlePod(pod) {
				util = usageIdle
			}
			for range count {
				out = append(out, dcgmDevice(n, next[n.name], resource, pod, util))
				next[n.name]++
			}
		}
	}
	return out, pods, nil
}

// heldUnits is the GPU resource of the device plugin a pod's containers ask for, and how many.
func heldUnits(pod *corev1.Pod) (string, int64) {
	for _, c := range pod.Spec.Containers {
		for name, q := range c.Resources.Limits {
			if name == resourceGPU || strings.HasPrefix(string(name), "nvidia.com/mig-") {
				return string(name), q.Value()
			}
		}
	}
	return "", 0
}

// idlePod makes one GPU pod in three idle, by its name.
func idlePod(pod *corev1.Pod) bool {
	h := fnv.New32a()
	_, _ = h.Write([]byte(pod.Namespace + "/" + pod.Name))
	return h.Sum32()%3 == 0
}

// dcgmDevice is unit i of node n as DCGM exporter reports it: a MIG device (a mixed-strategy
// resource, or a single-strategy MIG product) with its parent GPU's index and UUID, seven to
// a GPU; a whole GPU or replica its own.
func dcgmDevice(n fleetNode, i int, resource string, pod *corev1.Pod, util float64) testenv.DCGMGPU {
	base := baseProduct(n.product)
	profile, _ := strings.CutPrefix(resource, "nvidia.com/mig-")
	if p, found := strings.CutPrefix(n.product, base+"-MIG-"); found {
		profile = p
	}
	g := testenv.DCGMGPU{Node: n.name, Index: i, Model: strings.ReplaceAll(base, "-", " "),
		Namespace: pod.Namespace, Pod: pod.Name, Container: pod.Spec.Containers[0].Name, Util: util}
	if profile != "" {
		g.Index, g.MIGProfile, g.MIGInstance = i/7, profile, i
	}
	g.UUID = "GPU-" + uuidOf(n.name+"/"+strconv.Itoa(g.Index))
	return g
}

// backfillUsage writes the exporter's devices' past (window up to now, a sample per
// usageScrape, both series of every whole GPU as on data-centre GPUs) into a file and
// promtool turns it into TSDB blocks in dir/data.
func backfillUsage(ctx context.Context, dir string, x *testenv.DCGMExporter, window time.Duration, res *usageResult) error {
	binDir := os.Getenv(testenv.BinDirEnv)
	if binDir == "" {
		return fmt.Errorf("no promtool: set %s (`make bench` does)", testenv.BinDirEnv)
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return err
	}
	file := filepath.Join(dir, "history.om")
	defer os.Remove(file)
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	start := time.Now()
	to := start.Truncate(usageScrape)
	w := bufio.NewWriterSize(f, 1<<20)
	err = x.WriteHistory(w, testenv.DCGMHistory{From: to.Add(-window), To: to, Step: usageScrape, Profiling: true})
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write the DCGM history: %w", err)
	}
	res.historyWrite = time.Since(start)
	if st, err := os.Stat(file); err == nil {
		res.historyBytes = st.Size()
	}
	start = time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "promtool"), "tsdb", "create-blocks-from", "openmetrics", "--quiet", file, filepath.Join(dir, "data"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("backfill the history with promtool: %w: %s", err, out)
	}
	res.backfill = time.Since(start)
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.promtoolKiB = ru.Maxrss
	}
	return nil
}

// measureUsage restarts the operator without usage and measures its steady RSS, then with
// --prometheus-url: its first status with usage, and over a quiet period of readings its
// RSS, status and record writes, readings and CPU.
func measureUsage(ctx context.Context, h *harness, prom *testenv.Prometheus, res *usageResult) error {
	if _, _, err := restartOperator(ctx, h, "usage phase, without Prometheus"); err != nil {
		return err
	}
	h.op.pid.SettleCPU(15 * time.Second)
	res.before = h.op.pid.Window(ctx, usageBaseline)
	res.heapBefore = h.op.metric("go_memstats_heap_inuse_bytes") / (1 << 20)
	h.prof.heap("usage-before-heap.pprof")

	args := h.launcher.args
	defer func() { h.launcher.args = args }()
	h.launcher.args = append(slices.Clone(args), "--prometheus-url="+prom.URL, "--idle-window="+h.o.usageWindow.String(),
		"--idle-after="+usageIdleAfter.String())
	start := time.Now()
	var err error
	res.firstUsage, _, err = restartOperatorUntil(ctx, h, "usage phase, with Prometheus", func(gi *homelabv1.GpuInventory) bool {
		return gi.Status.Usage != nil && gi.Status.Usage.HeldGpus > 0
	})
	if err != nil {
		return fmt.Errorf("first status with usage: %w", err)
	}
	if err := waitWholeWindow(ctx, h, 15*time.Minute); err != nil {
		return err
	}
	res.wholeWindow = time.Since(start)
	// The readings after the backfill, so that the quiet period is the settled operator's.
	if err := waitReadings(ctx, h.op, h.op.metric(usageReadings)+usageSettle, usageInterval*(usageSettle+2)); err != nil {
		return err
	}
	return usageQuietPeriod(ctx, h, prom, res)
}

// waitWholeWindow polls the inventory until its usage counts the whole window: the
// UsageUnknown condition no longer says its past is being read.
func waitWholeWindow(ctx context.Context, h *harness, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); ; {
		gi, err := h.gpu.HomelabV1().GpuInventories().Get(ctx, homelabv1.DefaultInventoryName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(gi.Status.Conditions, homelabv1.ConditionUsageUnknown)
		if c != nil && c.Status == metav1.ConditionFalse && !strings.Contains(c.Message, "still being read") {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the usage did not count the whole window within %s: %+v", timeout, c)
		}
		time.Sleep(time.Second) // the status changes once, at the end of the backfill
	}
}

// waitReadings polls the operator's metrics until it has read usage want times, for at
// most timeout.
func waitReadings(ctx context.Context, op *operatorProc, want float64, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); ; {
		count := op.metric(usageReadings)
		if count >= want {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%.0f readings of Prometheus within %s, want %.0f: does the operator read usage once per --usage-interval?", count, timeout, want)
		}
		time.Sleep(time.Second) // the operator announces nothing
	}
}

// usageQuietPeriod counts the status and record writes, the operator's readings, CPU and
// RSS over --usage-quiet, nothing changing.
func usageQuietPeriod(ctx context.Context, h *harness, prom *testenv.Prometheus, res *usageResult) error {
	quiet, stop := context.WithCancel(ctx)
	defer stop()
	writes, err := countStatusWrites(quiet, h)
	if err != nil {
		return err
	}
	count0, seconds0, err := promQueries(prom)
	if err != nil {
		return err
	}
	readings0 := h.op.metric(usageReadings)
	ticks0 := h.op.pid.CPUTicks()
	res.quietRecords, err = countWrites(h.op, func() error {
		res.after = h.op.pid.Window(ctx, h.o.usageQuiet) // a quiet period: no change is expected to watch for
		return nil
	})
	if err != nil {
		return err
	}
	res.quietWrites = writes.count()
	count, seconds, err := promQueries(prom)
	if err != nil {
		return err
	}
	res.readings = h.op.metric(usageReadings) - readings0
	if res.readings > 0 {
		res.queriesPerReading = (count - count0) / res.readings
		res.promPerReading = time.Duration((seconds - seconds0) / res.readings * float64(time.Second))
		res.cpuPerReading = proc.Seconds(h.op.pid.CPUTicks()-ticks0) / res.readings
	}
	res.heapAfter = h.op.metric("go_memstats_heap_inuse_bytes") / (1 << 20)
	h.prof.heap("usage-heap.pprof")
	gi, err := h.gpu.HomelabV1().GpuInventories().Get(ctx, homelabv1.DefaultInventoryName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	res.status = gi.Status.Usage
	for _, c := range gi.Status.Conditions {
		if c.Type == homelabv1.ConditionUsageUnknown && c.Status == metav1.ConditionTrue {
			res.unknown = c.Reason + ": " + c.Message
		}
	}
	return nil
}

// measureUsageReads times, after the quiet period, a new usage.Reader in the harness's
// process (the operator's reader after a restart): its readings of the window's past, chunk
// by chunk, then usageRuns readings a minute apart; and each query of a chunk's reading
// answered and read whole.
func measureUsageReads(ctx context.Context, prom *testenv.Prometheus, window time.Duration, res *usageResult) error {
	settings := usage.Settings{Window: window, IdleBelow: 0.05, IdleAfter: usageIdleAfter}
	reader, err := usage.NewReader(usage.ReaderConfig{URL: prom.URL, Timeout: time.Minute}, settings)
	if err != nil {
		return err
	}
	at := time.Now().Truncate(usage.Step).Add(-usageRuns * usage.Step) // the later readings' steps are scraped
	read := func(took *[]time.Duration) error {
		start := time.Now()
		devices, problem := reader.Read(ctx, at)
		if problem.Reason != "" {
			return fmt.Errorf("the reader: %s: %s", problem.Reason, problem.Message)
		}
		*took = append(*took, time.Since(start))
		res.series = len(devices)
		return nil
	}
	for len(res.chunks) <= int(window/usage.Chunk)+1 && reader.Covered() < window {
		if err := read(&res.chunks); err != nil {
			return err
		}
	}
	for range usageRuns {
		at = at.Add(usage.Step)
		if err := read(&res.reader); err != nil {
			return err
		}
	}
	q := usage.QueriesFor(settings, usage.Chunk)
	for range usageRuns {
		for k, query := range []string{q.Now, q.Held, q.Idle, q.FirstSeen, q.LastBusy} {
			took, size, err := timeQuery(ctx, prom.URL, query, at)
			if err != nil {
				return err
			}
			res.queries[k] = append(res.queries[k], took)
			res.answerBytes = max(res.answerBytes, size)
		}
	}
	gauges, err := scrape(prom.URL + "/metrics")
	if err != nil {
		return fmt.Errorf("read Prometheus' metrics: %w", err)
	}
	res.promRSS = gauges["process_resident_memory_bytes"] / (1 << 20)
	return nil
}

// timeQuery asks Prometheus one instant query at at and returns the time until the answer
// was read whole, and its size.
func timeQuery(ctx context.Context, base, query string, at time.Time) (time.Duration, int, error) {
	u := base + usageQueryPath + "?" + url.Values{"query": {query}, "time": {strconv.FormatInt(at.Unix(), 10)}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("query Prometheus: %w", err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	took := time.Since(start)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("query Prometheus: %s %v", resp.Status, err)
	}
	return took, int(n), nil
}

// promQueries reads from Prometheus' own metrics the instant queries it has answered and
// the seconds it took.
func promQueries(prom *testenv.Prometheus) (count, seconds float64, err error) {
	gauges, err := scrape(prom.URL + "/metrics")
	if err != nil {
		return 0, 0, fmt.Errorf("read Prometheus' metrics: %w", err)
	}
	handler := `{handler="` + usageQueryPath + `"}`
	return gauges["prometheus_http_request_duration_seconds_count"+handler], gauges["prometheus_http_request_duration_seconds_sum"+handler], nil
}
