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
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
)

// harness is what the last phases share.
type harness struct {
	kube     kubernetes.Interface // protobuf
	gpu      versioned.Interface
	watcher  versioned.Interface // reads inventories without their node lists
	launcher *launcher
	op       *operatorProc // the running operator (a restart replaces it)
	quietRSS float64       // KiB: the steady RSS after sync
	fleet    []fleetNode   // the GPU nodes as generated
}

// lastPhases brings the fleet back to its generated state, then runs the hostile phase, the
// many-inventories phase and the GFD outage, in this order: the hostile phase compares the
// operator's memory with its quiet figure, which a thousand inventories (and the memory they
// leave to be returned once deleted) would blur, the inventories' expected totals need the
// hostile nodes restored, and the outage restarts the operator. It prints their tables and
// fails when a report was wrong; a memory target missed is printed, as the other targets are.
func lastPhases(ctx context.Context, h *harness) error {
	reset, err := resetFleet(ctx, h.kube, h.fleet)
	if err != nil {
		return err
	}
	whole := expectTotals(h.fleet, labels.Everything())
	if err := waitTotals(ctx, h.watcher, "cluster", whole, 2*time.Minute); err != nil {
		return fmt.Errorf("after the fleet reset (%s): %w", reset, err)
	}
	fmt.Fprintf(os.Stderr, "fleet reset: %s; the inventory shows %s\n", reset, whole)

	var hostile *hostileResult
	if hostileFor > 0 {
		if hostile, err = hostilePhase(ctx, h, hostileNodes, hostileRate, hostileFor); err != nil {
			return fmt.Errorf("hostile phase: %w", err)
		}
	}
	var wrong []error
	if hostileFor <= 0 && inventoryCount <= 0 {
		return outage(ctx, h, wrong)
	}
	// The hostile phase's rows first, so that a failure of the next phase does not lose them.
	fmt.Printf("\nHostile nodes, then many inventories (after the phases above; the fleet first made Ready again, as generated)\n\n")
	fmt.Println("| figure | measured | target |")
	fmt.Println("|---|---|---|")
	if r := hostile; r != nil {
		mib := func(kib float64) float64 { return kib / 1024 }
		fmt.Printf("| hostile writes: %d GPU nodes, each a new 64 KiB Ready message and random `nvidia.com/gpu.*` values | %.0f/s of %.0f/s asked (%d in %s, %d failed) | %.0f/s |\n",
			r.nodes, float64(r.writes)/r.duration.Seconds(), r.asked, r.writes, r.duration.Round(time.Second), r.failed, r.asked)
		fmt.Printf("| operator CPU during the attack | %.0f %% of a core | |\n", r.operatorCPU*100)
		fmt.Printf("| RSS quiet (steady after sync) / just before the attack | %.0f / %.0f MiB | |\n", mib(h.quietRSS), mib(r.beforeRSS))
		fmt.Printf("| RSS peak during the attack | %.0f MiB | |\n", mib(r.peakRSS))
		verdict := "met"
		if r.settledRSS > h.quietRSS+8*1024 {
			verdict = "**missed**"
		}
		fmt.Printf("| RSS settled after the attack (%s after the nodes were restored) | %.0f MiB, %+.1f MiB from quiet (%+.1f from just before) | ≤ quiet + 8 MiB: %s |\n",
			r.settleTook.Round(time.Second), mib(r.settledRSS), mib(r.settledRSS-h.quietRSS), mib(r.settledRSS-r.beforeRSS), verdict)
		correct := fmt.Sprintf("pass (%d state(s) seen, each %d GPU nodes, %d GPUs, all ready)", r.statesSeen, r.untouched.Nodes, r.untouched.Gpus)
		if r.wrongStates > 0 {
			correct = fmt.Sprintf("**FAIL**: %d of %d states wrong, first %s", r.wrongStates, r.statesSeen, r.firstWrong)
			wrong = append(wrong, fmt.Errorf("the inventory of the untouched nodes showed %d wrong states, first %s (want %s)", r.wrongStates, r.firstWrong, r.untouched))
		}
		fmt.Printf("| report for the %d untouched GPU nodes, during and after the attack | %s | pass |\n", r.untouched.Nodes, correct)
		restored := fmt.Sprintf("pass (%d GPU nodes, %d GPUs, all ready)", len(h.fleet), whole.Gpus)
		if !r.restoredRight {
			restored = "**FAIL**"
			wrong = append(wrong, fmt.Errorf("after the hostile nodes were restored: %w", r.restoreErr))
		}
		fmt.Printf("| report for the whole fleet once the %d nodes are restored | %s | pass |\n", r.nodes, restored)
		if r.failed > 0 {
			fmt.Fprintf(os.Stderr, "first failed hostile write: %v\n", r.firstFailure)
		}
	}
	if inventoryCount > 0 {
		r, err := inventoriesPhase(ctx, h, inventoryCount)
		if err != nil {
			return errors.Join(append(wrong, fmt.Errorf("%d inventories: %w", inventoryCount, err))...)
		}
		fmt.Printf("| %d more inventories (%d–%d GPU nodes each, mean %d): first create to every status right | %.1f s (creates took %.1f s) | |\n",
			r.count, r.fewest, r.most, r.mean, r.synced.Seconds(), r.created.Seconds())
		verdict := "met"
		if r.steadyRSS > 96*1024 {
			verdict = "**missed**"
		}
		fmt.Printf("| RSS just before the %d inventories were created | %.1f MiB | |\n", r.count, r.beforeRSS/1024)
		fmt.Printf("| steady RSS with %d inventories (peak in the phase) | %.0f MiB (%.0f MiB) | ≤ 96 MiB: %s |\n", r.count+1, r.steadyRSS/1024, r.peakRSS/1024, verdict)
	}
	return outage(ctx, h, wrong)
}

