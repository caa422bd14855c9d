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
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// NoFleet is what `fleet` says on a cluster where the fleet hub keeps no GpuFleet.
const NoFleet = "no GpuFleet here: the fleet hub (gpu-fleet-hub, docs/install.md#the-fleet-hub) keeps GpuFleets on its hub cluster; without a hub, `kubectl gpuinv --all-contexts` reads the inventory of every context"

type fleetOptions struct {
	output string
}

// NewFleetCommand is `kubectl gpuinv fleet [NAME]`: a GpuFleet the fleet hub keeps.
func NewFleetCommand(env factory.Environment, c *factory.Factory) *cobra.Command {
	o := &fleetOptions{}
	cmd := &cobra.Command{
		Use:   "fleet [NAME] [flags]",
		Short: "The GPUs of many clusters, from the GpuFleet the fleet hub keeps on its hub cluster",
		Long: `Show a GpuFleet (NAME, or the only one there is) from one GET on the hub cluster: where its
members come from (ClusterProfiles, MultiKueueClusters), how many can be read, the GPUs of the
members counted (total, Ready, free) and per model, one row per member (its state since when,
its GPUs, its models, or why it cannot be read and what to do) and the conditions that are
True (MembersUnreachable, MembersStale, DuplicateMembers, Truncated). -o wide adds each
member's ClusterProfile, MultiKueueCluster and server; -o json or yaml prints the object.

Without a hub, ` + "`kubectl gpuinv --all-contexts`" + ` reads the inventory of every kubeconfig context.

Exit status: 0 when every member can be read; 5 when some cannot (Unreachable or Stale; the
fleet is printed as usual); 1 on errors.`,
		Example: `  kubectl gpuinv fleet --context hub
  kubectl gpuinv fleet training -o wide
  kubectl gpuinv fleet training -o json | jq '.status.members[] | select(.state != "Reachable") | [.name, .reason] | @tsv'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch o.output {
			case factory.OutputTable, factory.OutputWide, factory.OutputJSON, factory.OutputYAML:
			default:
				return factory.Usagef("unknown output format %q: use wide, json or yaml", o.output)
			}
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return o.run(cmd.Context(), env, c, name)
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: wide, json or yaml (the GpuFleet object).")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{factory.OutputWide, factory.OutputJSON, factory.OutputYAML}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (o *fleetOptions) run(ctx context.Context, env factory.Environment, c *factory.Factory, name string) error {
	gf, err := readFleet(ctx, c, name)
	if err != nil {
		return err
	}
	switch o.output {
	case factory.OutputJSON, factory.OutputYAML:
		err = factory.PrintObject(env.Out, gf, o.output)
	default:
		err = printer.GpuFleetReport(env.Out, gf, factory.PrintOptions(env, o.output))
	}
	if err != nil {
		return err
	}
	if gf.Status.UnreachableMembers > 0 {
		return &factory.Exit{Code: factory.ExitPartial}
	}
	return nil
}

// readFleet reads the GpuFleet name, or the only one there is when name is "".
func readFleet(ctx context.Context, c *factory.Factory, name string) (*homelabv1.GpuFleet, error) {
	gpu, err := c.GPU()
	if err != nil {
		return nil, err
	}
	if name != "" {
		gf, err := gpu.GpuFleets().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, explainFleet(c, err, factory.Request{Verb: "get", Resource: "gpufleets", Group: homelabv1.GroupName, Name: name})
		}
		return gf, nil
	}
	list, err := gpu.GpuFleets().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, explainFleet(c, err, factory.Request{Verb: "list", Resource: "gpufleets", Group: homelabv1.GroupName})
	}
	switch len(list.Items) {
	case 0:
		return nil, errors.New(NoFleet)
	case 1:
		return &list.Items[0], nil
	}
	names := make([]string, len(list.Items))
	for i := range list.Items {
		names[i] = list.Items[i].Name
	}
	return nil, factory.Usagef("%d GpuFleets here (%s): name one, `kubectl gpuinv fleet NAME`", len(names), strings.Join(names, ", "))
}

// explainFleet says what to do about a failed read of GpuFleets: no such fleet, no CRD (no
// hub), or what Explain says.
func explainFleet(c *factory.Factory, err error, r factory.Request) error {
	switch {
	case apierrors.IsNotFound(err) && factory.IsMissingResource(err):
		return errors.New(NoFleet)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("GpuFleet %q not found; `kubectl gpuinv fleet` without a name shows the only one, or names them all", r.Name)
	}
	return c.Explain(err, r)
}
