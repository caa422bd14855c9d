// Package printer renders a GpuInventory's status for people, in the spirit of the first
// version's report. The demo uses it, and so can a command-line tool.
package printer

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Unlabeled stands for a product that no label names.
const Unlabeled = "<unlabeled>"

// Summary is one line with the totals, e.g. "4 GPU nodes, 0 ready; 1 GPU, 0 ready".
func Summary(s homelabv1.GpuInventoryStatus) string {
	return fmt.Sprintf("%d GPU %s, %d ready; %d %s, %d ready",
		s.TotalGpuNodes, plural(int(s.TotalGpuNodes), "node", "nodes"), s.ReadyGpuNodes,
		s.TotalGpus, plural(int(s.TotalGpus), "GPU", "GPUs"), s.ReadyGpus)
}

// NodeTable writes one row per GPU node: NODE, READY, PRODUCT, GPUS, MEMORY, WORKLOAD.
func NodeTable(w io.Writer, nodes []homelabv1.GpuNode) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tREADY\tPRODUCT\tGPUS\tMEMORY\tWORKLOAD")
	for _, n := range nodes {
		product := n.Product
		if product == "" {
			product = Unlabeled
		}
		memory := ""
		if n.GpuMemoryMiB > 0 {
			memory = strconv.FormatInt(n.GpuMemoryMiB, 10) + " MiB"
		}
		fmt.Fprintf(tw, "%s\t%t\t%s\t%d\t%s\t%s\n", n.Name, n.Ready, product, n.GpuCount, memory, n.WorkloadConfig)
	}
	return tw.Flush()
}

// Inventory writes the summary line, the Degraded condition when it is True, and the table.
func Inventory(w io.Writer, gi *homelabv1.GpuInventory) error {
	if _, err := fmt.Fprintf(w, "GpuInventory %s: %s\n", gi.Name, Summary(gi.Status)); err != nil {
		return err
	}
	for _, c := range gi.Status.Conditions {
		if c.Type == homelabv1.ConditionDegraded && c.Status == "True" {
			if _, err := fmt.Fprintf(w, "Degraded: %s\n", c.Message); err != nil {
				return err
			}
		}
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	return NodeTable(w, gi.Status.Nodes)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
