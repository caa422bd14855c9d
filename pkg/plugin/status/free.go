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

package status

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

type freeOptions struct {
	model  string
	count  int32
	output string
}

func NewFreeCommand(env factory.Environment, c *factory.Factory) *cobra.Command {
	o := &freeOptions{count: 1}
	cmd := &cobra.Command{
		Use:   "free [NAME] [flags]",
		Short: "Where a job of N GPUs of one model can run now, from the inventory",
		Long: `Answer "where can a job of --count GPUs of --model run now" from one GET of the GpuInventory
NAME (default: cluster): per model, its free GPUs, how many nodes have at least --count free
GPUs (FIT-NODES), the nodes with the most free GPUs and what waiting pods ask of the model.
A free GPU is healthy, held by no pod, on a Ready node that is not cordoned.

The inventory counts nodes with 1, 2, 4 and 8 free GPUs; for another --count the count is
exact when the inventory lists every node, else a range such as 3-9 (the line above the
table says so). Whether some node fits is always exact.

Exit status: 0 when some node fits; 4 when none does (the answer is printed as usual);
1 on errors, including a --model that no model of the inventory matches.`,
		Example: `  kubectl gpuinv free                          # every model, jobs of 1 GPU
  kubectl gpuinv free --model H100 --count 8   # where can an 8-GPU H100 job start
  kubectl gpuinv free --model "NVIDIA H100 80GB HBM3" -o json | jq .models[0].most
  while kubectl gpuinv free --model a100 --count 4 >/dev/null; [ $? -eq 4 ]; do sleep 60; done   # wait for room`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: CompleteInventoryNames(c),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch o.output {
			case factory.OutputTable, factory.OutputJSON, factory.OutputYAML:
			default:
				return factory.Usagef("unknown output format %q: use json or yaml", o.output)
			}
			if o.count < 1 {
				return factory.Usagef("--count must be at least 1")
			}
			name := homelabv1.DefaultInventoryName
			if len(args) == 1 {
				name = args[0]
			}
			return o.run(cmd.Context(), env, c, name)
		},
	}
	cmd.Flags().StringVar(&o.model, "model", "", "The GPU model, any case, as GPU Feature Discovery labels it (NVIDIA-H100-80GB-HBM3, with or without a MIG or SHARED variant), as NVIDIA's DRA driver names it (NVIDIA H100 80GB HBM3), or part of it (h100). Default: every model.")
	cmd.Flags().Int32Var(&o.count, "count", o.count, "GPUs the job needs on one node.")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: json or yaml (the answer, for scripts).")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{factory.OutputJSON, factory.OutputYAML}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (o *freeOptions) run(ctx context.Context, env factory.Environment, c *factory.Factory, name string) error {
	gi, err := readStatus(ctx, c, name)
	if err != nil {
		return err
	}
	s := &gi.Status
	switch {
	case s.Allocation == nil:
		return fmt.Errorf("GpuInventory %q does not say which GPUs are free: the operator does not read pods (it runs with --allocation=false, or predates allocation); `kubectl gpuinv who` lists the pods holding GPUs from the pods themselves", name)
	}
	models, err := matchModels(s.Models, o.model)
	if err != nil {
		return fmt.Errorf("GpuInventory %q: %w", name, err)
	}
	answer := answerFree(gi, models, o.model, o.count)
	switch o.output {
	case factory.OutputJSON, factory.OutputYAML:
		err = factory.WriteData(env.Out, answer, o.output)
	default:
		err = printer.FreeReport(env.Out, answer, env.Clock())
	}
	if err != nil {
		return err
	}
	if !answer.Fits {
		return &factory.Exit{Code: factory.ExitNoFit}
	}
	return nil
}

// matchModels picks the models --model names: those equal to it (any case) once put in GPU
// Feature Discovery's form without its variant, else those whose name contains it. "" picks
// them all.
func matchModels(models []homelabv1.GpuModel, model string) ([]homelabv1.GpuModel, error) {
	if model == "" {
		return models, nil
	}
	gfd := inventory.NormalizeProduct(model)
	base, _ := inventory.BaseModel(gfd)
	var equal, containing []homelabv1.GpuModel
	for _, m := range models {
		if m.Product == "" || m.Product == inventory.OtherModels {
			continue
		}
		switch {
		case strings.EqualFold(m.Product, base) || strings.EqualFold(m.Product, gfd):
			equal = append(equal, m)
		case strings.Contains(strings.ToLower(m.Product), strings.ToLower(gfd)):
			containing = append(containing, m)
		}
	}
	if len(equal) > 0 {
		return equal, nil
	}
	if len(containing) > 0 {
		return containing, nil
	}
	var names []string
	for _, m := range models {
		names = append(names, modelName(m.Product))
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no GPU model matches %q: the inventory has no GPU nodes", model)
	}
	folded := ""
	if slices.Contains(names, inventory.OtherModels) {
		folded = fmt.Sprintf("; the smallest models are folded into %s, which --model cannot pick", inventory.OtherModels)
	}
	return nil, fmt.Errorf("no GPU model matches %q (models: %s%s)", model, strings.Join(names, ", "), folded)
}

