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
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/klog/v2"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/version"
)

const name = "gpu-fleet-hub"

// exitCode ends the command with this code; what went wrong has been logged already.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit code %d", int(c)) }

// Main parses args, runs the hub (or its secretreader plugin) until SIGTERM or SIGINT, and
// returns the exit code: 0 after a clean stop or --help, 1 when the hub fails, 2 for bad
// flags or arguments.
func Main(args []string) int {
	cmd := NewCommand()
	cmd.SetArgs(args)
	err := cmd.Execute()
	var code exitCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		return int(code)
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\nRun '%s --help' for usage.\n", name, err, name)
		return 2
	}
}

// NewCommand returns the hub's command with its flags in named sections, and the
// secretreader subcommand.
func NewCommand() *cobra.Command {
	opts := NewOptions()
	cmd := &cobra.Command{
		Use: name,
		Long: name + " runs on a hub cluster: it finds the member clusters from ClusterProfiles and\n" +
			"MultiKueueClusters, watches each member's GpuInventory, and keeps the GpuFleets' status.\n\n" +
			"`" + name + " secretreader` is the credential plugin of the access provider \"secretreader\"\n" +
			"(see its --help).",
		SilenceErrors: true,
		SilenceUsage:  true,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unexpected arguments %q", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if v, _ := cmd.Flags().GetBool("version"); v {
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", name, version.Get())
				return nil
			}
			if err := setUp(opts); err != nil {
				return err
			}
			if code := run(opts); code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
	fss := opts.Flags()
	fss.FlagSet("generic").BoolP("help", "h", false, "Show this help and exit.")
	fss.FlagSet("generic").Bool("version", false, "Print the version, commit, build date and Go version, and exit.")
	for _, fs := range fss.FlagSets {
		cmd.Flags().AddFlagSet(fs)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, fss, cols)
	cmd.AddCommand(newSecretReaderCommand())
	return cmd
}

// setUp validates the options and applies the logging configuration.
func setUp(opts *Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	logsapi.ReapplyHandling = logsapi.ReapplyHandlingIgnoreUnchanged
	if err := logsapi.ValidateAndApply(opts.Logging, nil); err != nil {
		return fmt.Errorf("logging: %w", err)
	}
	return nil
}

// run runs the hub until a signal and returns the exit code.
func run(opts *Options) int {
	defer klog.Flush()
	ctx, stop := signalContext()
	defer stop()
	logger := klog.Background()
	ctx = klog.NewContext(ctx, logger)
	h, err := New(opts)
	if err != nil {
		logger.Error(err, "Cannot start")
		return 1
	}
	if err := h.Run(ctx); err != nil {
		logger.Error(err, "Hub stopped")
		return 1
	}
	logger.Info("Hub stopped")
	return 0
}

// signalContext is cancelled by the first SIGTERM or SIGINT; a second one exits at once.
func signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-ch
		cancel()
		<-ch
		os.Exit(1)
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}
