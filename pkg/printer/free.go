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
	"strings"
	"text/tabwriter"
	"time"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Free is what `free` says, and what it prints with -o json.
type Free struct {
	Inventory string `json:"inventory"`
	// Model is --model as given; empty for every model.
	Model string `json:"model,omitempty"`
	Count int32  `json:"count"`
	// Fits: some node has at least Count free GPUs of one of the models.
	Fits bool `json:"fits"`
	// Nodes and NodesAtMost bound the number of nodes with at least Count free GPUs (equal
	// when Exact).
	Nodes       int32 `json:"nodes"`
	NodesAtMost int32 `json:"nodesAtMost"`
	Exact       bool  `json:"exact"`
	// FreeGpus and Gpus sum the models'.
	FreeGpus int32       `json:"freeGpus"`
	Gpus     int32       `json:"gpus"`
	Models   []ModelFree `json:"models"`
	// Waiting is demand that no model row shows: for any model, and for models the inventory
	// has no node of (without --model).
	Waiting []homelabv1.GpuDemand `json:"waiting,omitempty"`
	// Listed and Total: the inventory's node list, for the range's explanation.
	Listed int `json:"-"`
	Total  int `json:"-"`
}

// ModelFree is the answer for one model.
type ModelFree struct {
	Model    string `json:"model"`
	FreeGpus int32  `json:"freeGpus"`
	Gpus     int32  `json:"gpus"`
	// MostFreeOnANode is the most free GPUs on one node of the model.
	MostFreeOnANode int32                `json:"mostFreeOnANode"`
	Nodes           int32                `json:"nodes"`
	NodesAtMost     int32                `json:"nodesAtMost"`
	Exact           bool                 `json:"exact"`
	Most            []homelabv1.NodeFree `json:"most,omitempty"`
	PendingGpus     int32                `json:"pendingGpus"`
}

// FreeReport prints free's answer for people.
func FreeReport(w io.Writer, a *Free, now time.Time) error {
	var b strings.Builder
	scope := "Inventory " + a.Inventory
	if a.Model != "" {
		scope += fmt.Sprintf(", models matching %q", a.Model)
	}
	fmt.Fprintf(&b, "%s: %d of %s free.\n", scope, a.FreeGpus, count64(int64(a.Gpus), "GPU", "GPUs"))
	job := "a free GPU"
	if a.Count > 1 {
		job = fmt.Sprintf("%d free GPUs", a.Count)
	}
	switch {
	case len(a.Models) == 0:
		b.WriteString("No GPU nodes.\n")
	case a.Fits && a.Exact:
		fmt.Fprintf(&b, "A job of %s fits on %s now.\n", count64(int64(a.Count), "GPU", "GPUs"), count64(int64(a.Nodes), "node", "nodes"))
	case a.Fits:
		fmt.Fprintf(&b, "A job of %s fits on %d to %d nodes now (the inventory lists %d of %d GPU nodes and counts nodes with 1, 2, 4 and 8 free GPUs).\n",
			count64(int64(a.Count), "GPU", "GPUs"), a.Nodes, a.NodesAtMost, a.Listed, a.Total)
	default:
		most := int32(0)
		for _, m := range a.Models {
			most = max(most, m.MostFreeOnANode)
		}
		fmt.Fprintf(&b, "No node has %s of one model now", job)
		if most > 0 {
			fmt.Fprintf(&b, " (at most %d on one node)", most)
		}
		b.WriteString(".\n")
	}
	if len(a.Models) > 0 {
		b.WriteString("\n")
		tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "MODEL\tFREE\tFIT-NODES\tMOST-FREE\tPENDING")
		for _, m := range a.Models {
			fit := fmt.Sprint(m.Nodes)
			if !m.Exact {
				fit = fmt.Sprintf("%d-%d", m.Nodes, m.NodesAtMost)
			}
			var most []string
			for _, n := range m.Most {
				most = append(most, fmt.Sprintf("%s (%d)", n.Name, n.FreeGpus))
			}
			if len(most) == 0 {
				most = []string{"-"}
			}
			fmt.Fprintf(tw, "%s\t%d/%d\t%s\t%s\t%d\n", m.Model, m.FreeGpus, m.Gpus, fit, strings.Join(most, ", "), m.PendingGpus)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(a.Waiting) > 0 {
		b.WriteString("\n")
	}
	for _, d := range a.Waiting {
		what := "Waiting for any model"
		if d.Model != "" {
			what = "Waiting for " + d.Model + ", which no node here has"
		}
		fmt.Fprintf(&b, "%s: %s asking for %s", what, count64(int64(d.Pods), "pod", "pods"), count64(int64(d.Gpus), "GPU", "GPUs"))
		if d.Since != nil {
			fmt.Fprintf(&b, ", the oldest for %s", age(d.Since.Time, now))
		}
		b.WriteString(".\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
