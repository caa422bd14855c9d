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
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
)

// phaseLabel marks the inventories the many-inventories phase creates, to delete them at once.
const phaseLabel = "scale.gpuinv.test/phase"

// inventoriesResult is what the many-inventories phase measured.
type inventoriesResult struct {
	count              int
	fewest, most, mean int32 // GPU nodes each inventory covers
	created            time.Duration
	synced             time.Duration // from the first create to the last right status
	steadyRSS, peakRSS float64       // KiB
	beforeRSS          float64       // KiB, just before the first create
}

// inventoriesPhase creates --inventories GpuInventories over subsets of a few hundred GPU
// nodes, waits until every status shows the fixture's figures for its subset, measures the
// operator's memory with them, and deletes them.
func inventoriesPhase(ctx context.Context, h *harness) (result, error) {
	count, pid := h.o.inventories, h.op.pid
	res := &inventoriesResult{count: count, fewest: 1 << 30}
	want := map[string]totals{}
	var items []*homelabv1.GpuInventory
	for k := range count {
		gi := &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%04d", k), Labels: map[string]string{phaseLabel: "inventories"}},
			Spec: homelabv1.GpuInventorySpec{NodeSelector: subsetSelector(k, len(h.fleet))}}
		sel, err := metav1.LabelSelectorAsSelector(gi.Spec.NodeSelector)
		if err != nil {
			return nil, fmt.Errorf("selector of inventory %s: %w", gi.Name, err)
		}
		t := expectTotals(h.fleet, sel)
		want[gi.Name] = t
		res.fewest, res.most, res.mean = min(res.fewest, t.Nodes), max(res.most, t.Nodes), res.mean+t.Nodes
		items = append(items, gi)
	}
	res.mean /= int32(max(1, count))

	res.beforeRSS = pid.RSS()
	pid.ResetPeak()
	start := time.Now()
	if err := createInventories(ctx, h, items); err != nil {
		return nil, err
	}
	res.created = time.Since(start)
	if err := waitAllSynced(ctx, h, want, 10*time.Minute); err != nil {
		return nil, err
	}
	res.synced = time.Since(start)

	// A quiet period with every inventory in place: nothing changes, so nothing to watch for.
	time.Sleep(10 * time.Second)
	res.steadyRSS = pid.RSS()
	res.peakRSS = pid.Peak()
	h.prof.heap("inventories-heap.pprof")

	if err := forEach(items, func(gi *homelabv1.GpuInventory) error {
		if err := h.gpu.HomelabV1().GpuInventories().Delete(ctx, gi.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete inventory %s: %w", gi.Name, err)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	only := metav1.ListOptions{LabelSelector: phaseLabel + "=inventories"}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		left, err := h.watcher.HomelabV1().GpuInventories().List(ctx, only)
		return err == nil && len(left.Items) == 0, err
	})
	if err != nil {
		return nil, fmt.Errorf("the %d inventories were not all gone within 2m: %w", count, err)
	}
	return res, nil
}

// subsetSelector is the k-th inventory's node selector: four shapes in turn (matchLabels
// equality; matchLabels with matchExpressions In; In only; Exists with NotIn), over the
// fleet's models, families and zones, each cutting the GPU nodes into a subset of 1/15 to
// 4/15 of them. One GPU node, different for each k, is left out by name, so that no two
// selectors are equal.
func subsetSelector(k, gpuNodes int) *metav1.LabelSelector {
	var products []string
	for _, m := range fixtures.GPUModels {
		products = append(products, m.Labels["nvidia.com/gpu.product"])
	}
	families := []string{"hopper", "ampere", "ada-lovelace", "turing"}
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	a, b := (k/4)%len(products), (k/20)%len(zones)
	in := func(key string, values ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: key, Operator: metav1.LabelSelectorOpIn, Values: values}
	}
	notIn := func(key string, values ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: key, Operator: metav1.LabelSelectorOpNotIn, Values: values}
	}
	var s metav1.LabelSelector
	switch k % 4 {
	case 0:
		s.MatchLabels = map[string]string{"nvidia.com/gpu.product": products[a], "topology.kubernetes.io/zone": zones[b]}
	case 1:
		s.MatchLabels = map[string]string{"nvidia.com/gpu.family": families[a%len(families)]}
		s.MatchExpressions = append(s.MatchExpressions, in("topology.kubernetes.io/zone", zones[b], zones[(b+1)%3]))
	case 2:
		s.MatchExpressions = append(s.MatchExpressions, in("nvidia.com/gpu.product", products[a], products[(a+1)%len(products)]),
			in("topology.kubernetes.io/zone", zones[b]))
	default:
		s.MatchExpressions = append(s.MatchExpressions,
			metav1.LabelSelectorRequirement{Key: "nvidia.com/gpu.present", Operator: metav1.LabelSelectorOpExists},
			notIn("nvidia.com/gpu.product", products[a], products[(a+1)%len(products)], products[(a+2)%len(products)]),
			notIn("topology.kubernetes.io/zone", zones[b]))
	}
	s.MatchExpressions = append(s.MatchExpressions, notIn("kubernetes.io/hostname", fixtures.FleetNodeName(2*(k%gpuNodes))))
	return &s
}

// createInventories creates items.
func createInventories(ctx context.Context, h *harness, items []*homelabv1.GpuInventory) error {
	return forEach(items, func(gi *homelabv1.GpuInventory) error {
		if _, err := h.gpu.HomelabV1().GpuInventories().Create(ctx, gi, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create inventory %s: %w", gi.Name, err)
		}
		return nil
	})
}

// forEach calls do for every item, 16 at a time, and returns the first error.
func forEach(items []*homelabv1.GpuInventory, do func(*homelabv1.GpuInventory) error) error {
	todo := make(chan *homelabv1.GpuInventory)
	errs := make(chan error, len(items))
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for gi := range todo {
				if err := do(gi); err != nil {
					errs <- err
				}
			}
		})
	}
	for _, gi := range items {
		todo <- gi
	}
	close(todo)
	wg.Wait()
	close(errs)
	return <-errs // nil when none failed
}

// waitAllSynced follows the phase's inventories (without their node lists) until each shows
// its expected totals, at most timeout; it says on stderr how many are done as it goes.
func waitAllSynced(ctx context.Context, h *harness, want map[string]totals, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	inventories := h.watcher.HomelabV1().GpuInventories()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = phaseLabel + "=inventories"
			return inventories.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = phaseLabel + "=inventories"
			return inventories.Watch(ctx, opts)
		},
	}
	done := map[string]bool{}
	last := map[string]totals{}
	report := time.Now()
	_, err := watchtools.UntilWithSync(ctx, lw, &homelabv1.GpuInventory{}, nil, func(ev watch.Event) (bool, error) {
		gi, ok := ev.Object.(*homelabv1.GpuInventory)
		if !ok {
			return false, nil
		}
		switch {
		case ev.Type == watch.Deleted:
			return false, fmt.Errorf("inventory %s was deleted", gi.Name)
		case synced(gi, want[gi.Name]):
			done[gi.Name] = true
		default:
			delete(done, gi.Name)
			last[gi.Name] = statusTotals(gi.Status)
		}
		if time.Since(report) > 10*time.Second {
			report = time.Now()
			fmt.Fprintf(os.Stderr, "inventories: %d of %d show their totals\n", len(done), len(want))
		}
		return len(done) == len(want), nil
	})
	if err != nil {
		for name, t := range want {
			if !done[name] {
				return fmt.Errorf("%d of %d inventories show their totals; %s wants %s, last seen %s: %w", len(done), len(want), name, t, last[name], err)
			}
		}
		return err
	}
	return nil
}
