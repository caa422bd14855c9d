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

// Command measure runs one command, its output to /dev/null, and prints its wall time, CPU
// time, maximum resident set size and exit code as JSON (a command that ran and exited non-zero
// is measured too: the caller decides which codes are answers). The scale harness starts the plugin through it because
// on Linux a child's ru_maxrss starts from the resident size of the memory map it was
// started from (Go starts children with vfork, sharing the parent's map): a plugin started
// by the harness, which holds a fleet's worth of memory, would report the harness's size.
// This program stays a few MiB, below anything it measures (spawnerKiB says how much).
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/youngju-dev/gpu-inventory-operator/hack/scale/proc"
)

type result struct {
	WallSeconds float64 `json:"wallSeconds"`
	CPUSeconds  float64 `json:"cpuSeconds"` // user and system
	MaxRSSKiB   int64   `json:"maxRSSKiB"`
	SpawnerKiB  int64   `json:"spawnerKiB"`
	ExitCode    int     `json:"exitCode"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: measure COMMAND [ARG...]")
		os.Exit(2)
	}
	r, err := run(os.Args[1], os.Args[2:]...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", strings.Join(os.Args[1:], " "), err)
		os.Exit(1)
	}
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

// run runs name with args, its stdout discarded, and measures it. An error means the command
// did not run to an exit; a non-zero exit is in the result.
func run(name string, args ...string) (result, error) {
	cmd := exec.Command(name, args...)
	cmd.Stderr = os.Stderr
	spawner := int64(proc.Self().Peak())
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	var exited *exec.ExitError
	if err != nil && !errors.As(err, &exited) {
		return result{}, err
	}
	usage, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return result{}, errors.New("no resource usage")
	}
	cpu := time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
	return result{WallSeconds: wall.Seconds(), CPUSeconds: cpu.Seconds(), MaxRSSKiB: usage.Maxrss, SpawnerKiB: spawner, ExitCode: cmd.ProcessState.ExitCode()}, nil
}
