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

// Command scale measures the operator against a real kube-apiserver with a realistic fleet:
// memory, start-up time, CPU under churn, status writes and change-to-status latency; with
// --plugin, also the time and memory of `kubectl gpuinv` and `kubectl gpuinv scan` on the same
// fleet; with --pods, the allocation phase: pods bound to the fleet's nodes, the operator's
// start, memory and CPU with them, a plain Pod informer's memory beside it, `kubectl gpuinv
// free` and `who`; with --plugin, first, the fleet phase: `kubectl gpuinv --all-contexts` over
// several kube-apiservers (fleet.go); unless --hub-members is 0, the hub phase: the fleet hub
// on a kube-apiserver of its own over member API doubles, a process of this binary
// re-executed (hub.go, memberprocess.go); with --quota-queues, the quota phase: Kueue's objects
// beside the fleet (quota.go); after the allocation phase, unless --usage-window is 0, the
// usage phase: a real Prometheus with DCGM history for the pods' GPUs (usage.go); after the
// quiet phase, unless --topology-quiet is 0, the topology phase: the operator restarted with
// --topology=false against the quiet phase's, and status.topology's size (topology.go). The
// phases and their order are the list in phases.go; report.go prints their tables, those of
// the README's "Performance" section. `make bench` runs it; `make bench-large`, its first phases on
// 20,000 nodes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
)

func main() {
	if os.Getenv(memberDoublesEnv) == "1" {
		if err := runMemberDoubles(os.Args[1:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "member doubles: %v\n", err)
			os.Exit(1)
		}
		return
	}
	o := &options{}
	o.register(flag.CommandLine)
	flag.Parse()
	if err := o.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "scale: %v\n", err)
		os.Exit(2)
	}
	h := &harness{o: o, prof: profiler{dir: o.profileDir}}
	defer h.close()
	rep := &report{w: os.Stdout, o: o}
	if err := runPhases(context.Background(), h, phases(o), rep); err != nil {
		h.close() // os.Exit skips the deferred close
		fmt.Fprintf(os.Stderr, "scale: %v\n", err)
		os.Exit(1)
	}
}
