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

package nominate

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/dispatch"
)

// Outcomes of gpu_fleet_dispatch_nominations_total.
const (
	outcomeWritten  = "written"
	outcomeConflict = "conflict"
	outcomeFailed   = "failed"
)

// carryOut writes what the decision changes: the nomination, then the condition (with its
// event).
func (c *Controller) carryOut(ctx context.Context, key cache.ObjectName, wl *dispatch.Workload, t *tracked, d decision, now time.Time) error {
	logger := klog.FromContext(ctx)
	if !sameSet(d.nominate, wl.Status.NominatedClusterNames) {
		err := c.writeNomination(ctx, key, wl, d.nominate)
		c.opts.Dispatch.Nominations.WithLabelValues(outcomeOf(err), d.why).Inc()
		if err != nil {
			return fmt.Errorf("nominate %v for Workload %s: %w", d.nominate, key, err)
		}
		logger.V(2).Info("Nominated workers", "workload", key, "workers", d.nominate, "why", d.why)
		c.mu.Lock()
		if len(t.nominated) == 0 && len(d.nominate) > 0 && !t.seenAt.IsZero() {
			c.opts.Dispatch.Latency.Observe(now.Sub(t.seenAt).Seconds())
			t.seenAt = time.Time{}
		}
		t.nominated, t.nominatedAt = slices.Clone(d.nominate), now
		c.mu.Unlock()
	}
	c.mu.Lock()
	t.result = d.result
	c.mu.Unlock()
	c.countResults()
	if d.condition == nil || sameCondition(gpuFit(wl), d.condition) {
		return nil
	}
	if err := c.writeCondition(ctx, key, d.condition, now); err != nil {
		return fmt.Errorf("condition %s on Workload %s: %w", ConditionGpuFit, key, err)
	}
	if d.condition.Reason == ReasonFitsNowhere || d.condition.Reason == ReasonInvalidWorkload {
		c.opts.Recorder.Event(eventObject(wl), corev1.EventTypeWarning, d.condition.Reason, d.condition.Message)
	}
	return nil
}

func outcomeOf(err error) string {
	switch {
	case err == nil:
		return outcomeWritten
	case apierrors.IsConflict(err):
		return outcomeConflict
	}
	return outcomeFailed
}

// errChanged is a Workload whose nomination changed between the cache and the server: the
// sync runs again on the newer object.
var errChanged = fmt.Errorf("the Workload's nomination changed since it was read")

// writeNomination applies status.nominatedClusterNames as Kueue's own dispatchers do: under
// Kueue's field manager, with the whole status as the server has it, at its resourceVersion
// (docs/design/hub.md, "The write"). Kueue's next apply then drops only what it means to.
func (c *Controller) writeNomination(ctx context.Context, key cache.ObjectName, read *dispatch.Workload, workers []string) error {
	client := c.opts.Client.Resource(WorkloadsResource).Namespace(key.Namespace)
	live, err := client.Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	names, _, _ := unstructured.NestedStringSlice(live.Object, "status", "nominatedClusterNames")
	if _, set, _ := unstructured.NestedString(live.Object, "status", "clusterName"); set || !sameSet(names, read.Status.NominatedClusterNames) {
		return apierrors.NewConflict(WorkloadsResource.GroupResource(), key.Name, errChanged)
	}
	_, err = client.ApplyStatus(ctx, key.Name, NominationApply(live, workers), metav1.ApplyOptions{FieldManager: KueueFieldManager, Force: true})
	return err
}

// NominationApply is the apply of a nomination for the Workload as read: its whole status
// with nominatedClusterNames set (left out when workers is empty), at its resourceVersion.
func NominationApply(live *unstructured.Unstructured, workers []string) *unstructured.Unstructured {
	status, _, _ := unstructured.NestedMap(live.Object, "status")
	if status == nil {
		status = map[string]any{}
	}
	if len(workers) == 0 {
		delete(status, "nominatedClusterNames")
	} else {
		names := make([]any, len(workers))
		for i, w := range workers {
			names[i] = w
		}
		status["nominatedClusterNames"] = names
	}
	apply := &unstructured.Unstructured{Object: map[string]any{"status": status}}
	apply.SetAPIVersion(live.GetAPIVersion())
	apply.SetKind(live.GetKind())
	apply.SetNamespace(live.GetNamespace())
	apply.SetName(live.GetName())
	apply.SetResourceVersion(live.GetResourceVersion())
	return apply
}

// writeCondition applies the hub's condition alone, under the hub's own field manager, so
// that Kueue's applies, which copy the status they read, never remove it.
func (c *Controller) writeCondition(ctx context.Context, key cache.ObjectName, cond *metav1.Condition, now time.Time) error {
	apply := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{map[string]any{
		"type": cond.Type, "status": string(cond.Status), "reason": cond.Reason, "message": cond.Message,
		"lastTransitionTime": metav1.NewTime(now).UTC().Format(time.RFC3339),
	}}}}}
	apply.SetAPIVersion(WorkloadsResource.GroupVersion().String())
	apply.SetKind("Workload")
	apply.SetNamespace(key.Namespace)
	apply.SetName(key.Name)
	_, err := c.opts.Client.Resource(WorkloadsResource).Namespace(key.Namespace).ApplyStatus(ctx, key.Name, apply,
		metav1.ApplyOptions{FieldManager: homelabv1.FleetFieldManager, Force: true})
	return err
}

func sameCondition(a, b *metav1.Condition) bool {
	return a != nil && b != nil && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}

// eventObject is the Workload as an event's involved object.
func eventObject(wl *dispatch.Workload) runtime.Object {
	ref := &corev1.ObjectReference{APIVersion: WorkloadsResource.GroupVersion().String(), Kind: "Workload",
		Namespace: wl.Namespace, Name: wl.Name, UID: wl.UID, ResourceVersion: wl.ResourceVersion}
	return ref
}

// countResults sets gpu_fleet_dispatch_workloads from the Workloads tracked.
func (c *Controller) countResults() {
	counts := map[string]float64{resultNominated: 0, resultFitsNowhere: 0, resultNoGpus: 0}
	c.mu.Lock()
	for _, t := range c.tracked {
		if t.result != "" {
			counts[t.result]++
		}
	}
	c.mu.Unlock()
	for result, n := range counts {
		c.opts.Dispatch.Workloads.WithLabelValues(result).Set(n)
	}
}
