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
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// waitCRDEstablished follows CRD name until the API server reports it Established.
func waitCRDEstablished(ctx context.Context, apiext apiextensionsclient.Interface, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	crds := apiext.ApiextensionsV1().CustomResourceDefinitions()
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return crds.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return crds.Watch(ctx, opts)
		},
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &apiextensionsv1.CustomResourceDefinition{}, nil, func(ev watch.Event) (bool, error) {
		crd, ok := ev.Object.(*apiextensionsv1.CustomResourceDefinition)
		if !ok || ev.Type == watch.Deleted {
			return false, nil
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not established within %s: %w", name, timeout, err)
	}
	return nil
}

// watchRecords lists and watches the GpuNode records until done accepts them all (by name),
// at most timeout.
func watchRecords(ctx context.Context, gpu versioned.Interface, timeout time.Duration, done func(map[string]*homelabv1.GpuNode) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	records := gpu.HomelabV1().GpuNodes()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return records.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return records.Watch(ctx, opts)
		},
	}
	all := map[string]*homelabv1.GpuNode{}
	synced := func(store cache.Store) (bool, error) {
		for _, obj := range store.List() {
			if r, ok := obj.(*homelabv1.GpuNode); ok {
				all[r.Name] = r
			}
		}
		return done(all), nil
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &homelabv1.GpuNode{}, synced, func(ev watch.Event) (bool, error) {
		r, ok := ev.Object.(*homelabv1.GpuNode)
		if !ok {
			return false, nil
		}
		if ev.Type == watch.Deleted {
			delete(all, r.Name)
		} else {
			all[r.Name] = r
		}
		return done(all), nil
	})
	return err
}

// recordsCreated is what the first start on an empty cluster measured of the records.
type recordsCreated struct {
	crdServed time.Duration // from the operator's start until the GpuNode CRD is established
	all       time.Duration // from the operator's start until every GPU node has its record
	err       error
}

// waitAllRecords measures, from started, when the GpuNode CRD is established and when all
// want records exist and know their node's GPUs.
func waitAllRecords(ctx context.Context, apiext apiextensionsclient.Interface, gpu versioned.Interface, started time.Time, want int) recordsCreated {
	var res recordsCreated
	if res.err = waitCRDEstablished(ctx, apiext, homelabv1.GpuNodeCRDName, 2*time.Minute); res.err != nil {
		return res
	}
	res.crdServed = time.Since(started)
	res.err = watchRecords(ctx, gpu, 5*time.Minute, func(all map[string]*homelabv1.GpuNode) bool {
		if len(all) < want {
			return false
		}
		for _, r := range all {
			if r.Spec.Product == "" || r.Spec.GpuCount == 0 {
				return false
			}
		}
		return true
	})
	if res.err != nil {
		res.err = fmt.Errorf("all %d GpuNode records: %w", want, res.err)
	}
	res.all = time.Since(started)
	return res
}

// recordsCounted returns the operator's record writes once it has counted want records
// created or seeded (it counts a write after the API server answered, so after a watch
// saw the record), at most 5 s later.
func recordsCounted(op *operatorProc, want int64) (writeCounts, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		counts, err := op.recordWrites()
		if err != nil || counts[metrics.GpuNodeCreated]+counts[metrics.GpuNodeSeeded] >= want || time.Now().After(deadline) {
			return counts, err
		}
		time.Sleep(100 * time.Millisecond) // a counter: nothing to watch
	}
}

// countWrites returns the record writes the operator made while phase ran.
func countWrites(op *operatorProc, phase func() error) (writeCounts, error) {
	before, err := op.recordWrites()
	if err != nil {
		return nil, err
	}
	if err := phase(); err != nil {
		return nil, err
	}
	after, err := op.recordWrites()
	if err != nil {
		return nil, err
	}
	return after.since(before), nil
}

// relabelResult is what the relabel phase measured.
type relabelResult struct {
	nodes  int           // GPU nodes relabelled, each once
	took   time.Duration // sending the relabels
	synced time.Duration // from the first relabel until every record shows it
	writes writeCounts   // from the first relabel until every record shows it
}

// relabelPhase changes the driver version of --relabel-rate distinct GFD nodes a second for
// --relabel-duration (as a driver upgrade rolling through the fleet does), counts the record
// writes until every relabelled record shows its new version, then puts the fleet's version
// back and waits until the records show that too.
func relabelPhase(ctx context.Context, h *harness) (result, error) {
	rate, d := h.o.relabelRate, h.o.relabelFor
	res := &relabelResult{}
	gfd := gfdNodes(h.fleet) // a DRA node's driver version is its slice's
	count := min(len(gfd)-1, int(rate*d.Seconds()))
	nodes := gfd[1 : 1+count] // never the first, the probes' marker
	const upgraded = "575.57.08"
	var relabelled []fleetNode
	var err error
	res.writes, err = countWrites(h.op, func() error {
		start := time.Now()
		relabelled, err = paced(ctx, nodes, rate, func(n fleetNode) error { return setDriver(ctx, h.kube, n.name, upgraded) })
		res.took = time.Since(start)
		if err != nil {
			return err
		}
		err = waitDrivers(ctx, h.gpu, relabelled, upgraded, 2*time.Minute)
		res.synced = time.Since(start)
		return err
	})
	res.nodes = len(relabelled)
	if err != nil {
		return nil, err
	}
	// Back to the fleet's version, not measured.
	if _, err := paced(ctx, relabelled, 0, func(n fleetNode) error {
		return setDriver(ctx, h.kube, n.name, n.labels["nvidia.com/cuda.driver-version.full"])
	}); err != nil {
		return nil, err
	}
	if err := waitDrivers(ctx, h.gpu, relabelled, h.fleet[0].labels["nvidia.com/cuda.driver-version.full"], 2*time.Minute); err != nil {
		return nil, fmt.Errorf("after the driver version was put back: %w", err)
	}
	return res, nil
}

