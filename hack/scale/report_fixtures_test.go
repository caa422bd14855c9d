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
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/youngju-dev/gpu-inventory-operator/hack/scale/proc"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/topology"
)

// windowOf is an RSS window of median, low and high MiB.
func windowOf(median, low, high float64) proc.Window {
	return proc.Window{Median: median * 1024, Low: low * 1024, High: high * 1024}
}

// ms is n milliseconds.
func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// spreadOf is count durations from low, step apart.
func spreadOf(low, step time.Duration, count int) []time.Duration {
	out := make([]time.Duration, count)
	for i := range out {
		out[i] = low + time.Duration(i)*step
	}
	return out
}

// runsOf is a plugin's recorded runs: wall seconds, CPU seconds and max RSS KiB each, the
// spawner at 6 MiB.
func runsOf(runs ...[3]float64) pluginResults {
	var out pluginResults
	for _, r := range runs {
		out = append(out, pluginRun{WallSeconds: r[0], CPUSeconds: r[1], MaxRSSKiB: int64(r[2]), SpawnerKiB: 6 * 1024})
	}
	return out
}

func metTimes(wall, cpu, kib float64) pluginResults {
	return runsOf([3]float64{wall, cpu, kib}, [3]float64{wall * 0.9, cpu, kib - 512}, [3]float64{wall * 1.2, cpu * 1.1, kib + 256})
}

// Scenario "bench": a run as make bench's, most targets met.

var benchHub = &hubResult{members: 50, memberNodes: 5000, workers: 5, inventoryBytes: 227 * 1024, gpuNodes: 2500, listed: 463, reachable: ms(3200),
	changes:     []time.Duration{ms(1021), ms(33), ms(41), ms(29), ms(35), ms(30), ms(38), ms(31), ms(44), ms(36)},
	nominations: []time.Duration{ms(20), ms(12), ms(11), ms(13), ms(12), ms(14), ms(12), ms(11), ms(12), ms(13)},
	quiet:       proc.Window{Median: 63.7 * 1024, Low: 63.6 * 1024, High: 63.7 * 1024}, peak: 64.4 * 1024, anon: 39.1 * 1024,
	apiWrites: map[string]int64{"gpufleets": 0, "workloads": 0, "events": 0}}

var missedHub = &hubResult{members: 50, memberNodes: 5000, workers: 5, inventoryBytes: 227 * 1024, gpuNodes: 2500, listed: 463, reachable: ms(9100),
	changes: []time.Duration{ms(2300), ms(800)}, nominations: []time.Duration{ms(1200)},
	quiet: proc.Window{Median: 101 * 1024, Low: 99 * 1024, High: 104 * 1024}, peak: 110 * 1024, anon: 80 * 1024,
	fleetWrites: 2, apiErr: errors.New("connection refused")}

var benchEmpty = &emptyStart{gpuNodes: 2500, draNodes: 1250, firstStatus: ms(1291), records: recordsCreated{crdServed: ms(412), all: ms(23712)},
	writes: writeCounts{"created": 2500, "skipped": 4}}

var benchQuiet = &quietResult{restartWrites: writeCounts{"skipped": 2500}, statusWrites: 0, records: writeCounts{},
	cpu: 0.0011, rss: 39321.6, anon: 18 * 1024, file: 20 * 1024,
	latency: spreadOf(ms(101), ms(5), 20), serverApply: spreadOf(ms(98), ms(11), 20)}

// fleetTopology is status.topology of one topology with levels of zone, block and rack
// domains, listing listed domains.
func fleetTopology(zones, blocks, racks int32, listed int, problems ...string) *homelabv1.GpuTopology {
	return &homelabv1.GpuTopology{Topologies: []homelabv1.TopologyTree{{Name: "labels",
		Levels:  []homelabv1.TopologyLevel{{Key: topology.Zone, Domains: zones}, {Key: topology.AWSNetworkLayer1, Domains: blocks}, {Key: topology.Rack, Domains: racks}},
		Domains: make([]homelabv1.TopologyDomain, listed), Problems: problems}}}
}

