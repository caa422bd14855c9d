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
	"context"
	"io"
	"k8s.io/apimachinery/pkg/api/meta"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/version"
)

type showOptions struct {
	output         string
	problems       bool
	watch          bool
	failOnDegraded bool

	// Several clusters (fleet.go).
	allContexts       bool
	clusterTimeout    time.Duration
	clusterTimeoutSet bool // else --request-timeout, when given, is the per-cluster timeout
}

// rootLong is the root command's help; rootExample its examples.
const (
	rootLong = `Show a GpuInventory (default: cluster): the totals, the per-model summary and one row per GPU
node, as the gpu-inventory-operator keeps them in the object's status.

With several contexts (--context a,b or --all-contexts) it reads the inventory in each cluster
at once and prints the fleet: the totals, one row per cluster, the models summed across
clusters and the node rows with their CLUSTER; -o json/yaml prints a v1 List of the objects,
each annotated with its context. A cluster that cannot be read is one line on stderr naming
the context and why; the others are printed as usual.

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
  kubectl gpuinv free --model H100 --count 8   # where an 8-GPU job can start now (4: nowhere)
  kubectl gpuinv who -A --by-namespace         # who holds the GPUs
  kubectl gpuinv why -n ml trainer-0           # why a pod waits, in the scheduler's words
  kubectl gpuinv fit -f trainer.yaml           # would all its replicas fit now (1: no)
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
	o := &showOptions{}
	cmd := &cobra.Command{
		Use:               "kubectl-gpuinv [NAME]",
		Short:             "The NVIDIA GPU nodes of a cluster at a glance, from its GpuInventory",
		Long:              rootLong,
		Example:           rootExample,
		Args:              cobra.MaximumNArgs(1),
		Version:           version.Get().String(),
		SilenceErrors:     true,
		SilenceUsage:      true,
		ValidArgsFunction: completeInventoryNames(c),
		Annotations:       map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl gpuinv"},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.HasParent() && len(contexts.Names()) > 1 {
				return factory.Usagef("`kubectl gpuinv %s` reads one cluster: give one --context (several contexts, and --all-contexts, are for `kubectl gpuinv [NAME]`)", cmd.Name())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name := homelabv1.DefaultInventoryName
			if len(args) == 1 {
				name = args[0]
			}
			if o.allContexts || len(contexts.Names()) > 1 {
				o.clusterTimeoutSet = cmd.Flags().Changed("cluster-timeout")
				return o.runFleet(cmd.Context(), env, c, name, contexts.Names())
			}
			return o.run(cmd.Context(), env, c, name)
		},
	}
	cmd.SetVersionTemplate("kubectl gpuinv {{.Version}}\n")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return factory.UsageError{Err: err} })
	flags.AddFlags(cmd.PersistentFlags())
	// --context is contextList: one context as kubectl's, or several.
	cmd.PersistentFlags().Var(contexts, "context", "The kubeconfig context to use; with several (repeated or comma-separated), the inventory is read in each of them (not for the subcommands).")
	_ = cmd.RegisterFlagCompletionFunc("context", c.CompleteContexts)
	cmd.Flags().BoolVar(&o.allContexts, "all-contexts", false, "Read the inventory in every context of the kubeconfig (a fleet report: a row per cluster, models summed across clusters, a CLUSTER column on the node rows).")
	cmd.Flags().DurationVar(&o.clusterTimeout, "cluster-timeout", 5*time.Second, "With several contexts: how long to wait for each cluster's inventory before reporting the cluster as not answering; when only --request-timeout is given, that.")
	// Without a shorthand: kubectl's -v is verbosity.
	cmd.Flags().Bool("version", false, "Print the version of kubectl gpuinv.")
	factory.AddOutputFlags(cmd, &o.output, &o.problems, &o.failOnDegraded)
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "After printing the inventory, follow it: redraw on a terminal, else print a line per change (with -o json/yaml, the object).")
	cmd.AddCommand(newScanCommand(env, c), newListCommand(env, c), newNodesCommand(env, c), newFreeCommand(env, c), newWhoCommand(env, c),
		newWhyCommand(env, c), newFitCommand(env, c), newQuotaCommand(env, c), newIdleCommand(env, c))
	return cmd
}

func (o *showOptions) run(ctx context.Context, env factory.Environment, c *factory.Factory, name string) error {
	if err := factory.ValidateOutput(o.output, o.problems); err != nil {
		return err
	}
	gpu, err := c.GPU()
	if err != nil {
		return err
	}
	gi, err := gpu.GpuInventories().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return c.Explain(err, factory.GetInventory(name))
	}
	if o.watch {
		return o.follow(ctx, env, c, gi)
	}
	popts := factory.PrintOptions(env, o.output)
	popts.Problems = o.problems
	if err := show(env.Out, gi, o.output, popts); err != nil {
		return err
	}
	if o.failOnDegraded && degraded(gi) {
		return &factory.Exit{Code: factory.ExitDegraded}
	}
	return nil
}

// completeInventoryNames completes NAME with the GpuInventory objects that exist.
func completeInventoryNames(c *factory.Factory) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		gpu, err := c.GPU()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
		defer cancel()
		list, err := gpu.GpuInventories().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		for _, gi := range list.Items {
			names = append(names, gi.Name+"\t"+printer.Summary(gi.Status))
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// show prints one inventory in the chosen format.

func show(w io.Writer, gi *homelabv1.GpuInventory, output string, opts printer.Options) error {
	switch output {
	case factory.OutputJSON, factory.OutputYAML:
		return factory.PrintObject(w, gi, output)
	}
	return printer.Report(w, gi, opts)
}

// degraded reports whether the inventory's Degraded condition is True.
func degraded(gi *homelabv1.GpuInventory) bool {
	return meta.IsStatusConditionPresentAndEqual(gi.Status.Conditions, homelabv1.ConditionDegraded, metav1.ConditionTrue)
}
