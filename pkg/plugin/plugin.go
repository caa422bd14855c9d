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

// Package plugin is `kubectl gpuinv`: the GpuInventory at a glance, for people and for
// scripts. It reads the operator's GpuInventory (one object), follows it with a watch, or
// computes the same inventory straight from the Nodes with the operator's own pure package
// (pkg/inventory), so that the two never disagree.
//
// Run is the whole program: cmd/kubectl-gpuinv only wires it to the process, so tests call
// it in-process with arguments, buffers and a "stdout is a terminal" switch. This package is
// the root command; the rest is in rooms beside it, after cmctl's layout: the one client
// factory every verb reaches the API through (factory), the verbs with their options, runs
// and output (status, live, schedule), the scheduler simulation why and fit share
// (simulate); all text is rendered by pkg/printer.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/simulate"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/status"
)

// Exit codes that scripts and cron jobs can rely on (factory's, where each is explained).
const (
	ExitOK         = factory.ExitOK
	ExitError      = factory.ExitError
	ExitDoesNotFit = factory.ExitDoesNotFit
	ExitFitError   = factory.ExitFitError
	ExitDegraded   = factory.ExitDegraded
	ExitNoFit      = factory.ExitNoFit
	ExitPartial    = factory.ExitPartial
)

// Environment is what a run of the plugin reads of the world besides its arguments.
type Environment = factory.Environment

// CRDNotInstalled is the message for a cluster without the GpuInventory CRD.
const CRDNotInstalled = factory.CRDNotInstalled

// Run runs `kubectl gpuinv` with args (without the program name) and returns the exit code.
func Run(ctx context.Context, args []string, env factory.Environment) int {
	return run(ctx, args, env, nil)
}

// run is Run with the API clients replaced by fakes when fake is not nil.
func run(ctx context.Context, args []string, env factory.Environment, fake *factory.Factory) int {
	if env.Out == nil {
		env.Out = io.Discard
	}
	if env.ErrOut == nil {
		env.ErrOut = io.Discard
	}
	cmd := newRootCommand(env, fake)
	if args == nil {
		args = []string{} // nil would make cobra read os.Args
	}
	cmd.SetArgs(args)
	cmd.SetOut(env.Out)
	cmd.SetErr(env.ErrOut)
	executed, err := cmd.ExecuteContextC(ctx)
	var exit *factory.Exit
	switch {
	case err == nil:
		return factory.ExitOK
	case errors.As(err, &exit):
		return exit.Code
	case errors.Is(err, factory.ErrUsage):
		fmt.Fprintf(env.ErrOut, "error: %v\nSee 'kubectl gpuinv --help' for usage.\n", err)
	default:
		fmt.Fprintf(env.ErrOut, "error: %v\n", err)
	}
	if executed != nil && executed.Annotations[factory.ErrorExitCode] != "" {
		if code, convErr := strconv.Atoi(executed.Annotations[factory.ErrorExitCode]); convErr == nil {
			return code
		}
	}
	return factory.ExitError
}

// testLoads, in unit tests, read the cluster for why and fit instead of simulate.Load, for
// the factory they are given.
var testLoads sync.Map // of *factory.Factory to a simulate.Loader

// loaderOf is what reads the cluster for why and fit through c.
func loaderOf(c *factory.Factory) simulate.Loader {
	if l, ok := testLoads.Load(c); ok {
		return l.(simulate.Loader)
	}
	return simulate.Load
}

// The names of the answers that scripts and the integration tests read (the verbs' own).
const (
	// ContextAnnotation names the context of each inventory of a fleet's -o json/yaml.
	ContextAnnotation = status.ContextAnnotation
	// GpuNodeCRDNotInstalled and GpuNodeCRDOlderOperator are the messages of `nodes` without
	// the GpuNode CRD.
	GpuNodeCRDNotInstalled  = status.GpuNodeCRDNotInstalled
	GpuNodeCRDOlderOperator = status.GpuNodeCRDOlderOperator
)
