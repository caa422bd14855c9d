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

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// NoTopology is what `topology` says of an inventory without status.topology.
const NoTopology = "no topology: no GPU node carries a topology label the operator reads and no Kueue Topology is served (spec.topology.levels names the labels; docs/api.md#topology)"

type topologyOptions struct {
	output string
}

func NewTopologyCommand(env factory.Environment, c *factory.Factory) *cobra.Command {
	o := &topologyOptions{}
	cmd := &cobra.Command{
		Use:   "topology [NAME] [flags]",
		Short: "The GPU nodes' topology domains (zones, racks, NVLink cliques): free GPUs and gang slots per domain",
		Long: `Show how the GPU nodes group into topology domains, from one GET of the GpuInventory NAME
(default: cluster): its status.topology, one tree per hierarchy (a Kueue Topology, or the node
labels of spec.topology.levels or the well-known ones), level by level. Per domain and GPU
model: the nodes, the GPUs, those free on schedulable nodes (free on NotReady or cordoned ones
apart), how many gangs of each counted size fit in it at once now (SLOTS, pods of one node's
worth of GPUs each), and the largest gang that fits in it. Then the largest gang per model
and level, what the nodes' labels get wrong, and the TopologyFragmented condition.

These are the operator's counts; ` + "`kubectl gpuinv fit -f`" + ` answers for one gang as kube-scheduler or
Kueue would place it.

Exit status: 0 when the topology was printed, also when there is none (a line says why); 1 on
errors.`,
		Example: `  kubectl gpuinv topology
  kubectl gpuinv topology -o json | jq '.topologies[].largest'`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: CompleteInventoryNames(c),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch o.output {
			case factory.OutputTable, factory.OutputJSON, factory.OutputYAML:
			default:
				return factory.Usagef("unknown output format %q: use json or yaml", o.output)
			}
			name := homelabv1.DefaultInventoryName
			if len(args) == 1 {
				name = args[0]
			}
			return o.run(cmd.Context(), env, c, name)
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: json or yaml (status.topology).")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{factory.OutputJSON, factory.OutputYAML}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (o *topologyOptions) run(ctx context.Context, env factory.Environment, c *factory.Factory, name string) error {
	gi, err := readStatus(ctx, c, name)
	if err != nil {
		return err
	}
	s := &gi.Status
	fragmented := meta.FindStatusCondition(s.Conditions, homelabv1.ConditionTopologyFragmented)
	if s.Topology == nil || len(s.Topology.Topologies) == 0 {
		if o.output == factory.OutputJSON || o.output == factory.OutputYAML {
			fmt.Fprintf(env.ErrOut, "GpuInventory %s: %s\n", name, NoTopology)
			return factory.WriteData(env.Out, &homelabv1.GpuTopology{}, o.output)
		}
		return printer.Nothing(env.Out, name, NoTopology)
	}
	if o.output == factory.OutputJSON || o.output == factory.OutputYAML {
		return factory.WriteData(env.Out, s.Topology, o.output)
	}
	return printer.TopologyReport(env.Out, name, s.Topology, fragmented)
}
