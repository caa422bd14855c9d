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
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/follow"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/statuswriter"
)

// settle waits until inventory name has not changed for quiet (at most timeout).
func settle(ctx context.Context, gpu versioned.Interface, name string, quiet, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	gi, err := gpu.HomelabV1().GpuInventories().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	w, err := gpu.HomelabV1().GpuInventories().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: gi.ResourceVersion})
	if err != nil {
		return err
	}
	defer w.Stop()
	timer := time.NewTimer(quiet)
	for {
		select {
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("inventory %s did not settle within %s", name, timeout)
		case _, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("watch ended before the inventory settled")
			}
			timer.Reset(quiet)
		}
	}
}

// probe changes a marker node's product to a new value count times and measures each time
// until the status's model summary shows it, on one watch opened before the first change.
func probe(ctx context.Context, h *harness, count int, phase string) ([]time.Duration, error) {
	gi, err := h.watcher.HomelabV1().GpuInventories().Get(ctx, "cluster", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	w, err := h.watcher.HomelabV1().GpuInventories().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=cluster", ResourceVersion: gi.ResourceVersion})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	var out []time.Duration
	marker := fixtures.FleetNodeName(0)
	for k := range count {
		if ctx.Err() != nil {
			break
		}
		if phase == "quiet" {
			// A quiet cluster: no change for longer than the operator's sync intervals
			// (--min-sync-interval, and four times that for the ConfigMap); the previous
			// probe's change is the last one.
			time.Sleep(h.o.quietGap)
		}
		product := fmt.Sprintf("PROBE-%s-%d-%d", phase, k, time.Now().UnixNano())
		patch := fmt.Sprintf(`{"metadata":{"labels":{"nvidia.com/gpu.product":%q}}}`, product)
		t0 := time.Now()
		if _, err := h.json.CoreV1().Nodes().Patch(ctx, marker, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return nil, err
		}
		latency, err := seen(ctx, w, t0, product)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return nil, fmt.Errorf("probe %d: %w", k, err)
		}
		out = append(out, latency)
		if h.probeLog != nil {
			// To set against the operator's log of the same run (its sync durations at -v=4).
			fmt.Fprintf(h.probeLog, "%s probe %d at %s: %s\n", phase, k, t0.UTC().Format("15:04:05.000000"), latency.Round(time.Millisecond))
		}
	}
	return out, nil
}

// dryRunApplies measures the API server's part of a status write: count server-side applies
// of the inventory's current status as the operator sends them (its field manager,
// fieldValidation=Ignore, an answer of metadata only) with dryRun=All, which does everything
// a write does (decoding, merging, validation, encoding the answer) except storing it. One a
// second, as in the quiet phase.
func dryRunApplies(ctx context.Context, gpu versioned.Interface, count int) ([]time.Duration, error) {
	gi, err := gpu.HomelabV1().GpuInventories().Get(ctx, "cluster", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	writer := statuswriter.New(gpu.HomelabV1().RESTClient()).DryRun()
	var out []time.Duration
	for range count {
		time.Sleep(time.Second)
		t0 := time.Now()
		if _, err := writer.ApplyStatus(ctx, gi.Name, gi.Status); err != nil {
			return nil, fmt.Errorf("dry-run apply: %w", err)
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}

// seen waits on w for the status whose models show product and returns the time since t0.
func seen(ctx context.Context, w watch.Interface, t0 time.Time, product string) (time.Duration, error) {
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-timeout.C:
			return 0, errors.New("the status did not show the change within 30s")
		case ev, ok := <-w.ResultChan():
			if !ok {
				return 0, errors.New("the watch ended")
			}
			gi, isInventory := ev.Object.(*homelabv1.GpuInventory)
			if isInventory && slices.ContainsFunc(gi.Status.Models, func(m homelabv1.GpuModel) bool { return m.Product == product }) {
				return time.Since(t0), nil
			}
		}
	}
}

// watchInventory follows inventory name until done accepts a state of it (timeout at most),
// waiting for the CRD, which the operator installs first.
func watchInventory(ctx context.Context, gpu versioned.Interface, name string, timeout time.Duration, done func(*homelabv1.GpuInventory) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := follow.Inventory(ctx, gpu.HomelabV1().GpuInventories(), name, func(gi *homelabv1.GpuInventory, deleted bool) (bool, error) {
			return !deleted && done(gi), nil
		})
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("not reached within %s", timeout)
		case !apierrors.IsNotFound(err):
			return err
		}
		time.Sleep(100 * time.Millisecond) // the CRD is not installed yet
	}
}

// writeCounter counts modifications of the GpuInventory.
type writeCounter struct {
	mu sync.Mutex
	n  int
}

func (w *writeCounter) count() int { w.mu.Lock(); defer w.mu.Unlock(); return w.n }

// run counts the states of the inventory after the one at resourceVersion rv.
func (w *writeCounter) run(ctx context.Context, gpu versioned.Interface, rv string) {
	_ = watchInventory(ctx, gpu, "cluster", 24*time.Hour, func(gi *homelabv1.GpuInventory) bool {
		if gi.ResourceVersion != rv {
			rv = gi.ResourceVersion
			w.mu.Lock()
			w.n++
			w.mu.Unlock()
		}
		return false
	})
}
