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
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// Options say how Report, List and Line render an inventory.
type Options struct {
	// Wide adds the family, compute capability, driver and CUDA versions, sharing, source of
	// the facts and NVLink clique of each node, and the allocatable GPUs of each model.
	Wide bool
	// Problems shows only the nodes that need attention (inventory.IsProblem).
	Problems bool
	// Color marks readiness and problems with ANSI colours.
	Color bool
	// Now is the clock relative ages are measured against ("3h ago").
	Now time.Time
	// Scan, when set, says that the status was computed from the Nodes by a scan rather than
	// read from the operator's GpuInventory.
	Scan *ScanSource
}

// ScanSource describes a scan: how many Nodes it read, with which label selector.
type ScanSource struct {
	Nodes    int
	Selector string
}

// LastKnownMark follows a value that comes from last-known labels.
const LastKnownMark = "*"

// Report writes what `kubectl gpuinv` shows: a header with the totals, the per-model summary
// and the node table.
func Report(w io.Writer, gi *homelabv1.GpuInventory, opts Options) error {
	kv, reported := header(gi, opts)
	if err := kv.write(w, opts.Color); err != nil || !reported {
		return err
	}
	s := gi.Status
	allocated := s.Allocation != nil
	if len(s.Models) > 0 {
		if _, err := io.WriteString(w, "\n"); err != nil {
			return err
		}
		if err := modelTable(w, s.Models, allocated, opts); err != nil {
			return err
		}
	}
	if allocated {
		if err := waitingLines(w, s.Models, s.Allocation.Pending, opts.Now); err != nil {
			return err
		}
	}
	if len(s.Cliques) > 0 {
		if _, err := io.WriteString(w, "\n"); err != nil {
			return err
		}
		if err := cliqueTable(w, s.Cliques, opts); err != nil {
			return err
		}
	}
	return nodeSection(w, s.Nodes, allocated, opts)
}

// header is the key-value block above the tables; reported is false when the operator has
// not written a status yet (the header then says so, and nothing follows).
func header(gi *homelabv1.GpuInventory, opts Options) (kv keyValues, reported bool) {
	s := gi.Status
	if opts.Scan != nil {
		what := "all nodes"
		if opts.Scan.Selector != "" {
			what = "nodes matching " + opts.Scan.Selector
		}
		kv.add("Scanned", plain(fmt.Sprintf("%s (%s), computed from the Nodes without the operator", count(opts.Scan.Nodes, "node", "nodes"), what)))
	} else {
		kv.add("Name", plain(gi.Name))
		kv.add("Selector", plain(SelectorString(gi.Spec.NodeSelector)))
		if gi.Spec.Note != "" {
			kv.add("Note", plain(gi.Spec.Note))
		}
		if s.InventoryHash == "" && s.ObservedAt == nil {
			kv.add("Status", colored("not reported yet: is the operator running? `kubectl gpuinv scan` computes the inventory from the Nodes", yellow))
			return kv, false
		}
	}
	kv.add("GPU nodes", join(" ", readyCell(s.ReadyGpuNodes, s.TotalGpuNodes), plain("ready")))
	gpus := join(" ", readyCell(s.ReadyGpus, s.TotalGpus), plain("ready"))
	unhealthy := colored(fmt.Sprintf("%d unhealthy", s.UnhealthyGpus), red)
	if s.UnhealthyGpus == 0 {
		unhealthy = plain("0 unhealthy")
	}
	kv.add("GPUs", join(", ", gpus, unhealthy))
	if s.LabelsMissingNodes > 0 {
		kv.add("Labels missing", colored(fmt.Sprintf("%s (%s counted from last-known labels)",
			count(int(s.LabelsMissingNodes), "node", "nodes"), count(int(s.UnlabeledGpus), "GPU", "GPUs")), yellow))
	} else {
		kv.add("Labels missing", plain("0 nodes"))
	}
	if opts.Scan == nil {
		changed := "never"
		if s.ObservedAt != nil {
			changed = fmt.Sprintf("%s ago (%s)", age(s.ObservedAt.Time, opts.Now), s.ObservedAt.UTC().Format(time.RFC3339))
		}
		kv.add("Last changed", plain(changed))
	}
	if a := s.Allocation; a != nil {
		kv.add("Allocated", plain(fmt.Sprintf("%s held by %s (%s GPU-equivalents), %d free",
			count(int(a.AllocatedGpus), "GPU", "GPUs"), count(int(a.GpuPods), "pod", "pods"), MilliGPUs(a.AllocatedMilliGpus), a.FreeGpus)))
		if a.PendingPods > 0 {
			kv.add("Waiting", colored(fmt.Sprintf("%s asking for %s", count(int(a.PendingPods), "pod", "pods"), count(int(a.PendingGpus), "GPU", "GPUs")), yellow))
		}
	}
	if c := meta.FindStatusCondition(s.Conditions, homelabv1.ConditionDegraded); c != nil {
		text := fmt.Sprintf("%s (%s)", c.Status, c.Message)
		if c.Status == metav1.ConditionTrue {
			kv.add("Degraded", colored(text, red))
		} else {
			kv.add("Degraded", colored(text, green))
		}
	}
	if listed := listedNodes(s); listed < int(s.TotalGpuNodes) {
		kv.add("Listed", colored(fmt.Sprintf("%d of %d GPU nodes (problem nodes first); totals and models count every node",
			listed, s.TotalGpuNodes), yellow))
	}
	return kv, true
}

