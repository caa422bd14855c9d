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
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/podcache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/usage"
)

// The bounds the tables judge figures by (KiB, shares of a core, durations); each row writes
// its own as text beside the verdict.
const (
	coldStartTarget     = 2500 * time.Millisecond
	allRecordsTarget    = time.Minute
	warmStartTarget     = 2 * time.Second
	changesCPUTarget    = 0.05 // flips alone, and flips with republishes
	relabelRateTarget   = 50   // record writes a second
	hostileSettleKiB    = 8 * 1024
	inventoriesRSSKiB   = 96 * 1024
	quotaBudgetKiB      = 8 * 1024 // what Kueue's objects may add to the steady RSS
	statusBytesTarget   = 256 * 1024
	allocationRSSKiB    = 64 * 1024
	podChurnCPUTarget   = 0.10
	statusWritesPerSec  = 2
	maxFloorRatio       = 1.25     // the starts at 100,000 pods against the floor's lists
	usageBudgetKiB      = 8 * 1024 // what reading usage may add to the steady RSS
	usageReadingTimeout = 10 * time.Second
	topologyBudgetKiB   = 4 * 1024 // what status.topology may add to the steady RSS
	topologyListedMax   = 32       // domains one topology lists, at any size
	hubRSSKiB           = 96 * 1024
	hubChangeTarget     = 2 * time.Second
	hubNominationTarget = time.Second
)

// commandTarget bounds a plugin command: its median wall time and, unless 0, its largest
// max RSS.
type commandTarget struct {
	wall   time.Duration
	rssMiB float64
}

// The plugin commands' targets. A question about pods that may go anywhere (no node
// selector) makes why and fit read every pod; pinned to a model or pool, they read the pods
// of those nodes only.
var (
	showTarget     = commandTarget{300 * time.Millisecond, 40}
	scanTarget     = commandTarget{2 * time.Second, 150}
	fleetTarget    = commandTarget{wall: time.Second}
	quotaTarget    = commandTarget{wall: 500 * time.Millisecond}
	freeTarget     = commandTarget{300 * time.Millisecond, 40}
	whoTarget      = commandTarget{5 * time.Second, 150}
	pinnedTarget   = commandTarget{time.Second, 64}
	anywhereTarget = commandTarget{5 * time.Second, 128}
)

func (t commandTarget) String() string {
	s := fmt.Sprintf("≤ %g s", t.wall.Seconds())
	if t.rssMiB > 0 {
		s += fmt.Sprintf(", ≤ %g MiB", t.rssMiB)
	}
	return s
}

// judge is the target with its verdict on runs, or "" for no target (gzip: the user's
// choice, with no target of its own).
func (t commandTarget) judge(runs pluginResults) string {
	if t.wall == 0 {
		return ""
	}
	return judged(t.String(), t.met(runs))
}

// met judges runs: the median wall time, and the largest max RSS.
func (t commandTarget) met(runs pluginResults) bool {
	return runs.medianWall() <= t.wall && (t.rssMiB == 0 || float64(runs.maxRSS())/1024 <= t.rssMiB)
}

// judged is a target as a row writes it, with its verdict.
func judged(target string, met bool) string { return target + ": " + verdict(met) }

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "**missed**"
}

// report prints the run's tables, docs/performance.md's source, as the phases' results come
// in (result.printTo): each table once the phases it shows have run.
type report struct {
	w io.Writer
	o *options
	// op gathers the operator's table until the status size, its last figure.
	op operatorFigures
	// lastOpen says whether the hostile-and-inventories table has its heading.
	lastOpen bool
}

// operatorFigures are the rows of the operator's table.
type operatorFigures struct {
	empty                  *emptyStart
	warm                   *warmStart
	quiet                  *quietResult
	churn                  *churnResult
	onlyFlips, republished *flipResult // nil: skipped
	relabel                *relabelResult
	topology               *topologyResult // nil: skipped; its table follows the operator's
}

// result is what a phase measured; printTo hands it to the report's table for it.
type result interface{ printTo(r *report) }

// A result that completes no table is kept for the one it belongs to.
func (e *emptyStart) printTo(r *report)     { r.op.empty = e }
func (w *warmStart) printTo(r *report)      { r.op.warm = w }
func (q *quietResult) printTo(r *report)    { r.op.quiet = q }
func (c *churnResult) printTo(r *report)    { r.op.churn = c }
func (t *topologyResult) printTo(r *report) { r.op.topology = t }
func (f *flipResult) printTo(r *report) {
	if f.republish {
		r.op.republished = f
	} else {
		r.op.onlyFlips = f
	}
}
func (l *relabelResult) printTo(r *report) { r.op.relabel = l }

func (f *fleetResult) printTo(r *report)       { r.fleet(f) }
func (h *hubResult) printTo(r *report)         { r.hub(h) }
func (s *statusSize) printTo(r *report)        { r.operator(&r.op, s) }
func (p *pluginsResult) printTo(r *report)     { r.plugins(p) }
func (h *hostileResult) printTo(r *report)     { r.hostile(h) }
func (i *inventoriesResult) printTo(r *report) { r.inventories(i) }
func (o *outageResult) printTo(r *report)      { r.outage(o) }
func (q *quotaResult) printTo(r *report)       { r.quota(q) }
func (a *allocationResult) printTo(r *report)  { r.allocation(a) }
func (f *freeWhoResult) printTo(r *report)     { r.freeWho(f) }
func (w *whyFitResult) printTo(r *report)      { r.whyFit(w) }
func (f *floorResult) printTo(r *report)       { r.floor(f) }
func (u *usageResult) printTo(r *report)       { r.usage(u) }

