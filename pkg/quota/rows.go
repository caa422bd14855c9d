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

package quota

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

// row is quota against hardware for one owner (a ClusterQueue, a root cohort, a Cohort
// object, or none for the cluster), model and resource.
type row struct {
	owner                               *member
	model                               string
	resource                            corev1.ResourceName
	flavors                             []string // sorted
	queues                              []string // in name order
	lastQueue                           *member
	nominal, borrowable, reserved, used int64
	pending, admitted                   int32
	hw                                  figures // what the flavors (and, for a model, unselected nodes) offer
	reached                             figures // what the flavors alone reach
	strandedReady                       int64
	finding                             string
}

type rowKey struct {
	owner    *member
	model    string
	resource corev1.ResourceName
}

// rowSet keeps rows by key and in the order they were made.
type rowSet struct {
	byKey map[rowKey]*row
	list  []*row
}

func newRowSet() *rowSet { return &rowSet{byKey: map[rowKey]*row{}} }

func (s *rowSet) get(owner *member, model string, resource corev1.ResourceName) *row {
	k := rowKey{owner, model, resource}
	if r, ok := s.byKey[k]; ok {
		return r
	}
	r := &row{owner: owner, model: model, resource: resource}
	s.byKey[k] = r
	s.list = append(s.list, r)
	return r
}

func (r *row) addFlavor(f string) {
	if i, found := slices.BinarySearch(r.flavors, f); !found {
		r.flavors = slices.Insert(r.flavors, i, f)
	}
}

// addQueue counts a ClusterQueue's workloads once per row.
func (r *row) addQueue(q *member) {
	if r.lastQueue == q {
		return
	}
	r.lastQueue = q
	r.queues = append(r.queues, q.name)
	r.pending = saturating.Add(r.pending, max(0, q.queue.Pending))
	r.admitted = saturating.Add(r.admitted, max(0, q.queue.Admitted))
}

// name is what a row is sorted by after its quota: its owner's name.
func (r *row) name() string {
	if r.owner == nil {
		return ""
	}
	return r.owner.name
}

// sortRows orders rows largest nominal quota first, then by name, model and resource.
func sortRows(rows []*row) {
	slices.SortFunc(rows, func(a, b *row) int {
		if c := cmp.Compare(b.nominal, a.nominal); c != 0 {
			return c
		}
		if c := cmp.Compare(a.name(), b.name()); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.model, b.model), cmp.Compare(a.resource, b.resource))
	})
}

func (r *row) figures() homelabv1.QuotaFigures {
	return homelabv1.QuotaFigures{
		Resource: string(r.resource),
		Capacity: r.hw.capacity, Ready: r.hw.ready, Free: r.hw.free,
		Nominal: r.nominal, Borrowable: r.borrowable, Reserved: r.reserved, Used: r.used,
		PendingWorkloads: r.pending, AdmittedWorkloads: r.admitted,
		Finding: r.finding,
	}
}

// listNames is up to n names, then how many more.
func listNames(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// first is at most n items of s.
func first[T any](s []T, n int) []T { return s[:min(len(s), n)] }

// label names a cohort row's owner for a finding: the cohort and its queues.
func (r *row) label() string {
	if r.owner.queue != nil {
		return fmt.Sprintf("ClusterQueue %s (in no cohort)", r.owner.name)
	}
	if len(r.queues) == 0 {
		return fmt.Sprintf("cohort %s (no ClusterQueue has this quota; the Cohort's own)", r.owner.name)
	}
	return fmt.Sprintf("cohort %s (ClusterQueues %s)", r.owner.name, listNames(r.queues, 8))
}
