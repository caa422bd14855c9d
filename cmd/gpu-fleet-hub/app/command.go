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

// Package app is the gpu-fleet-hub command: its flags, the hub's run and leader election,
// the wiring of its sources and controllers, the HTTP endpoints, and the secretreader
// credential plugin it carries as a subcommand (docs/design/hub.md).
package app

import (
	"github.com/spf13/cobra"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/daemon"
)

const name = "gpu-fleet-hub"

// Main parses args, runs the hub (or its secretreader plugin) until SIGTERM or SIGINT, and
// returns the exit code: 0 after a clean stop or --help, 1 when the hub fails, 2 for bad
// flags or arguments.
func Main(args []string) int {
	return daemon.Main(NewCommand(), args)
}

// NewCommand returns the hub's command with its flags in named sections, and the
// secretreader subcommand.
func NewCommand() *cobra.Command {
	opts := NewOptions()
	cmd := daemon.NewCommand(daemon.Command{
		Name: name,
		Long: name + " runs on a hub cluster: it finds the member clusters from ClusterProfiles and\n" +
			"MultiKueueClusters, watches each member's GpuInventory, and keeps the GpuFleets' status.\n\n" +
			"`" + name + " secretreader` is the credential plugin of the access provider \"secretreader\"\n" +
			"(see its --help).",
		Options:  &opts.Options,
		Flags:    opts.Flags(),
		Validate: opts.Validate,
		Start:    func() (daemon.Runner, error) { return New(opts) },
		Stopped:  "Hub stopped",
	})
	cmd.AddCommand(newSecretReaderCommand())
	return cmd
}
