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

package plugin

import (
	"github.com/spf13/cobra"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/live"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/schedule"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/status"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/version"
)

// rootLong is the root command's help; rootExample its examples.
const (
	rootLong = `Show a GpuInventory (default: cluster): the totals, the per-model summary and one row per GPU
node, as the gpu-inventory-operator keeps them in the object's status.

With several contexts (--context a,b or --all-contexts) it reads the inventory in each cluster
at once and prints the fleet: the totals, one row per cluster, the models summed across
clusters and the node rows with their CLUSTER; -o json/yaml prints a v1 List of the objects,
each annotated with its context. A cluster that cannot be read is one line on stderr naming
the context and why; the others are printed as usual. Where a fleet hub runs, ` + "`kubectl gpuinv fleet`" + `
reads the GpuFleet it keeps on the hub cluster instead.

Exit status: 0 fine; 1 on errors (the message says what to do), or when no cluster could be
read; 3 with --fail-on-degraded when the inventory (with several contexts: any of them) is
Degraded; 4 when ` + "`free`" + ` finds no node with room for the job; 5 when some contexts could
not be read (the others are printed; 5 wins over 3). ` + "`fit`" + ` has its own: 0 fits, 1 does not
fit, 2 on errors.`

	rootExample = `  kubectl gpuinv                      # the cluster inventory
  kubectl gpuinv a100-pool -o wide    # another inventory, with driver and CUDA versions
  kubectl gpuinv --problems           # only the nodes that need attention
  kubectl gpuinv --watch              # follow the changes
  kubectl gpuinv -o json | jq .status.readyGpus
  kubectl gpuinv --fail-on-degraded >/dev/null || alert   # 3 when Degraded
  kubectl gpuinv --context prod-eu,prod-us    # two clusters: CLUSTER column, models summed
  kubectl gpuinv --all-contexts --problems    # every context of the kubeconfig (5: some unread)
  kubectl gpuinv --all-contexts -o json | jq -r '.items[] | [.metadata.annotations["gpuinv.homelab.youngju.dev/context"], .status.readyGpus] | @tsv'
  kubectl gpuinv fleet --context hub          # the GpuFleet a fleet hub keeps (5: members unreachable)
  kubectl gpuinv free --model H100 --count 8   # where an 8-GPU job can start now (4: nowhere)
  kubectl gpuinv who -A --by-namespace         # who holds the GPUs
  kubectl gpuinv why -n ml trainer-0           # why a pod waits, in the scheduler's words
  kubectl gpuinv fit -f trainer.yaml           # would all its replicas fit now (1: no)
  kubectl gpuinv topology            # free GPUs and gang slots per rack, zone, NVLink clique
  kubectl gpuinv nodes --problems     # every GPU node from its GpuNode record, however many
  kubectl gpuinv scan                 # no operator needed`
)

// newRootCommand builds `kubectl gpuinv` with its subcommands. fake, when not nil, replaces
// the clients that the config flags would make.
func newRootCommand(env factory.Environment, fake *factory.Factory) *cobra.Command {
	flags := factory.NewConfigFlags()
	contexts := factory.NewContextList(flags)
	c := fake
	if c == nil {
		c = factory.FromFlags(flags, env.ErrOut)
	}
	show := status.NewShow(env, c)
	cmd := &cobra.Command{
		Use:               "kubectl-gpuinv [NAME]",
		Short:             "The NVIDIA GPU nodes of a cluster at a glance, from its GpuInventory",
		Long:              rootLong,
		Example:           rootExample,
		Args:              cobra.MaximumNArgs(1),
		Version:           version.Get().String(),
		SilenceErrors:     true,
		SilenceUsage:      true,
		ValidArgsFunction: status.CompleteInventoryNames(c),
		Annotations:       map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl gpuinv"},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.HasParent() && len(contexts.Names()) > 1 {
				return factory.Usagef("`kubectl gpuinv %s` reads one cluster: give one --context (several contexts, and --all-contexts, are for `kubectl gpuinv [NAME]`)", cmd.Name())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return show.Run(cmd, args, contexts.Names())
		},
	}
	cmd.SetVersionTemplate("kubectl gpuinv {{.Version}}\n")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return factory.UsageError{Err: err} })
	flags.AddFlags(cmd.PersistentFlags())
	// --context is contextList: one context as kubectl's, or several.
	cmd.PersistentFlags().Var(contexts, "context", "The kubeconfig context to use; with several (repeated or comma-separated), the inventory is read in each of them (not for the subcommands).")
	_ = cmd.RegisterFlagCompletionFunc("context", c.CompleteContexts)
	show.AddFleetFlags(cmd)
	// Without a shorthand: kubectl's -v is verbosity.
	cmd.Flags().Bool("version", false, "Print the version of kubectl gpuinv.")
	show.AddOutputFlags(cmd)
	load := loaderOf(c)
	cmd.AddCommand(live.NewScanCommand(env, c), status.NewListCommand(env, c), status.NewNodesCommand(env, c), status.NewFreeCommand(env, c),
		live.NewWhoCommand(env, c), schedule.NewWhyCommand(env, c, load), schedule.NewFitCommand(env, c, load), status.NewQuotaCommand(env, c),
		status.NewIdleCommand(env, c), status.NewTopologyCommand(env, c), status.NewFleetCommand(env, c))
	return cmd
}
