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
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/youngju-dev/gpu-inventory-operator/hack/scale/proc"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
)

// launcher starts the operator as a separate process, so that its RSS and CPU are its own,
// with the same flags each time and its log appended to one file.
type launcher struct {
	binary string
	args   []string
	env    []string
	log    *os.File
}

// operatorProc is one running operator.
type operatorProc struct {
	cmd     *exec.Cmd
	pid     proc.Process
	metrics string // host:port of its /metrics
	started time.Time
}

// start starts an operator, its /metrics on a free loopback port.
func (l *launcher) start() (*operatorProc, error) {
	addr, err := freeAddress()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(l.log, "\n==== hack/scale: operator started at %s ====\n", time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(l.binary, append(slices.Clone(l.args), "--metrics-bind-address="+addr)...)
	cmd.Stdout, cmd.Stderr = l.log, l.log
	cmd.Env = append(os.Environ(), l.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start operator %s: %w", l.binary, err)
	}
	return &operatorProc{cmd: cmd, pid: proc.Process(cmd.Process.Pid), metrics: addr, started: started}, nil
}

// stop ends the operator as Kubernetes does: SIGTERM, then SIGKILL after 30 s.
func (p *operatorProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// freeAddress returns a loopback address with a port nothing listens on.
func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// recordWrites reads gpu_inventory_gpunode_writes_total by outcome from the operator's
// /metrics.
func (p *operatorProc) recordWrites() (writeCounts, error) {
	series, err := scrape("http://" + p.metrics + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("read the operator's metrics: %w", err)
	}
	const prefix = "gpu_inventory_gpunode_writes_total{outcome=\""
	out := writeCounts{}
	for name, v := range series {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			out[strings.TrimSuffix(rest, "\"}")] = int64(v)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the operator's metrics have no gpu_inventory_gpunode_writes_total")
	}
	return out, nil
}

// metric reads one figure of the operator's /metrics, by its name and labels as written
// (0 when absent or unreadable).
func (p *operatorProc) metric(name string) float64 {
	series, _ := scrape("http://" + p.metrics + "/metrics")
	return series[name]
}

// scrape reads a Prometheus text exposition: every series by its name and labels as
// written.
func scrape(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseSeries(resp.Body)
}

// parseSeries reads "name{labels} value" lines; comments are skipped.
func parseSeries(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		i := strings.LastIndexByte(line, ' ')
		if strings.HasPrefix(line, "#") || i <= 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("series %s: %w", line, err)
		}
		out[line[:i]] = v
	}
	return out, s.Err()
}

// writeCounts are GpuNode record writes by outcome.
type writeCounts map[string]int64

// since returns the counts of c less those of before.
func (c writeCounts) since(before writeCounts) writeCounts {
	out := writeCounts{}
	for k, v := range c {
		out[k] = v - before[k]
	}
	return out
}

// writes is the number of records written: every outcome but skipped.
func (c writeCounts) writes() int64 {
	var n int64
	for _, outcome := range metrics.GpuNodeOutcomes {
		if outcome != metrics.GpuNodeSkipped {
			n += c[outcome]
		}
	}
	return n
}

// String lists the written outcomes that are not zero.
func (c writeCounts) String() string {
	var parts []string
	for _, outcome := range metrics.GpuNodeOutcomes {
		if outcome != metrics.GpuNodeSkipped && c[outcome] != 0 {
			parts = append(parts, fmt.Sprintf("%s %d", outcome, c[outcome]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
