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

// Command demo is `make demo`; see package demo.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/demo"
)

func main() {
	// Colour as kubectl gpuinv does: on a terminal, unless NO_COLOR is set.
	opts := demo.Options{Out: os.Stdout, Color: term.IsTerminal(int(os.Stdout.Fd())) && os.Getenv("NO_COLOR") == ""}
	flag.StringVar(&opts.Operator, "operator", "bin/gpu-inventory-operator", "Path of the operator binary.")
	flag.BoolVar(&opts.Once, "once", false, "Print the converged inventory and exit.")
	flag.BoolVar(&opts.Wide, "wide", false, "Print the inventory as kubectl gpuinv -o wide does (with each node's source and clique).")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := demo.Run(ctx, opts); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("Stopped the operator and the control plane.")
}
