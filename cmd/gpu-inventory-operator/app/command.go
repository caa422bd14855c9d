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
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/klog/v2"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/version"
)

const name = "gpu-inventory-operator"

// exitCode ends the command with this code; what went wrong has been logged already.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit code %d", int(c)) }

// Main parses args, runs the operator until SIGTERM or SIGINT, and returns the exit code:
// 0 after a clean stop or --help, 1 when the operator fails, 2 for bad flags or arguments.
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

// NewCommand returns the operator's command with its flags in named sections.
func NewCommand() *cobra.Command {
	opts := NewOptions()
	cmd := &cobra.Command{
		Use: name,
		Long: name + " keeps GpuInventory objects and the gpu-node-status ConfigMap equal to what\n" +
			"the cluster's Nodes say about their NVIDIA GPUs.",
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
	return cmd
}

// setUp validates the options and applies the logging configuration and the GC target.
func setUp(opts *Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	// Main may run more than once in a process (tests); the same configuration is fine.
	logsapi.ReapplyHandling = logsapi.ReapplyHandlingIgnoreUnchanged
	if err := logsapi.ValidateAndApply(opts.Logging, nil); err != nil {
		return fmt.Errorf("logging: %w", err)
	}
	if os.Getenv("GOGC") == "" {
		// The heap is mostly the long-lived node cache: collecting at 50 % growth keeps the
		// resident set near it at little CPU cost. GOGC in the environment overrides this.
		debug.SetGCPercent(50)
	}
	return nil
}

// run runs the operator until a signal and returns the exit code.
func run(opts *Options) int {
	defer klog.Flush() // also flushes the JSON logger (klog.FlushLogger)
	ctx, stop := signalContext()
	defer stop()
	logger := klog.Background()
	ctx = klog.NewContext(ctx, logger)

	op, err := New(opts)
	if err != nil {
		logger.Error(err, "Cannot start")
		return 1
	}
	if opts.PprofAddress != "" {
		if err := servePprof(ctx, opts.PprofAddress); err != nil {
			logger.Error(err, "Cannot serve profiles")
			return 1
		}
	}
	if err := op.Run(ctx); err != nil {
		logger.Error(err, "Operator stopped")
		return 1
	}
	logger.Info("Operator stopped")
	return 0
}

// servePprof serves Go's profiles until ctx is cancelled.
func servePprof(ctx context.Context, addr string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--pprof-bind-address %s: %w", addr, err)
	}
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = server.Serve(listener) }()
	context.AfterFunc(ctx, func() { _ = server.Close() })
	return nil
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