func (r *report) printf(format string, args ...any) { fmt.Fprintf(r.w, format, args...) }

// table starts a table: its heading (the lines above it), then its columns.
func (r *report) table(heading string, columns ...string) {
	r.printf("\n%s\n\n| %s |\n|%s\n", heading, strings.Join(columns, " | "), strings.Repeat("---|", len(columns)))
}

func mib(kib float64) float64 { return kib / 1024 }

func (r *report) fleet(f *fleetResult) {
	r.table(fmt.Sprintf("`kubectl gpuinv --all-contexts` over %d contexts: %d kube-apiservers sharing one etcd (one prefix each), each GpuInventory covering %d GPU nodes and listing %d (%.0f KiB) (%d runs, output to /dev/null; median wall time, largest max RSS)",
		f.contexts, f.contexts, f.total, f.listed, float64(f.objBytes)/1024, r.o.pluginRuns), "command", "wall time", "CPU", "max RSS", "target")
	r.printf("| `kubectl gpuinv --all-contexts` (%d GETs at once, fleet report) | %s | %s | %s | %s |\n",
		f.contexts, f.runs.wall(), f.runs.cpu(), f.runs.rss(), judged(fleetTarget.String(), fleetTarget.met(f.runs)))
}

// hub prints the hub phase's table.
func (r *report) hub(h *hubResult) {
	r.table(fmt.Sprintf("Fleet hub: `gpu-fleet-hub --dispatch` (its built binary) on a kube-apiserver of its own, over %d member API doubles (one process beside it; HTTPS, HTTP/2, a bearer token), each serving list and watch (bookmarks) of the GpuInventory of a %d-node cluster (%d GPU nodes, %d listed, topology and quota: %.0f KiB of JSON), named by %d ClusterProfiles (the secretreader plugin), %d of them also MultiKueue workers; Kueue's objects written by the harness (no Kueue runs)",
		h.members, h.memberNodes, h.gpuNodes, h.listed, float64(h.inventoryBytes)/1024, h.members, h.workers), "figure", "measured", "target")
	r.printf("| the hub's start to every member Reachable in the GpuFleet status | %.1f s | |\n", h.reachable.Seconds())
	r.printf("| RSS while quiet (%s; median, range) | %s | %s |\n", r.o.hubQuiet, h.quiet, judged("≤ 96 MiB", h.quiet.Median <= hubRSSKiB))
	r.printf("| peak RSS (VmHWM, the whole phase); anonymous at the end | %.1f MiB; %.1f MiB | %s |\n", mib(h.peak), mib(h.anon), judged("≤ 96 MiB", h.peak <= hubRSSKiB))
	if len(h.changes) > 0 {
		r.printf("| a double's MODIFIED event to a watch on the hub seeing the GpuFleet status show it (%d changes, a member each, 2 s apart): median / max | %s / %s | %s |\n",
			len(h.changes), median(h.changes), slices.Max(h.changes).Round(time.Millisecond), judged("≤ 2 s", slices.Max(h.changes) <= hubChangeTarget))
	}
	if len(h.nominations) > 0 {
		r.printf("| a pending MultiKueue Workload (1 GPU; its MultiKueue check written Pending) to a watch seeing `nominatedClusterNames` (%d Workloads in turn): median / max | %s / %s | %s |\n",
			len(h.nominations), median(h.nominations), slices.Max(h.nominations).Round(time.Millisecond), judged("≤ 1 s", slices.Max(h.nominations) <= hubNominationTarget))
	}
	api := "not read: " + fmt.Sprint(h.apiErr)
	var apiTotal int64
	if h.apiErr == nil {
		var parts []string
		for _, res := range hubWritten {
			parts = append(parts, fmt.Sprintf("%s %d", res, h.apiWrites[res]))
			apiTotal += h.apiWrites[res]
		}
		api = strings.Join(parts, ", ")
	}
	r.printf("| writes while quiet (%s): the hub's GpuFleet status writes / nominations written (its metrics); the API server's writes (%s) | %d / %d; %s | %s |\n",
		r.o.hubQuiet, strings.Join(hubWritten, ", "), h.fleetWrites, h.nominationWrites, api, judged("0", h.fleetWrites == 0 && h.nominationWrites == 0 && apiTotal == 0 && h.apiErr == nil))
}

