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

// Package app is the gpu-inventory-operator command: its flags, the operator's run and leader
// election, the wiring of clients, informers and controllers, and the HTTP endpoints.
package app

import (
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/daemon"
)

const name = "gpu-inventory-operator"

// Main parses args, runs the operator until SIGTERM or SIGINT, and returns the exit code:
// 0 after a clean stop or --help, 1 when the operator fails, 2 for bad flags or arguments.
func Main(args []string) int {
	return daemon.Main(NewCommand(), args)
}

// NewCommand returns the operator's command with its flags in named sections.
func NewCommand() *cobra.Command {
	opts := NewOptions()
	return daemon.NewCommand(daemon.Command{
		Name: name,
		Long: name + " keeps GpuInventory objects and the gpu-node-status ConfigMap equal to what\n" +
			"the cluster's Nodes say about their NVIDIA GPUs.",
		Options:  &opts.Options,
		Flags:    opts.Flags(),
		Validate: opts.Validate,
		Start: func() (daemon.Runner, error) {
			if os.Getenv("GOGC") == "" {
				// The heap is mostly the long-lived node cache: collecting at 50 % growth keeps the
				// resident set near it at little CPU cost. GOGC in the environment overrides this.
				debug.SetGCPercent(50)
			}
			return New(opts)
		},
		Stopped: "Operator stopped",
	})
}
