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

package gpuinventory

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventorycache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/section"
)

// computed is an inventory's content as the caches say it is now.
type computed struct {
	content    inventory.Inventory
	listed     []homelabv1.GpuNodeEntry // the entries for status.nodes
	conditions []metav1.Condition       // without transition times
	stored     []homelabv1.GpuNodeEntry // the node list of the stored status
	invalid    bool                     // the selector is invalid: no nodes were read
	parts      []*section.Part          // each section's, nil where it has none
}

// syncHandler brings one inventory's status up to date: compute, up to date?, write, announce.
func (c *Controller) syncHandler(ctx context.Context, key cache.ObjectName) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "inventory", key.Name)
	ctx = klog.NewContext(ctx, logger)
	if c.beforeSync != nil {
		c.beforeSync(key.Name)
	}
	gi, err := c.inventories.Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil // deleted; nothing to keep up to date
	}
	if err != nil {
		return fmt.Errorf("get GpuInventory %s from cache: %w", key.Name, err)
	}
	now, err := c.compute(ctx, gi)
	if err != nil {
		return err
	}
	defer now.content.Release() // what outlives the sync (status, memory, events) is copied
	c.observe(gi, now)
	if upToDate(gi, now.content.Hash) {
		c.memory.markSynced(key)
		c.metrics.StatusWrites.WithLabelValues(gi.Name, "skipped").Inc()
		c.metrics.LastSuccessfulSync.WithLabelValues(gi.Name).SetToCurrentTime()
		return nil
	}
	status := c.statusFor(gi, now)
	if err := c.write(ctx, gi, now.content.Hash, status); err != nil {
		return err
	}
	c.announce(ctx, gi, now, status)
	return nil
}

// compute reads the nodes the inventory's selector covers and the stored node list (the
// memory of last-known labels, which survives restarts and leader changes).
func (c *Controller) compute(ctx context.Context, gi *homelabv1.GpuInventory) (computed, error) {
	sel, err := c.selectors.get(gi)
	if err != nil {
		content := inventory.FromEntries(nil)
		sum := sha256.Sum256([]byte(err.Error()))
		content.Hash = "invalid-selector:" + hex.EncodeToString(sum[:8])
		cond := inventory.InvalidSelectorCondition(err, gi.Generation)
		cond.Message = inventory.Cut(cond.Message, inventory.MaxMessageBytes)
		return computed{content: content, invalid: true, conditions: []metav1.Condition{cond}}, nil
	}
	nodes, err := c.nodes.List(sel)
	if err != nil {
		return computed{}, fmt.Errorf("list nodes from cache: %w", err)
	}
	stored, err := c.storedNodes(ctx, gi)
	if err != nil {
		return computed{}, err
	}
	content, warnings := c.entries.ComputeWithRecords(nodes, stored, c.facts.Record, c.clock.Now())
	if c.readsPods {
		content.AddDemand(c.facts.Pending(), gi.Spec.NodeSelector == nil)
	}
	c.warnings.log(klog.FromContext(ctx), warnings)
	listed, omitted := content.Listed(c.maxStatusNodes, inventory.MaxNodeListBytes)
	now := computed{content: content, listed: listed, stored: stored,
		conditions: inventory.ConditionsFor(content, &gi.Spec, omitted, gi.Generation)}
	c.computeSections(ctx, gi, nodes, &now)
	return now, nil
}

// computeSections adds each section's part: its conditions, and its hash to the content's.
func (c *Controller) computeSections(ctx context.Context, gi *homelabv1.GpuInventory, nodes []*corev1.Node, now *computed) {
	in := section.Input{Inventory: gi, Nodes: nodes, Content: &now.content, Logger: klog.FromContext(ctx), KeepsLabel: c.keeps, KeepsLevel: c.keepsLevel}
	now.parts = make([]*section.Part, len(c.sections))
	for i, s := range c.sections {
		part := s.Compute(in)
		if part == nil {
			continue
		}
		c.cannotHandle(part.MissingLabels, "the inventory's "+s.Name())
		now.parts[i], now.conditions = part, append(now.conditions, part.Conditions...)
		now.content.Hash += ":" + s.Name() + ":" + part.Hash
	}
}

// upToDate reports whether the stored status has this content for the current spec.
func upToDate(gi *homelabv1.GpuInventory, hash string) bool {
	return gi.Status.InventoryHash == hash && gi.Status.ObservedGeneration == gi.Generation
}

// statusFor is the status to write: conditions keep their transition time unless their
// status flips, and observedAt moves only when the content changed.
func (c *Controller) statusFor(gi *homelabv1.GpuInventory, now computed) homelabv1.GpuInventoryStatus {
	at := metav1.NewTime(c.clock.Now())
	observedAt := at
	if gi.Status.InventoryHash == now.content.Hash && gi.Status.ObservedAt != nil {
		observedAt = *gi.Status.ObservedAt // only the generation moved
	}
	conditions := make([]metav1.Condition, len(gi.Status.Conditions))
	copy(conditions, gi.Status.Conditions) // never mutate what the lister returns
	if now.invalid {                       // no nodes were read: what they said before no longer holds
		meta.RemoveStatusCondition(&conditions, homelabv1.ConditionLabelsMissing)
		meta.RemoveStatusCondition(&conditions, homelabv1.ConditionTruncated)
		meta.RemoveStatusCondition(&conditions, homelabv1.ConditionFragmented)
	}
	for _, s := range c.sections { // a section's conditions its part no longer sets
		for _, t := range s.Conditions() {
			if meta.FindStatusCondition(now.conditions, t) == nil {
				meta.RemoveStatusCondition(&conditions, t)
			}
		}
	}
	for _, cond := range now.conditions {
		cond.LastTransitionTime = at
		meta.SetStatusCondition(&conditions, cond)
	}
	status := now.content.Status(now.listed, conditions, gi.Generation, observedAt)
	for _, part := range now.parts {
		if part != nil && part.Set != nil {
			part.Set(&status)
		}
	}
	return status
}