// operator prints the operator's table and the figures below it, once the status size, its
// last row, is measured.
func (r *report) operator(f *operatorFigures, size *statusSize) {
	q, c, e, o := f.quiet, f.churn, f.empty, r.o
	r.table(fmt.Sprintf("N=%d nodes (%d GPU nodes), churn %.0f flips/s for %s (%d flips), %d probes per phase\n"+
		"DRA: %d of the GPU nodes (--dra-share %g) have no GFD label and one ResourceSlice of 8 devices; the churn's %d changes include %d slice republishes (%d of them adding or removing a device taint)",
		o.nodes, size.totalGpuNodes, o.churn, o.churnFor, c.counts.Changes, o.probes,
		e.draNodes, o.draShare, c.counts.Changes, c.counts.Republishes, c.counts.Taints), "figure", "measured", "target")
	r.printf("| steady RSS after sync (with %d records) | %.1f MiB | ≤ 48 MiB |\n", e.gpuNodes, q.rss/1024)
	r.printf("| peak RSS | %.0f MiB | ≤ 96 MiB |\n", c.peakRSS/1024)
	r.printf("| start to first complete status on an empty cluster (the operator installs both CRDs) | %.2f s | %s |\n",
		e.firstStatus.Seconds(), judged("≤ 2.5 s", e.firstStatus <= coldStartTarget))
	r.printf("| start on an empty cluster to all %d GpuNode records (default `--gpunode-qps`) | %.1f s (CRD established at %.1f s; %s) | %s |\n",
		e.gpuNodes, e.records.all.Seconds(), e.records.crdServed.Seconds(), e.writes, judged("≤ 60 s", e.records.all <= allRecordsTarget))
	r.printf("| start to first complete status (CRDs, inventory and %d records exist) | %.2f s | %s |\n",
		e.gpuNodes, f.warm.firstStatus.Seconds(), judged("≤ 2 s", f.warm.firstStatus <= warmStartTarget))
	r.printf("| record writes from that start until the quiet phase | %d (%s) | %s |\n", q.restartWrites.writes(), q.restartWrites, judged("0", q.restartWrites.writes() == 0))
	r.printf("| CPU under the churn (%.0f changes/s: Ready flips, every tenth a relabel, every 25th a node leaving and joining, slice republishes) | %.1f %% of a core | (the target is for flips and republishes, below) |\n", o.churn, c.cpu*100)
	r.printf("| slice republishes under churn (generation+1, same devices; device taint toggles) | %d (%d) | |\n", c.counts.Republishes, c.counts.Taints)
	r.printf("| status writes while quiet (10 s) | %d | 0 |\n", q.statusWrites)
	r.printf("| CPU while quiet (10 s, once settled: the fixed part of the figures under churn) | %.1f %% of a core | |\n", q.cpu*100)
	r.printf("| record writes while quiet (10 s) | %d (%s) | %s |\n", q.records.writes(), q.records, judged("0", q.records.writes() == 0))
	r.singleChanges(f, c.records)
	r.printf("| status writes/s under churn | %.1f | ≤ 2 per inventory |\n", c.statusWrites)
	r.printf("| change -> status, p99 | %s quiet, %s under churn | ≤ 200 ms quiet, ≤ 1.5 s under churn |\n", p99(q.latency), p99(c.latency))
	r.printf("| status size | %.0f KiB at %d GPU nodes | ≤ 256 KiB at any size |\n", float64(size.bytes)/1024, size.totalGpuNodes)
	r.printf("\nsteady RSS: %.0f MiB anonymous (heap, stacks, runtime), %.0f MiB of mapped files (the binary)\n", q.anon/1024, q.file/1024)
	r.printf("change -> status: median %s quiet, %s under churn\n", median(q.latency), median(c.latency))
	r.printf("the API server's share: a dry-run apply of the same status takes median %s, p99 %s\n", median(q.serverApply), p99(q.serverApply))
	if t := f.topology; t != nil {
		r.topology(t)
	}
}

// topology prints the topology phase's table.
func (r *report) topology(t *topologyResult) {
	r.table(fmt.Sprintf("Topology: status.topology of the %d GPU nodes (the fleet's levels: %s); the operator restarted with `--topology=false`, then with the run's flags again, each measured as the quiet phase measures it (CPU settled, %s quiet, then its memory)",
		t.gpuNodes, levelsText(t.want), r.o.topologyQuiet), "figure", "measured", "target")
	added := mib(t.quietRSS) - t.off.rss
	r.printf("| steady RSS with `--topology=false` (Go heap in use) | %.1f MiB (%.1f MiB) | |\n", t.off.rss, t.off.heapInuse)
	r.printf("| steady RSS with topology (the quiet phase's), over `--topology=false` | %.1f MiB: %+.1f MiB | %s |\n",
		mib(t.quietRSS), added, judged("≤ +4 MiB", added*1024 <= topologyBudgetKiB))
	r.printf("| steady RSS with topology, restarted again (Go heap in use), over `--topology=false` | %.1f MiB (%.1f MiB): %+.1f MiB (heap %+.1f MiB) | |\n",
		t.on.rss, t.on.heapInuse, t.on.rss-t.off.rss, t.on.heapInuse-t.off.heapInuse)
	r.printf("| status writes while quiet with topology (%s) | %d (record writes %d) | %s |\n",
		r.o.topologyQuiet, t.quietWrites, t.quietRecords.writes(), judged("0", t.quietWrites == 0 && t.quietRecords.writes() == 0))
	levels := "pass"
	if !t.levelsRight() {
		levels = "**FAIL**"
	}
	r.printf("| status.topology: topologies, their levels and the domains each counts | %s | the fleet's: %s |\n", topologyLevels(t.status), levels)
	listed, counted := t.mostListed()
	r.printf("| status.topology: domains listed (of those its levels count) | %d (of %d) | %s |\n",
		listed, counted, judged(fmt.Sprintf("≤ %d", topologyListedMax), listed <= topologyListedMax))
	r.printf("| status.topology as JSON; the inventory as the API server sends it, without / with topology | %.1f KiB; %.0f / %.0f KiB | |\n",
		float64(t.sectionBytes)/1024, float64(t.offBytes)/1024, float64(t.onBytes)/1024)
}

