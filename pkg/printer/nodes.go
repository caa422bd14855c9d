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

package printer

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// NodeGone is the readiness of a GPU node whose record outlives its Node.
const NodeGone = "gone"

// GpuNodeRow is one GPU node as `kubectl gpuinv nodes` shows it: its GpuNode record and the
// status of its Node's Ready condition (True, False, Unknown, or NodeGone).
type GpuNodeRow struct {
	Record *homelabv1.GpuNode
	Ready  string
}

// Problem reports whether the node needs attention: its Node is not Ready or gone, its
// facts are missing (the record holds the last-known ones), or it has health conditions.
func (r GpuNodeRow) Problem() bool {
	return r.Ready != string(corev1.ConditionTrue) || r.Record.Spec.MissingSince != nil || len(r.healthConditions()) > 0
}

// healthConditions are the record's conditions from the health monitors and the DRA driver
// (see isHealthCondition).
func (r GpuNodeRow) healthConditions() []string {
	var health []string
	for _, c := range r.Record.Spec.Conditions {
		if isHealthCondition(c) {
			health = append(health, c)
		}
	}
	return health
}

// isHealthCondition: what the health monitors (NVSentinel, the GPU Operator's driver upgrades)
// and the DRA driver's device taints and pools say. A record's other conditions
// (UnhealthyGPUs, MIGConfigFailed) are the report's to show.
func isHealthCondition(c string) bool {
	switch c {
	case inventory.NodeGPUFallenOff, inventory.NodeXIDError, inventory.NodeSXIDError, inventory.NodeGPUMemoryError,
		inventory.NodeGPUThermal, inventory.NodeGPUPCIeError, inventory.NodeNVLinkError, inventory.NodeGPUHealthWarning,
		inventory.NodeQuarantined, inventory.NodeDriverUpgrading, inventory.NodeDriverUpgradeFailed,
		inventory.NodeDeviceTainted, inventory.NodeDevicesPending:
		return true
	}
	return false
}

// GpuNodes writes what `kubectl gpuinv nodes` shows: one row per GPU node (rows as given,
// already filtered), the health conditions of the rows that have any, then a summary line. total is the number of GPU nodes before filtering;
// model and opts.Problems name the filters that were applied.
func GpuNodes(w io.Writer, rows []GpuNodeRow, total int, model string, opts Options) error {
	filter := nodesFilter(model, opts.Problems)
	switch {
	case total == 0:
		_, err := io.WriteString(w, "No GpuNode records: the operator has not recorded any GPU node (no node has GPU labels yet, or the operator is not running); `kubectl gpuinv scan` reads the Nodes directly.\n")
		return err
	case len(rows) == 0 && model == "":
		_, err := fmt.Fprintf(w, "No GPU node needs attention (%s).\n", count(total, "GPU node", "GPU nodes"))
		return err
	case len(rows) == 0:
		_, err := fmt.Fprintf(w, "No GPU node matches %s (%s in all).\n", filter, count(total, "GPU node", "GPU nodes"))
		return err
	}
	var t table
	headers := []string{"NAME", "READY", "PRODUCT", "GPUS", "MEMORY", "MIG/SHARING", "DRIVER", "SOURCE", "MISSING-SINCE"}
	if opts.Wide {
		headers = append(headers, "FAMILY", "COMPUTE", "CUDA", "WORKLOAD", "CLIQUE", "LAST-SEEN", "AGE")
	}
	t.header(headers...)
	for _, r := range rows {
		s := &r.Record.Spec
		product := s.Product
		if product == "" {
			product = Unlabeled
		}
		memory := ""
		if s.GpuMemoryMiB > 0 {
			memory = strconv.FormatInt(s.GpuMemoryMiB, 10) + " MiB"
		}
		missing := plain("")
		if s.MissingSince != nil {
			missing = colored(age(s.MissingSince.Time, opts.Now), yellow)
		}
		row := []cell{plain(r.Record.Name), readiness(r.Ready), plain(product), plain(strconv.Itoa(int(s.GpuCount))),
			plain(memory), plain(migSharing(s)), plain(s.DriverVersion), plain(s.Source), missing}
		if opts.Wide {
			lastSeen := ""
			if s.LastSeen != nil {
				lastSeen = age(s.LastSeen.Time, opts.Now)
			}
			row = append(row, plain(s.Family), plain(s.ComputeCapability), plain(s.CudaVersion), plain(s.WorkloadConfig),
				plain(s.Clique), plain(lastSeen), plain(age(r.Record.CreationTimestamp.Time, opts.Now)))
		}
		t.row(row...)
	}
	if err := t.write(w, opts.Color); err != nil {
		return err
	}
	if err := healthFootnote(w, rows, opts.Color); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n"+gpuNodesSummary(rows, total, filter)+"\n")
	return err
}

