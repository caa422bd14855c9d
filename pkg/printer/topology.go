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

// Package printer renders a GpuInventory's status for people: what `kubectl gpuinv` and
// `make demo` print.
package printer

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// TopologyReport prints status.topology as trees, level by level: per domain and model the
// GPUs, the free ones and the gang slots; then the largest gang per level, the problems and
// the TopologyFragmented condition.
func TopologyReport(w io.Writer, name string, t *homelabv1.GpuTopology, fragmented *metav1.Condition) error {
	var b strings.Builder
	for i := range t.Topologies {
		if i > 0 {
			b.WriteString("\n")
		}
		if err := writeTree(&b, &t.Topologies[i]); err != nil {
			return err
		}
	}
	if fragmented != nil {
		b.WriteString("\n")
		switch fragmented.Status {
		case metav1.ConditionTrue:
			fmt.Fprintf(&b, "TopologyFragmented (%s): %s\n", fragmented.Reason, fragmented.Message)
		default:
			fmt.Fprintf(&b, "Not fragmented: %s\n", fragmented.Message)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTree prints one hierarchy.
func writeTree(b *strings.Builder, t *homelabv1.TopologyTree) error {
	levels := make([]string, len(t.Levels))
	listed := 0
	for i, l := range t.Levels {
		levels[i] = fmt.Sprintf("%s (%s)", l.Key, count(int(l.Domains), "domain", "domains"))
		listed += int(l.Domains)
	}
	fmt.Fprintf(b, "Topology %s: %s\n", t.Name, strings.Join(levels, " > "))
	sizes := make([]string, len(t.GangSizes))
	for i, s := range t.GangSizes {
		sizes[i] = strconv.Itoa(int(s))
	}
	if t.RequiredLevel != "" {
		fmt.Fprintf(b, "Gangs must fit in one %s domain; slots are counted for gangs of %s GPUs.\n", t.RequiredLevel, strings.Join(sizes, ", "))
	}
	if len(t.Domains) > 0 {
		b.WriteString("\n")
		tw := tabwriter.NewWriter(b, 0, 8, 2, ' ', 0)
		fmt.Fprintf(tw, "DOMAIN\tMODEL\tNODES\tGPUS\tFREE\tSLOTS (%s)\tLARGEST\n", strings.Join(sizes, "/"))
		for _, d := range treeOrder(t) {
			writeDomain(tw, t, d)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if listed > len(t.Domains) {
			fmt.Fprintf(b, "%d of the %d domains listed: those with unschedulable nodes, then the most free GPUs.\n", len(t.Domains), listed)
		}
	}
	if t.OutsideNodes > 0 {
		verb := "lack"
		if t.OutsideNodes == 1 {
			verb = "lacks"
		}
		fmt.Fprintf(b, "%s %s the %s label: in no domain.\n", count(int(t.OutsideNodes), "GPU node", "GPU nodes"), verb, t.Levels[0].Key)
	}
	if len(t.Largest) > 0 {
		b.WriteString("\nLargest gang that fits in one domain now:\n")
		for _, l := range t.Largest {
			where := "no domain can take a GPU"
			if l.Domain != "" {
				where = "in " + shortKey(l.Level) + " " + l.Domain
			}
			fmt.Fprintf(b, "  %s per %s: %d GPUs, %s\n", l.Model, shortKey(l.Level), l.Gpus, where)
		}
	}
	if len(t.Problems) > 0 {
		b.WriteString("\nProblems:\n")
		for _, p := range t.Problems {
			fmt.Fprintf(b, "  %s\n", p)
		}
	}
	return nil
}

// placedDomain is a listed domain at its depth in the tree.
type placedDomain struct {
	d     *homelabv1.TopologyDomain
	depth int
}

// treeOrder lists the domains parent before children, each level's in the status's order; a
// domain whose parent is not listed starts at its own depth.
func treeOrder(t *homelabv1.TopologyTree) []placedDomain {
	depth := map[string]int{}
	for i, l := range t.Levels {
		depth[l.Key] = i
	}
	children := map[string][]*homelabv1.TopologyDomain{}
	listed := map[string]bool{}
	for i := range t.Domains {
		d := &t.Domains[i]
		listed[domainKey(depth[d.Level], d.Name)] = true
	}
	var roots []*homelabv1.TopologyDomain
	for i := range t.Domains {
		d := &t.Domains[i]
		parent := domainKey(depth[d.Level]-1, d.Parent)
		if d.Parent == "" || !listed[parent] {
			roots = append(roots, d)
			continue
		}
		children[parent] = append(children[parent], d)
	}
	var out []placedDomain
	var walk func(d *homelabv1.TopologyDomain)
	walk = func(d *homelabv1.TopologyDomain) {
		out = append(out, placedDomain{d, depth[d.Level]})
		for _, c := range children[domainKey(depth[d.Level], d.Name)] {
			walk(c)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	return out
}

func domainKey(depth int, name string) string { return strconv.Itoa(depth) + "/" + name }

// writeDomain writes a domain's rows: one per model.
func writeDomain(tw io.Writer, t *homelabv1.TopologyTree, p placedDomain) {
	d := p.d
	label := strings.Repeat("  ", p.depth) + shortKey(d.Level) + "=" + d.Name
	if d.UnschedulableNodes > 0 {
		label += fmt.Sprintf(" (%d unschedulable)", d.UnschedulableNodes)
	}
	if len(d.Models) == 0 {
		fmt.Fprintf(tw, "%s\t-\t%d\t0\t0\t-\t0\n", label, d.Nodes)
	}
	for i, m := range d.Models {
		if i > 0 {
			label = ""
		}
		free := strconv.Itoa(int(m.FreeGpus))
		if m.UnschedulableFreeGpus > 0 {
			free += fmt.Sprintf(" (+%d unschedulable)", m.UnschedulableFreeGpus)
		}
		slots := make([]string, len(t.GangSizes))
		for j := range slots {
			slots[j] = "-"
			if j < len(m.GangSlots) {
				slots[j] = strconv.Itoa(int(m.GangSlots[j]))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%d\n", label, m.Model, m.Nodes, m.Gpus, free, strings.Join(slots, "/"), m.LargestGang)
	}
}

// shortKey is a label key without its prefix: topology.kubernetes.io/rack is "rack".
func shortKey(key string) string {
	if i := strings.LastIndex(key, "/"); i >= 0 {
		return key[i+1:]
	}
	return key
}