// singleChanges prints the rows of the phases after the churn, and the churn's record writes
// among them.
func (r *report) singleChanges(s *operatorFigures, churnRecords writeCounts) {
	rate := r.o.churn
	if f := s.onlyFlips; f != nil {
		r.printf("| record writes while %.0f GPU nodes/s flip Ready (flips only, %d in %s, and 2 s after) | %d (%s) | %s |\n",
			rate, f.flips, f.took.Round(time.Second), f.writes.writes(), f.writes, judged("0", f.writes.writes() == 0))
		r.printf("| CPU while %.0f GPU nodes/s flip Ready, nothing else changing (%d flips in %s) | %.1f %% of a core | %s |\n",
			rate, f.flips, f.took.Round(time.Second), f.cpu*100, judged("≤ 5 % of a core", f.cpu <= changesCPUTarget))
	}
	if f := s.republished; f != nil {
		r.printf("| CPU under %.0f changes/s spread over Ready flips and slice republishes, nothing else changing (%d changes in %s, %d of them republishes, %d taint toggles) | %.1f %% of a core | %s |\n",
			rate, f.flips, f.took.Round(time.Second), f.counts.Republishes, f.counts.Taints, f.cpu*100, judged("≤ 5 % of a core", f.cpu <= changesCPUTarget))
		r.printf("| record writes under those flips and republishes (a taint toggle changes a node's health, as does the first republish of a node the churn left tainted) | %d (%s) | |\n", f.writes.writes(), f.writes)
	}
	r.printf("| record writes under churn (its relabels are GFD's timestamp, its republishes the slice's generation; its rejoins and the probes change identities, its taint toggles health) | %d (%s) | |\n", churnRecords.writes(), churnRecords)
	if l := s.relabel; l != nil {
		// The writes happen between the first relabel and the last record showing it.
		perSec := float64(l.writes.writes()) / l.synced.Seconds()
		r.printf("| relabel (driver version of distinct GPU nodes): %d nodes in %s, %.1f nodes/s; record writes until every record shows it (%s) | %d (%s), %.1f/s over those %s, %.2f per relabelled node | %s |\n",
			l.nodes, l.took.Round(100*time.Millisecond), float64(l.nodes)/l.took.Seconds(), l.synced.Round(100*time.Millisecond),
			l.writes.writes(), l.writes, perSec, l.synced.Round(100*time.Millisecond), float64(l.writes.writes())/float64(max(1, l.nodes)),
			judged("≤ 50/s, ≤ 1 per node", perSec <= relabelRateTarget && l.writes.writes() <= int64(l.nodes)))
	}
}

func (r *report) plugins(p *pluginsResult) {
	r.table(fmt.Sprintf("`kubectl gpuinv` on the same fleet (%d runs each, output to /dev/null; median wall time, largest max RSS)", r.o.pluginRuns),
		"command", "wall time", "max RSS", "target")
	r.printf("| `kubectl gpuinv` (reads the GpuInventory) | %s | %s | %s |\n", p.show.wall(), p.show.rss(), showTarget)
	r.printf("| `kubectl gpuinv scan` (lists the %d nodes) | %s | %s | %s |\n", r.o.nodes, p.scanned.wall(), p.scanned.rss(), scanTarget)
	r.printf("\n`kubectl gpuinv scan` equals the operator's status: %s\n", p.agree)
}

// openLast prints the heading of the hostile-and-inventories table before its first row.
func (r *report) openLast() {
	if !r.lastOpen {
		r.table("Hostile nodes, then many inventories (after the phases above; the fleet first made Ready again, as generated)", "figure", "measured", "target")
		r.lastOpen = true
	}
}

func (r *report) hostile(h *hostileResult) {
	r.openLast()
	r.printf("| hostile writes: %d GPU nodes, each a new 64 KiB Ready message and random `nvidia.com/gpu.*` values | %.0f/s of %.0f/s asked (%d in %s, %d failed) | %.0f/s |\n",
		h.nodes, float64(h.writes)/h.duration.Seconds(), h.asked, h.writes, h.duration.Round(time.Second), h.failed, h.asked)
	r.printf("| operator CPU during the attack | %.0f %% of a core | |\n", h.operatorCPU*100)
	r.printf("| RSS quiet (steady after sync) / just before the attack | %.0f / %.0f MiB | |\n", mib(h.quietRSS), mib(h.beforeRSS))
	r.printf("| RSS peak during the attack | %.0f MiB | |\n", mib(h.peakRSS))
	r.printf("| RSS settled after the attack (%s after the nodes were restored) | %.0f MiB, %+.1f MiB from quiet (%+.1f from just before) | %s |\n",
		h.settleTook.Round(time.Second), mib(h.settledRSS), mib(h.settledRSS-h.quietRSS), mib(h.settledRSS-h.beforeRSS),
		judged("≤ quiet + 8 MiB", h.settledRSS <= h.quietRSS+hostileSettleKiB))
	correct := fmt.Sprintf("pass (%d state(s) seen, each %d GPU nodes, %d GPUs, all ready)", h.statesSeen, h.untouched.Nodes, h.untouched.Gpus)
	if h.wrongStates > 0 {
		correct = fmt.Sprintf("**FAIL**: %d of %d states wrong, first %s", h.wrongStates, h.statesSeen, h.firstWrong)
	}
	r.printf("| report for the %d untouched GPU nodes, during and after the attack | %s | pass |\n", h.untouched.Nodes, correct)
	restored := fmt.Sprintf("pass (%d GPU nodes, %d GPUs, all ready)", h.whole.Nodes, h.whole.Gpus)
	if h.restoreErr != nil {
		restored = "**FAIL**"
	}
	r.printf("| report for the whole fleet once the %d nodes are restored | %s | pass |\n", h.nodes, restored)
}