// healthFootnote lists the health conditions of the rows that have any, one line per node.
func healthFootnote(w io.Writer, rows []GpuNodeRow, color bool) error {
	var kv keyValues
	for _, r := range rows {
		health := r.healthConditions()
		if len(health) == 0 {
			continue
		}
		words := make([]cell, len(health))
		for i, c := range health {
			words[i] = condition(c)
		}
		kv.add("  "+r.Record.Name, join(", ", words...))
	}
	if len(kv.keys) == 0 {
		return nil
	}
	if _, err := io.WriteString(w, "\nHealth conditions:\n"); err != nil {
		return err
	}
	return kv.write(w, color)
}

// gpuNodesSummary is the line under the table, e.g. "7 GPU nodes, 3 problems (2 not Ready,
// 1 Node gone, 1 with facts missing)"; a node can have several problems.
func gpuNodesSummary(rows []GpuNodeRow, total int, filter string) string {
	var problems, notReady, gone, missing, conditions int
	for _, r := range rows {
		if r.Problem() {
			problems++
		}
		switch r.Ready {
		case string(corev1.ConditionTrue):
		case NodeGone:
			gone++
		default:
			notReady++
		}
		if r.Record.Spec.MissingSince != nil {
			missing++
		}
		if len(r.healthConditions()) > 0 {
			conditions++
		}
	}
	nodes := count(total, "GPU node", "GPU nodes")
	if len(rows) != total || filter != "" {
		nodes = fmt.Sprintf("%d of %s (%s)", len(rows), nodes, filter)
	}
	if problems == 0 {
		return nodes + ", no problems"
	}
	var kinds []string
	if notReady > 0 {
		kinds = append(kinds, fmt.Sprintf("%d not Ready", notReady))
	}
	if gone > 0 {
		kinds = append(kinds, fmt.Sprintf("%d Node gone", gone))
	}
	if missing > 0 {
		kinds = append(kinds, fmt.Sprintf("%d with facts missing", missing))
	}
	if conditions > 0 {
		kinds = append(kinds, fmt.Sprintf("%d with health conditions", conditions))
	}
	return fmt.Sprintf("%s, %s (%s)", nodes, count(problems, "problem", "problems"), strings.Join(kinds, ", "))
}

// nodesFilter names the filters of `kubectl gpuinv nodes` as they were given.
func nodesFilter(model string, problems bool) string {
	var flags []string
	if model != "" {
		flags = append(flags, "--model "+model)
	}
	if problems {
		flags = append(flags, "--problems")
	}
	return strings.Join(flags, " ")
}

// readiness is the READY cell: green when True, yellow when the Node is gone, red otherwise.
func readiness(ready string) cell {
	switch ready {
	case string(corev1.ConditionTrue):
		return colored(ready, green)
	case NodeGone:
		return colored(ready, yellow)
	}
	return colored(ready, red)
}

// migSharing is the MIG layout (as the report's notes show it, else the MIG strategy) and
// the sharing of a record.
func migSharing(s *homelabv1.GpuNodeSpec) string {
	var parts []string
	for _, c := range notes(homelabv1.GpuNodeEntry{Product: s.Product, GpuCount: s.GpuCount, MIG: s.MIG}, time.Time{}) {
		parts = append(parts, c.text)
	}
	if len(parts) == 0 && s.MIG != nil && s.MIG.Strategy != "" {
		parts = append(parts, "MIG "+s.MIG.Strategy) // enabled, its layout unknown
	}
	if sh := sharing(s.Sharing); sh != "" {
		parts = append(parts, sh)
	}
	return strings.Join(parts, ", ")
}
