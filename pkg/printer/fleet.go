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
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// Fleet is the same GpuInventory read in several kubeconfig contexts.
type Fleet struct {
	// Name is the inventory's name, the same in every context.
	Name string
	// Clusters are the contexts, in the order they are shown.
	Clusters []FleetCluster
	// ShowUnread lists the clusters that could not be read, with why, under the cluster
	// table (--watch, where the screen is the whole output); otherwise only the header counts
	// them.
	ShowUnread bool
}

// FleetCluster is one context of a fleet.
type FleetCluster struct {
	Context string
	// Inventory is the context's inventory; nil when it could not be read.
	Inventory *homelabv1.GpuInventory
	// Problem says, in plain words, why the inventory could not be read.
	Problem string
	// Since is when the problem was first seen; zero when unknown.
	Since time.Time
}

// read returns the clusters whose inventory was read.
func (f Fleet) read() []FleetCluster {
	var read []FleetCluster
	for _, c := range f.Clusters {
		if c.Inventory != nil {
			read = append(read, c)
		}
	}
	return read
}

// FleetReport writes the fleet's report: a header with the totals of the clusters read, one
// row per cluster, the per-model summary across clusters and one row per GPU node with its
// cluster.
func FleetReport(w io.Writer, f Fleet, opts Options) error {
	read := f.read()
	allocated := slices.ContainsFunc(read, func(c FleetCluster) bool { return c.Inventory.Status.Allocation != nil })
	header := fleetHeader(read, len(f.Clusters), allocated)
	if err := header.write(w, opts.Color); err != nil {
		return err
	}
	if len(read) > 0 || f.ShowUnread {
		if _, err := io.WriteString(w, "\n"); err != nil {
			return err
		}
	}
	if len(read) > 0 {
		if err := clusterTable(w, read, allocated, opts); err != nil {
			return err
		}
	}
	if f.ShowUnread {
		if err := unreadLines(w, f.Clusters, opts); err != nil {
			return err
		}
	}
	if len(read) == 0 {
		return nil
	}
	if models := FleetModels(read); len(models) > 0 {
		if _, err := io.WriteString(w, "\n"); err != nil {
			return err
		}
		if err := writeModelTable(w, models, true, allocated, opts); err != nil {
			return err
		}
		if err := fleetAllocationNotes(w, read, allocated, opts.Now); err != nil {
			return err
		}
	}
	return fleetNodeSection(w, read, allocated, opts)
}

// fleetHeader sums the clusters read; total counts those that could not be read too.
func fleetHeader(read []FleetCluster, total int, allocated bool) keyValues {
	var kv keyValues
	var s homelabv1.GpuInventoryStatus
	var a homelabv1.GpuAllocation
	var degraded, noAllocation []string
	listed := 0
	for _, c := range read {
		cs := c.Inventory.Status
		s.TotalGpuNodes += cs.TotalGpuNodes
		s.ReadyGpuNodes += cs.ReadyGpuNodes
		s.TotalGpus += cs.TotalGpus
		s.ReadyGpus += cs.ReadyGpus
		s.UnhealthyGpus += cs.UnhealthyGpus
		s.LabelsMissingNodes += cs.LabelsMissingNodes
		s.UnlabeledGpus += cs.UnlabeledGpus
		listed += listedNodes(cs)
		if ca := cs.Allocation; ca != nil {
			a.AllocatedGpus += ca.AllocatedGpus
			a.AllocatedMilliGpus += ca.AllocatedMilliGpus
			a.FreeGpus += ca.FreeGpus
			a.GpuPods += ca.GpuPods
			a.PendingPods += ca.PendingPods
			a.PendingGpus += ca.PendingGpus
		} else {
			noAllocation = append(noAllocation, c.Context)
		}
		if meta.IsStatusConditionTrue(cs.Conditions, homelabv1.ConditionDegraded) {
			degraded = append(degraded, c.Context)
		}
	}
	clusters := plain(fmt.Sprintf("%d read", len(read)))
	if len(read) < total {
		clusters = colored(fmt.Sprintf("%d of %d read", len(read), total), red)
	}
	kv.add("Clusters", clusters)
	if len(read) == 0 {
		return kv
	}
	kv.add("GPU nodes", join(" ", readyCell(s.ReadyGpuNodes, s.TotalGpuNodes), plain("ready")))
	unhealthy := plain("0 unhealthy")
	if s.UnhealthyGpus > 0 {
		unhealthy = colored(fmt.Sprintf("%d unhealthy", s.UnhealthyGpus), red)
	}
	kv.add("GPUs", join(", ", join(" ", readyCell(s.ReadyGpus, s.TotalGpus), plain("ready")), unhealthy))
	if s.LabelsMissingNodes > 0 {
		kv.add("Labels missing", colored(fmt.Sprintf("%s (%s counted from last-known labels)",
			count(int(s.LabelsMissingNodes), "node", "nodes"), count(int(s.UnlabeledGpus), "GPU", "GPUs")), yellow))
	} else {
		kv.add("Labels missing", plain("0 nodes"))
	}
	if allocated {
		text := fmt.Sprintf("%s held by %s (%s GPU-equivalents), %d free",
			count(int(a.AllocatedGpus), "GPU", "GPUs"), count(int(a.GpuPods), "pod", "pods"), MilliGPUs(a.AllocatedMilliGpus), a.FreeGpus)
		if len(noAllocation) > 0 {
			text += "; no allocation data from " + strings.Join(noAllocation, ", ")
		}
		kv.add("Allocated", plain(text))
		if a.PendingPods > 0 {
			kv.add("Waiting", colored(fmt.Sprintf("%s asking for %s", count(int(a.PendingPods), "pod", "pods"), count(int(a.PendingGpus), "GPU", "GPUs")), yellow))
		}
	}
	text := fmt.Sprintf("%d of %s", len(degraded), count(len(read), "cluster", "clusters"))
	if len(degraded) > 0 {
		kv.add("Degraded", colored(text+" ("+strings.Join(degraded, ", ")+")", red))
	} else {
		kv.add("Degraded", colored(text, green))
	}
	if listed < int(s.TotalGpuNodes) {
		kv.add("Listed", colored(fmt.Sprintf("%d of %d GPU nodes (each inventory lists its problem nodes first); totals and models count every node",
			listed, s.TotalGpuNodes), yellow))
	}
	return kv
}

