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
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
)

// pluginsResult is what the plugin phase measured: `kubectl gpuinv` and `scan` on the fleet.
type pluginsResult struct {
	show, scanned pluginResults
	agree         string // whether scan equals the operator's status
}

// pluginsPhase runs the plugin, once the status has settled after the changes above.
func pluginsPhase(ctx context.Context, h *harness) (result, error) {
	if err := settle(ctx, h.watcher, homelabv1.DefaultInventoryName, 2*time.Second, 30*time.Second); err != nil {
		return nil, err
	}
	kubeconfig, res := h.env.KubeconfigPath(), &pluginsResult{}
	var err error
	if res.show, err = measurePlugin(h.env.Dir, h.o.plugin, kubeconfig, h.o.pluginRuns); err != nil {
		return nil, err
	}
	if res.scanned, err = measurePlugin(h.env.Dir, h.o.plugin, kubeconfig, h.o.pluginRuns, "scan"); err != nil {
		return nil, err
	}
	if res.agree, err = scanAgrees(ctx, h.gpu, h.o.plugin, kubeconfig); err != nil {
		return nil, err
	}
	return res, nil
}

// commandRow is one plugin command of a table: its arguments as shown, what it asks, the
// target it is judged by, and its runs (or why it was not measured).
type commandRow struct {
	args        []string
	what        string
	target      commandTarget
	runs        pluginResults
	notMeasured error
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

// rss is the largest max RSS of the runs, an upper bound when it is the spawner's.
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

// rssSpread is the median of the runs' max RSS and its range.
func (r pluginResults) rssSpread() string {
	kib := make([]float64, len(r))
	for i := range r {
		kib[i] = float64(r[i].MaxRSSKiB)
	}
	slices.Sort(kib)
	return fmt.Sprintf("%.0f MiB (%.0f–%.0f)", kib[len(kib)/2]/1024, kib[0]/1024, kib[len(kib)-1]/1024)
}

func (r pluginResults) medianWall() time.Duration {
	return r.median(func(run pluginRun) float64 { return run.WallSeconds })
}

// cpu is the median CPU time (user and system) of the runs.
func (r pluginResults) cpu() string {
	return fmt.Sprintf("%.2f s", r.median(func(run pluginRun) float64 { return run.CPUSeconds }).Seconds())
}

func (r pluginResults) median(seconds func(pluginRun) float64) time.Duration {
	if len(r) == 0 {
		return 0
	}
	d := make([]time.Duration, len(r))
	for i := range r {
		d[i] = time.Duration(seconds(r[i]) * float64(time.Second))
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// maxRSS is the largest max RSS of the runs, in KiB.
func (r pluginResults) maxRSS() int64 {
	var most int64
	for _, run := range r {
		most = max(most, run.MaxRSSKiB)
	}
	return most
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

// pluginHelp returns the help of a plugin command, or an error when the plugin does not
// have it (the root's help comes back instead).
func pluginHelp(binary, command string) (string, error) {
	out, err := exec.Command(binary, command, "--help").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s --help: %w", binary, command, err)
	}
	if !strings.Contains(string(out), "Usage:\n  kubectl gpuinv "+command) {
		return "", fmt.Errorf("%s has no %q command", binary, command)
	}
	return string(out), nil
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
