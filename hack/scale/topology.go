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
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/topology"
)

// fleetTopologyKeys are the topology labels the generated fleet carries, broadest first: the
// well-known keys the operator groups the GPU nodes by when neither spec.topology nor a Kueue
// Topology names the levels.
var fleetTopologyKeys = []string{topology.Zone, topology.AWSNetworkLayer1, topology.Rack}

// fleetLevels are the fleet's topology levels and the domains each counts: the distinct
// values of its label on the GPU nodes.
func fleetLevels(fleet []fleetNode) []homelabv1.TopologyLevel {
	var out []homelabv1.TopologyLevel
	for _, key := range fleetTopologyKeys {
		values := map[string]bool{}
		for _, n := range fleet {
			if v, ok := n.labels[key]; ok {
				values[v] = true
			}
		}
		if len(values) > 0 {
			out = append(out, homelabv1.TopologyLevel{Key: key, Domains: int32(len(values))})
		}
	}
	return out
}

// topologyResult is what the topology phase measured: the operator's steady memory without
// status.topology against the quiet phase's with it, its quiet writes with it, and the size
// of the section.
type topologyResult struct {
	gpuNodes     int
	quietRSS     float64  // KiB: the quiet phase's steady RSS, with topology
	off, on      memSplit // restarted with --topology=false; restarted again with it, as the run's flags have it
	quietWrites  int      // status writes over the quiet window with topology
	quietRecords writeCounts
	status       *homelabv1.GpuTopology    // status.topology after that restart
	want         []homelabv1.TopologyLevel // the fleet's levels and domains
	sectionBytes int                       // status.topology as JSON
	offBytes     int                       // the inventory as the API server sends it, without topology
	onBytes      int                       // and with it
}

// restartWithTopology restarts the operator until its first complete status, then waits
// until the status has status.topology or not, as want says: the harness's watch reads
// inventories as the operator's informer does, without status.topology, so this asks for
// the whole object.
func restartWithTopology(ctx context.Context, h *harness, why string, want bool) error {
	if _, _, err := restartOperator(ctx, h, why); err != nil {
		return fmt.Errorf("operator log %s: %w", h.logPath, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		gi, err := h.gpu.HomelabV1().GpuInventories().Get(ctx, homelabv1.DefaultInventoryName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return (gi.Status.Topology != nil) == want, nil
	})
}

// topologyPhase restarts the operator with --topology=false and measures it as the quiet
// phase measured the operator with topology (once its CPU has settled, a quiet window, then
// its memory), then restarts it with the run's flags and measures it the same way: status and
// record writes over that window, and status.topology.
func topologyPhase(ctx context.Context, h *harness) (result, error) {
	res := &topologyResult{gpuNodes: len(h.fleet), quietRSS: h.quietRSS, want: fleetLevels(h.fleet)}
	args := h.launcher.args
	defer func() { h.launcher.args = args }()
	h.launcher.args = append(slices.Clone(args), "--topology=false")
	err := restartWithTopology(ctx, h, "topology phase, --topology=false", false)
	if err != nil {
		return nil, err
	}
	if res.off, _, _, err = topologyQuiet(ctx, h, "topology-off-heap.pprof"); err != nil {
		return nil, err
	}
	if _, res.offBytes, err = inventorySize(ctx, h.gpu); err != nil {
		return nil, err
	}

	h.launcher.args = args
	if err = restartWithTopology(ctx, h, "topology phase, restored", true); err != nil {
		return nil, err
	}
	if res.on, res.quietWrites, res.quietRecords, err = topologyQuiet(ctx, h, "topology-heap.pprof"); err != nil {
		return nil, err
	}
	gi, err := h.gpu.HomelabV1().GpuInventories().Get(ctx, homelabv1.DefaultInventoryName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	res.status = gi.Status.Topology
	data, err := json.Marshal(res.status)
	if err != nil {
		return nil, err
	}
	res.sectionBytes = len(data)
	if _, res.onBytes, err = inventorySize(ctx, h.gpu); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "topology: steady RSS %.1f MiB without, %.1f MiB in the quiet phase and %.1f MiB restored with it; status.topology %d bytes\n",
		res.off.rss, mib(res.quietRSS), res.on.rss, res.sectionBytes)
	return res, nil
}

// topologyQuiet measures the running operator as the quiet phase does: once its CPU has
// settled, the status and record writes over --topology-quiet, then where its memory goes.
func topologyQuiet(ctx context.Context, h *harness, heapFile string) (memSplit, int, writeCounts, error) {
	h.op.pid.SettleCPU(15 * time.Second)
	quiet, stop := context.WithCancel(ctx)
	defer stop()
	writes, err := countStatusWrites(quiet, h)
	if err != nil {
		return memSplit{}, 0, nil, err
	}
	records, err := countWrites(h.op, func() error {
		time.Sleep(h.o.topologyQuiet) // a quiet period: no change is expected to watch for
		return nil
	})
	if err != nil {
		return memSplit{}, 0, nil, err
	}
	split := readMemSplit(h.op)
	h.prof.heap(heapFile)
	return split, writes.count(), records, nil
}

// levelsRight says whether status.topology is one topology with the fleet's levels, each
// counting the fleet's domains.
func (t *topologyResult) levelsRight() bool {
	return t.status != nil && len(t.status.Topologies) == 1 && slices.Equal(t.status.Topologies[0].Levels, t.want)
}

// mostListed is the most domains one topology lists, and the domains all its levels count.
func (t *topologyResult) mostListed() (listed, counted int) {
	if t.status == nil {
		return 0, 0
	}
	for _, tree := range t.status.Topologies {
		if len(tree.Domains) < listed {
			continue
		}
		listed, counted = len(tree.Domains), 0
		for _, l := range tree.Levels {
			counted += int(l.Domains)
		}
	}
	return listed, counted
}

// mistakes: status.topology not as the fleet's labels make it.
func (t *topologyResult) mistakes() []error {
	if t.levelsRight() {
		return nil
	}
	return []error{fmt.Errorf("topology: status.topology is %s, want one topology of levels %s", topologyLevels(t.status), levelsText(t.want))}
}

// topologyLevels names each topology of status with its levels and their domains.
func topologyLevels(status *homelabv1.GpuTopology) string {
	if status == nil || len(status.Topologies) == 0 {
		return "absent"
	}
	var trees []string
	for _, tree := range status.Topologies {
		s := tree.Name + ": " + levelsText(tree.Levels)
		if len(tree.Problems) > 0 {
			s += " (problems: " + strings.Join(tree.Problems, "; ") + ")"
		}
		trees = append(trees, s)
	}
	return strings.Join(trees, "; ")
}

// levelsText is levels as "key domains, ...".
func levelsText(levels []homelabv1.TopologyLevel) string {
	var out []string
	for _, l := range levels {
		out = append(out, fmt.Sprintf("%s %d", l.Key, l.Domains))
	}
	return strings.Join(out, ", ")
}
