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

package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The DCGM exporter's series that the operator reads, with the HELP texts the exporter writes
// (its default-counters.csv).
const (
	DCGMGPUUtil        = "DCGM_FI_DEV_GPU_UTIL"          // gauge, percent 0-100
	DCGMGrEngineActive = "DCGM_FI_PROF_GR_ENGINE_ACTIVE" // gauge, ratio 0-1 (profiling)

	// DCGMJob is the scrape job StartPrometheus gives a DCGM exporter double by default.
	DCGMJob = "dcgm-exporter"
	// DefaultDCGMDriverVersion is DCGM_FI_DRIVER_VERSION when a DCGMGPU sets none.
	DefaultDCGMDriverVersion = "580.105.08"
)

var dcgmHelp = map[string]string{
	DCGMGPUUtil:        "GPU utilization (in %).",
	DCGMGrEngineActive: "Ratio of time the graphics engine is active.",
}

// DCGMGPU is one device as DCGM exporter reports it: a whole GPU, or a MIG device (MIGProfile
// set), whose series carry the parent GPU's Index and UUID.
type DCGMGPU struct {
	Node   string // Hostname: the node's name, as the GPU Operator sets NODE_NAME
	Index  int    // gpu: the (parent) GPU's index on the node; device is nvidia<Index>
	UUID   string // UUID: the (parent) GPU's GPU-<uuid>
	Model  string // modelName, for example "NVIDIA H100 80GB HBM3"
	Driver string // DCGM_FI_DRIVER_VERSION; DefaultDCGMDriverVersion when empty
	// MIGProfile (GPU_I_PROFILE, for example "1g.10gb") and MIGInstance (GPU_I_ID) make this
	// a MIG device. DCGM reports no DCGM_FI_DEV_GPU_UTIL for MIG devices, only profiling.
	MIGProfile  string
	MIGInstance int
	// Namespace, Pod and Container are the exporter's Kubernetes pod mapping; empty when no
	// pod holds the device (or the mapping is off, as for DRA devices by default).
	Namespace, Pod, Container string
	// DRA is the claim a DRA-allocated device is reported with when the exporter runs with
	// --kubernetes-enable-dra; nil for devices of the device plugin.
	DRA *DCGMClaim
	// Util is the utilisation as a 0-1 fraction: DCGM_FI_PROF_GR_ENGINE_ACTIVE as is,
	// DCGM_FI_DEV_GPU_UTIL as a whole percent.
	Util float64
}

// DCGMClaim is the ResourceClaim allocation DCGM exporter names a DRA device's series by.
type DCGMClaim struct {
	Namespace, Name string // dra_claim_namespace, dra_claim_name
	Pool, Device    string // dra_pool_name, dra_device_name (the driver is gpu.nvidia.com)
}

