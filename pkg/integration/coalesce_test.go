//go:build integration

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

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Status writes are spaced by a token bucket per inventory: after a quiet spell two changes
// in a row are both written at once, while sustained churn writes about once per
// --min-sync-interval.
func TestWritesComeInBurstsAndAreSpacedUnderChurn(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	opts := testOptions()
	opts.MinSyncInterval = 2 * time.Second
	startOperator(t, c.env.Config, opts)
	gi := c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})

	w, err := c.gpu.HomelabV1().GpuInventories().Watch(context.Background(), metav1.ListOptions{
		FieldSelector: "metadata.name=cluster", ResourceVersion: gi.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// next returns the next version of the inventory that satisfies done, or fails after timeout.
	next := func(timeout time.Duration, what string, done func(*homelabv1.GpuInventory) bool) {
		t.Helper()
		deadline := time.After(timeout)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("the watch of the inventory ended")
				}
				if gi, isInventory := ev.Object.(*homelabv1.GpuInventory); isInventory && done(gi) {
					return
				}
			case <-deadline:
				t.Fatalf("%s: not in the status within %s", what, timeout)
			}
		}
	}
	// A quiet spell of one interval refills the bucket (the first status took one token).
	quiet := time.After(opts.MinSyncInterval)
	for done := false; !done; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch of the inventory ended")
			}
			t.Fatalf("the inventory changed while the cluster was quiet: %s", ev.Type)
		case <-quiet:
			done = true
		}
	}

	nuc2 := func(gi *homelabv1.GpuInventory) homelabv1.GpuNodeEntry {
		for _, n := range gi.Status.Nodes {
			if n.Name == "nuc2" {
				return n
			}
		}
		return homelabv1.GpuNodeEntry{}
	}
	start := time.Now()
	c.patchLabels(t, "nuc2", map[string]string{"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-3060", "nvidia.com/gpu.count": "1"})
	next(200*time.Millisecond, "nuc2's labels back", func(gi *homelabv1.GpuInventory) bool { return !nuc2(gi).LabelsMissing })
	labelsBack := time.Since(start)
	start = time.Now()
	c.setReady(t, "nuc2", corev1.ConditionTrue)
	// Held for the whole interval, this change would take 2 s.
	next(200*time.Millisecond, "nuc2 Ready", func(gi *homelabv1.GpuInventory) bool { return nuc2(gi).Ready })
	t.Logf("after a quiet spell: labels back in the status after %s, Ready %s after that", labelsBack, time.Since(start))

	// Churn: nuc1's GPU memory label changes every 100 ms for 6 s, each value new (a Ready
	// flip back and forth can find the status as it was and rightly write nothing). Two
	// writes of the burst, then one per 2 s.
	churn := 6 * time.Second
	writes := 0
	stop := time.After(churn)
	flip := time.NewTicker(100 * time.Millisecond)
	defer flip.Stop()
	memory := 8188
	for done := false; !done; {
		select {
		case <-flip.C:
			memory++
			c.patchLabels(t, "nuc1", map[string]string{"nvidia.com/gpu.memory": fmt.Sprint(memory)})
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch of the inventory ended")
			}
			if ev.Type == watch.Modified {
				writes++
			}
		case <-stop:
			done = true
		}
	}
	if most := 2 + int(churn/opts.MinSyncInterval) + 1; writes < 2 || writes > most {
		t.Errorf("%d status writes in %s of churn with --min-sync-interval=%s; want between 2 and %d", writes, churn, opts.MinSyncInterval, most)
	}
}