func modelName(product string) string {
	if product == "" {
		return printer.Unlabeled
	}
	return product
}

// answerFree answers for the models picked from gi's status.
func answerFree(gi *homelabv1.GpuInventory, models []homelabv1.GpuModel, model string, count int32) *printer.Free {
	s := &gi.Status
	a := &printer.Free{Inventory: gi.Name, Model: model, Count: count, Exact: true, Models: []printer.ModelFree{},
		Listed: len(s.Nodes), Total: int(s.TotalGpuNodes)}
	complete := len(s.Nodes) >= int(s.TotalGpuNodes)
	listed := listedFree(s)
	for _, m := range models {
		lo, hi := nodesWithFree(m.Fit, listed[m.Product], complete, count)
		mf := printer.ModelFree{Model: modelName(m.Product), FreeGpus: m.FreeGpus, Gpus: m.Gpus, Nodes: lo, NodesAtMost: hi,
			Exact: lo == hi, PendingGpus: m.PendingGpus}
		if m.Fit != nil {
			mf.Most = m.Fit.Most
			if len(m.Fit.Most) > 0 {
				mf.MostFreeOnANode = m.Fit.Most[0].FreeGpus
			}
		}
		a.Fits = a.Fits || mf.MostFreeOnANode >= count
		a.Nodes = saturating.Add(a.Nodes, lo)
		a.NodesAtMost = saturating.Add(a.NodesAtMost, hi)
		a.Exact = a.Exact && mf.Exact
		a.FreeGpus = saturating.Add(a.FreeGpus, m.FreeGpus)
		a.Gpus = saturating.Add(a.Gpus, m.Gpus)
		a.Models = append(a.Models, mf)
	}
	known := map[string]bool{}
	for _, m := range s.Models {
		known[m.Product] = true
	}
	for _, d := range s.Allocation.Pending {
		if d.Model == "" || (model == "" && !known[d.Model]) {
			a.Waiting = append(a.Waiting, d)
		}
	}
	return a
}

// listedFree is the listed nodes with their free GPUs, by the model row they count under.
func listedFree(s *homelabv1.GpuInventoryStatus) map[string][]homelabv1.NodeFree {
	rows := map[string]bool{}
	for _, m := range s.Models {
		rows[m.Product] = true
	}
	out := map[string][]homelabv1.NodeFree{}
	for i := range s.Nodes {
		base, _ := inventory.BaseModel(s.Nodes[i].Product)
		if !rows[base] && rows[inventory.OtherModels] {
			base = inventory.OtherModels
		}
		out[base] = append(out[base], homelabv1.NodeFree{Name: s.Nodes[i].Name, FreeGpus: s.Nodes[i].FreeGpus})
	}
	return out
}

// fitBuckets are the free-GPU counts the inventory's fit summary counts nodes for.
var fitBuckets = []int32{1, 2, 4, 8}

func bucketCount(fit *homelabv1.GpuFit, b int32) int32 {
	switch b {
	case 1:
		return fit.NodesWith1Free
	case 2:
		return fit.NodesWith2Free
	case 4:
		return fit.NodesWith4Free
	case 8:
		return fit.NodesWith8Free
	}
	return 0
}

// nodesWithFree bounds how many nodes of a model have at least n free GPUs (n >= 1), from the
// model's fit summary and its listed nodes (all of them when complete). Exact (lo == hi) for
// the summary's buckets, with a complete list, or when the summary names every node with a
// free GPU; else at least what the next bucket up or the nodes named in the summary and the
// list show, and at most the bucket below.
func nodesWithFree(fit *homelabv1.GpuFit, listed []homelabv1.NodeFree, complete bool, n int32) (lo, hi int32) {
	if fit == nil || len(fit.Most) == 0 || fit.Most[0].FreeGpus < n {
		return 0, 0
	}
	if slices.Contains(fitBuckets, n) {
		c := bucketCount(fit, n)
		return c, c
	}
	atLeast := func(lists ...[]homelabv1.NodeFree) int32 {
		seen := map[string]bool{}
		for _, list := range lists {
			for _, f := range list {
				if f.FreeGpus >= n {
					seen[f.Name] = true
				}
			}
		}
		return int32(min(len(seen), 1<<31-1))
	}
	if complete {
		c := atLeast(listed)
		return c, c
	}
	if len(fit.Most) < inventory.MaxFitNodes || int(fit.NodesWith1Free) <= len(fit.Most) {
		c := atLeast(fit.Most) // Most names every node with a free GPU
		return c, c
	}
	lo = atLeast(fit.Most, listed)
	for _, b := range fitBuckets {
		if b > n {
			lo = max(lo, bucketCount(fit, b))
			break
		}
		hi = bucketCount(fit, b)
	}
	return lo, max(lo, hi)
}