// nodeSection writes the node table (only the problem nodes with opts.Problems) and its
// footnotes, or a line saying there is nothing to list.
func nodeSection(w io.Writer, all []homelabv1.GpuNodeEntry, allocated bool, opts Options) error {
	nodes := all
	if opts.Problems {
		nodes = nil
		for _, n := range all {
			if inventory.IsProblem(n) {
				nodes = append(nodes, n)
			}
		}
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return err
	}
	switch {
	case len(nodes) == 0 && opts.Problems:
		_, err := fmt.Fprintf(w, "No GPU node needs attention (%s listed).\n", count(len(all), "node", "nodes"))
		return err
	case len(nodes) == 0:
		_, err := io.WriteString(w, "No GPU nodes.\n")
		return err
	}
	if err := nodeTable(w, nodes, allocated, opts); err != nil {
		return err
	}
	return footnotes(w, nodes)
}

// nodeTable writes NODE, READY, PRODUCT, GPUS, (with allocation: ALLOC, FREE, wide: PODS,)
// MEMORY, WORKLOAD, (wide: FAMILY, COMPUTE, DRIVER, CUDA, SHARING, SOURCE, CLIQUE,) NOTES.
func nodeTable(w io.Writer, nodes []homelabv1.GpuNodeEntry, allocated bool, opts Options) error {
	var t table
	t.header(nodeHeaders(allocated, opts)...)
	for _, n := range nodes {
		t.row(nodeRow(make([]cell, 0, 20), n, allocated, allocated, opts)...)
	}
	return t.write(w, opts.Color)
}

// nodeHeaders are the node table's column names; allocated adds ALLOC and FREE (wide: PODS).
func nodeHeaders(allocated bool, opts Options) []string {
	headers := []string{"NODE", "READY", "PRODUCT", "GPUS"}
	if allocated {
		headers = append(headers, "ALLOC", "FREE")
		if opts.Wide {
			headers = append(headers, "PODS")
		}
	}
	headers = append(headers, "MEMORY", "WORKLOAD")
	if opts.Wide {
		headers = append(headers, "FAMILY", "COMPUTE", "DRIVER", "CUDA", "SHARING", "SOURCE", "CLIQUE")
	}
	return append(headers, "NOTES")
}