// clusterTable writes one row of totals per cluster read.
func clusterTable(w io.Writer, read []FleetCluster, allocated bool, opts Options) error {
	var t table
	headers := []string{"CLUSTER", "GPU-NODES", "READY-GPUS", "UNHEALTHY", "LABELS-MISSING"}
	if allocated {
		headers = append(headers, "ALLOCATED", "FREE", "PENDING")
	}
	t.header(append(headers, "DEGRADED", "CHANGED")...)
	for _, c := range read {
		s := c.Inventory.Status
		unhealthy := plain("0")
		if s.UnhealthyGpus > 0 {
			unhealthy = colored(strconv.Itoa(int(s.UnhealthyGpus)), red)
		}
		missing := plain("0")
		if s.LabelsMissingNodes > 0 {
			missing = colored(strconv.Itoa(int(s.LabelsMissingNodes)), yellow)
		}
		row := []cell{plain(c.Context), readyCell(s.ReadyGpuNodes, s.TotalGpuNodes), readyCell(s.ReadyGpus, s.TotalGpus), unhealthy, missing}
		if allocated {
			if a := s.Allocation; a != nil {
				row = append(row, plain(strconv.Itoa(int(a.AllocatedGpus))), freeCell(a.FreeGpus), pendingCell(a.PendingGpus))
			} else {
				row = append(row, plain(unknown), plain(unknown), plain(unknown))
			}
		}
		degraded := plain("")
		if cond := meta.FindStatusCondition(s.Conditions, homelabv1.ConditionDegraded); cond != nil {
			degraded = colored(string(cond.Status), green)
			if cond.Status == metav1.ConditionTrue {
				degraded = colored(string(cond.Status), red)
			}
		}
		changed := plain("<never>")
		switch {
		case s.InventoryHash == "" && s.ObservedAt == nil:
			changed = colored("not reported yet", yellow)
		case s.ObservedAt != nil:
			changed = plain(age(s.ObservedAt.Time, opts.Now))
		}
		t.row(append(row, degraded, changed)...)
	}
	return t.write(w, opts.Color)
}

// unreadLines writes a line per cluster that could not be read: its context and why.
func unreadLines(w io.Writer, clusters []FleetCluster, opts Options) error {
	var t table
	for _, c := range clusters {
		if c.Inventory != nil {
			continue
		}
		text := c.Problem
		if !c.Since.IsZero() {
			text += " (for " + age(c.Since, opts.Now) + ")"
		}
		t.row(plain(c.Context+":"), colored(text, red))
	}
	if len(t.rows) == 0 {
		return nil
	}
	var b strings.Builder
	if err := t.write(&b, opts.Color); err != nil {
		return err
	}
	lines := strings.SplitAfter(strings.TrimSuffix(b.String(), "\n"), "\n")
	_, err := io.WriteString(w, "\nNot read:\n  "+strings.Join(lines, "  ")+"\n")
	return err
}

// FleetModel is a GPU model summed across clusters.
type FleetModel struct {
	homelabv1.GpuModel
	// Clusters counts the clusters that have the model; Allocated those of them whose
	// inventory carries allocation data (AllocatedGpus, FreeGpus and PendingGpus sum theirs).
	Clusters, Allocated int
}