// fiveThousandLevels are the levels of make bench's fleet: 10 blocks of 5 racks in 3 zones.
var fiveThousandLevels = []homelabv1.TopologyLevel{{Key: topology.Zone, Domains: 3}, {Key: topology.AWSNetworkLayer1, Domains: 10}, {Key: topology.Rack, Domains: 50}}

var benchTopology = &topologyResult{gpuNodes: 2500, quietRSS: benchQuiet.rss, off: memSplit{rss: 36.2, heapInuse: 10.4}, on: memSplit{rss: 38.9, heapInuse: 11.6},
	quietRecords: writeCounts{}, status: fleetTopology(3, 10, 50, 32), want: fiveThousandLevels, sectionBytes: 16 * 1024, offBytes: 194 * 1024, onBytes: 241 * 1024}

var benchChurn = &churnResult{counts: testenv.ChurnCounts{Changes: 1500, Republishes: 312, Taints: 31}, cpu: 0.0381,
	statusWrites: 1.1, peakRSS: 49 * 1024, records: writeCounts{"updated": 130, "deleted": 60, "created": 60},
	latency: spreadOf(ms(600), ms(33), 20)}

var (
	benchFlips     = &flipResult{flips: 1500, counts: testenv.ChurnCounts{Changes: 1500}, took: ms(30012), writes: writeCounts{}, cpu: 0.028}
	benchRepublish = &flipResult{republish: true, flips: 1500, counts: testenv.ChurnCounts{Changes: 1500, Republishes: 744, Taints: 70}, took: ms(30020), writes: writeCounts{"updated": 3}, cpu: 0.034}
	benchRelabel   = &relabelResult{nodes: 1000, took: ms(20310), synced: ms(20512), writes: writeCounts{"updated": 1000}}
)

var benchHostile = &hostileResult{nodes: 50, asked: 500, writes: 10020, failed: 3, firstFailure: errors.New("node x: timeout"),
	duration: ms(60012), operatorCPU: 0.41, beforeRSS: 40 * 1024, peakRSS: 81.4 * 1024, settledRSS: 43.3 * 1024, settleTook: ms(91200),
	quietRSS: benchQuiet.rss, untouched: totals{Nodes: 2450, Gpus: 17000}, statesSeen: 7, whole: totals{Nodes: 2500, Gpus: 20000}}

var benchInventories = &inventoriesResult{count: 1000, fewest: 82, most: 1167, mean: 410, created: ms(12400), synced: ms(53400),
	steadyRSS: 66.2 * 1024, peakRSS: 77.1 * 1024, beforeRSS: 44.9 * 1024}

var benchOutage = &outageResult{nodes: 1250, all: 2500, removeTook: ms(3100), restoreTook: ms(3300), allMissing: ms(3900),
	restartAt: ms(60002), restartFirst: ms(2220), missingAfterRestart: true, backAt: ms(120004), exactBack: ms(4100),
	recordsBack: ms(9800), records: 2500, statesSeen: 29, complete: 29, maxMissing: 1250}

// benchQuotaPlan is the size of make bench's quota plan.
var benchQuotaPlan = quotaSize{flavors: 100, queues: 1000, cohortNames: 90, borrowing: 300, lending: 300, cohorts: 30, localQueues: 1000, namespaces: 100, workloads: 10000}