func (r *report) inventories(i *inventoriesResult) {
	r.openLast()
	r.printf("| %d more inventories (%d–%d GPU nodes each, mean %d): first create to every status right | %.1f s (creates took %.1f s) | |\n",
		i.count, i.fewest, i.most, i.mean, i.synced.Seconds(), i.created.Seconds())
	r.printf("| RSS just before the %d inventories were created | %.1f MiB | |\n", i.count, i.beforeRSS/1024)
	r.printf("| steady RSS with %d inventories (peak in the phase) | %.0f MiB (%.0f MiB) | %s |\n", i.count+1, i.steadyRSS/1024, i.peakRSS/1024,
		judged("≤ 96 MiB", i.steadyRSS <= inventoriesRSSKiB))
}

func (r *report) outage(o *outageResult) {
	r.table(fmt.Sprintf("GFD outage: every GPU node labelled by GPU Feature Discovery (%d; the %d DRA nodes have no such label) loses them, the operator restarts halfway, the labels come back after %s",
		o.nodes, o.all-o.nodes, r.o.outageFor), "figure", "measured", "target")
	r.printf("| labels taken from %d GPU nodes / put back | in %.1f s / in %.1f s (at %.0f s) | |\n", o.nodes, o.removeTook.Seconds(), o.restoreTook.Seconds(), o.backAt.Seconds())
	r.printf("| labelsMissingNodes during the outage (highest seen) | %d (every node counted %.1f s after the first removal) | %d |\n", o.maxMissing, o.allMissing.Seconds(), o.nodes)
	afterRestart := "**not all**"
	if o.missingAfterRestart {
		afterRestart = fmt.Sprint(o.nodes)
	}
	r.printf("| restart at %.0f s: start to first complete status | %.2f s, labelsMissingNodes %s | |\n", o.restartAt.Seconds(), o.restartFirst.Seconds(), afterRestart)
	r.printf("| labels back: status exact, labelsMissingNodes 0 / every record unmarked | %.1f s (labelsMissingNodes %d) / %.1f s (%d records) | 0 |\n",
		o.exactBack.Seconds(), o.lastMissing, o.recordsBack.Seconds(), o.records)
	result := fmt.Sprintf("pass (%d states seen, %d counting all %d GPU nodes, each exact)", o.statesSeen, o.complete, o.all)
	if failures := o.failures(); len(failures) > 0 {
		result = "**FAIL**: " + strings.Join(failures, "; ")
	}
	r.printf("| totalGpus and per-model nodes and GPUs in every state counting all GPU nodes; LabelsMissing naming the count | %s | pass |\n", result)
}

func (r *report) quota(q *quotaResult) {
	p := q.plan
	r.table("Quota: Kueue's CRDs installed while the operator runs; ClusterQueue status written by the harness through the status subresource, as Kueue would (no Kueue controller runs)",
		"figure", "measured", "target")
	r.printf("| Kueue's objects: %d ResourceFlavors, %d ClusterQueues (%d cohorts, %d with a borrowingLimit, %d with a lendingLimit), %d Cohort objects, %d LocalQueues in %d namespaces, each queue's status | created in %.1f s | |\n",
		p.flavors, p.queues, p.cohortNames, p.borrowing, p.lending, p.cohorts, p.localQueues, p.namespaces, q.created.Seconds())
	r.printf("| last write to a status.quota counting every ClusterQueue and its usage (live, no restart) | %.2f s | |\n", q.firstQuota.Seconds())
	r.printf("| %d Workloads (%d writers; the operator reads none) | created in %.1f s, %.0f/s | |\n",
		p.workloads, quotaWorkers, q.workloadsTook.Seconds(), float64(p.workloads)/q.workloadsTook.Seconds())
	r.printf("| steady RSS without Kueue, after a restart (median of %s, range) | %s | |\n", quotaQuietFor, q.before)
	r.printf("| steady RSS with Kueue picked up live, over the quiet minute | %s: %+.1f MiB | %s |\n",
		q.live, mib(q.live.Median-q.before.Median), judged("≤ +8 MiB", q.live.Median-q.before.Median <= quotaBudgetKiB))
	r.printf("| steady RSS after a restart with Kueue in place (median of %s, range) | %s: %+.1f MiB | %s |\n",
		quotaQuietFor, q.restarted, mib(q.restarted.Median-q.before.Median), judged("≤ +8 MiB", q.restarted.Median-q.before.Median <= quotaBudgetKiB))
	r.printf("| restart with Kueue in place: start to first complete status / to the first with every ClusterQueue and its usage | %.2f s / %.2f s | |\n", q.restartComplete.Seconds(), q.restartFirst.Seconds())
	r.printf("| status writes while quiet (%s, Kueue in place) | %d (record writes %d) | %s |\n",
		quotaQuietFor, q.quietWrites, q.quietRecords.writes(), judged("0", q.quietWrites == 0 && q.quietRecords.writes() == 0))
	r.printf("| status size with quota | %.0f KiB | %s |\n", float64(q.statusBytes)/1024, judged("≤ 256 KiB", q.statusBytes <= statusBytesTarget))
	if len(q.show) > 0 {
		r.printf("| `kubectl gpuinv quota` (%d runs: median wall time (range); max RSS median (range)) | %s, CPU %s | %s | %s |\n",
			len(q.show), q.show.wall(), q.show.cpu(), q.show.rssSpread(), judged(quotaTarget.String(), quotaTarget.met(q.show)))
	}
	if len(q.queue) > 0 {
		r.printf("| `kubectl gpuinv quota --queue %s` (reads the LocalQueue too) | %s, CPU %s | %s | %s |\n",
			q.queueArg, q.queue.wall(), q.queue.cpu(), q.queue.rssSpread(), judged(quotaTarget.String(), quotaTarget.met(q.queue)))
	}
	if s := q.quota; s != nil {
		var found []string
		for _, c := range q.conditions {
			if slices.Contains([]string{homelabv1.ConditionQuotaOvercommitted, homelabv1.ConditionQuotaStranded, homelabv1.ConditionQuotaUnknown}, c.Type) {
				found = append(found, fmt.Sprintf("%s=%s", c.Type, c.Status))
			}
		}
		r.printf("\nwhere the RSS goes at the end of each window (MiB, without Kueue / live / after the restart): %s\n", splitRows(q.splits[:]...))
		r.printf("status.quota: Kueue %s, %d ClusterQueues, %d cohorts, %d stranded Ready nodes (the DRA nodes: no flavor selects them), %d model rows, %d cohort rows, %d queue rows; %v\n",
			s.Kueue, s.ClusterQueues, s.Cohorts, s.StrandedNodes, len(s.Models), len(s.CohortModels), len(s.Queues), found)
	}
}

