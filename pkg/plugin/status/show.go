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

// Package status holds the readers of the operator's status, each verb with its options,
// its run and its output: the inventory itself (the root command's Show, with --watch and
// several contexts), list, nodes, free, quota and idle. They read GpuInventory and GpuNode
// objects through the factory and print them with pkg/printer.
package status

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// Show is the root command's own verb, `kubectl gpuinv [NAME]`: one inventory, followed with
// --watch, or with several contexts the fleet's.
type Show struct {
	env factory.Environment
	c   *factory.Factory
	o   showOptions
}

// NewShow is the root command's verb, reading through c.
func NewShow(env factory.Environment, c *factory.Factory) *Show {
	return &Show{env: env, c: c}
}

// AddFleetFlags registers --all-contexts and --cluster-timeout on cmd.
func (s *Show) AddFleetFlags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&s.o.allContexts, "all-contexts", false, "Read the inventory in every context of the kubeconfig (a fleet report: a row per cluster, models summed across clusters, a CLUSTER column on the node rows).")
	cmd.Flags().DurationVar(&s.o.clusterTimeout, "cluster-timeout", 5*time.Second, "With several contexts: how long to wait for each cluster's inventory before reporting the cluster as not answering; when only --request-timeout is given, that.")
}

// AddOutputFlags registers -o, --problems, --fail-on-degraded and --watch on cmd.
func (s *Show) AddOutputFlags(cmd *cobra.Command) {
	factory.AddOutputFlags(cmd, &s.o.output, &s.o.problems, &s.o.failOnDegraded)
	cmd.Flags().BoolVarP(&s.o.watch, "watch", "w", false, "After printing the inventory, follow it: redraw on a terminal, else print a line per change (with -o json/yaml, the object).")
}

// Run shows the inventory args name (default: cluster) in the contexts given (none: the
// current one).
func (s *Show) Run(cmd *cobra.Command, args, contexts []string) error {
	name := homelabv1.DefaultInventoryName
	if len(args) == 1 {
		name = args[0]
	}
	if s.o.allContexts || len(contexts) > 1 {
		s.o.clusterTimeoutSet = cmd.Flags().Changed("cluster-timeout")
		return s.o.runFleet(cmd.Context(), s.env, s.c, name, contexts)
	}
	return s.o.run(cmd.Context(), s.env, s.c, name)
}

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
	if err := factory.PrintInventory(env.Out, gi, o.output, popts); err != nil {
		return err
	}
	if o.failOnDegraded && factory.Degraded(gi) {
		return &factory.Exit{Code: factory.ExitDegraded}
	}
	return nil
}

// completeInventoryNames completes NAME with the GpuInventory objects that exist.

func CompleteInventoryNames(c *factory.Factory) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
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
