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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/usage"
)

// computedUsage is what the pods holding an inventory's GPUs use of them.
type computedUsage struct {
	status    *homelabv1.GpuUsage
	condition metav1.Condition
	rows      []usage.Row // per namespace and model, for the metrics
	hash      string
}

// usageFor reads the usage snapshot for the inventory's nodes: nil when usage is not read or
// the inventory has no GPU nodes. A failed query is the UsageUnknown condition beside the
// last good usage; it never holds back the rest of the status.
func (c *Controller) usageFor(gi *homelabv1.GpuInventory, nodes []*corev1.Node, content inventory.Inventory) *computedUsage {
	if c.usageNow == nil || content.TotalGpuNodes == 0 {
		return nil
	}
	s := c.usageNow()
	if !s.Known() && s.Problem.Reason == "" {
		return nil // not asked yet
	}
	covers := func(string) bool { return true } // the whole cluster's inventory
	if gi.Spec.NodeSelector != nil {
		names := make(map[string]struct{}, len(nodes))
		for _, n := range nodes {
			names[n.Name] = struct{}{}
		}
		covers = func(node string) bool { _, ok := names[node]; return ok }
	}
	u := &computedUsage{status: usage.Summarize(s, covers), rows: usage.Rows(s, covers),
		condition: usageCondition(s, gi.Generation)}
	data, _ := json.Marshal(struct {
		Status    *homelabv1.GpuUsage
		Condition metav1.Condition
	}{u.status, u.condition})
	sum := sha256.Sum256(data)
	u.hash = hex.EncodeToString(sum[:8])
	return u
}

// usageCondition says whether the last query of Prometheus was answered.
func usageCondition(s *usage.Snapshot, generation int64) metav1.Condition {
	cond := metav1.Condition{Type: homelabv1.ConditionUsageUnknown, ObservedGeneration: generation,
		Status: metav1.ConditionFalse, Reason: homelabv1.ReasonUsageRead,
		Message: "Prometheus answered the utilisation of the GPUs DCGM exporter reports on."}
	switch {
	case s.Problem.Reason != "":
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, s.Problem.Reason, s.Problem.Message
		if s.Known() {
			cond.Message += "; status.usage is from " + s.At.UTC().Format("2006-01-02T15:04:05Z")
		}
	case s.Partial():
		cond.Message += fmt.Sprintf(" The window's past is still being read: status.usage counts its last %s of %s.",
			s.Covered, s.Settings.Window)
	}
	cond.Message = inventory.Cut(cond.Message, maxMessageBytes)
	return cond
}

// usageMetrics is the usage as the metrics report it: the rows status.usage lists and every
// other one with idle GPUs (the alert's); nil when usage is not read.
func usageMetrics(u *computedUsage) *metrics.UsageContent {
	if u == nil {
		return nil
	}
	out := &metrics.UsageContent{Unknown: u.condition.Status == metav1.ConditionTrue}
	for i, r := range u.rows {
		if i >= usage.MaxNamespaces && r.IdleGpus == 0 {
			continue
		}
		out.Rows = append(out.Rows, metrics.UsageRow{Namespace: r.Namespace, Model: r.Model, Held: r.HeldGpus,
			Idle: r.IdleGpus, HeldHours: r.HeldGpuHours, IdleHours: r.IdleGpuHours})
	}
	return out
}

// withoutUsage drops the UsageUnknown condition of an inventory that no longer reads usage.
func withoutUsage(conditions *[]metav1.Condition, now computed) {
	if now.usage == nil {
		meta.RemoveStatusCondition(conditions, homelabv1.ConditionUsageUnknown)
	}
}
