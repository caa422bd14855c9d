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
	"cmp"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Bounds of status.usage's lists.
const (
	MaxNamespaces  = 32
	MaxIdleHolders = 20
)

// Summarize is status.usage of an inventory: the snapshot's holders on the nodes it covers.
// nil when the snapshot holds no good answer or no holder is on those nodes.
func Summarize(s *Snapshot, covers func(node string) bool) *homelabv1.GpuUsage {
	if s == nil || !s.Known() {
		return nil
	}
	out := &homelabv1.GpuUsage{
		Window:    s.Settings.Window.String(),
		IdleAfter: s.Settings.IdleAfter.String(),
		Metric:    MetricEngineActive,
	}
	var idle []*Holder
	for i := range s.Holders {
		h := &s.Holders[i]
		if !covers(h.Node) {
			continue
		}
		out.HeldGpus += h.GPUs
		if h.LongIdle {
			out.IdleGpus += h.GPUs
		}
		if !h.Profiling {
			out.Metric = MetricGPUUtil
		}
		if listedSince(h, s.At) > 0 {
			idle = append(idle, h)
		}
	}
	if out.HeldGpus == 0 {
		return nil
	}
	out.Namespaces = namespaceRows(s.Holders, covers)
	if len(out.Namespaces) > MaxNamespaces {
		out.Namespaces = out.Namespaces[:MaxNamespaces]
	}
	slices.SortFunc(idle, func(a, b *Holder) int {
		return cmp.Or(cmp.Compare(a.IdleSince, b.IdleSince), compareHolders(*a, *b))
	})
	for _, h := range idle[:min(len(idle), MaxIdleHolders)] {
		out.IdleHolders = append(out.IdleHolders, homelabv1.IdleHolder{Namespace: h.Namespace, Pod: h.Pod,
			Node: h.Node, Model: h.Model, Gpus: h.GPUs, IdleSince: metav1.NewTime(time.Unix(h.IdleSince, 0).UTC())})
	}
	return out
}

// Row is a namespace's figures for one model, with the GPUs of its long-idle holders.
type Row struct {
	homelabv1.UsageNamespace
	IdleGpus int32
}

// Rows are the snapshot's figures per namespace and model on the nodes covers accepts, the
// most idle GPU-hours first; nil when the snapshot holds no good answer.
func Rows(s *Snapshot, covers func(node string) bool) []Row {
	if s == nil || !s.Known() {
		return nil
	}
	return rows(s.Holders, covers)
}

// namespaceRows are the rows as status.usage lists them.
func namespaceRows(holders []Holder, covers func(string) bool) []homelabv1.UsageNamespace {
	all := rows(holders, covers)
	out := make([]homelabv1.UsageNamespace, len(all))
	for i := range all {
		out[i] = all[i].UsageNamespace
	}
	return out
}

// rows sums the holders per namespace and model; covers nil: every node.
func rows(holders []Holder, covers func(string) bool) []Row {
	type key struct{ namespace, model string }
	type sum struct {
		gpus, idleGpus int32
		held, idle     int64
	}
	sums := map[key]*sum{}
	for i := range holders {
		h := &holders[i]
		if covers != nil && !covers(h.Node) {
			continue
		}
		k := key{h.Namespace, h.Model}
		s := sums[k]
		if s == nil {
			s = &sum{}
			sums[k] = s
		}
		s.gpus += h.GPUs
		s.held += int64(h.HeldSteps)
		s.idle += int64(h.IdleSteps)
		if h.LongIdle {
			s.idleGpus += h.GPUs
		}
	}
	stepsPerHour := int64(time.Hour / Step)
	out := make([]Row, 0, len(sums))
	for k, s := range sums {
		out = append(out, Row{UsageNamespace: homelabv1.UsageNamespace{Namespace: k.namespace, Model: k.model, HeldGpus: s.gpus,
			HeldGpuHours: s.held / stepsPerHour, IdleGpuHours: s.idle / stepsPerHour}, IdleGpus: s.idleGpus})
	}
	slices.SortFunc(out, func(a, b Row) int {
		return cmp.Or(cmp.Compare(b.IdleGpuHours, a.IdleGpuHours), cmp.Compare(b.HeldGpuHours, a.HeldGpuHours),
			strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Model, b.Model))
	})
	return out
}
