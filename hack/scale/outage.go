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
	"maps"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/follow"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// restartOperator stops the operator, changes the default inventory's note meanwhile (so
// that the new operator owes it a status), starts a new one and returns the time from its
// start until the status is for that spec and counts every GPU node and GPU, and that status.
func restartOperator(ctx context.Context, h *harness, why string) (time.Duration, *homelabv1.GpuInventoryStatus, error) {
	return restartOperatorUntil(ctx, h, why, nil)
}

// restartOperatorUntil is restartOperator where the status must also satisfy done, when not
// nil.
func restartOperatorUntil(ctx context.Context, h *harness, why string, done func(*homelabv1.GpuInventory) bool) (time.Duration, *homelabv1.GpuInventoryStatus, error) {
	h.op.stop()
	patch := fmt.Sprintf(`{"spec":{"note":%q}}`, fmt.Sprintf("hack/scale: %s at %s", why, time.Now().UTC().Format(time.RFC3339Nano)))
	patched, err := h.gpu.HomelabV1().GpuInventories().Patch(ctx, homelabv1.DefaultInventoryName, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return 0, nil, fmt.Errorf("change the note of inventory %s: %w", homelabv1.DefaultInventoryName, err)
	}
	op, err := h.launcher.start()
	if err != nil {
		return 0, nil, err
	}
	h.op = op
	gpuNodes := int32(len(h.fleet))
	gpus := expectTotals(h.fleet, labels.Everything()).Gpus
	var first *homelabv1.GpuInventoryStatus
	err = watchInventory(ctx, h.watcher, homelabv1.DefaultInventoryName, 2*time.Minute, func(gi *homelabv1.GpuInventory) bool {
		first = &gi.Status
		// At least the patched generation: a list from the watch cache can be older. Every
		// GPU counted: a DRA node's come from its slice.
		return gi.Status.ObservedGeneration >= patched.Generation && gi.Status.TotalGpuNodes == gpuNodes && gi.Status.TotalGpus == gpus &&
			(done == nil || done(gi))
	})
	took := time.Since(op.started)
	if err != nil {
		return 0, nil, fmt.Errorf("first complete status after the restart (%s): %w", why, err)
	}
	return took, first, nil
}

// outageResult is what the GFD outage measured.
type outageResult struct {
	nodes                   int           // the GFD-labelled GPU nodes, which lose their labels
	all                     int           // every GPU node, DRA nodes included
	removeTook, restoreTook time.Duration // taking every node's GFD labels away, putting them back
	allMissing              time.Duration // from the first removal until labelsMissingNodes counted every node
	restartAt               time.Duration // from the first removal
	restartFirst            time.Duration // from the restart to its first complete status
	missingAfterRestart     bool          // the restarted operator's status counted every node missing
	backAt                  time.Duration // from the first removal until the labels were put back
	exactBack               time.Duration // from putting them back until the status is exact, none missing
	recordsBack             time.Duration // from putting them back until no record is marked missing
	records                 int

	// Every state of the inventory, followed throughout.
	statesSeen, complete, wrong int
	firstWrong                  string
	maxMissing                  int32
	lastMissing                 int32
}

// failures lists what the outage got wrong.
func (r *outageResult) failures() []string {
	var out []string
	if r.wrong > 0 {
		out = append(out, fmt.Sprintf("%d of %d complete states wrong, first: %s", r.wrong, r.complete, r.firstWrong))
	}
	if r.maxMissing != int32(r.nodes) {
		out = append(out, fmt.Sprintf("labelsMissingNodes reached %d, not %d", r.maxMissing, r.nodes))
	}
	if !r.missingAfterRestart {
		out = append(out, "the restarted operator's status did not count every node missing")
	}
	if r.lastMissing != 0 {
		out = append(out, fmt.Sprintf("labelsMissingNodes is %d after the labels came back", r.lastMissing))
	}
	return out
}

