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

package usage

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/section"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/source"
)

// Name names the source.
func (*Cache) Name() string { return "prometheus" }

// Sections is the cache's one section: status.usage and the UsageUnknown condition.
func (c *Cache) Sections() []section.Section { return []section.Section{NewSection(c.Snapshot, c)} }

// NewSection is the usage section of the snapshots snapshot returns (Cache.Snapshot), which
// changes tells of.
func NewSection(snapshot func() *Snapshot, changes source.Changes) section.Section {
	return usageSection{snapshot, changes}
}

// usageSection is what the pods holding an inventory's GPUs use of them. A failed query is
// the UsageUnknown condition beside the last good usage; it never holds back the rest of the
// status.
type usageSection struct {
	snapshot func() *Snapshot
	changes  source.Changes
}

func (usageSection) Name() string              { return "usage" }
func (usageSection) Conditions() []string      { return []string{homelabv1.ConditionUsageUnknown} }
func (s usageSection) Changes() source.Changes { return s.changes }
func (usageSection) Forget(string)             {}

// Compute reads the snapshot for the inventory's nodes: nil when the inventory has no GPU
// nodes or Prometheus has not been asked yet.
func (s usageSection) Compute(in section.Input) *section.Part {
	gi := in.Inventory
	if in.Content.TotalGpuNodes == 0 {
		return nil
	}
	snap := s.snapshot()
	if !snap.Known() && snap.Problem.Reason == "" {
		return nil // not asked yet
	}
	covers := func(string) bool { return true } // the whole cluster's inventory
	if gi.Spec.NodeSelector != nil {
		names := make(map[string]struct{}, len(in.Nodes))
		for _, n := range in.Nodes {
			names[n.Name] = struct{}{}
		}
		covers = func(node string) bool { _, ok := names[node]; return ok }
	}
	status, condition := Summarize(snap, covers), usageCondition(snap, gi.Generation)
	rows := Rows(snap, covers)
	data, _ := json.Marshal(struct {
		Status    *homelabv1.GpuUsage
		Condition metav1.Condition
	}{status, condition})
	sum := sha256.Sum256(data)
	return &section.Part{Hash: hex.EncodeToString(sum[:8]), Conditions: []metav1.Condition{condition},
		Set:     func(st *homelabv1.GpuInventoryStatus) { st.Usage = status },
		Observe: func(m *metrics.Content) { m.Usage = usageMetrics(condition, rows) }}
}

// usageCondition says whether the last query of Prometheus was answered.
func usageCondition(s *Snapshot, generation int64) metav1.Condition {
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
	cond.Message = inventory.Cut(cond.Message, inventory.MaxMessageBytes)
	return cond
}

// usageMetrics is the usage as the metrics report it: the rows status.usage lists and every
// other one with idle GPUs (the alert's).
func usageMetrics(condition metav1.Condition, rows []Row) *metrics.UsageContent {
	out := &metrics.UsageContent{Unknown: condition.Status == metav1.ConditionTrue}
	for i, r := range rows {
		if i >= MaxNamespaces && r.IdleGpus == 0 {
			continue
		}
		out.Rows = append(out.Rows, metrics.UsageRow{Namespace: r.Namespace, Model: r.Model, Held: r.HeldGpus,
			Idle: r.IdleGpus, HeldHours: r.HeldGpuHours, IdleHours: r.IdleGpuHours})
	}
	return out
}