// setDriver sets a node's driver version labels as GPU Feature Discovery writes them.
func setDriver(ctx context.Context, kube kubernetes.Interface, name, version string) error {
	parts := strings.Split(version, ".")
	if len(parts) != 3 {
		return fmt.Errorf("driver version %q is not major.minor.revision", version)
	}
	major, minor, rev := parts[0], parts[1], parts[2]
	patch := fmt.Sprintf(`{"metadata":{"labels":{"nvidia.com/cuda.driver-version.full":%q,"nvidia.com/cuda.driver-version.major":%q,"nvidia.com/cuda.driver-version.minor":%q,"nvidia.com/cuda.driver-version.revision":%q}}}`,
		version, major, minor, rev)
	if _, err := kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "gpu-feature-discovery"}); err != nil {
		return fmt.Errorf("relabel node %s: %w", name, err)
	}
	return nil
}

// waitDrivers follows the records until each of nodes' shows driver version.
func waitDrivers(ctx context.Context, gpu versioned.Interface, nodes []fleetNode, version string, timeout time.Duration) error {
	left := 0
	err := watchRecords(ctx, gpu, timeout, func(all map[string]*homelabv1.GpuNode) bool {
		left = 0
		for _, n := range nodes {
			if r := all[n.name]; r == nil || r.Spec.DriverVersion != version {
				left++
			}
		}
		return left == 0
	})
	if err != nil {
		return fmt.Errorf("%d of %d records do not show driver %s: %w", left, len(nodes), version, err)
	}
	return nil
}

// paced calls do for each node, rate a second (0: as fast as 16 workers go), and returns
// the nodes done; it stops at the first error.
func paced(ctx context.Context, nodes []fleetNode, rate float64, do func(fleetNode) error) ([]fleetNode, error) {
	todo := make(chan fleetNode)
	errs := make(chan error, len(nodes))
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for n := range todo {
				if err := do(n); err != nil {
					errs <- err
				}
			}
		})
	}
	start := time.Now()
	sent := 0
	for _, n := range nodes {
		if rate > 0 {
			if wait := time.Until(start.Add(time.Duration(float64(sent) / rate * float64(time.Second)))); wait > 0 {
				time.Sleep(wait) // the pace asked for: nothing to watch
			}
		}
		if len(errs) > 0 || ctx.Err() != nil {
			break
		}
		todo <- n
		sent++
	}
	close(todo)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nodes[:sent], err
	}
	return nodes[:sent], ctx.Err()
}

// flipResult is what a phase of Ready flips measured.
type flipResult struct {
	republish bool // on DRA nodes half of the changes slice republishes
	flips     int  // every change, republishes included
	counts    testenv.ChurnCounts
	took      time.Duration
	writes    writeCounts
	cpu       float64 // the operator's share of a core while the changes were sent
}

// flipsPhase flips Ready of GPU nodes at --churn a second for --flip-duration, nothing else
// changing.
func flipsPhase(ctx context.Context, h *harness) (result, error) {
	return flip(ctx, h, h.o.flipFor, 0)
}

// republishPhase flips Ready of GPU nodes at --churn a second for --republish-duration, a
// change that falls on a DRA node republishing its slice half of the time instead.
func republishPhase(ctx context.Context, h *harness) (result, error) {
	return flip(ctx, h, h.o.republishFor, h.o.draShare)
}

// flip flips Ready of GPU nodes at --churn a second for d and counts the record writes
// meanwhile (and for the 2 s after, which a write would take to show). With draShare, a
// change that falls on a DRA node republishes its slice half of the time instead
// (testenv.FlipAndRepublish); without it nothing else changes.
func flip(ctx context.Context, h *harness, d time.Duration, draShare float64) (result, error) {
	res := &flipResult{republish: draShare > 0}
	name := "flips"
	if res.republish {
		name = "republish"
	}
	n, rate, pid := h.o.nodes, h.o.churn, h.op.pid
	var err error
	res.writes, err = countWrites(h.op, func() error {
		flipCtx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		start, cpu0 := time.Now(), pid.CPUTicks()
		var profiled sync.WaitGroup
		h.prof.phase(&profiled, d, name+"-cpu.pprof", name+"-allocs.pprof")
		var err error
		if res.republish {
			res.counts, err = testenv.FlipAndRepublish(flipCtx, h.kube, n, rate, draShare)
		} else {
			res.counts.Changes, err = testenv.FlipReady(flipCtx, h.kube, n, rate)
		}
		res.flips = res.counts.Changes
		res.took = time.Since(start)
		profiled.Wait()
		res.cpu = pid.CoreShare(cpu0, res.took)
		time.Sleep(2 * time.Second) // a write that none is expected to make: nothing to watch for
		return err
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "Ready flips (%d slice republishes): %d in %s, record writes: %s\n", res.counts.Republishes, res.flips, res.took.Round(time.Second), res.writes)
	return res, nil
}
