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
	"testing"
)

// kueueLimit is a quota as Kueue's test wrappers write it: -1 leaves a limit unset.
func kueueLimit(flavor string, nominal, borrowing, lending int64) Limit {
	l := quota(flavor, gpu, nominal)
	if borrowing >= 0 {
		l.BorrowingLimit = ptr(borrowing)
	}
	if lending >= 0 {
		l.LendingLimit = ptr(lending)
	}
	return l
}

// TestBorrowableIsKueuesPotentialAvailable runs the cases of Kueue v0.17's own test of
// potentialAvailable (pkg/cache/scheduler/resource_test.go, TestAvailable), in GPUs instead of
// CPUs: what a queue may borrow is what Kueue says it could reach, less its nominal quota.
func TestBorrowableIsKueuesPotentialAvailable(t *testing.T) {
	type reach struct {
		queue, flavor string
		potential     int64
	}
	tests := []struct {
		name    string
		queues  []ClusterQueue
		cohorts []Cohort
		reaches []reach
	}{{
		name: "base cqs",
		queues: []ClusterQueue{queue("cq1", "", kueueLimit("red", 0, -1, -1)),
			queue("cq2", "", kueueLimit("red", 5, -1, -1), kueueLimit("blue", 10, -1, -1))},
		reaches: []reach{{"cq1", "red", 0}, {"cq2", "red", 5}, {"cq2", "blue", 10}},
	}, {
		name:    "cqs with cohort",
		queues:  []ClusterQueue{queue("cq1", "cohort", kueueLimit("red", 10, -1, -1)), queue("cq2", "cohort", kueueLimit("red", 10, -1, 9))},
		cohorts: []Cohort{{Name: "cohort", Quotas: []Limit{kueueLimit("red", 10, -1, -1)}}},
		reaches: []reach{{"cq1", "red", 29}, {"cq2", "red", 30}},
	}, {
		name:    "cq borrows from cohort",
		queues:  []ClusterQueue{queue("cq1", "cohort", kueueLimit("red", 10, -1, -1))},
		cohorts: []Cohort{{Name: "cohort", Quotas: []Limit{kueueLimit("red", 10, -1, -1)}}},
		reaches: []reach{{"cq1", "red", 20}},
	}, {
		name:    "cq oversubscription spills into cohort",
		queues:  []ClusterQueue{queue("cq1", "cohort", kueueLimit("red", 10, -1, -1)), queue("cq2", "cohort", kueueLimit("red", 10, 0, 0))},
		cohorts: []Cohort{{Name: "cohort", Quotas: []Limit{kueueLimit("red", 10, -1, -1)}}},
		reaches: []reach{{"cq1", "red", 20}, {"cq2", "red", 10}},
	}, {
		name: "lending and borrowing limits respected",
		queues: []ClusterQueue{queue("cq1", "cohort", kueueLimit("red", 10, -1, -1)), queue("cq2", "cohort", kueueLimit("red", 10, 2, -1)),
			queue("cq3", "cohort", kueueLimit("red", 10, -1, 5))},
		cohorts: []Cohort{{Name: "cohort", Quotas: []Limit{kueueLimit("red", 10, -1, -1)}}},
		reaches: []reach{{"cq1", "red", 35}, {"cq2", "red", 12}, {"cq3", "red", 40}},
	}, {
		name:   "hierarchical cohort",
		queues: []ClusterQueue{queue("cq1", "left", kueueLimit("red", 10, -1, -1)), queue("cq2", "right", kueueLimit("red", 10, -1, 0))},
		cohorts: []Cohort{{Name: "root"}, {Name: "left", Parent: "root", Quotas: []Limit{kueueLimit("red", 10, -1, -1)}},
			{Name: "right", Parent: "root", Quotas: []Limit{kueueLimit("red", 10, -1, -1)}}},
		reaches: []reach{{"cq1", "red", 30}, {"cq2", "red", 40}},
	}, {
		name: "hierarchical cohort respects borrowing limit",
		queues: []ClusterQueue{queue("left-cq1", "left", kueueLimit("red", 10, -1, -1)), queue("left-cq2", "left", kueueLimit("red", 10, 5, -1)),
			queue("right-cq", "right", kueueLimit("red", 10, -1, -1))},
		cohorts: []Cohort{{Name: "root"}, {Name: "left", Parent: "root", Quotas: []Limit{kueueLimit("red", 10, 5, -1)}},
			{Name: "right", Parent: "root", Quotas: []Limit{kueueLimit("red", 10, -1, -1)}}},
		reaches: []reach{{"left-cq1", "red", 35}, {"left-cq2", "red", 15}, {"right-cq", "red", 50}},
	}, {
		name: "hierarchical cohort respects lending limit",
		queues: []ClusterQueue{queue("left-cq1", "left", kueueLimit("red", 10, -1, 5)), queue("left-cq2", "left", kueueLimit("red", 10, -1, -1)),
			queue("right-cq", "right", kueueLimit("red", 0, -1, -1)), queue("root-cq", "root", kueueLimit("red", 0, -1, -1))},
		cohorts: []Cohort{{Name: "root"}, {Name: "left", Parent: "root", Quotas: []Limit{kueueLimit("red", 0, -1, 5)}},
			{Name: "right", Parent: "root", Quotas: []Limit{kueueLimit("red", 0, -1, -1)}}},
		reaches: []reach{{"left-cq1", "red", 20}, {"left-cq2", "red", 15}, {"right-cq", "red", 5}, {"root-cq", "red", 5}},
	}}
	// red and blue select different nodes, so that their quotas land in different rows.
	fleet := concat(nodes("red", a100, 1, 64, 64), nodes("blue", h100, 1, 64, 64))
	flavors := []Flavor{productFlavor("red", a100), productFlavor("blue", h100)}
	models := map[string]string{"red": a100, "blue": h100}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Compute(Cluster{Nodes: fleet, Kueue: kueue(flavors, tc.queues, tc.cohorts...)}, MaxRows)
			if len(r.Warnings) > 0 {
				t.Errorf("warnings: %q", r.Warnings)
			}
			for _, w := range tc.reaches {
				q := queueRow(t, r, w.queue, models[w.flavor], gpu)
				want(t, w.queue+" in "+w.flavor+": nominal + borrowable", q.Nominal+q.Borrowable, w.potential)
			}
		})
	}
}