// splitRows prints memory splits side by side.
func splitRows(splits ...memSplit) string {
	row := func(name string, v func(memSplit) float64) string {
		parts := make([]string, len(splits))
		for i, s := range splits {
			parts[i] = fmt.Sprintf("%.1f", v(s))
		}
		return name + " " + strings.Join(parts, " / ")
	}
	return strings.Join([]string{
		row("RSS", func(s memSplit) float64 { return s.rss }),
		row("heap spans in use", func(s memSplit) float64 { return s.heapInuse }),
		row("heap objects", func(s memSplit) float64 { return s.heapAlloc }),
		row("free heap kept", func(s memSplit) float64 { return s.idleKept }),
		row("stacks", func(s memSplit) float64 { return s.stacks }),
		row("mapped files", func(s memSplit) float64 { return s.file }),
	}, "; ")
}

func (r *report) allocation(a *allocationResult) {
	o := r.o
	r.table(fmt.Sprintf("Allocation: %d pods on the %d nodes (%d asking for GPUs: %d bound to GPU nodes, %d waiting, %d finished; the rest ordinary, on any node), the operator restarted with them in place; then %.0f pod creations and deletions a second for %s",
		a.pods, o.nodes, a.gpuPods, a.bound, a.pending, a.finished, o.podChurn, o.podChurnFor), "figure", "measured", "target")
	r.printf("| pods created (%d workers; each then gets its kubelet's or scheduler's status) | %d in %.0f s, %.0f/s; a GPU pod is %.1f KiB of JSON (%.1f KiB without managedFields), %.1f KiB of protobuf | |\n",
		o.podWorkers, a.pods, a.created.Seconds(), float64(a.pods)/a.created.Seconds(), float64(a.podJSON)/1024, float64(a.podBare)/1024, float64(a.podProto)/1024)
	r.printf("| start to first complete status (allocation exact: %s) | %.2f s (the operator's CPU time until then: %.1f s) | ≤ %.2f× the floor: in the floor's table |\n",
		&a.want, a.firstStatus.Seconds(), a.firstStatusCPU, maxFloorRatio)
	if len(a.byNamespace) > 0 {
		r.printf("| restarts in turn after the churn, %d each, %s apart: pods listed at once / by namespace (`--list-pods-by-namespace`, needs `list` on namespaces); median (range) | %s / %s | |\n",
			len(a.atOnce), alternationPause, spread(a.atOnce), spread(a.byNamespace))
	}
	r.printf("| steady RSS after sync | %.1f MiB (%.1f MiB anonymous, Go heap in use %.1f MiB) | %s |\n",
		mib(a.steadyRSS), mib(a.steadyAnon), mib(a.steadyHeap), judged("≤ 64 MiB", a.steadyRSS <= allocationRSSKiB))
	if i := a.informer; i != nil {
		r.printf("| plain client-go Pod informer, transform dropping managedFields, same %d pods (a process of its own, protobuf) | %.0f MiB 10 s after sync, %.0f MiB after a forced GC (heap %.0f MiB; synced in %.1f s, peak %.0f MiB) | |\n",
			i.Pods, mib(float64(i.RSSKiB)), mib(float64(i.RSSAfterGCKiB)), mib(float64(i.HeapAfterGCKiB)), i.SyncSeconds, mib(float64(i.PeakKiB)))
		r.printf("| ratio: that informer's RSS (after a forced GC) / the operator's steady RSS | %.1f× | |\n", float64(i.RSSAfterGCKiB)/a.steadyRSS)
	} else {
		r.printf("| plain client-go Pod informer | not measured: %v | |\n", a.informerErr)
	}
	r.podChurn(a)
}