// mistakes are what the reports got wrong.
func (r *outageResult) mistakes() []error {
	if failures := r.failures(); len(failures) > 0 {
		return []error{fmt.Errorf("GFD outage: %s", strings.Join(failures, "; "))}
	}
	return nil
}

// outagePhase takes GPU Feature Discovery's labels away from every GPU node it labels at once
// (its DaemonSet deleted), restarts the operator in the middle and puts the labels back after
// --outage-duration; DRA nodes have none to lose. It follows the default inventory throughout: every state
// that counts all GPU nodes must show the fleet's total GPUs and per-model node and GPU
// counts, labelsMissingNodes must count every GFD node during the outage (with the
// LabelsMissing condition naming the count) and none after, and the records must come back
// unmarked.
func outagePhase(ctx context.Context, h *harness) (result, error) {
	d := h.o.outageFor
	gfd := gfdNodes(h.fleet)
	res := &outageResult{nodes: len(gfd), all: len(h.fleet)}
	want := expectTotals(h.fleet, labels.Everything())
	if err := waitTotals(ctx, h.watcher, homelabv1.DefaultInventoryName, want, 2*time.Minute); err != nil {
		return nil, fmt.Errorf("before the outage: %w", err)
	}

	var mu sync.Mutex // res's state counts, written by the follower
	followCtx, stopFollowing := context.WithCancel(ctx)
	var following sync.WaitGroup
	following.Go(func() { followOutage(followCtx, h, res, &mu, want) })
	defer func() { stopFollowing(); following.Wait() }()

	start, err := takeGFDAway(ctx, h, gfd, res)
	if err != nil {
		return nil, err
	}
	time.Sleep(time.Until(start.Add(d / 2))) // the outage's length is the scenario: nothing to watch for
	res.restartAt = time.Since(start)
	took, first, err := restartOperator(ctx, h, "restart during the GFD outage")
	if err != nil {
		return nil, err
	}
	res.restartFirst, res.missingAfterRestart = took, first.LabelsMissingNodes == int32(len(gfd))
	fmt.Fprintf(os.Stderr, "GFD outage: operator restarted at %s, first complete status %s later\n", res.restartAt.Round(time.Second), res.restartFirst.Round(time.Millisecond))

	time.Sleep(time.Until(start.Add(d))) // as above
	res.backAt = time.Since(start)
	if err := putGFDBack(ctx, h, gfd, want, res); err != nil {
		return nil, err
	}
	// The last state seen is the one waitTotals accepted: the follower has it too once it
	// has caught up, which ending it now could cut short.
	if err := settle(ctx, h.watcher, homelabv1.DefaultInventoryName, 2*time.Second, 30*time.Second); err != nil {
		return nil, err
	}
	stopFollowing()
	following.Wait()
	return res, nil
}

// followOutage counts, until ctx ends, the states of the default inventory in res (under
// mu): those that count every GPU node, the labelsMissingNodes they show, and the wrong ones
// (outageWrong against want).
func followOutage(ctx context.Context, h *harness, res *outageResult, mu *sync.Mutex, want totals) {
	all := int32(res.all)
	_ = follow.Inventory(ctx, h.watcher.HomelabV1().GpuInventories(), homelabv1.DefaultInventoryName, func(gi *homelabv1.GpuInventory, deleted bool) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		res.statesSeen++
		if deleted {
			res.wrong++
			res.firstWrong = firstOf(res.firstWrong, "the inventory was deleted")
			return false, nil
		}
		st := gi.Status
		if st.TotalGpuNodes != all {
			return false, nil
		}
		res.complete++
		res.maxMissing, res.lastMissing = max(res.maxMissing, st.LabelsMissingNodes), st.LabelsMissingNodes
		if why := outageWrong(st, want); why != "" {
			res.wrong++
			res.firstWrong = firstOf(res.firstWrong, fmt.Sprintf("resourceVersion %s: %s", gi.ResourceVersion, why))
		}
		return false, nil
	})
}