var benchQuota = &quotaResult{plan: benchQuotaPlan, created: ms(9400), firstQuota: ms(1150), workloadsTook: ms(31200),
	before: windowOf(38.7, 38.1, 40.2), live: windowOf(47.0, 43.7, 47.1), restarted: windowOf(44.3, 43.9, 45.0),
	splits: [3]memSplit{{rss: 38.9, heapInuse: 12.1, heapAlloc: 9.3, idleKept: 1.2, stacks: 0.6, file: 20.1},
		{rss: 46.8, heapInuse: 19.7, heapAlloc: 15.2, idleKept: 2.3, stacks: 0.7, file: 20.1},
		{rss: 44.1, heapInuse: 17.4, heapAlloc: 13.9, idleKept: 1.8, stacks: 0.6, file: 20.1}},
	quietWrites: 0, quietRecords: writeCounts{}, restartFirst: ms(1290), restartComplete: ms(1011),
	quota: &homelabv1.GpuQuota{Kueue: "v1beta2", ClusterQueues: 1000, Cohorts: 100, StrandedNodes: 1250, Models: make([]homelabv1.QuotaModel, 6),
		CohortModels: make([]homelabv1.QuotaCohort, 32), Queues: make([]homelabv1.QuotaQueue, 32)},
	conditions: []metav1.Condition{{Type: homelabv1.ConditionQuotaOvercommitted, Status: metav1.ConditionTrue},
		{Type: homelabv1.ConditionQuotaStranded, Status: metav1.ConditionTrue}, {Type: "Ready", Status: metav1.ConditionTrue}},
	statusBytes: 210 * 1024, show: metTimes(0.05, 0.03, 31*1024), queue: metTimes(0.05, 0.04, 32*1024), queueArg: "team-000/lq-0000"}

var benchAllocation = &allocationResult{pods: 100000, gpuPods: 20000, bound: 19600, pending: 200, finished: 200,
	want:    allocationTotals{Gpus: 24000, Free: 2100, Pods: 19600, PendingPods: 200, PendingGpus: 600, Milli: 23900000, Pending: map[string]int32{"NVIDIA-H100-80GB-HBM3": 240, "": 360}},
	podJSON: 9100, podProto: 4200, podBare: 6100, created: ms(930000), firstStatus: ms(5780), firstStatusCPU: 2.7,
	atOnce: []time.Duration{ms(5300), ms(5560), ms(5310)}, byNamespace: []time.Duration{ms(6660), ms(6700), ms(6500)},
	steadyRSS: 46.1 * 1024, steadyAnon: 26.1 * 1024, steadyHeap: 21.8 * 1024,
	churn: churnOf(1500, 1500, 300, 300, 0), churnWall: ms(30010), churnCPU: 0.049, writesPerSec: 1.0, exactAfter: ms(1240),
	wantAfter: allocationTotals{Gpus: 24010, Free: 2090, Pods: 19610, PendingPods: 200, PendingGpus: 600, Milli: 23910000, Pending: map[string]int32{"NVIDIA-H100-80GB-HBM3": 240, "": 360}},
	afterRSS:  47.3 * 1024, peakRSS: 61.2 * 1024, afterHeap: 22.9 * 1024,
	informer: &informerResult{Pods: 100000, SyncSeconds: 21.4, RSSKiB: 1500 * 1024, HeapKiB: 1200 * 1024, RSSAfterGCKiB: 1350 * 1024, HeapAfterGCKiB: 1100 * 1024, PeakKiB: 2100 * 1024},
}

var benchFloor = &floorResult{pods: 100400, namespaces: 161, one: []time.Duration{ms(4910), ms(4790), ms(5240), ms(4900)}, perNamespace: []time.Duration{ms(2580), ms(2600), ms(2500)},
	starts: []time.Duration{ms(5780), ms(5300), ms(5560), ms(5310)}}

func churnOf(creates, deletes, gpuCreates, gpuDeletes, failed int64) *churnCounts {
	c := &churnCounts{}
	c.creates.Store(creates)
	c.deletes.Store(deletes)
	c.gpuCreates.Store(gpuCreates)
	c.gpuDeletes.Store(gpuDeletes)
	c.failed.Store(failed)
	return c
}

