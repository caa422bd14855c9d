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

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// phase is one step of the run: whether it runs with the options, what a failure of it
// means for the steps after it, and its run, which returns what it measured for the report
// (nil: nothing to print).
type phase struct {
	name string
	on   bool
	// fatal: a failure ends the run (every later phase measures against what this one set up).
	fatal bool
	// needs are earlier phases whose failure skips this one (one that is off does not).
	needs []string
	run   func(context.Context, *harness) (result, error)
}

// phases is the run, in order; where the order matters, the reason stands beside it.
func phases(o *options) []phase {
	plugin := o.plugin != ""
	list := []phase{
		// First, on API servers of its own, stopped before the big fleet is created: nothing
		// else runs beside them.
		{name: "fleet", on: plugin && o.fleetContexts > 0, fatal: true, run: fleetPhase},
		// On a kube-apiserver of its own too, before the big fleet: the hub, its member doubles
		// and the API server alone on the machine.
		{name: "hub", on: o.hubMembers > 0, run: hubPhase},
		// An empty cluster: the API server, the fleet, and the operator's first start, which
		// installs the CRDs and creates every record.
		{name: "cold start", on: true, fatal: true, run: coldStartPhase},
		// What is measured from here on is a restarted operator, as after every upgrade,
		// reschedule or leader change: the CRDs, the inventory and every record exist.
		{name: "warm start", on: true, fatal: true, run: warmStartPhase},
		// Before any change: its memory is the steady figure the later phases compare with.
		{name: "quiet", on: true, fatal: true, run: quietPhase},
		// Right after the quiet phase, on the same fleet: the operator without topology,
		// measured as the quiet phase measured it with topology, then restored before any
		// change.
		{name: "topology", on: o.topologyQuiet > 0, fatal: true, run: topologyPhase},
		{name: "churn", on: true, fatal: true, run: churnPhase},
		// One kind of change at a time, once the churn's rejoins have settled.
		{name: "flips", on: o.flipFor > 0, fatal: true, run: flipsPhase},
		{name: "republish", on: o.republishFor > 0 && o.draShare > 0, fatal: true, run: republishPhase},
		{name: "relabel", on: o.relabelFor > 0, fatal: true, run: relabelPhase},
		// The last row of the operator's table, after every change above.
		{name: "status size", on: true, fatal: true, run: statusSizePhase},
		{name: "plugin", on: plugin && o.pluginRuns > 0, fatal: true, run: pluginsPhase},
		// The phases below start from the fleet as generated; a failure of one of them no
		// longer ends the run.
		{name: "fleet reset", on: true, run: resetPhase},
		// Before the inventories: it compares the memory with the quiet figure, which a
		// thousand inventories (and what they leave to be returned once deleted) would blur.
		{name: "hostile", on: o.hostileFor > 0, needs: []string{"fleet reset"}, run: hostilePhase},
		// After the hostile phase: the inventories' totals need the hostile nodes restored.
		{name: "inventories", on: o.inventories > 0, needs: []string{"fleet reset", "hostile"}, run: inventoriesPhase},
		// Last of these: it restarts the operator.
		{name: "outage", on: o.outageFor > 0, needs: []string{"fleet reset", "hostile", "inventories"}, run: outagePhase},
		// Before the allocation phase, whose pods would be in its memory.
		{name: "quota", on: o.quotaQueues > 0, run: quotaPhase},
		// After every phase above, so that none of their figures includes its pods, which stay
		// for the phases below.
		{name: "allocation", on: o.pods > 0, run: allocationPhase},
		{name: "free and who", on: o.pods > 0 && plugin, needs: []string{"allocation"}, run: freeWhoPhase},
		// After free and who: it lifts the nodes' not-ready taints and adds DRA pods.
		{name: "why and fit", on: o.pods > 0 && plugin, needs: []string{"allocation", "free and who"}, run: whyFitPhase},
		// The allocation phase's starts against the floor's lists taken in turn with them,
		// printed after the questions, where the report has it.
		{name: "floor", on: o.pods > 0, needs: []string{"allocation", "free and who", "why and fit"}, run: floorPhase},
		// On the allocation phase's pods.
		{name: "usage", on: o.pods > 0 && o.gpuPods > 0 && o.usageWindow > 0, needs: []string{"allocation", "free and who", "why and fit"}, run: usagePhase},
		{name: "hold", on: o.hold, run: holdPhase},
	}
	if o.fleetOnly {
		return list[:1]
	}
	if o.hubOnly {
		return list[1:2]
	}
	return list
}

// outcome is what became of a phase.
type outcome int

const (
	off outcome = iota
	passed
	failed
	skipped // a phase it needs failed
)

// runPhases runs the phases in order, rep printing each result as it comes, and returns
// what failed: a phase's error, or what its report got wrong.
func runPhases(ctx context.Context, h *harness, list []phase, rep *report) error {
	outcomes := map[string]outcome{}
	var errs []error
	for _, p := range list {
		if !p.on {
			outcomes[p.name] = off
			continue
		}
		if missing := unmet(p.needs, outcomes); missing != "" {
			outcomes[p.name] = skipped
			fmt.Fprintf(os.Stderr, "%s: skipped, as %s did not pass\n", p.name, missing)
			continue
		}
		res, err := p.run(ctx, h)
		if res != nil {
			res.printTo(rep)
		}
		if w, ok := res.(interface{ mistakes() []error }); ok {
			errs = append(errs, w.mistakes()...)
		}
		if err == nil {
			outcomes[p.name] = passed
			continue
		}
		outcomes[p.name] = failed
		errs = append(errs, fmt.Errorf("%s: %w", p.name, err))
		if p.fatal {
			break
		}
	}
	return errors.Join(errs...)
}

// unmet names the first of needs that failed or was skipped, or "".
func unmet(needs []string, outcomes map[string]outcome) string {
	for _, name := range needs {
		if o := outcomes[name]; o == failed || o == skipped {
			return name
		}
	}
	return ""
}
