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
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// benchOptions are make bench's flags, as far as the tables show them.
func benchOptions() *options {
	return &options{nodes: 5000, churn: 50, churnFor: 30 * time.Second, probes: 20, pluginRuns: 5, draShare: 0.5,
		outageFor: 2 * time.Minute, podChurn: 100, podChurnFor: 30 * time.Second, podWorkers: 64,
		usageWindow: time.Hour, usageQuiet: 5 * time.Minute, topologyQuiet: 10 * time.Second, hubQuiet: time.Minute}
}

func freeWhoRows(freeNotMeasured error) []commandRow {
	return []commandRow{
		{args: []string{"free"}, what: "reads the GpuInventory", target: freeTarget, runs: benchFree, notMeasured: freeNotMeasured},
		{args: []string{"who", "--all-namespaces"}, what: "streams the 100000 pods and the claims", target: whoTarget, runs: benchWho},
		{args: []string{"who", "--all-namespaces", "--disable-compression"}, what: "the same without gzip, kubectl's flag", target: whoTarget, runs: benchWhoRaw},
	}
}

func whyFitRows() []commandRow {
	const why, fit, anywhere = "a pending pod asking for 8 H100s by node selector", "a Deployment of 4 replicas × 2 H100s by node selector",
		"a Deployment of 2 replicas × 8 GPUs, no node selector: every node's pods"
	gzip := "--disable-compression=false"
	return []commandRow{
		{args: []string{"why"}, what: why, target: pinnedTarget, runs: benchWhy},
		{args: []string{"why", gzip}, what: why, runs: benchWhyGzip}, // gzip: no target of its own
		{args: []string{"fit"}, what: fit, target: pinnedTarget, runs: benchFit},
		{args: []string{"fit", gzip}, what: fit, runs: benchFitGzip},
		{args: []string{"fit"}, what: anywhere, target: anywhereTarget, runs: benchAnyway},
		{args: []string{"fit", gzip}, what: anywhere, runs: benchAnyGzip},
	}
}

// The tables are docs/performance.md's source: recorded results of every phase print them
// as testdata/*.golden, which the harness printed before its phases became a list (but for
// the target of the why and fit questions that name no node, ≤ 5 s and ≤ 128 MiB since, the
// gzip rows, without a target since, and the topology and hub tables, new since).
func TestReportPrintsTheTablesOfRecordedResults(t *testing.T) {
	missedOptions := benchOptions()
	missedOptions.profileDir = "/tmp/profiles"
	for _, tc := range []struct {
		golden  string
		o       *options
		results []result
	}{
		{"bench", benchOptions(), []result{
			&fleetResult{contexts: 10, total: 1000, listed: 500, objBytes: 194 * 1024, runs: benchFleet}, benchHub,
			benchEmpty, &warmStart{firstStatus: ms(890)}, benchQuiet, benchTopology, benchChurn, benchFlips, benchRepublish, benchRelabel,
			&statusSize{totalGpuNodes: 2500, bytes: 198 * 1024},
			&pluginsResult{show: benchShow, scanned: benchScan, agree: benchAgree},
			benchHostile, benchInventories, benchOutage, benchQuota, benchAllocation,
			&freeWhoResult{rows: freeWhoRows(nil), whoAgrees: benchWhoSays},
			&whyFitResult{rows: whyFitRows(), whyAgrees: benchWhySays, fitAgrees: benchFitSays},
			benchFloor, benchUsage,
		}},
		{"missed", missedOptions, []result{
			missedHub, missedEmpty, &warmStart{firstStatus: ms(2100)}, missedQuiet, missedTopology, missedChurn, missedFlips, missedRelabel,
			&statusSize{totalGpuNodes: 2500, bytes: 300 * 1024},
			missedHostile, missedInventories, missedOutage, missedQuota, missedAllocation,
			&freeWhoResult{rows: freeWhoRows(errors.New(`kubectl-gpuinv has no "free" command`)), whoAgrees: benchWhoSays},
			&whyFitResult{notMeasured: errors.New(`kubectl-gpuinv has no "fit" command`)},
			missedFloor, missedUsage,
		}},
		{"inventories-only", benchOptions(), []result{benchInventories}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			var out strings.Builder
			rep := &report{w: &out, o: tc.o}
			for _, res := range tc.results {
				res.printTo(rep)
			}
			want, err := os.ReadFile("testdata/" + tc.golden + ".golden")
			if err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != string(want) {
				t.Errorf("the tables differ from testdata/%s.golden:\n%s", tc.golden, lineDiff(string(want), got))
			}
		})
	}
}

// lineDiff lists the lines that differ, by number.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := range max(len(w), len(g)) {
		var a, c string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			c = g[i]
		}
		if a != c {
			fmt.Fprintf(&b, "line %d:\n  want %s\n  got  %s\n", i+1, a, c)
		}
	}
	return b.String()
}

// A question about a pod that can go anywhere reads every pod: it is judged by ≤ 5 s and
// ≤ 128 MiB, a pinned one by ≤ 1 s and ≤ 64 MiB.
func TestWhyFitTargetsDependOnTheNodeSelector(t *testing.T) {
	runs := metTimes(4, 3, 120*1024) // median 4 s, largest 120.25 MiB
	if !anywhereTarget.met(runs) || pinnedTarget.met(runs) {
		t.Errorf("4 s, 120 MiB: anywhere met %t, pinned met %t; want met, missed", anywhereTarget.met(runs), pinnedTarget.met(runs))
	}
	if got := anywhereTarget.String(); got != "≤ 5 s, ≤ 128 MiB" {
		t.Errorf("the anywhere target reads %q", got)
	}
	if slow := metTimes(5.2, 3, 100*1024); anywhereTarget.met(slow) {
		t.Error("a median of 5.2 s meets ≤ 5 s")
	}
}
