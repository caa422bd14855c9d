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
	"slices"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

func NewListCommand(env factory.Environment, c *factory.Factory) *cobra.Command {
	var output string
	var failOnDegraded bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List every GpuInventory with its totals",
		Example: `  kubectl gpuinv list
  kubectl gpuinv list --fail-on-degraded   # 3 when any inventory is Degraded`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := factory.ValidateOutput(output, false); err != nil {
				return err
			}
			gpu, err := c.GPU()
			if err != nil {
				return err
			}
			list, err := gpu.GpuInventories().List(cmd.Context(), metav1.ListOptions{})
			if err != nil {
				return c.Explain(err, factory.ListInventory)
			}
			switch output {
			case factory.OutputJSON, factory.OutputYAML:
				err = factory.PrintObject(env.Out, list, output)
			default:
				err = printer.List(env.Out, list.Items, factory.PrintOptions(env, output))
			}
			if err != nil {
				return err
			}
			if failOnDegraded && slices.ContainsFunc(list.Items, func(gi homelabv1.GpuInventory) bool { return factory.Degraded(&gi) }) {
				return &factory.Exit{Code: factory.ExitDegraded}
			}
			return nil
		},
	}
	factory.AddOutputFlags(cmd, &output, nil, &failOnDegraded)
	return cmd
}
