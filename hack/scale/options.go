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
	"flag"
	"fmt"
	"time"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
)

// options are the run's flags: the fleet, the operator, and each phase's size (0 skips a
// phase).
type options struct {
	nodes    int
	churn    float64
	churnFor time.Duration
	operator string
	probes   int

	profileDir   string
	plugin       string
	pluginRuns   int
	quietGap     time.Duration
	operatorEnv  string
	operatorArgs string
	draShare     float64

	flipFor      time.Duration
	republishFor time.Duration
	relabelRate  float64
	relabelFor   time.Duration

	hostileFor   time.Duration
	hostileNodes int
	hostileRate  float64
	inventories  int
	outageFor    time.Duration

	quotaQueues    int
	quotaFlavors   int
	quotaWorkloads int

	pods        int
	gpuPods     int
	podChurn    float64
	podChurnFor time.Duration
	podWorkers  int

	usageWindow time.Duration
	usageQuiet  time.Duration

	topologyQuiet time.Duration

	fleetContexts int
	fleetGPUNodes int
	fleetOnly     bool

	hub            string
	hubMembers     int
	hubMemberNodes int
	hubChanges     int
	hubWorkloads   int
	hubWorkers     int
	hubQuiet       time.Duration
	hubOnly        bool

	hold bool
}

// register defines the flags on fs, their defaults in o.
func (o *options) register(fs *flag.FlagSet) {
	fs.IntVar(&o.nodes, "nodes", 5000, "Nodes in the fleet (half of them GPU nodes).")
	fs.Float64Var(&o.churn, "churn", 50, "Changes per second during the churn phase: Ready flips, and on DRA nodes as many slice republishes.")
	fs.DurationVar(&o.churnFor, "churn-duration", 30*time.Second, "Length of the churn phase.")
	fs.StringVar(&o.operator, "operator", "bin/gpu-inventory-operator", "Operator binary.")
	fs.IntVar(&o.probes, "probes", 20, "Latency probes per phase.")
	fs.StringVar(&o.profileDir, "profile-dir", "", "Write the operator's heap profiles (after sync and each phase), CPU profiles (during each churn, at the allocation start), log (-v=4) and each probe's latency here, and the API server's CPU profiles at the allocation start and during `who -A`.")
	fs.StringVar(&o.plugin, "plugin", "", "kubectl-gpuinv binary: after the churn, measure the plugin reading the inventory and scanning the nodes (empty: skip).")
	fs.IntVar(&o.pluginRuns, "plugin-runs", 5, "Runs of each plugin command.")
	fs.DurationVar(&o.quietGap, "quiet-gap", 5*time.Second, "Pause before each quiet-phase probe; keep it above four times the operator's --min-sync-interval (the ConfigMap's interval).")
	fs.StringVar(&o.operatorEnv, "operator-env", "", "More environment for the operator, space-separated NAME=value pairs (e.g. GOGC=40).")
	fs.StringVar(&o.operatorArgs, "operator-args", "", "More flags for the operator, space-separated (e.g. --min-sync-interval=1s).")
	fs.DurationVar(&o.hostileFor, "hostile-duration", time.Minute, "Length of the hostile phase, after the others: GPU nodes rewrite a 64 KiB Ready message and random GPU labels (0: skip).")
	fs.IntVar(&o.hostileNodes, "hostile-nodes", 50, "GPU nodes that write in the hostile phase.")
	fs.Float64Var(&o.hostileRate, "hostile-rate", 10, "Writes per second of each hostile node.")
	fs.IntVar(&o.inventories, "inventories", 1000, "GpuInventories over a few hundred GPU nodes each, created after the hostile phase (0: skip).")
	fs.DurationVar(&o.flipFor, "flip-duration", 10*time.Second, "Length of the phase of Ready flips only (at --churn per second), after the churn: it must cost no GpuNode record write.")
	fs.DurationVar(&o.republishFor, "republish-duration", 10*time.Second, "Length of the phase of Ready flips and slice republishes (at --churn per second, on DRA nodes half of them republishes), after the flips.")
	fs.Float64Var(&o.relabelRate, "relabel-rate", 50, "GPU nodes a second whose driver version changes in the relabel phase (each a record write).")
	fs.DurationVar(&o.relabelFor, "relabel-duration", 20*time.Second, "Length of the relabel phase (0: skip).")
	fs.Float64Var(&o.draShare, "dra-share", 0.5, "Share of the GPU nodes run by NVIDIA's DRA driver: no GFD label, one ResourceSlice of eight H100s each.")
	fs.DurationVar(&o.outageFor, "outage-duration", 2*time.Minute, "The last phase: every GPU node labelled by GPU Feature Discovery loses its labels, the operator restarts halfway, the labels come back after this (0: skip).")
	fs.IntVar(&o.pods, "pods", 0, "Pods of the allocation phase, the very last: the operator restarts with them in place, then they churn (0: skip).")
	fs.IntVar(&o.gpuPods, "gpu-pods", 0, "Of --pods, pods that ask for GPUs: 1 % of them wait unscheduled, 1 % have finished, the rest are bound to free shares of the GPU nodes.")
	fs.Float64Var(&o.podChurn, "pod-churn", 100, "Pod creations and deletions a second (half each) in the allocation phase, GPU pods in their share of --pods.")
	fs.DurationVar(&o.podChurnFor, "pod-churn-duration", 30*time.Second, "Length of the allocation phase's pod churn.")
	fs.IntVar(&o.podWorkers, "pod-workers", 64, "Parallel creations of the allocation phase's pods.")
	fs.IntVar(&o.quotaQueues, "quota-queues", 1000, "ClusterQueues of the quota phase, after the last phases and before the allocation phase: Kueue's CRDs installed while the operator runs, --quota-flavors ResourceFlavors, the queues in cohorts, a LocalQueue each, --quota-workloads Workloads; the operator's memory and quiet status writes with them, and `kubectl gpuinv quota` (0: skip).")
	fs.IntVar(&o.quotaFlavors, "quota-flavors", 100, "ResourceFlavors of the quota phase, by GPU product, zone and node pool (at least 5: one per GPU model of the fleet).")
	fs.IntVar(&o.quotaWorkloads, "quota-workloads", 10000, "Kueue Workloads of the quota phase, spread over its LocalQueues.")
	fs.IntVar(&o.fleetContexts, "fleet-contexts", 10, "Clusters of the fleet phase, the first (needs --plugin): as many kube-apiservers on one etcd, each a kubeconfig context with a GpuInventory, read by `kubectl gpuinv --all-contexts` (0: skip).")
	fs.IntVar(&o.fleetGPUNodes, "fleet-gpu-nodes", 1000, "GPU nodes that each fleet-phase inventory covers (it lists at most 500 of them, as the operator does).")
	fs.BoolVar(&o.fleetOnly, "fleet-only", false, "Run the fleet phase alone.")
	fs.StringVar(&o.hub, "hub", "bin/gpu-fleet-hub", "Fleet hub binary of the hub phase.")
	fs.IntVar(&o.hubMembers, "hub-members", 50, "Member clusters of the hub phase, after the fleet phase: the hub (--dispatch) on a kube-apiserver of its own over as many member API doubles (one process), each named by a ClusterProfile; its memory, a member's change to the GpuFleet status, a pending MultiKueue Workload to its nomination, its writes while quiet (0: skip; at most 100).")
	fs.IntVar(&o.hubMemberNodes, "hub-member-nodes", 5000, "Nodes of each member cluster of the hub phase (half of them GPU nodes): its GpuInventory is the operator's for them.")
	fs.IntVar(&o.hubChanges, "hub-changes", 10, "Member changes of the hub phase, one member at a time, each timed to the GpuFleet status showing it.")
	fs.IntVar(&o.hubWorkloads, "hub-workloads", 10, "Pending MultiKueue Workloads of the hub phase, one at a time, each timed to its nomination.")
	fs.IntVar(&o.hubWorkers, "hub-workers", 5, "Of --hub-members, members that are also MultiKueue workers (a MultiKueueCluster each, in the MultiKueueConfig).")
	fs.DurationVar(&o.hubQuiet, "hub-quiet", time.Minute, "The hub phase's quiet window: the hub's RSS sampled, its writes counted, nothing changing.")
	fs.BoolVar(&o.hubOnly, "hub-only", false, "Run the hub phase alone.")
	fs.DurationVar(&o.usageWindow, "usage-window", time.Hour, "The usage phase, after the allocation phase (needs --gpu-pods): a real Prometheus with this much DCGM history backfilled, the operator's --idle-window (at least 1h; 0: skip).")
	fs.DurationVar(&o.usageQuiet, "usage-quiet", 5*time.Minute, "The usage phase's quiet period: the operator's readings (one a minute) whose status writes, RSS and CPU are counted.")
	fs.DurationVar(&o.topologyQuiet, "topology-quiet", 10*time.Second, "The topology phase, after the quiet phase: the operator restarted with --topology=false, then with the run's flags again, each measured as the quiet phase measures it over this quiet window (its memory; with topology, its status writes and status.topology) (0: skip).")
	fs.BoolVar(&o.hold, "hold", false, "After the last phase, keep the API server and the operator running until interrupted, for experiments against them (its kubeconfig is printed).")
}