// FleetModels sums the models of the clusters read by base model (MIG and -SHARED variants
// grouped as in each inventory), sorted by product ("" first). MemoryMiB is the largest seen.
func FleetModels(read []FleetCluster) []FleetModel {
	byProduct := map[string]*FleetModel{}
	for _, c := range read {
		for _, m := range c.Inventory.Status.Models {
			f := byProduct[m.Product]
			if f == nil {
				f = &FleetModel{GpuModel: homelabv1.GpuModel{Product: m.Product}}
				byProduct[m.Product] = f
			}
			f.Clusters++
			if c.Inventory.Status.Allocation != nil {
				f.Allocated++
			}
			f.Nodes += m.Nodes
			f.ReadyNodes += m.ReadyNodes
			f.Gpus += m.Gpus
			f.ReadyGpus += m.ReadyGpus
			f.AllocatableGpus += m.AllocatableGpus
			f.UnhealthyGpus += m.UnhealthyGpus
			f.MemoryMiB = max(f.MemoryMiB, m.MemoryMiB)
			f.AllocatedGpus += m.AllocatedGpus
			f.FreeGpus += m.FreeGpus
			f.PendingGpus += m.PendingGpus
			for _, v := range m.Variants {
				if !slices.Contains(f.Variants, v) {
					f.Variants = append(f.Variants, v)
				}
			}
		}
	}
	models := make([]FleetModel, 0, len(byProduct))
	for _, m := range byProduct {
		slices.Sort(m.Variants)
		models = append(models, *m)
	}
	slices.SortFunc(models, func(a, b FleetModel) int { return cmp.Compare(a.Product, b.Product) })
	return models
}

// fleetAllocationNotes write, under the model table, which clusters the allocation figures
// leave out and the demand no model row shows, per cluster.
func fleetAllocationNotes(w io.Writer, read []FleetCluster, allocated bool, now time.Time) error {
	if !allocated {
		return nil
	}
	var b strings.Builder
	var without []string
	for _, c := range read {
		s := c.Inventory.Status
		if s.Allocation == nil {
			without = append(without, c.Context)
			continue
		}
		b.WriteString(waitingText(s.Models, s.Allocation.Pending, now, " in "+c.Context, "there"))
	}
	switch len(without) {
	case 0:
	case 1:
		b.WriteString("ALLOCATED, FREE and PENDING leave out " + without[0] + ": its inventory carries no allocation data (its operator does not read pods).\n")
	default:
		b.WriteString("ALLOCATED, FREE and PENDING leave out " + strings.Join(without, ", ") + ": their inventories carry no allocation data (their operators do not read pods).\n")
	}
	if b.Len() == 0 {
		return nil
	}
	_, err := io.WriteString(w, "\n"+b.String())
	return err
}

// fleetNodeSection writes the node rows of every cluster read (only the problem nodes with
// opts.Problems), with a CLUSTER column, and their footnotes.
func fleetNodeSection(w io.Writer, read []FleetCluster, allocated bool, opts Options) error {
	listed := 0
	for _, c := range read {
		listed += len(c.Inventory.Status.Nodes)
	}
	t := table{rows: make([][]cell, 0, listed+1)}
	t.header(append([]string{"CLUSTER"}, nodeHeaders(allocated, opts)...)...)
	var b strings.Builder
	shown := 0
	lastKnown := false
	for _, c := range read {
		s := c.Inventory.Status
		for _, n := range s.Nodes {
			if opts.Problems && !inventory.IsProblem(n) {
				continue
			}
			shown++
			t.row(nodeRow(append(make([]cell, 0, 20), plain(c.Context)), n, allocated, s.Allocation != nil, opts)...)
			lastKnown = lastKnown || (n.LabelsMissing && n.Product != "")
			for _, warning := range n.Warnings {
				if b.Len() == 0 {
					b.WriteString("\nLabel warnings:\n")
				}
				fmt.Fprintf(&b, "  %s %s: %s\n", c.Context, n.Name, warning)
			}
		}
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return err
	}
	switch {
	case shown == 0 && opts.Problems:
		_, err := fmt.Fprintf(w, "No GPU node needs attention (%s listed in %s).\n", count(listed, "node", "nodes"), count(len(read), "cluster", "clusters"))
		return err
	case shown == 0:
		_, err := io.WriteString(w, "No GPU nodes.\n")
		return err
	}
	if err := t.write(w, opts.Color); err != nil {
		return err
	}
	if lastKnown {
		if _, err := io.WriteString(w, LastKnownMark+" last-known value: GPU Feature Discovery's labels are gone from the node\n"); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// pendingCell is a count of GPUs asked for by waiting pods, yellow when there are some.
func pendingCell(pending int32) cell {
	if pending > 0 {
		return colored(strconv.Itoa(int(pending)), yellow)
	}
	return plain("0")
}

// FleetLine is Line for the inventory of a context: "<observedAt> [context] name: ...".
func FleetLine(context string, gi *homelabv1.GpuInventory) string {
	at, rest, _ := strings.Cut(Line(gi), " ")
	return at + " [" + context + "] " + rest
}
