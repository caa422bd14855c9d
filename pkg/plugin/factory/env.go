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

package factory

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Exit codes that scripts and cron jobs can rely on.
const (
	ExitOK = 0
	// ExitError: the command could not do its job; stderr says why and what to do.
	ExitError = 1
	// ExitDoesNotFit: `fit` found some replica that does not fit now (the answer is printed).
	// It is 1, so `fit` reports its errors with ExitFitError.
	ExitDoesNotFit = 1
	// ExitFitError: `fit` could not answer: a wrong flag, a file that cannot be read or holds
	// something it cannot place, or an API error; stderr says why.
	ExitFitError = 2
	// ExitDegraded: with --fail-on-degraded, an inventory is Degraded (a GPU node is not
	// Ready or has unhealthy GPUs). The output is printed as usual.
	ExitDegraded = 3
	// ExitNoFit: `free` found no node with --count free GPUs of the model asked for. The
	// answer is printed as usual.
	ExitNoFit = 4
	// ExitPartial: with several contexts, the inventory of some could not be read (stderr has
	// a line for each); the others are printed as usual. It wins over ExitDegraded.
	ExitPartial = 5
)

// Environment is what a run of the plugin reads of the world besides its arguments (and
// the kubeconfig, which the config flags find as kubectl does).
type Environment struct {
	// Out receives the output, ErrOut the errors.
	Out, ErrOut io.Writer
	// In is what `fit -f -` reads; nil means os.Stdin.
	In io.Reader
	// Terminal says that Out is a terminal: tables are coloured (unless NO_COLOR is set) and
	// --watch redraws the screen instead of printing a line per change.
	Terminal bool
	// Getenv reads environment variables (NO_COLOR); nil means os.Getenv.
	Getenv func(string) string
	// Now is the clock that relative ages ("3h ago") are measured against; nil means time.Now.
	Now func() time.Time
}

func (e Environment) getenv(key string) string {
	if e.Getenv == nil {
		return os.Getenv(key)
	}
	return e.Getenv(key)
}

// Input is what `fit -f -` reads.
func (e Environment) Input() io.Reader {
	if e.In == nil {
		return os.Stdin
	}
	return e.In
}

// Clock is the time now.
func (e Environment) Clock() time.Time {
	if e.Now == nil {
		return time.Now()
	}
	return e.Now()
}

// Color reports whether output is coloured: only on a terminal, and never when NO_COLOR is
// set to a non-empty value (https://no-color.org).
func (e Environment) Color() bool { return e.Terminal && e.getenv("NO_COLOR") == "" }

// ErrorExitCode is the annotation of a command whose errors exit with another code than
// ExitError (`fit`, where 1 means "does not fit").
const ErrorExitCode = "gpuinv.homelab.youngju.dev/error-exit-code"

// Exit ends the run with a code other than 0 after the output was printed, without an
// error message.
type Exit struct{ Code int }

func (e *Exit) Error() string { return fmt.Sprintf("exit code %d", e.Code) }

// ErrUsage marks errors in the command line.
var ErrUsage = errors.New("usage")

// UsageError is an error in the command line: the run prints it with a pointer to --help.
type UsageError struct{ Err error }

func (e UsageError) Error() string        { return e.Err.Error() }
func (e UsageError) Is(target error) bool { return target == ErrUsage }

// Usagef is a UsageError with the message of format and args.
func Usagef(format string, args ...any) error { return UsageError{Err: fmt.Errorf(format, args...)} }