// validate says what is wrong with a combination of flags.
func (o *options) validate() error {
	if o.fleetOnly && (o.plugin == "" || o.fleetContexts <= 0) {
		return errors.New("--fleet-only needs --plugin and --fleet-contexts above 0")
	}
	if o.hubOnly && o.hubMembers <= 0 {
		return errors.New("--hub-only needs --hub-members above 0")
	}
	if o.hubMembers > 100 || (o.hubMembers > 0 && (o.hubMemberNodes < 2 || o.hubChanges < 1 || o.hubWorkloads < 1 || o.hubWorkers < 1 || o.hubQuiet < time.Second)) {
		return errors.New("the hub phase needs --hub-members of at most 100 (a GpuFleet lists 100 rows), --hub-member-nodes of at least 2, --hub-changes, --hub-workloads and --hub-workers of at least 1, --hub-quiet of at least 1s")
	}
	if o.quotaQueues > 0 && (o.quotaFlavors < len(fixtures.GPUModels) || o.quotaWorkloads < 0) {
		return fmt.Errorf("the quota phase needs --quota-flavors of at least %d (one per GPU model) and --quota-workloads of 0 or more", len(fixtures.GPUModels))
	}
	if !o.fleetOnly && o.usageWindow != 0 && (o.usageWindow < time.Hour || o.usageWindow%time.Minute != 0 || o.usageQuiet < time.Minute) {
		return errors.New("--usage-window must be whole minutes, at least 1h (or 0: skip), and --usage-quiet at least 1m")
	}
	return nil
}