// outage runs the GFD outage phase and prints its table; it returns wrong and what the
// outage got wrong.
func outage(ctx context.Context, h *harness, wrong []error) error {
	if outageFor <= 0 {
		return errors.Join(wrong...)
	}
	r, err := outagePhase(ctx, h, outageFor)
	if err != nil {
		return errors.Join(append(wrong, fmt.Errorf("GFD outage: %w", err))...)
	}
	fmt.Printf("\nGFD outage: every GPU node labelled by GPU Feature Discovery (%d; the %d DRA nodes have no such label) loses them, the operator restarts halfway, the labels come back after %s\n\n", r.nodes, r.all-r.nodes, outageFor)
	fmt.Println("| figure | measured | target |")
	fmt.Println("|---|---|---|")
	fmt.Printf("| labels taken from %d GPU nodes / put back | in %.1f s / in %.1f s (at %.0f s) | |\n", r.nodes, r.removeTook.Seconds(), r.restoreTook.Seconds(), r.backAt.Seconds())
	fmt.Printf("| labelsMissingNodes during the outage (highest seen) | %d (every node counted %.1f s after the first removal) | %d |\n", r.maxMissing, r.allMissing.Seconds(), r.nodes)
	fmt.Printf("| restart at %.0f s: start to first complete status | %.2f s, labelsMissingNodes %s | |\n", r.restartAt.Seconds(), r.restartFirst.Seconds(),
		map[bool]string{true: fmt.Sprintf("%d", r.nodes), false: "**not all**"}[r.missingAfterRestart])
	fmt.Printf("| labels back: status exact, labelsMissingNodes 0 / every record unmarked | %.1f s (labelsMissingNodes %d) / %.1f s (%d records) | 0 |\n",
		r.exactBack.Seconds(), r.lastMissing, r.recordsBack.Seconds(), r.records)
	result := fmt.Sprintf("pass (%d states seen, %d counting all %d GPU nodes, each exact)", r.statesSeen, r.complete, r.all)
	if failures := r.failures(); len(failures) > 0 {
		result = "**FAIL**: " + strings.Join(failures, "; ")
		wrong = append(wrong, fmt.Errorf("GFD outage: %s", strings.Join(failures, "; ")))
	}
	fmt.Printf("| totalGpus and per-model nodes and GPUs in every state counting all GPU nodes; LabelsMissing naming the count | %s | pass |\n", result)
	return errors.Join(wrong...)
}
