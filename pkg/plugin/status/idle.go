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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// NoUsageRead is what `idle` says of an inventory the operator reads no utilisation for.
const NoUsageRead = "the operator does not read GPU utilisation: run it with --prometheus-url pointing at the Prometheus that scrapes DCGM exporter (docs/metrics.md)"

type idleOptions struct {
	output string
}

func NewIdleCommand(env factory.Environment, c *factory.Factory) *cobra.Command {
	o := &idleOptions{}
	cmd := &cobra.Command{
		Use:   "idle [NAME] [flags]",
		Short: "Pods that hold GPUs they do not use, the longest idle first",
		Long: `List the pods that hold GPUs DCGM exporter reports idle, from one GET of the GpuInventory NAME
(default: cluster): its status.usage, which the operator fills when it reads GPU utilisation
from Prometheus (--prometheus-url). Per pod: namespace, node, model, the GPUs it holds (a MIG
device counts as one) and since when they have been idle (below the operator's --idle-below
utilisation), the longest idle first; the inventory lists at most 20, idle for ten minutes or
more. A summary line counts the GPUs held and those idle for longer than --idle-after.

Exit status: 0 when the usage was printed, also when nothing is idle or no usage is read (a
line says why); 1 on errors.`,
		Example: `  kubectl gpuinv idle                      # idle holders in the whole cluster's inventory
  kubectl gpuinv idle -o json | jq -r '.idleHolders[] | "\(.namespace)/\(.pod)"'`,
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
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: json or yaml (status.usage).")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{factory.OutputJSON, factory.OutputYAML}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (o *idleOptions) run(ctx context.Context, env factory.Environment, c *factory.Factory, name string) error {
	gi, err := readStatus(ctx, c, name)
	if err != nil {
		return err
	}
	s := &gi.Status
	unknown := meta.FindStatusCondition(s.Conditions, homelabv1.ConditionUsageUnknown)
	if s.Usage == nil {
		why := NoUsageRead
		switch {
		case unknown != nil && unknown.Status == metav1.ConditionTrue:
			why = "usage unknown: " + unknown.Message
		case unknown != nil:
			why = "no pod holds GPUs that DCGM exporter reports on"
		}
		if o.output == factory.OutputJSON || o.output == factory.OutputYAML {
			fmt.Fprintf(env.ErrOut, "GpuInventory %s: %s\n", name, why)
			return factory.WriteData(env.Out, &homelabv1.GpuUsage{}, o.output)
		}
		return printer.Nothing(env.Out, name, why)
	}
	if o.output == factory.OutputJSON || o.output == factory.OutputYAML {
		return factory.WriteData(env.Out, s.Usage, o.output)
	}
	return printer.IdleReport(env.Out, name, s.Usage, unknown, env.Clock())
}