// validate says what is wrong with g, if anything.
func (g DCGMGPU) validate() error {
	var problems []string
	if g.Node == "" {
		problems = append(problems, "no Node (Hostname)")
	}
	if !strings.HasPrefix(g.UUID, "GPU-") {
		problems = append(problems, fmt.Sprintf("UUID %q does not start with GPU-", g.UUID))
	}
	if g.Model == "" {
		problems = append(problems, "no Model (modelName)")
	}
	if g.Index < 0 || g.MIGInstance < 0 {
		problems = append(problems, "a negative index")
	}
	if math.IsNaN(g.Util) || g.Util < 0 || g.Util > 1 {
		problems = append(problems, fmt.Sprintf("utilisation %v outside 0-1", g.Util))
	}
	if (g.Pod == "") != (g.Namespace == "") {
		problems = append(problems, "a pod without a namespace or a namespace without a pod")
	}
	if g.DRA != nil && g.Pod == "" {
		problems = append(problems, "a DRA claim without the pod it is mapped to")
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("DCGM device %s/%s: %s", g.Node, g.UUID, strings.Join(problems, ", "))
}

// key identifies the device: a MIG device by its parent and GPU instance.
func (g DCGMGPU) key() string {
	if g.MIGProfile == "" {
		return g.UUID
	}
	return g.UUID + "/" + strconv.Itoa(g.MIGInstance)
}

// labels is the label set DCGM exporter writes, in its order: gpu, UUID, pci_bus_id, device,
// modelName, the MIG labels, Hostname, then its labels and its attributes (the pod mapping),
// each group sorted by name as its template ranges over maps.
func (g DCGMGPU) labels() string {
	driver := g.Driver
	if driver == "" {
		driver = DefaultDCGMDriverVersion
	}
	var b strings.Builder
	fmt.Fprintf(&b, `gpu="%d",UUID=%s,pci_bus_id="00000000:%02X:00.0",device="nvidia%d",modelName=%s`,
		g.Index, quote(g.UUID), 0x18+g.Index*0x10, g.Index, quote(g.Model))
	if g.MIGProfile != "" {
		fmt.Fprintf(&b, `,GPU_I_PROFILE=%s,GPU_I_ID="%d"`, quote(g.MIGProfile), g.MIGInstance)
	}
	fmt.Fprintf(&b, `,Hostname=%s,DCGM_FI_DRIVER_VERSION=%s`, quote(g.Node), quote(driver))
	if g.Pod != "" {
		fmt.Fprintf(&b, `,container=%s`, quote(g.Container))
		if c := g.DRA; c != nil {
			fmt.Fprintf(&b, `,dra_claim_name=%s,dra_claim_namespace=%s,dra_device_name=%s,dra_driver_name="gpu.nvidia.com",dra_pool_name=%s`,
				quote(c.Name), quote(c.Namespace), quote(c.Device), quote(c.Pool))
		}
		fmt.Fprintf(&b, `,namespace=%s,pod=%s`, quote(g.Namespace), quote(g.Pod))
	}
	return b.String()
}

// quote writes a label value as the exposition formats escape it.
func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// families returns the metric names g is reported under, in the exporter's order.
func (g DCGMGPU) families(profiling bool) []string {
	var out []string
	if g.MIGProfile == "" {
		out = append(out, DCGMGPUUtil)
	}
	if profiling {
		out = append(out, DCGMGrEngineActive)
	}
	return out
}

// value formats g's utilisation as the exporter formats the metric: GPU_UTIL an integer
// percent, profiling ratios with six decimals.
func (g DCGMGPU) value(metric string) string {
	if metric == DCGMGPUUtil {
		return strconv.Itoa(int(math.Round(g.Util * 100)))
	}
	return strconv.FormatFloat(g.Util, 'f', 6, 64)
}

// DCGMExporter is an HTTP server that answers /metrics as NVIDIA's DCGM exporter does, for
// devices a test sets and changes while it runs.
type DCGMExporter struct {
	mu        sync.Mutex
	gpus      []DCGMGPU
	profiling bool
	scrapes   int
	scraped   chan struct{} // closed and replaced at every scrape
	listener  net.Listener
	server    *http.Server
}

// StartDCGMExporter serves gpus on a free loopback port, with profiling metrics
// (DCGM_FI_PROF_GR_ENGINE_ACTIVE) as on data-centre GPUs; Close stops it.
func StartDCGMExporter(gpus ...DCGMGPU) (*DCGMExporter, error) {
	x := &DCGMExporter{profiling: true, scraped: make(chan struct{})}
	if err := x.SetGPUs(gpus...); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("DCGM exporter: listen: %w", err)
	}
	x.listener = l
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", x.serveMetrics)
	x.server = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = x.server.Serve(l) }()
	return x, nil
}

func (x *DCGMExporter) serveMetrics(w http.ResponseWriter, _ *http.Request) {
	body := x.Exposition()
	// Counted before the answer is written: whoever reads the answer finds it counted.
	x.mu.Lock()
	x.scrapes++
	close(x.scraped)
	x.scraped = make(chan struct{})
	x.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write(body)
}

// Addr is the exporter's host:port (Prometheus' instance label for it).
func (x *DCGMExporter) Addr() string { return x.listener.Addr().String() }

// SetGPUs replaces the devices reported; a device that fails validation changes nothing.
func (x *DCGMExporter) SetGPUs(gpus ...DCGMGPU) error {
	seen := map[string]bool{}
	for _, g := range gpus {
		if err := g.validate(); err != nil {
			return err
		}
		if seen[g.key()] {
			return fmt.Errorf("DCGM device %s is set twice", g.key())
		}
		seen[g.key()] = true
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.gpus = slices.Clone(gpus)
	return nil
}

// GPUs returns the devices reported now.
func (x *DCGMExporter) GPUs() []DCGMGPU {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.gpus)
}

// Update changes the device with uuid (and, for a MIG device, GPU instance migInstance;
// ignored for whole GPUs) through change.
func (x *DCGMExporter) Update(uuid string, migInstance int, change func(*DCGMGPU)) error {
	gpus := x.GPUs()
	for i := range gpus {
		if gpus[i].UUID == uuid && (gpus[i].MIGProfile == "" || gpus[i].MIGInstance == migInstance) {
			change(&gpus[i])
			return x.SetGPUs(gpus...)
		}
	}
	return fmt.Errorf("DCGM exporter reports no device %s (GPU instance %d)", uuid, migInstance)
}

// SetProfiling turns the profiling metrics on or off: off, the exporter reports only
// DCGM_FI_DEV_GPU_UTIL, as on GPUs without DCP support.
func (x *DCGMExporter) SetProfiling(on bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.profiling = on
}

// Scrapes counts the answers to /metrics so far.
func (x *DCGMExporter) Scrapes() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.scrapes
}

// NextScrape returns a channel closed when /metrics is next answered: once it is closed, the
// reader has seen every change made before the call.
func (x *DCGMExporter) NextScrape() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.scraped
}