// nodeRow appends to row the node's cells under nodeHeaders(allocated, opts); known says
// whether its inventory carries allocation (else its allocation cells are "-").
func nodeRow(row []cell, n homelabv1.GpuNodeEntry, allocated, known bool, opts Options) []cell {
	mark := ""
	if n.LabelsMissing {
		mark = LastKnownMark
	}
	product := n.Product
	if product == "" {
		product = Unlabeled
	} else {
		product += mark
	}
	memory := ""
	if n.GpuMemoryMiB > 0 {
		memory = strconv.FormatInt(n.GpuMemoryMiB, 10) + " MiB" + mark
	}
	ready := colored("true", green)
	if !n.Ready {
		ready = colored("false", red)
	}
	row = append(row, plain(n.Name), ready, plain(product), plain(strconv.Itoa(int(n.GpuCount))+mark))
	if allocated {
		switch {
		case known:
			row = append(row, plain(strconv.Itoa(int(n.AllocatedGpus))), freeCell(n.FreeGpus))
		default:
			row = append(row, plain(unknown), plain(unknown))
		}
		if opts.Wide && known {
			row = append(row, plain(strconv.Itoa(int(n.GpuPods))))
		} else if opts.Wide {
			row = append(row, plain(unknown))
		}
	}
	row = append(row, plain(memory), plain(n.WorkloadConfig))
	if opts.Wide {
		row = append(row, plain(n.Family), plain(n.ComputeCapability), plain(n.DriverVersion), plain(n.CudaVersion), plain(sharing(n.Sharing)),
			plain(entrySource(n)), plain(n.Clique))
	}
	notes := notes(n, opts.Now)
	if !opts.Wide && n.Source != "" {
		notes = append(notes, plain("via "+n.Source)) // GFD alone goes without saying
	}
	return append(row, join(", ", notes...))
}

// unknown fills a cell whose figure the inventory does not carry.
const unknown = "-"