// podChurn prints the rows of the allocation phase's pod churn.
func (r *report) podChurn(a *allocationResult) {
	c, rate := a.churn, r.o.podChurn
	achieved := float64(c.creates.Load()+c.deletes.Load()) / a.churnWall.Seconds()
	r.printf("| pod churn: %d creations and %d deletions in %.1f s (%d and %d of them GPU pods), %d failed | %.0f/s of %.0f/s asked | |\n",
		c.creates.Load(), c.deletes.Load(), a.churnWall.Seconds(), c.gpuCreates.Load(), c.gpuDeletes.Load(), c.failed.Load(), achieved, rate)
	// When the API server could not keep up with the rate asked, the CPU figure is also given
	// scaled to that rate, and judged so.
	cpu, scaled := a.churnCPU, ""
	if achieved < 0.95*rate && achieved > 0 {
		cpu = a.churnCPU * rate / achieved
		scaled = fmt.Sprintf(" at %.0f/s; %.1f %% scaled to %.0f/s", achieved, cpu*100, rate)
	}
	r.printf("| CPU under the pod churn | %.1f %% of a core%s | %s |\n", a.churnCPU*100, scaled, judged("≤ 10 % of a core", cpu <= podChurnCPUTarget))
	r.printf("| status writes/s under the pod churn (one inventory) | %.1f | %s |\n", a.writesPerSec, judged("≤ 2 per inventory", a.writesPerSec <= statusWritesPerSec))
	r.printf("| after the churn: status exact (%s) | after %.2f s | pass |\n", &a.wantAfter, a.exactAfter.Seconds())
	r.printf("| RSS after the churn, quiet (peak during it) | %.1f MiB, Go heap in use %.1f MiB (%.1f MiB) | |\n", mib(a.afterRSS), mib(a.afterHeap), mib(a.peakRSS))
}

// commandRows prints a table's plugin commands, each judged by its target.
func (r *report) commandRows(rows []commandRow) {
	for _, c := range rows {
		if c.notMeasured != nil {
			r.printf("| `kubectl gpuinv %s` | not measured: %v | | %s |\n", c.args[0], c.notMeasured, c.target)
			continue
		}
		r.printf("| `kubectl gpuinv %s` (%s) | %s, CPU %s | %s | %s |\n", strings.Join(c.args, " "), c.what, c.runs.wall(), c.runs.cpu(), c.runs.rss(),
			c.target.judge(c.runs))
	}
}

func (r *report) freeWho(f *freeWhoResult) {
	r.table(fmt.Sprintf("`kubectl gpuinv free` and `who` with the pods in place (%d runs each, output to /dev/null; median wall time, largest max RSS)", r.o.pluginRuns),
		"command", "wall time", "max RSS", "target")
	r.commandRows(f.rows)
	if f.whoAgrees != "" {
		r.printf("\n`kubectl gpuinv who` equals the pods: %s\n", f.whoAgrees)
	}
}

func (r *report) whyFit(w *whyFitResult) {
	r.table(fmt.Sprintf("`kubectl gpuinv why` and `fit` with the pods in place (%d runs each, output to /dev/null; median wall time, largest max RSS)", r.o.pluginRuns),
		"command", "wall time", "max RSS", "target")
	if w.notMeasured != nil {
		r.printf("| `kubectl gpuinv why`, `fit` | not measured: %v | | %s |\n", w.notMeasured, pinnedTarget)
		return
	}
	r.commandRows(w.rows)
	r.printf("\n`kubectl gpuinv why` equals the pods: %s\n", w.whyAgrees)
	r.printf("`kubectl gpuinv fit` equals the pods: %s\n", w.fitAgrees)
}

// floor prints the floor's table and the operator's starts with all pods listed at once
// (the first after the pods were created, then the restarts) against it.
func (r *report) floor(f *floorResult) {
	r.table(fmt.Sprintf("The floor of the first complete status: the %d pods listed by a client that only decodes them, as the operator's pod cache does (protobuf over HTTP/1.1, no gzip), in turn with the operator's starts: each list once the start before it has settled; median (range)",
		f.pods), "list", "wall time", "target")
	r.printf("| one list of all pods (resourceVersion 0, the operator's first list), %d times | %s | |\n", len(f.one), spread(f.one))
	r.printf("| namespace by namespace (%d namespaces, %d at a time, as `kubectl gpuinv who -A`; needs `list` on namespaces), %d times | %s | |\n",
		f.namespaces, podcache.Listers, len(f.perNamespace), spread(f.perNamespace))
	ratio := midpoint(f.starts).Seconds() / midpoint(f.one).Seconds()
	judgedRatio := judged(fmt.Sprintf("≤ %.2f×", maxFloorRatio), ratio <= maxFloorRatio)
	if r.o.profileDir != "" {
		judgedRatio = fmt.Sprintf("≤ %.2f×: not comparable: with --profile-dir the start was profiled, the operator's and the API server's CPU", maxFloorRatio)
	}
	r.printf("| the operator's first complete status with the pods listed at once, %d starts (the first after the pods were created, then the restarts) | %s = %.2f× one list | %s |\n",
		len(f.starts), spread(f.starts), ratio, judgedRatio)
	r.printf("\nIn turn, start / the floor's list after it: %s\n", inTurn(f.starts, f.one))
}

