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

package quotacache

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/quota"
)

// kept is what an informer's store holds of an object: its metadata for the store and the
// reflector, and its compact quota form, never modified once made.
type kept[T any] struct {
	kubeproto.Compact
	Value T
}

func (k *kept[T]) DeepCopyObject() runtime.Object { out := *k; return &out }

// same reports whether other keeps the same value.
func (k *kept[T]) same(other any) bool {
	o, ok := other.(*kept[T])
	return ok && reflect.DeepEqual(k.Value, o.Value)
}

// keptOf wraps v with u's metadata.
func keptOf[T any](u *unstructured.Unstructured, v T) *kept[T] {
	return &kept[T]{Compact: kubeproto.Compact{Namespace: u.GetNamespace(), Name: u.GetName(), ResourceVersion: u.GetResourceVersion()}, Value: v}
}

// The readers of Kueue's objects, from the JSON the API server sends (as unstructured maps).
// A field of the wrong type reads as absent: a transform that fails would make the informer
// list again and again.

// flavorOf reads a ResourceFlavor: spec.nodeLabels and spec.nodeTaints (the same in v1beta1
// and v1beta2).
func flavorOf(u *unstructured.Unstructured) quota.Flavor {
	f := quota.Flavor{Name: u.GetName()}
	spec := mapOf(u.Object["spec"])
	if labels := mapOf(spec["nodeLabels"]); len(labels) > 0 {
		f.NodeLabels = make(map[string]string, len(labels))
		for k, v := range labels {
			if s, ok := v.(string); ok {
				f.NodeLabels[k] = s
			}
		}
	}
	for _, t := range sliceOf(spec["nodeTaints"]) {
		t := mapOf(t)
		f.NodeTaints = append(f.NodeTaints, corev1.Taint{Key: str(t["key"]), Value: str(t["value"]), Effect: corev1.TaintEffect(str(t["effect"]))})
	}
	return f
}

// clusterQueueOf reads a ClusterQueue: its cohort (spec.cohortName in v1beta2, spec.cohort in
// v1beta1), its quotas and Kueue's counts.
func clusterQueueOf(u *unstructured.Unstructured, version string) quota.ClusterQueue {
	spec, status := mapOf(u.Object["spec"]), mapOf(u.Object["status"])
	cohort := "cohortName"
	if version == "v1beta1" {
		cohort = "cohort"
	}
	return quota.ClusterQueue{
		Name:      u.GetName(),
		Cohort:    str(spec[cohort]),
		Quotas:    limitsOf(spec["resourceGroups"]),
		Reserved:  usagesOf(status["flavorsReservation"]),
		Used:      usagesOf(status["flavorsUsage"]),
		Pending:   count(status["pendingWorkloads"]),
		Reserving: count(status["reservingWorkloads"]),
		Admitted:  count(status["admittedWorkloads"]),
	}
}

// cohortOf reads a Cohort: its parent (spec.parentName; a v1beta1 Cohort of an older Kueue
// wrote spec.parent) and its quotas.
func cohortOf(u *unstructured.Unstructured, version string) quota.Cohort {
	spec := mapOf(u.Object["spec"])
	parent := str(spec["parentName"])
	if parent == "" && version == "v1beta1" {
		parent = str(spec["parent"])
	}
	return quota.Cohort{Name: u.GetName(), Parent: parent, Quotas: limitsOf(spec["resourceGroups"])}
}

// localQueueOf reads a LocalQueue: its ClusterQueue and Kueue's counts.
func localQueueOf(u *unstructured.Unstructured) quota.LocalQueue {
	spec, status := mapOf(u.Object["spec"]), mapOf(u.Object["status"])
	return quota.LocalQueue{Namespace: u.GetNamespace(), Name: u.GetName(), ClusterQueue: str(spec["clusterQueue"]),
		Pending: count(status["pendingWorkloads"]), Admitted: count(status["admittedWorkloads"])}
}

// limitsOf reads spec.resourceGroups[].flavors[].resources[] of the kept resources.
func limitsOf(groups any) []quota.Limit {
	var out []quota.Limit
	for _, g := range sliceOf(groups) {
		for _, f := range sliceOf(mapOf(g)["flavors"]) {
			flavor := str(mapOf(f)["name"])
			for _, r := range sliceOf(mapOf(f)["resources"]) {
				r := mapOf(r)
				name := corev1.ResourceName(str(r["name"]))
				if !KeepQueueResource(name) {
					continue
				}
				l := quota.Limit{Flavor: flavor, Resource: name}
				l.Nominal, _ = value(r["nominalQuota"])
				l.BorrowingLimit = optional(r["borrowingLimit"])
				l.LendingLimit = optional(r["lendingLimit"])
				out = append(out, l)
			}
		}
	}
	return out
}

// usagesOf reads status.flavorsReservation or status.flavorsUsage of the kept resources.
func usagesOf(flavors any) []quota.Usage {
	var out []quota.Usage
	for _, f := range sliceOf(flavors) {
		flavor := str(mapOf(f)["name"])
		for _, r := range sliceOf(mapOf(f)["resources"]) {
			r := mapOf(r)
			name := corev1.ResourceName(str(r["name"]))
			if !KeepQueueResource(name) {
				continue
			}
			u := quota.Usage{Flavor: flavor, Resource: name}
			u.Total, _ = value(r["total"])
			u.Borrowed, _ = value(r["borrowed"])
			out = append(out, u)
		}
	}
	return out
}

func optional(v any) *int64 {
	if v == nil {
		return nil
	}
	n, _ := value(v)
	return &n
}

func mapOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func sliceOf(v any) []any {
	s, _ := v.([]any)
	return s
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func count(v any) int32 {
	switch n := v.(type) {
	case int64:
		return int32(max(0, min(n, 1<<31-1)))
	case float64:
		return int32(max(0, min(n, 1<<31-1)))
	}
	return 0
}