// footnotes explains the last-known mark and lists the label warnings of the shown nodes.
func footnotes(w io.Writer, nodes []homelabv1.GpuNodeEntry) error {
	var b strings.Builder
	for _, n := range nodes {
		if n.LabelsMissing && n.Product != "" {
			b.WriteString(LastKnownMark + " last-known value: GPU Feature Discovery's labels are gone from the node\n")
			break
		}
	}
	header := false
	for _, n := range nodes {
		for _, warning := range n.Warnings {
			if !header {
				b.WriteString("\nLabel warnings:\n")
				header = true
			}
			fmt.Fprintf(&b, "  %s: %s\n", n.Name, warning)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// notes are the NOTES of a node: its conditions (NotReady, LabelsMissing since 3h,
// 2 unhealthy, ...), its MIG layout and how many label warnings it has.
func notes(n homelabv1.GpuNodeEntry, now time.Time) []cell {
	var notes []cell
	for _, c := range n.Conditions {
		switch c {
		case inventory.NodeUnhealthyGPUs:
			notes = append(notes, colored(fmt.Sprintf("%d unhealthy", n.UnhealthyGpus), red))
		case inventory.NodeLabelsMissing:
			text := c
			if n.LabelsMissingSince != nil {
				text += " since " + age(n.LabelsMissingSince.Time, now)
			}
			notes = append(notes, colored(text, yellow))
		default:
			notes = append(notes, condition(c))
		}
	}
	if m := n.MIG; m != nil {
		var devices []string
		for _, d := range m.Devices {
			devices = append(devices, fmt.Sprintf("%dx%s", d.Count, d.Profile))
		}
		if _, variant := inventory.BaseModel(n.Product); len(devices) == 0 && strings.HasPrefix(variant, "MIG-") && n.GpuCount > 0 {
			devices = append(devices, fmt.Sprintf("%dx%s", n.GpuCount, strings.TrimPrefix(variant, "MIG-")))
		}
		if len(devices) > 0 {
			notes = append(notes, plain("MIG "+strings.Join(devices, "+")))
		}
		if m.ConfigState == "pending" || m.ConfigState == "rebooting" {
			notes = append(notes, colored("MIG "+m.ConfigState, yellow))
		}
	}
	if parts := freeParts(n); parts != "" {
		notes = append(notes, plain("free "+parts))
	}
	if len(n.Warnings) > 0 {
		notes = append(notes, colored(count(len(n.Warnings), "label warning", "label warnings"), yellow))
	}
	return notes
}

// freeParts says what a pod could still get of the node's parts of GPUs, which FREE (whole
// GPUs) leaves out: MIG devices per profile (device plugin or DRA partitions), shared
// replicas, DRA GPUs with a share left; "" when none.
func freeParts(n homelabv1.GpuNodeEntry) string {
	if !n.Ready || slices.Contains(n.Conditions, inventory.NodeCordoned) {
		return ""
	}
	shape := inventory.ShapeOf(&n)
	var parts []string
	for _, f := range n.Free {
		if f.Free <= 0 {
			continue
		}
		switch {
		case strings.HasPrefix(f.Resource, "nvidia.com/mig-"):
			parts = append(parts, fmt.Sprintf("%dx%s", f.Free, strings.TrimPrefix(f.Resource, "nvidia.com/mig-")))
		case strings.HasPrefix(f.Resource, inventory.DRAPartitionPrefix):
			parts = append(parts, fmt.Sprintf("%dx%s", f.Free, strings.TrimPrefix(f.Resource, inventory.DRAPartitionPrefix)))
		case f.Resource == inventory.DRASharedResource:
			parts = append(parts, fmt.Sprintf("%d shared", f.Free))
		case f.Resource == "nvidia.com/gpu" && shape.SingleMIGProfile != "":
			parts = append(parts, fmt.Sprintf("%dx%s", f.Free, shape.SingleMIGProfile))
		case f.Resource == "nvidia.com/gpu.shared" || f.Resource == "nvidia.com/gpu" && shape.Replicas > 1:
			parts = append(parts, count(int(f.Free), "replica", "replicas"))
		}
	}
	return strings.Join(parts, "+")
}

// condition is a node condition in red when the node or one of its GPUs is unusable (or its
// driver upgrade failed), in yellow otherwise.
func condition(c string) cell {
	switch c {
	case inventory.NodeNotReady, inventory.NodeUnreachable, inventory.NodeMIGConfigFailed, inventory.NodeUnhealthyGPUs,
		inventory.NodeGPUFallenOff, inventory.NodeXIDError, inventory.NodeSXIDError, inventory.NodeGPUMemoryError,
		inventory.NodeGPUPCIeError, inventory.NodeNVLinkError, inventory.NodeQuarantined, inventory.NodeDriverUpgradeFailed:
		return colored(c, red)
	}
	return colored(c, yellow)
}

// modelTable writes the per-model summary; with allocation, ALLOCATED, FREE and PENDING.
func modelTable(w io.Writer, models []homelabv1.GpuModel, allocated bool, opts Options) error {
	rows := make([]FleetModel, len(models))
	for i, m := range models {
		rows[i] = FleetModel{GpuModel: m, Clusters: 1, Allocated: 1}
	}
	return writeModelTable(w, rows, false, allocated, opts)
}

// writeModelTable writes the model rows of one inventory or, with fleet, of several clusters
// (a CLUSTERS column; allocation shown as unknown for a model no allocating cluster has).
func writeModelTable(w io.Writer, models []FleetModel, fleet, allocated bool, opts Options) error {
	var t table
	headers := []string{"MODEL"}
	if fleet {
		headers = append(headers, "CLUSTERS")
	}
	headers = append(headers, "VARIANTS", "READY-NODES", "READY-GPUS", "UNHEALTHY", "MEMORY")
	if allocated {
		headers = append(headers, "ALLOCATED", "FREE", "PENDING")
	}
	if opts.Wide {
		headers = append(headers, "ALLOCATABLE")
	}
	t.header(headers...)
	for _, m := range models {
		product := m.Product
		if product == "" {
			product = Unlabeled
		}
		memory := ""
		if m.MemoryMiB > 0 {
			memory = strconv.FormatInt(m.MemoryMiB, 10) + " MiB"
		}
		unhealthy := plain("0")
		if m.UnhealthyGpus > 0 {
			unhealthy = colored(strconv.Itoa(int(m.UnhealthyGpus)), red)
		}
		row := []cell{plain(product)}
		if fleet {
			row = append(row, plain(strconv.Itoa(m.Clusters)))
		}
		row = append(row, plain(strings.Join(m.Variants, ",")), readyCell(m.ReadyNodes, m.Nodes),
			readyCell(m.ReadyGpus, m.Gpus), unhealthy, plain(memory))
		switch {
		case allocated && m.Allocated > 0:
			row = append(row, plain(strconv.Itoa(int(m.AllocatedGpus))), freeCell(m.FreeGpus), pendingCell(m.PendingGpus))
		case allocated:
			row = append(row, plain(unknown), plain(unknown), plain(unknown))
		}
		if opts.Wide {
			row = append(row, plain(strconv.Itoa(int(m.AllocatableGpus))))
		}
		t.row(row...)
	}
	return t.write(w, opts.Color)
}

// waitingLines write, under the model table, the demand that no model row shows: pods that
// take any model, and pods pinning a model no covered node has.
func waitingLines(w io.Writer, models []homelabv1.GpuModel, pending []homelabv1.GpuDemand, now time.Time) error {
	text := waitingText(models, pending, now, "", "here")
	if text == "" {
		return nil
	}
	_, err := io.WriteString(w, "\n"+text)
	return err
}

// waitingText is waitingLines' lines; in ("" or " in CONTEXT") follows "Waiting", and here
// names where no node has the model.
func waitingText(models []homelabv1.GpuModel, pending []homelabv1.GpuDemand, now time.Time, in, here string) string {
	rows := map[string]bool{}
	for _, m := range models {
		rows[m.Product] = true
	}
	var b strings.Builder
	for _, d := range pending {
		if d.Model != "" && rows[d.Model] {
			continue
		}
		what := "Waiting" + in + " for any model"
		if d.Model != "" {
			what = "Waiting" + in + " for " + d.Model + ", which no node " + here + " has"
		}
		fmt.Fprintf(&b, "%s: %s asking for %s", what, count(int(d.Pods), "pod", "pods"), count(int(d.Gpus), "GPU", "GPUs"))
		if d.Since != nil {
			fmt.Fprintf(&b, ", the oldest for %s", age(d.Since.Time, now))
		}
		b.WriteString(".\n")
	}
	return b.String()
}

// freeCell is a count of free GPUs, green when there are some.
func freeCell(free int32) cell {
	if free > 0 {
		return colored(strconv.Itoa(int(free)), green)
	}
	return plain("0")
}

// MilliGPUs renders thousandths of a GPU as GPU-equivalents: whole numbers as integers,
// parts with two decimals, rounded half up (never 0.00 for a part that is held).
func MilliGPUs(milli int64) string {
	milli = max(milli, 0)
	if milli%1000 == 0 {
		return strconv.FormatInt(milli/1000, 10)
	}
	hundredths := milli / 10
	if milli%10 >= 5 {
		hundredths++
	}
	hundredths = max(hundredths, 1)
	return fmt.Sprintf("%d.%02d", hundredths/100, hundredths%100)
}

// cliqueTable writes the nodes and GPUs of each multi-node NVLink domain.
func cliqueTable(w io.Writer, cliques []homelabv1.GpuClique, opts Options) error {
	var t table
	t.header("NVLINK-CLIQUE", "NODES", "READY-GPUS")
	for _, c := range cliques {
		t.row(plain(c.Name), plain(strconv.Itoa(int(c.Nodes))), readyCell(c.ReadyGpus, c.Gpus))
	}
	return t.write(w, opts.Color)
}

// entrySource names where an inventory entry's GPU facts came from; an empty Source means
// GPU Feature Discovery's labels alone.
func entrySource(n homelabv1.GpuNodeEntry) string {
	if n.Source == "" {
		return homelabv1.SourceGPUFeatureDiscovery
	}
	return n.Source
}

// List writes one row per inventory: NAME, SELECTOR, READY-NODES, READY-GPUS, UNHEALTHY,
// LABELS-MISSING, DEGRADED, CHANGED.
func List(w io.Writer, items []homelabv1.GpuInventory, opts Options) error {
	if len(items) == 0 {
		_, err := io.WriteString(w, "No GpuInventory objects.\n")
		return err
	}
	var t table
	t.header("NAME", "SELECTOR", "READY-NODES", "READY-GPUS", "UNHEALTHY", "LABELS-MISSING", "DEGRADED", "CHANGED")
	for i := range items {
		gi := &items[i]
		s := gi.Status
		degraded := plain("")
		if c := meta.FindStatusCondition(s.Conditions, homelabv1.ConditionDegraded); c != nil {
			degraded = colored(string(c.Status), green)
			if c.Status == metav1.ConditionTrue {
				degraded = colored(string(c.Status), red)
			}
		}
		changed := "<never>"
		if s.ObservedAt != nil {
			changed = age(s.ObservedAt.Time, opts.Now)
		}
		unhealthy := plain("0")
		if s.UnhealthyGpus > 0 {
			unhealthy = colored(strconv.Itoa(int(s.UnhealthyGpus)), red)
		}
		missing := plain("0")
		if s.LabelsMissingNodes > 0 {
			missing = colored(strconv.Itoa(int(s.LabelsMissingNodes)), yellow)
		}
		t.row(plain(gi.Name), plain(SelectorString(gi.Spec.NodeSelector)), readyCell(s.ReadyGpuNodes, s.TotalGpuNodes),
			readyCell(s.ReadyGpus, s.TotalGpus), unhealthy, missing, degraded, plain(changed))
	}
	return t.write(w, opts.Color)
}

// Line is a one-line account of an inventory for logs and pipes (`--watch` when the output
// is not a terminal): when its content last changed, its name, the totals and the Degraded
// condition.
func Line(gi *homelabv1.GpuInventory) string {
	s := gi.Status
	at := "-"
	if s.ObservedAt != nil {
		at = s.ObservedAt.UTC().Format(time.RFC3339)
	}
	if s.InventoryHash == "" && s.ObservedAt == nil {
		return fmt.Sprintf("%s %s: not reported yet", at, gi.Name)
	}
	parts := []string{Summary(s)}
	if s.UnhealthyGpus > 0 {
		parts = append(parts, fmt.Sprintf("%d unhealthy", s.UnhealthyGpus))
	}
	if s.LabelsMissingNodes > 0 {
		parts = append(parts, fmt.Sprintf("labels missing on %s", count(int(s.LabelsMissingNodes), "node", "nodes")))
	}
	if c := meta.FindStatusCondition(s.Conditions, homelabv1.ConditionDegraded); c != nil {
		if c.Status == metav1.ConditionTrue {
			parts = append(parts, "degraded: "+c.Message)
		} else {
			parts = append(parts, "not degraded")
		}
	}
	return fmt.Sprintf("%s %s: %s", at, gi.Name, strings.Join(parts, "; "))
}

// SelectorString is an inventory's node selector as kubectl writes selectors, or "<all nodes>".
func SelectorString(ls *metav1.LabelSelector) string {
	if ls == nil || (len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0) {
		return "<all nodes>"
	}
	return metav1.FormatLabelSelector(ls)
}

// keyValues is a header of "Key:  value" lines with aligned values.
type keyValues struct {
	keys   []string
	values []cell
}

func (kv *keyValues) add(key string, value cell) {
	kv.keys = append(kv.keys, key+":")
	kv.values = append(kv.values, value)
}

func (kv *keyValues) write(w io.Writer, color bool) error {
	var t table
	for i := range kv.keys {
		t.row(plain(kv.keys[i]), kv.values[i])
	}
	return t.write(w, color)
}

// readyCell is "ready/total", green when all are ready, red otherwise.
func readyCell(ready, total int32) cell {
	text := fmt.Sprintf("%d/%d", ready, total)
	if ready < total {
		return colored(text, red)
	}
	return colored(text, green)
}

// join joins cells, keeping each one's colour.
func join(sep string, cells ...cell) cell {
	var text, styled []string
	anyStyled := false
	for _, c := range cells {
		text = append(text, c.text)
		if c.styled != "" {
			styled = append(styled, c.styled)
			anyStyled = true
		} else {
			styled = append(styled, c.text)
		}
	}
	out := cell{text: strings.Join(text, sep)}
	if anyStyled {
		out.styled = strings.Join(styled, sep)
	}
	return out
}

func sharing(s *homelabv1.GpuSharing) string {
	if s == nil {
		return ""
	}
	strategy := s.Strategy
	if strategy == "" {
		strategy = "shared"
	}
	if s.Replicas > 1 {
		return fmt.Sprintf("%s x%d", strategy, s.Replicas)
	}
	return strategy
}

func listedNodes(s homelabv1.GpuInventoryStatus) int {
	if s.ListedNodes > 0 {
		return int(s.ListedNodes)
	}
	return len(s.Nodes)
}

// age is a relative age as kubectl prints it ("3h", "5m10s").
func age(t, now time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	return duration.HumanDuration(d)
}

func count(n int, one, many string) string {
	return strconv.Itoa(n) + " " + plural(n, one, many)
}

// Nothing says in one line why an inventory has nothing to show (no usage read, no quota).
func Nothing(w io.Writer, inventory, why string) error {
	_, err := fmt.Fprintf(w, "GpuInventory %s: %s.\n", inventory, why)
	return err
}