// write applies status and remembers what was written.
func (c *Controller) write(ctx context.Context, gi *homelabv1.GpuInventory, hash string, status homelabv1.GpuInventoryStatus) error {
	key := cache.MetaObjectToName(gi)
	resourceVersion, err := c.writer.ApplyStatus(ctx, gi.Name, status)
	if err != nil {
		return fmt.Errorf("apply status of GpuInventory %s: %w", gi.Name, err)
	}
	c.limiter.Wrote(key)
	c.memory.wrote(key, hash, resourceVersion, status.Nodes)
	c.metrics.StatusWrites.WithLabelValues(gi.Name, "written").Inc()
	c.metrics.LastSuccessfulSync.WithLabelValues(gi.Name).SetToCurrentTime()
	return nil
}

// announce logs the new content and records events for what changed since the stored
// status (none for the first status: a new operator must not announce every node).
func (c *Controller) announce(ctx context.Context, gi *homelabv1.GpuInventory, now computed, status homelabv1.GpuInventoryStatus) {
	content := now.content
	degraded := meta.FindStatusCondition(status.Conditions, homelabv1.ConditionDegraded)
	klog.FromContext(ctx).Info("Inventory changed", "gpuNodes", content.TotalGpuNodes, "readyGpuNodes", content.ReadyGpuNodes,
		"gpus", content.TotalGpus, "readyGpus", content.ReadyGpus, "unhealthyGpus", content.UnhealthyGpus,
		"labelsMissingNodes", content.LabelsMissingNodes, "degraded", degraded.Status, "reason", degraded.Reason)
	if gi.Status.InventoryHash == "" || now.invalid {
		return
	}
	complete := len(now.stored) == int(gi.Status.TotalGpuNodes)
	for _, ev := range inventory.Diff(now.stored, content.Nodes, complete) {
		c.recorder.Event(gi, ev.Type, ev.Reason, ev.Message)
	}
}

// storedNodes is the node list of gi's stored status: from the object when it has it, from
// memory when this controller wrote that very resourceVersion, otherwise from the server.
func (c *Controller) storedNodes(ctx context.Context, gi *homelabv1.GpuInventory) ([]homelabv1.GpuNodeEntry, error) {
	if !inventorycache.NodesOmitted(gi) {
		return gi.Status.Nodes, nil
	}
	key := cache.MetaObjectToName(gi)
	if nodes, ok := c.memory.nodesAt(key, gi.ResourceVersion); ok {
		return nodes, nil
	}
	full, err := c.client.Get(ctx, gi.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read the node list of GpuInventory %s: %w", gi.Name, err)
	}
	c.metrics.StatusReads.WithLabelValues(gi.Name).Inc()
	c.memory.read(key, full.ResourceVersion, full.Status.Nodes)
	return full.Status.Nodes, nil
}

// observe publishes an inventory's content as gauges. Label cardinality stays bounded: per
// inventory and per model, and per node only with PerNodeMetrics.
func (c *Controller) observe(gi *homelabv1.GpuInventory, now computed) {
	content := now.content
	out := metrics.Content{
		GPUNodes: content.TotalGpuNodes, ReadyGPUNodes: content.ReadyGpuNodes,
		GPUs: content.TotalGpus, ReadyGPUs: content.ReadyGpus,
		UnhealthyGPUs: content.UnhealthyGpus, LabelsMissingNodes: content.LabelsMissingNodes,
		FragmentationGPUs: gi.Spec.FragmentationThreshold(),
		Models:            make([]metrics.ModelContent, len(content.Models)),
	}
	for i, model := range content.Models {
		out.Models[i] = metrics.ModelContent{Product: model.Product, GPUs: model.Gpus, ReadyGPUs: model.ReadyGpus,
			Allocated: model.AllocatedGpus, Free: model.FreeGpus, LargestFit: model.LargestFit}
	}
	sources, conditions := map[string]int32{}, map[string]int32{}
	for i := range content.Nodes {
		n := &content.Nodes[i]
		sources[cmp.Or(n.Source, homelabv1.SourceGPUFeatureDiscovery)]++
		for _, cond := range n.Conditions {
			conditions[cond]++
		}
		if c.perNodeMetrics && !n.Ready {
			out.NotReadyNodes = append(out.NotReadyNodes, n.Name)
		}
	}
	out.SourceNodes, out.ConditionNodes = counts(sources), counts(conditions)
	for _, part := range now.parts {
		if part != nil && part.Observe != nil {
			part.Observe(&out)
		}
	}
	if a := content.Allocation; a != nil {
		out.Allocation = true
		for _, d := range a.Pending {
			p := metrics.Pending{Product: d.Model, GPUs: d.Gpus}
			if d.Since != nil {
				p.Since = d.Since.Unix()
			}
			out.Pending = append(out.Pending, p)
		}
		for _, ns := range a.Namespaces {
			out.Namespaces = append(out.Namespaces, metrics.Count{Name: ns.Namespace, Value: ns.Gpus})
		}
	}
	c.metrics.SetContent(gi.Name, out)
}

func counts(m map[string]int32) []metrics.Count {
	out := make([]metrics.Count, 0, len(m))
	for name, n := range m {
		out = append(out, metrics.Count{Name: name, Value: n})
	}
	return out
}
