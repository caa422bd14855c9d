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

package printer

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// NoGPUNode names the model of quota whose flavors select no GPU node.
const NoGPUNode = "<no GPU node>"

// GPUResource is the resource whole GPUs are requested as.
const GPUResource = "nvidia.com/gpu"

// QuotaView is what `kubectl gpuinv quota` prints: an inventory's status.quota, or the rows
// of one ClusterQueue and its cohort.
type QuotaView struct {
	Inventory string
	Quota     *homelabv1.GpuQuota
	// Queue is the ClusterQueue the rows were picked for (empty: every row); LocalQueue the
	// NAMESPACE/NAME it was asked as, when it was; Cohort the queue's cohort.
	Queue, LocalQueue, Cohort string
	// Conditions are the inventory's conditions; the quota ones that are True are printed.
	Conditions []metav1.Condition
}

// Quota writes the quota tables: per model, per cohort, per ClusterQueue and per
// namespace (each only when it has rows), what the bounded lists leave out, and the quota
// conditions that are True.
func Quota(w io.Writer, v QuotaView, opts Options) error {
	var b strings.Builder
	b.WriteString(quotaHeadline(v) + "\n")
	q := v.Quota
	sections := []func(*table, *homelabv1.GpuQuota, Options){modelRows, cohortRows, queueRows, namespaceRows}
	for _, section := range sections {
		var t table
		section(&t, q, opts)
		if len(t.rows) > 1 {
			b.WriteString("\n")
			if err := t.write(&b, opts.Color); err != nil {
				return err
			}
		}
	}
	var notes []string
	if !allWholeGPUs(q) {
		notes = append(notes, "Counts are in each row's RESOURCE: GPUs for nvidia.com/gpu, MIG devices for a MIG resource, replicas for a shared one, devices for a DRA device class.")
	}
	if v.Queue == "" {
		if line := notListed(q); line != "" {
			notes = append(notes, line)
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n" + strings.Join(notes, "\n") + "\n")
	}
	if v.Queue == "" {
		if err := quotaConditions(&b, v.Conditions, opts.Color); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// quotaHeadline is the line above the tables: what quota exists, or which queue is shown.
func quotaHeadline(v QuotaView) string {
	q := v.Quota
	if v.Queue != "" {
		s := "ClusterQueue " + v.Queue
		if v.LocalQueue != "" {
			s += " (LocalQueue " + v.LocalQueue + ")"
		}
		if v.Cohort != "" {
			s += " in cohort " + v.Cohort
		}
		return fmt.Sprintf("%s, from GpuInventory %s.", s, v.Inventory)
	}
	var parts []string
	if q.Kueue == "" {
		parts = append(parts, "Kueue is not served")
	} else {
		parts = append(parts, fmt.Sprintf("Kueue %s: %s in %s with GPU quota", q.Kueue,
			count(int(q.ClusterQueues), "ClusterQueue", "ClusterQueues"), count(int(q.Cohorts), "cohort", "cohorts")))
	}
	if q.Namespaces > 0 {
		parts = append(parts, fmt.Sprintf("ResourceQuotas limit GPUs in %s", count(int(q.Namespaces), "namespace", "namespaces")))
	}
	if q.StrandedNodes > 0 {
		parts = append(parts, fmt.Sprintf("%s no ResourceFlavor selects", count(int(q.StrandedNodes), "Ready GPU node", "Ready GPU nodes")))
	}
	return fmt.Sprintf("Inventory %s: %s.", v.Inventory, strings.Join(parts, "; "))
}

// figureHeaders are the columns every quota row has after its names.
var figureHeaders = []string{"RESOURCE", "GPUS", "READY", "FREE", "QUOTA", "BORROWABLE", "RESERVED", "USED", "PENDING", "FINDING"}

// figureCells are f's cells, in figureHeaders' order (with ADMITTED when wide). Kueue's
// figures are "-" for a ResourceQuota, which neither lends nor queues.
func figureCells(f homelabv1.QuotaFigures, source string, opts Options) []cell {
	borrowable, reserved, pending, admitted := quotaNum(f.Borrowable), quotaNum(f.Reserved), quotaNum(int64(f.PendingWorkloads)), quotaNum(int64(f.AdmittedWorkloads))
	if source == homelabv1.QuotaSourceResourceQuota {
		borrowable, reserved, pending, admitted = plain("-"), plain("-"), plain("-"), plain("-")
	}
	cells := []cell{plain(f.Resource), quotaNum(f.Capacity), quotaNum(f.Ready), quotaNum(f.Free), quotaNum(f.Nominal), borrowable,
		reserved, quotaNum(f.Used), pending, findingCell(f.Finding)}
	if opts.Wide {
		cells = append(cells, admitted)
	}
	return cells
}

func quotaHeaders(opts Options, first []string, wide ...string) []string {
	h := append(first, figureHeaders...)
	if opts.Wide {
		h = append(h, "ADMITTED")
		h = append(h, wide...)
	}
	return h
}

func modelRows(t *table, q *homelabv1.GpuQuota, opts Options) {
	t.header(quotaHeaders(opts, []string{"MODEL", "SOURCE"}, "STRANDED")...)
	for _, m := range q.Models {
		row := append([]cell{plain(quotaModel(m.Model)), plain(m.Source)}, figureCells(m.QuotaFigures, m.Source, opts)...)
		if opts.Wide {
			row = append(row, quotaNum(m.StrandedReady))
		}
		t.row(row...)
	}
}

func cohortRows(t *table, q *homelabv1.GpuQuota, opts Options) {
	t.header(quotaHeaders(opts, []string{"COHORT", "MODEL"}, "QUEUES")...)
	for _, c := range q.CohortModels {
		row := append([]cell{plain(c.Cohort), plain(quotaModel(c.Model))}, figureCells(c.QuotaFigures, homelabv1.QuotaSourceKueue, opts)...)
		if opts.Wide {
			row = append(row, plain(quotaNames(c.Queues)))
		}
		t.row(row...)
	}
}

func queueRows(t *table, q *homelabv1.GpuQuota, opts Options) {
	t.header(quotaHeaders(opts, []string{"QUEUE", "COHORT", "MODEL"}, "FLAVORS")...)
	for _, r := range q.Queues {
		row := append([]cell{plain(r.Name), plain(noneIfEmpty(r.Cohort)), plain(quotaModel(r.Model))}, figureCells(r.QuotaFigures, homelabv1.QuotaSourceKueue, opts)...)
		if opts.Wide {
			row = append(row, plain(quotaNames(r.Flavors)))
		}
		t.row(row...)
	}
}

func namespaceRows(t *table, q *homelabv1.GpuQuota, _ Options) {
	t.header("NAMESPACE", "RESOURCE", "HARD", "USED")
	for _, n := range q.NamespaceQuotas {
		t.row(plain(n.Namespace), plain(n.Resource), quotaNum(n.Hard), quotaNum(n.Used))
	}
}

// notListed says how many queues, cohorts and namespaces the bounded lists leave out.
func notListed(q *homelabv1.GpuQuota) string {
	queues, cohorts, namespaces := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, r := range q.Queues {
		queues[r.Name] = true
	}
	for _, c := range q.CohortModels {
		cohorts[c.Cohort] = true
	}
	for _, n := range q.NamespaceQuotas {
		namespaces[n.Namespace] = true
	}
	var parts []string
	for _, p := range []struct {
		total, listed int
		one, many     string
	}{
		{int(q.ClusterQueues), len(queues), "ClusterQueue", "ClusterQueues"},
		{int(q.Cohorts), len(cohorts), "cohort", "cohorts"},
		{int(q.Namespaces), len(namespaces), "namespace", "namespaces"},
	} {
		if p.total > p.listed {
			parts = append(parts, fmt.Sprintf("%d of %s", p.total-p.listed, count(p.total, p.one, p.many)))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("Not listed: %s (the inventory keeps the rows of the largest quotas).", joinWithAnd(parts))
}

// quotaConditions writes the quota conditions that are True, with their messages.
func quotaConditions(b *strings.Builder, conditions []metav1.Condition, color bool) error {
	var kv keyValues
	for _, c := range []struct{ condition, colour string }{
		{homelabv1.ConditionQuotaOvercommitted, red},
		{homelabv1.ConditionQuotaStranded, yellow},
		{homelabv1.ConditionQuotaUnknown, yellow},
	} {
		if cond := meta.FindStatusCondition(conditions, c.condition); cond != nil && cond.Status == metav1.ConditionTrue {
			kv.add(cond.Type, colored(cond.Message, c.colour))
		}
	}
	if len(kv.keys) == 0 {
		return nil
	}
	b.WriteString("\n")
	return kv.write(b, color)
}

// allWholeGPUs: every row counts whole GPUs (nvidia.com/gpu, or its ResourceQuota form).
func allWholeGPUs(q *homelabv1.GpuQuota) bool {
	var resources []string
	for _, m := range q.Models {
		resources = append(resources, m.Resource)
	}
	for _, c := range q.CohortModels {
		resources = append(resources, c.Resource)
	}
	for _, r := range q.Queues {
		resources = append(resources, r.Resource)
	}
	for _, n := range q.NamespaceQuotas {
		resources = append(resources, n.Resource)
	}
	for _, r := range resources {
		if r != GPUResource && r != "requests."+GPUResource && r != "limits."+GPUResource {
			return false
		}
	}
	return true
}

func findingCell(finding string) cell {
	switch finding {
	case "":
		return plain("")
	case homelabv1.QuotaFindingOvercommitted:
		return colored(finding, red)
	}
	return colored(finding, yellow)
}

func quotaModel(model string) string {
	if model == "" {
		return NoGPUNode
	}
	return model
}

func quotaNum(n int64) cell { return plain(strconv.FormatInt(n, 10)) }

func noneIfEmpty(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func quotaNames(list []string) string { return noneIfEmpty(strings.Join(list, ",")) }

// joinWithAnd joins "a", "a and b", "a, b and c".
func joinWithAnd(parts []string) string {
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