// takeGFDAway takes GFD's labels from the gfd nodes and waits until labelsMissingNodes counts
// every one of them; it returns when the removal started.
func takeGFDAway(ctx context.Context, h *harness, gfd []fleetNode, res *outageResult) (time.Time, error) {
	missing := int32(len(gfd))
	start := time.Now()
	if err := setGFD(ctx, h, gfd, false); err != nil {
		return start, err
	}
	res.removeTook = time.Since(start)
	fmt.Fprintf(os.Stderr, "GFD outage: labels taken from %d GPU nodes in %s\n", len(gfd), res.removeTook.Round(time.Millisecond))
	err := watchInventory(ctx, h.watcher, homelabv1.DefaultInventoryName, 2*time.Minute, func(gi *homelabv1.GpuInventory) bool {
		return gi.Status.LabelsMissingNodes == missing
	})
	if err != nil {
		return start, fmt.Errorf("labelsMissingNodes did not reach %d: %w", missing, err)
	}
	res.allMissing = time.Since(start)
	return start, nil
}

// putGFDBack puts GFD's labels back on the gfd nodes and measures until the status shows want
// and until every record is there, none marked missing.
func putGFDBack(ctx context.Context, h *harness, gfd []fleetNode, want totals, res *outageResult) error {
	back := time.Now()
	if err := setGFD(ctx, h, gfd, true); err != nil {
		return err
	}
	res.restoreTook = time.Since(back)
	if err := waitTotals(ctx, h.watcher, homelabv1.DefaultInventoryName, want, 2*time.Minute); err != nil {
		return fmt.Errorf("after the labels came back: %w", err)
	}
	res.exactBack = time.Since(back)
	marked := 0
	err := watchRecords(ctx, h.gpu, 2*time.Minute, func(records map[string]*homelabv1.GpuNode) bool {
		res.records, marked = len(records), 0
		for _, r := range records {
			if r.Spec.MissingSince != nil {
				marked++
			}
		}
		return res.records == res.all && marked == 0
	})
	if err != nil {
		return fmt.Errorf("after the labels came back, %d records, %d of them marked missing: %w", res.records, marked, err)
	}
	res.recordsBack = time.Since(back)
	return nil
}

// outageWrong says what is wrong with a status that counts every GPU node during or after
// the outage, or "".
func outageWrong(st homelabv1.GpuInventoryStatus, want totals) string {
	got := statusTotals(st)
	var why []string
	if got.Gpus != want.Gpus {
		why = append(why, fmt.Sprintf("totalGpus %d, want %d", got.Gpus, want.Gpus))
	}
	if !maps.Equal(got.Models, want.Models) || !maps.Equal(got.ModelGpus, want.ModelGpus) {
		why = append(why, fmt.Sprintf("models %s, want %s", got.models(), want.models()))
	}
	cond := meta.FindStatusCondition(st.Conditions, homelabv1.ConditionLabelsMissing)
	switch {
	case cond == nil:
		why = append(why, "no LabelsMissing condition")
	case st.LabelsMissingNodes > 0 && (cond.Status != metav1.ConditionTrue || !strings.HasPrefix(cond.Message, fmt.Sprintf("%d GPU nodes ", st.LabelsMissingNodes))):
		why = append(why, fmt.Sprintf("labelsMissingNodes %d but LabelsMissing is %s: %.80q", st.LabelsMissingNodes, cond.Status, cond.Message))
	case st.LabelsMissingNodes == 0 && cond.Status != metav1.ConditionFalse:
		why = append(why, fmt.Sprintf("no labels missing but LabelsMissing is %s", cond.Status))
	}
	return strings.Join(why, "; ")
}

func firstOf(first, next string) string {
	if first != "" {
		return first
	}
	return next
}

// setGFD takes GPU Feature Discovery's labels away from nodes (present false) or puts them
// back, 16 nodes at a time.
func setGFD(ctx context.Context, h *harness, nodes []fleetNode, present bool) error {
	_, err := paced(ctx, nodes, 0, func(n fleetNode) error { return testenv.SetGFDLabels(ctx, h.kube, n.index, present) })
	return err
}