// WaitScrape returns once /metrics has been answered after the call, or when ctx ends.
func (x *DCGMExporter) WaitScrape(ctx context.Context) error {
	select {
	case <-x.NextScrape():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("DCGM exporter on %s not scraped: %w", x.Addr(), ctx.Err())
	}
}

// Exposition is what /metrics answers now: the text format, one HELP and TYPE per metric
// followed by its series, as DCGM exporter's template writes it.
func (x *DCGMExporter) Exposition() []byte {
	x.mu.Lock()
	gpus, profiling := slices.Clone(x.gpus), x.profiling
	x.mu.Unlock()
	var b bytes.Buffer
	for _, metric := range []string{DCGMGPUUtil, DCGMGrEngineActive} {
		var lines []string
		for _, g := range gpus {
			if slices.Contains(g.families(profiling), metric) {
				lines = append(lines, fmt.Sprintf("%s{%s} %s\n", metric, g.labels(), g.value(metric)))
			}
		}
		if len(lines) == 0 {
			continue
		}
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", metric, dcgmHelp[metric], metric)
		b.WriteString(strings.Join(lines, ""))
	}
	return b.Bytes()
}

// Close stops the server.
func (x *DCGMExporter) Close() error {
	return x.server.Close()
}

// DCGMHistory says how WriteDCGMHistory writes the past of a set of devices.
type DCGMHistory struct {
	// From and To bound the samples (To included when it falls on a step); Step is their
	// spacing (at least a second: OpenMetrics timestamps are written in whole seconds).
	From, To time.Time
	Step     time.Duration
	// Job and Instance are the target labels Prometheus adds when it scrapes the exporter, so
	// that the history and the live series are the same series.
	Job, Instance string
	// Profiling writes DCGM_FI_PROF_GR_ENGINE_ACTIVE besides DCGM_FI_DEV_GPU_UTIL.
	Profiling bool
	// At returns a device's state at a time (its holder and utilisation then), and false
	// when the device reported nothing then. Nil: every device as given, all the time.
	At func(at time.Time, g DCGMGPU) (DCGMGPU, bool)
}

// WriteHistory writes the exporter's devices' past as WriteDCGMHistory does, with the
// exporter's address as the instance label unless h sets one, and job DCGMJob unless h sets
// one.
func (x *DCGMExporter) WriteHistory(w io.Writer, h DCGMHistory) error {
	if h.Instance == "" {
		h.Instance = x.Addr()
	}
	if h.Job == "" {
		h.Job = DCGMJob
	}
	return WriteDCGMHistory(w, x.GPUs(), h)
}

// WriteDCGMHistory writes the series of gpus from h.From to h.To as OpenMetrics text with
// timestamps, for `promtool tsdb create-blocks-from openmetrics` (PrometheusOptions.History):
// one family per metric, each series' samples together and in time order, ending # EOF.
func WriteDCGMHistory(w io.Writer, gpus []DCGMGPU, h DCGMHistory) error {
	if h.Step < time.Second {
		return fmt.Errorf("DCGM history: step %s is under a second", h.Step)
	}
	if !h.From.Before(h.To) {
		return fmt.Errorf("DCGM history: from %s is not before to %s", h.From, h.To)
	}
	if h.Job == "" || h.Instance == "" {
		return errors.New("DCGM history: job and instance labels are needed to match the scraped series")
	}
	type series struct{ metric, labels string }
	samples := map[series][]string{}
	var order []series
	for at := h.From.Truncate(time.Second); !at.After(h.To); at = at.Add(h.Step) {
		for _, g := range gpus {
			if h.At != nil {
				var reported bool
				if g, reported = h.At(at, g); !reported {
					continue
				}
			}
			if err := g.validate(); err != nil {
				return fmt.Errorf("DCGM history at %s: %w", at.UTC().Format(time.RFC3339), err)
			}
			labels := g.labels() + ",instance=" + quote(h.Instance) + ",job=" + quote(h.Job)
			for _, metric := range g.families(h.Profiling) {
				s := series{metric, labels}
				if _, ok := samples[s]; !ok {
					order = append(order, s)
				}
				samples[s] = append(samples[s], g.value(metric)+" "+strconv.FormatInt(at.Unix(), 10))
			}
		}
	}
	bw := &errWriter{w: w}
	for _, metric := range []string{DCGMGPUUtil, DCGMGrEngineActive} {
		header := false
		for _, s := range order {
			if s.metric != metric {
				continue
			}
			if !header {
				bw.printf("# HELP %s %s\n# TYPE %s gauge\n", metric, dcgmHelp[metric], metric)
				header = true
			}
			for _, sample := range samples[s] {
				bw.printf("%s{%s} %s\n", metric, s.labels, sample)
			}
		}
	}
	bw.printf("# EOF\n")
	return bw.err
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