func (r *report) usage(u *usageResult) {
	o := r.o
	r.table(fmt.Sprintf("Usage: DCGM exporter double reporting a device per GPU unit the running GPU pods hold (a third of the pods idle at %g, the rest at %g, unchanging); a real Prometheus scraping it once a minute with %s of history backfilled; the operator restarted with `--prometheus-url`, `--idle-window %s`, `--idle-after %s`, the default `--usage-interval` (1m) and `--prometheus-timeout` (10s)",
		usageIdle, usageBusy, o.usageWindow, o.usageWindow, usageIdleAfter), "figure", "measured", "target")
	r.printf("| held devices (pods): DCGM series (both series of a whole GPU, profiling only of a MIG device) | %d devices of %d pods (%d idle) | |\n", u.devices, u.pods, u.idleDevices)
	r.printf("| history: %s at one sample a minute, written / `promtool tsdb create-blocks-from openmetrics` | %.0f MiB in %.0f s / %.0f s, promtool max RSS %.0f MiB | |\n",
		o.usageWindow, float64(u.historyBytes)/(1<<20), u.historyWrite.Seconds(), u.backfill.Seconds(), mib(float64(u.promtoolKiB)))
	r.printf("| Prometheus start to first scrape of the double / its RSS at the end | %.0f s / %.0f MiB | |\n", u.promStart.Seconds(), u.promRSS)
	r.printf("| restart with `--prometheus-url`: start to the first status with usage / to the whole window's | %.1f s / %.1f s | |\n", u.firstUsage.Seconds(), u.wholeWindow.Seconds())
	r.printf("| steady RSS without usage, after a restart (median of %s, range; Go heap in use) | %s; %.1f MiB | |\n", usageBaseline, u.before, u.heapBefore)
	r.printf("| steady RSS with usage (median of the quiet %s, range; Go heap in use) | %s; %.1f MiB: %+.1f MiB | %s |\n",
		o.usageQuiet, u.after, u.heapAfter, mib(u.after.Median-u.before.Median), judged("≤ +8 MiB", u.after.Median-u.before.Median <= usageBudgetKiB))
	r.printf("| status writes while quiet (%s, %.0f readings, no class change) | %d (record writes %d) | %s |\n",
		o.usageQuiet, u.readings, u.quietWrites, u.quietRecords.writes(), judged("0", u.quietWrites == 0 && u.quietRecords.writes() == 0))
	perMinute := u.readings / o.usageQuiet.Minutes()
	r.printf("| readings a minute while quiet (the operator's reading count); Prometheus' instant queries per reading | %.2f; %.1f | %s |\n",
		perMinute, u.queriesPerReading, judged("≤ 1", perMinute <= 1.01))
	r.printf("| one reading of the operator: Prometheus' time answering its queries (its own request-duration metric) / the operator's CPU in the quiet period per reading | %.2f s / %.2f s | %s |\n",
		u.promPerReading.Seconds(), u.cpuPerReading, judged("within `--prometheus-timeout` 10 s", u.promPerReading < usageReadingTimeout))
	if len(u.chunks) > 0 {
		r.printf("| a new `usage.Reader` in the harness: its %d readings of the window's past (a %s chunk each; median, range) | %s | %s |\n",
			len(u.chunks), usage.Chunk, spread(u.chunks), judged("within 10 s", slices.Max(u.chunks) < usageReadingTimeout))
	}
	r.printf("| its readings after, a minute apart, median of %d (range) | %s: %d devices | |\n", usageRuns, spread(u.reader), u.series)
	r.printf("| Prometheus' answer, read whole, median of %d: now / over a %s chunk: held / idle / first seen / last busy (largest answer) | %s / %s / %s / %s / %s (%.1f MiB) | |\n",
		usageRuns, usage.Chunk, median(u.queries[0]), median(u.queries[1]), median(u.queries[2]), median(u.queries[3]), median(u.queries[4]), float64(u.answerBytes)/(1<<20))
	if s := u.status; s != nil {
		r.printf("\nstatus.usage: %s, heldGpus %d, idleGpus %d, %d namespace rows, %d idle holders listed", s.Metric, s.HeldGpus, s.IdleGpus, len(s.Namespaces), len(s.IdleHolders))
	}
	if u.unknown != "" {
		r.printf("; UsageUnknown: %s", u.unknown)
	}
	r.printf("\n")
}

func median(d []time.Duration) string {
	if len(d) == 0 {
		return "n/a"
	}
	s := slices.Sorted(slices.Values(d))
	return s[len(s)/2].Round(time.Millisecond).String()
}

func p99(d []time.Duration) string {
	if len(d) == 0 {
		return "n/a"
	}
	s := slices.Sorted(slices.Values(d))
	i := min((len(s)*99+99)/100, len(s))
	return s[i-1].Round(time.Millisecond).String()
}

// spread is the median of d and its range, in seconds.
func spread(d []time.Duration) string {
	s := slices.Sorted(slices.Values(d))
	return fmt.Sprintf("%.2f s (%.2f–%.2f)", midpoint(s).Seconds(), s[0].Seconds(), s[len(s)-1].Seconds())
}

// midpoint is the median of d: the mean of the middle two of an even count.
func midpoint(d []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(d))
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// inTurn pairs each start with the floor's list that followed it, in seconds.
func inTurn(starts, lists []time.Duration) string {
	var pairs []string
	for i := range min(len(starts), len(lists)) {
		pairs = append(pairs, fmt.Sprintf("%.2f / %.2f s", starts[i].Seconds(), lists[i].Seconds()))
	}
	return strings.Join(pairs, ", ")
}
