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

// Package daemon is what the project's long-running binaries (the operator and the fleet hub)
// share, as Kubernetes' components share k8s.io/component-base: the command (exit codes,
// --help in sections, --version, logging, the signal context, profiles), the options every
// daemon has (endpoints, leader election, logging) and an Instance's run with or without
// leader election and its /metrics, /healthz and /readyz. Each binary's app keeps its own
// flags, wiring and controllers.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/klog/v2"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/version"
)

// Command is what NewCommand makes a daemon's command of.
type Command struct {
	// Name is the binary's name, in usage, --version and errors.
	Name string
	// Long is the text --help starts with.
	Long string
	// Options are the shared options, embedded in the binary's.
	Options *Options
	// Flags are the binary's flags in their sections; the generic section gets --help and
	// --version.
	Flags cliflag.NamedFlagSets
	// Validate checks all of the binary's options (Options' Validate among them).
	Validate func() error
	// Start makes the daemon once the options are valid and logging is set up; an error is
	// logged as "Cannot start".
	Start func() (Runner, error)
	// Stopped is logged when the daemon's Run has returned ("Operator stopped").
	Stopped string
}

// Runner is a daemon: Run runs it until ctx is cancelled.
type Runner interface {
	Run(ctx context.Context) error
}

// exitCode ends the command with this code; what went wrong has been logged already.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit code %d", int(c)) }

// Main runs cmd (NewCommand's, with any subcommands) with args and returns the exit code:
// 0 after a clean stop or --help, 1 when the daemon fails, 2 for bad flags or arguments.
func Main(cmd *cobra.Command, args []string) int {
	cmd.SetArgs(args)
	err := cmd.Execute()
	var code exitCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		return int(code)
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\nRun '%s --help' for usage.\n", cmd.Name(), err, cmd.Name())
		return 2
	}
}

// NewCommand returns the daemon's command with its flags in named sections.
func NewCommand(c Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:           c.Name,
		Long:          c.Long,
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
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", c.Name, version.Get())
				return nil
			}
			if err := c.setUp(); err != nil {
				return err
			}
			if code := c.run(); code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
	fss := c.Flags
	fss.FlagSet("generic").BoolP("help", "h", false, "Show this help and exit.")
	fss.FlagSet("generic").Bool("version", false, "Print the version, commit, build date and Go version, and exit.")
	for _, fs := range fss.FlagSets {
		cmd.Flags().AddFlagSet(fs)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, fss, cols)
	return cmd
}

// setUp validates the options and applies the logging configuration.
func (c Command) setUp() error {
	if err := c.Validate(); err != nil {
		return err
	}
	// Main may run more than once in a process (tests); the same configuration is fine.
	logsapi.ReapplyHandling = logsapi.ReapplyHandlingIgnoreUnchanged
	if err := logsapi.ValidateAndApply(c.Options.Logging, nil); err != nil {
		return fmt.Errorf("logging: %w", err)
	}
	return nil
}

// run runs the daemon until a signal and returns the exit code.
func (c Command) run() int {
	defer klog.Flush() // also flushes the JSON logger (klog.FlushLogger)
	ctx, stop := signalContext()
	defer stop()
	logger := klog.Background()
	ctx = klog.NewContext(ctx, logger)

	d, err := c.Start()
	if err != nil {
		logger.Error(err, "Cannot start")
		return 1
	}
	if c.Options.PprofAddress != "" {
		if err := servePprof(ctx, c.Options.PprofAddress); err != nil {
			logger.Error(err, "Cannot serve profiles")
			return 1
		}
	}
	if err := d.Run(ctx); err != nil {
		logger.Error(err, c.Stopped)
		return 1
	}
	logger.Info(c.Stopped)
	return 0
}

// servePprof serves Go's profiles until ctx is cancelled.
func servePprof(ctx context.Context, addr string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	if _, err := serve(ctx, addr, mux); err != nil {
		return fmt.Errorf("--pprof-bind-address %s: %w", addr, err)
	}
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

// serve serves handler on addr until ctx is cancelled and returns the bound address.
func serve(ctx context.Context, addr string, handler http.Handler) (string, error) {
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	server := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = server.Serve(listener) }()
	context.AfterFunc(ctx, func() { _ = server.Close() })
	return listener.Addr().String(), nil
}
