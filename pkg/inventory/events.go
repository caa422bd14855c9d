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

package inventory

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Event reasons recorded on a GpuInventory.
const (
	EventNodeNotReady   = "GPUNodeNotReady"
	EventNodeReady      = "GPUNodeReady"
	EventGPUsUnhealthy  = "GPUsUnhealthy"
	EventGPUsHealthy    = "GPUsHealthy"
	EventLabelsMissing  = "LabelsMissing"
	EventLabelsRestored = "LabelsRestored"
	EventNodeJoined     = "GPUNodeJoined"
	EventNodeLeft       = "GPUNodeLeft"
)

// Event is something that happened to a GPU node, worth a Kubernetes Event.
type Event struct {
	Type    string // corev1.EventTypeNormal or corev1.EventTypeWarning
	Reason  string
	Message string
}

// Diff returns the events that lead from previous to current (both sorted by name). When
// previousComplete is false, previous lists only part of the nodes (a truncated status), so
// a node absent from it may not be new and no join event is made for it. Nodes that leave
// are recognised only among those previous lists.
func Diff(previous, current []homelabv1.GpuNodeEntry, previousComplete bool) []Event {
	prev := make(map[string]*homelabv1.GpuNodeEntry, len(previous))
	for i := range previous {
		prev[previous[i].Name] = &previous[i]
	}
	var events []Event
	add := func(eventType, reason, format string, args ...any) {
		events = append(events, Event{Type: eventType, Reason: reason, Message: fmt.Sprintf(format, args...)})
	}
	seen := make(map[string]bool, len(current))
	for i := range current {
		cur := &current[i]
		seen[cur.Name] = true
		old, known := prev[cur.Name]
		if !known {
			if previousComplete {
				add(corev1.EventTypeNormal, EventNodeJoined, "GPU node %s joined (%s, %d GPUs, ready=%t)", cur.Name, productOrUnknown(cur.Product), cur.GpuCount, cur.Ready)
			}
			continue
		}
		switch {
		case old.Ready && !cur.Ready:
			add(corev1.EventTypeWarning, EventNodeNotReady, "GPU node %s is not Ready (%d GPUs unavailable)", cur.Name, cur.GpuCount)
		case !old.Ready && cur.Ready:
			add(corev1.EventTypeNormal, EventNodeReady, "GPU node %s is Ready", cur.Name)
		}
		switch {
		case cur.UnhealthyGpus > old.UnhealthyGpus:
			add(corev1.EventTypeWarning, EventGPUsUnhealthy, "%d of %d GPUs on node %s are unhealthy (allocatable %d < capacity %d)", cur.UnhealthyGpus, cur.GpuCount, cur.Name, cur.Allocatable, cur.Capacity)
		case cur.UnhealthyGpus == 0 && old.UnhealthyGpus > 0:
			add(corev1.EventTypeNormal, EventGPUsHealthy, "all GPUs on node %s are healthy again", cur.Name)
		}
		switch {
		case !old.LabelsMissing && cur.LabelsMissing:
			add(corev1.EventTypeWarning, EventLabelsMissing, "GPU Feature Discovery labels vanished from node %s; keeping last-known %s x%d", cur.Name, productOrUnknown(cur.Product), cur.GpuCount)
		case old.LabelsMissing && !cur.LabelsMissing:
			add(corev1.EventTypeNormal, EventLabelsRestored, "GPU Feature Discovery labels are back on node %s (%s x%d)", cur.Name, productOrUnknown(cur.Product), cur.GpuCount)
		}
	}
	for _, old := range previous {
		if !seen[old.Name] {
			add(corev1.EventTypeWarning, EventNodeLeft, "GPU node %s left the inventory (%s, %d GPUs)", old.Name, productOrUnknown(old.Product), old.GpuCount)
		}
	}
	return events
}

func productOrUnknown(p string) string {
	if p == "" {
		return "unknown product"
	}
	return p
}