var benchUsage = &usageResult{pods: 19600, devices: 26100, idleDevices: 8700, series: 26100, historyBytes: 900 << 20,
	historyWrite: ms(41000), backfill: ms(95000), promStart: ms(12000), promtoolKiB: 2100 * 1024,
	before: windowOf(48.4, 47.9, 49.0), after: windowOf(52.0, 50.1, 53.3), heapBefore: 22.1, heapAfter: 24.1,
	firstUsage: ms(2100), wholeWindow: ms(13600), quietWrites: 0, quietRecords: writeCounts{}, readings: 5,
	queriesPerReading: 2, promPerReading: ms(490), cpuPerReading: 0.31,
	chunks: []time.Duration{ms(3610), ms(3140), ms(4080)}, reader: []time.Duration{ms(410), ms(380), ms(440)},
	queries:     [5][]time.Duration{{ms(20), ms(21), ms(19)}, {ms(300), ms(310), ms(290)}, {ms(200), ms(220), ms(210)}, {ms(100), ms(110), ms(90)}, {ms(150), ms(140), ms(160)}},
	answerBytes: 3 << 20, promRSS: 612, status: &homelabv1.GpuUsage{Metric: "DCGM_FI_PROF_GR_ENGINE_ACTIVE", HeldGpus: 26100, IdleGpus: 8700,
		Namespaces: make([]homelabv1.UsageNamespace, 32), IdleHolders: make([]homelabv1.IdleHolder, 20)}}

// Scenario "missed": targets missed, reports wrong, things not measured.

var missedEmpty = &emptyStart{gpuNodes: 2500, firstStatus: ms(3100), records: recordsCreated{crdServed: ms(900), all: ms(71000)}, writes: writeCounts{"created": 2500, "updated": 7}}

var missedQuiet = &quietResult{restartWrites: writeCounts{"updated": 2}, statusWrites: 3, records: writeCounts{"updated": 1},
	cpu: 0.012, rss: 52 * 1024, anon: 31 * 1024, file: 21 * 1024}

var missedTopology = &topologyResult{gpuNodes: 2500, quietRSS: missedQuiet.rss, off: memSplit{rss: 45.5, heapInuse: 12}, on: memSplit{rss: 51, heapInuse: 16},
	quietWrites: 2, quietRecords: writeCounts{"updated": 1}, want: fiveThousandLevels, sectionBytes: 130 * 1024, offBytes: 194 * 1024, onBytes: 324 * 1024,
	status: fleetTopology(3, 30, 150, 80, `topology level "topology.k8s.aws/network-node-layer-1" does not nest in "topology.kubernetes.io/zone"`)}

var missedChurn = &churnResult{counts: testenv.ChurnCounts{Changes: 1400}, cpu: 0.061, statusWrites: 2.4, peakRSS: 101 * 1024, records: writeCounts{}}

var (
	missedFlips   = &flipResult{flips: 1400, counts: testenv.ChurnCounts{Changes: 1400}, took: ms(30100), writes: writeCounts{"updated": 4}, cpu: 0.061}
	missedRelabel = &relabelResult{nodes: 1000, took: ms(20100), synced: ms(18000), writes: writeCounts{"updated": 1200}}
)

var missedHostile = &hostileResult{nodes: 50, asked: 500, writes: 6000, duration: ms(60000), operatorCPU: 0.5, beforeRSS: 41 * 1024,
	peakRSS: 90 * 1024, settledRSS: 55 * 1024, settleTook: 4 * time.Minute, quietRSS: missedQuiet.rss, untouched: totals{Nodes: 2450, Gpus: 17000},
	wrongStates: 2, firstWrong: "2449 GPU nodes", statesSeen: 9, whole: totals{Nodes: 2500, Gpus: 20000}, restoreErr: errors.New("not reached within 2m0s")}

var missedInventories = &inventoriesResult{count: 1000, fewest: 82, most: 1167, mean: 410, created: ms(12400), synced: ms(153400),
	steadyRSS: 101 * 1024, peakRSS: 120 * 1024, beforeRSS: 44.9 * 1024}

var missedOutage = &outageResult{nodes: 1250, all: 2500, removeTook: ms(3100), restoreTook: ms(3300), allMissing: ms(3900),
	restartAt: ms(60002), restartFirst: ms(2220), missingAfterRestart: false, backAt: ms(120004), exactBack: ms(4100),
	recordsBack: ms(9800), records: 2500, statesSeen: 29, complete: 27, wrong: 2, firstWrong: "resourceVersion 9: totalGpus 1, want 2",
	maxMissing: 1249, lastMissing: 3}

