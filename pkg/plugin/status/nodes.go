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
	"errors"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// Messages for a cluster that does not serve GpuNode records.
const (
	// GpuNodeCRDNotInstalled: neither CRD is installed.
	GpuNodeCRDNotInstalled = "the GpuNode CRD is not installed; run the operator or use `kubectl gpuinv scan`"
	// GpuNodeCRDOlderOperator: the GpuInventory CRD is, so the operator predates GpuNode records.
	GpuNodeCRDOlderOperator = "the GpuNode CRD is not installed: the operator is older than this plugin (it keeps no per-node records); upgrade the operator, which installs the CRD when it starts, or use `kubectl gpuinv` (the inventory) or `kubectl gpuinv scan` (the Nodes)"
)

type nodesOptions struct {
	output    string
	model     string
	problems  bool
	chunkSize int64
}

func NewNodesCommand(env factory.Environment, c *factory.Factory) *cobra.Command {
	o := &nodesOptions{chunkSize: 500}
	cmd := &cobra.Command{
		Use:   "nodes [flags]",
		Short: "List every GPU node from the operator's GpuNode records, with its Node's readiness",
		Long: `List every GPU node the operator has recorded (one GpuNode record per GPU node, kept even
while GPU Feature Discovery's labels are gone), joined with the Ready condition of its Node:
True, False, Unknown, or "gone" when the Node no longer exists. Unlike the inventory's node
table, which lists at most --max-status-nodes nodes, it shows them all, sorted by name.
SOURCE says where each node's facts came from (gpu-feature-discovery, dra, gke,
accelerator-label, device-plugin, comma-separated when several agree); the health
conditions and the warnings of the listed nodes follow the table.

-o json and -o yaml print the records as stored (a GpuNodeList, after the filters); the
readiness is the Node's. It needs "list" on gpunodes.homelab.youngju.dev and on nodes.`,
		Example: `  kubectl gpuinv nodes
  kubectl gpuinv nodes --problems            # not Ready, Node gone, facts missing, or health conditions
  kubectl gpuinv nodes --model H100 -o wide
  kubectl gpuinv nodes --problems -o json | jq -r '.items[].metadata.name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := factory.ValidateOutput(o.output, false); err != nil {
				return err
			}
			if o.chunkSize < 0 {
				return factory.Usagef("--chunk-size must not be negative")
			}
			return o.run(cmd.Context(), env, c)
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: wide (adds family, compute capability, CUDA version, workload, NVLink clique, last seen and age), json or yaml (the records as stored).")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{factory.OutputWide, factory.OutputJSON, factory.OutputYAML}, cobra.ShellCompDirectiveNoFileComp))
	cmd.Flags().StringVar(&o.model, "model", "", "Show only the GPU nodes whose product contains this text (case-insensitive) or whose base model it is, e.g. H100 or NVIDIA-A100-SXM4-40GB.")
	cmd.Flags().BoolVar(&o.problems, "problems", false, "Show only the GPU nodes that need attention: Node not Ready (False or Unknown) or gone, GPU facts missing (the record holds the last-known ones), or health conditions (a health monitor's GPU fault, a tainted DRA device, a driver upgrade).")
	// --problem, as the issue spells it, is accepted too.
	cmd.Flags().BoolVar(&o.problems, "problem", false, "Same as --problems.")
	_ = cmd.Flags().MarkHidden("problem")
	cmd.Flags().Int64Var(&o.chunkSize, "chunk-size", o.chunkSize, "Objects per page of the record and node lists. 0 lists each in one response.")
	return cmd
}

func (o *nodesOptions) run(ctx context.Context, env factory.Environment, c *factory.Factory) error {
	gpu, err := c.GPU()
	if err != nil {
		return err
	}
	records, err := gpuNodeRecords(ctx, gpu, o.chunkSize)
	if err != nil {
		return explainGpuNodes(c, err)
	}
	var rows []printer.GpuNodeRow
	if len(records) > 0 {
		core, err := c.Core()
		if err != nil {
			return err
		}
		if rows, err = joinReadiness(ctx, core, records, o.chunkSize); err != nil {
			return c.ExplainNodes(err)
		}
	}
	shown := filterGpuNodes(rows, o.model, o.problems)
	switch o.output {
	case factory.OutputJSON, factory.OutputYAML:
		list := &homelabv1.GpuNodeList{Items: make([]homelabv1.GpuNode, 0, len(shown))}
		list.SetGroupVersionKind(homelabv1.SchemeGroupVersion.WithKind("GpuNodeList"))
		for _, r := range shown {
			item := *r.Record
			item.SetGroupVersionKind(homelabv1.SchemeGroupVersion.WithKind("GpuNode"))
			list.Items = append(list.Items, item)
		}
		return factory.PrintObject(env.Out, list, o.output)
	}
	popts := factory.PrintOptions(env, o.output)
	popts.Problems = o.problems
	return printer.GpuNodes(env.Out, shown, len(rows), o.model, popts)
}

// gpuNodeRecords lists every GpuNode record, chunkSize at a time, sorted by name. Managed
// fields are dropped page by page: nothing here prints them.
func gpuNodeRecords(ctx context.Context, gpu factory.GPUAPI, chunkSize int64) ([]homelabv1.GpuNode, error) {
	opts := metav1.ListOptions{Limit: chunkSize}
	var records []homelabv1.GpuNode
	for {
		page, err := gpu.GpuNodes().List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range page.Items {
			page.Items[i].ManagedFields = nil
		}
		records = append(records, page.Items...)
		if page.Continue == "" {
			break
		}
		opts.Continue = page.Continue
	}
	slices.SortFunc(records, func(a, b homelabv1.GpuNode) int { return strings.Compare(a.Name, b.Name) })
	return records, nil
}

// joinReadiness pairs each record with the status of its Node's Ready condition. The node
// list is read as scan reads it (protobuf pages, each Node decoded by the operator's trimming
// decoder), and only the readiness of recorded nodes is kept. A node without a Ready
// condition is Unknown, as kubectl shows it.
func joinReadiness(ctx context.Context, core rest.Interface, records []homelabv1.GpuNode, chunkSize int64) ([]printer.GpuNodeRow, error) {
	ready := make(map[string]string, len(records))
	for i := range records {
		ready[records[i].Name] = printer.NodeGone
	}
	keep := func(node *corev1.Node) {
		if _, recorded := ready[node.Name]; !recorded {
			return
		}
		status := string(corev1.ConditionUnknown)
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status != "" {
				status = string(c.Status)
			}
		}
		ready[node.Name] = status
	}
	decode := nodecache.NewNodeTrimmer(nil).DecodeNode
	opts := metav1.ListOptions{Limit: chunkSize}
	for {
		meta, _, err := factory.StreamNodes(ctx, core, opts, decode, keep)
		if err != nil {
			return nil, err
		}
		if meta.Continue == "" {
			break
		}
		opts.Continue = meta.Continue
	}
	rows := make([]printer.GpuNodeRow, len(records))
	for i := range records {
		rows[i] = printer.GpuNodeRow{Record: &records[i], Ready: ready[records[i].Name]}
	}
	return rows, nil
}

// filterGpuNodes keeps the rows whose product matches model (see matchesModel; "" keeps all)
// and, with problems, those that need attention.
func filterGpuNodes(rows []printer.GpuNodeRow, model string, problems bool) []printer.GpuNodeRow {
	if model == "" && !problems {
		return rows
	}
	var shown []printer.GpuNodeRow
	for _, r := range rows {
		if (model == "" || matchesModel(r.Record.Spec.Product, model)) && (!problems || r.Problem()) {
			shown = append(shown, r)
		}
	}
	return shown
}

// matchesModel reports whether product contains model, ignoring case, or model is its base
// model (the product without a MIG or SHARED variant).
func matchesModel(product, model string) bool {
	base, _ := inventory.BaseModel(product)
	return strings.Contains(strings.ToLower(product), strings.ToLower(model)) || strings.EqualFold(base, model)
}

// explainGpuNodes explains a failed list of GpuNode records: a missing CRD says whether the
// operator is too old to have it; other errors are explained as for the other commands.
func explainGpuNodes(c *factory.Factory, err error) error {
	if !apierrors.IsNotFound(err) {
		return c.Explain(err, factory.ListGpuNodes)
	}
	served, known := servedHomelabResources(c)
	switch {
	case known && served["gpunodes"]:
		return c.Explain(err, factory.ListGpuNodes)
	case known && served["gpuinventories"]:
		return errors.New(GpuNodeCRDOlderOperator)
	case known || factory.IsMissingResource(err):
		return errors.New(GpuNodeCRDNotInstalled)
	}
	return c.Explain(err, factory.ListGpuNodes)
}

// servedHomelabResources asks discovery which resources of the operator's API group the API
// server serves. known is false when discovery itself failed.
func servedHomelabResources(c *factory.Factory) (served map[string]bool, known bool) {
	disc, err := c.Discovery()
	if err != nil {
		return nil, false
	}
	resources, err := disc.ServerResourcesForGroupVersion(homelabv1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return map[string]bool{}, true
	}
	if err != nil {
		return nil, false
	}
	served = map[string]bool{}
	for _, r := range resources.APIResources {
		served[r.Name] = true
	}
	return served, true
}