var missedQuota = &quotaResult{plan: benchQuotaPlan, created: ms(9400), firstQuota: ms(1150), workloadsTook: ms(31200),
	before: windowOf(38.7, 38.1, 40.2), live: windowOf(47.0, 43.7, 47.1), restarted: windowOf(48.3, 43.9, 49.0),
	quietWrites: 1, quietRecords: writeCounts{}, restartFirst: ms(1290), restartComplete: ms(1011), statusBytes: 300 * 1024}

var missedAllocation = &allocationResult{pods: 100000, gpuPods: 20000, bound: 19600, pending: 200, finished: 200,
	podJSON: 9100, podProto: 4200, podBare: 6100, created: ms(930000), firstStatus: ms(7780), firstStatusCPU: 3.7,
	atOnce: []time.Duration{ms(7300)}, steadyRSS: 66.1 * 1024, steadyAnon: 36.1 * 1024, steadyHeap: 31.8 * 1024,
	churn: churnOf(1000, 900, 200, 180, 12), churnWall: ms(30010), churnCPU: 0.09, writesPerSec: 2.5, exactAfter: ms(1240),
	afterRSS: 67.3 * 1024, peakRSS: 81.2 * 1024, afterHeap: 32.9 * 1024, informerErr: errors.New("podinformer: exit status 1")}

var missedFloor = &floorResult{pods: 100400, namespaces: 161, one: []time.Duration{ms(4910), ms(4790)}, perNamespace: []time.Duration{ms(2580)},
	starts: []time.Duration{ms(7780), ms(7300)}}

var missedUsage = &usageResult{pods: 19600, devices: 26100, idleDevices: 8700, series: 26100, historyBytes: 900 << 20,
	historyWrite: ms(41000), backfill: ms(95000), promStart: ms(12000), promtoolKiB: 2100 * 1024,
	before: windowOf(48.4, 47.9, 49.0), after: windowOf(58.0, 50.1, 59.3), heapBefore: 22.1, heapAfter: 24.1,
	firstUsage: ms(2100), wholeWindow: ms(13600), quietWrites: 2, quietRecords: writeCounts{"updated": 1}, readings: 7,
	queriesPerReading: 2, promPerReading: ms(10490), cpuPerReading: 0.31,
	reader:  []time.Duration{ms(410), ms(380), ms(440)},
	queries: [5][]time.Duration{{ms(20)}, {ms(300)}, {ms(200)}, {ms(100)}, {ms(150)}}, answerBytes: 3 << 20, promRSS: 612,
	unknown: "PrometheusUnreachable: dial tcp: refused"}

// The plugin tables' runs.

var (
	benchShow    = metTimes(0.05, 0.03, 31*1024)
	benchScan    = metTimes(0.97, 1.4, 100*1024)
	benchAgree   = "yes (same counts and models, 2500/2500 GPU nodes ready; the hashes differ by the status's allocation, which scan does not compute)"
	benchFleet   = metTimes(0.31, 0.2, 43*1024)
	benchFree    = metTimes(0.04, 0.02, 31*1024)
	benchWho     = metTimes(4.97, 3.1, 80*1024)
	benchWhoRaw  = metTimes(3.29, 2.9, 69*1024)
	benchWhy     = metTimes(0.66, 0.40, 48*1024)
	benchFit     = metTimes(0.76, 0.45, 50*1024)
	benchWhyGzip = metTimes(0.97, 0.5, 49*1024)
	benchFitGzip = metTimes(2.15, 0.6, 49*1024)
	benchAnyway  = metTimes(5.56, 4.06, 306*1024)
	benchAnyGzip = metTimes(4.2, 3.9, 120*1024)
	benchWhoSays = "yes: 19610 pods holding, 200 waiting for 600 GPUs; milli-GPUs: who 23910000, the status's allocatedMilliGpus 23910000 (+0)"
	benchWhySays = `yes: "0/5000 nodes are available: 250 Insufficient nvidia.com/gpu, 4750 node(s) didn't match Pod's node affinity/selector." (250 H100 nodes, 31 GPUs free among them)`
	benchFitSays = "yes: 4 of 4 replicas placed (31 GPUs free on the H100 nodes)"
)
