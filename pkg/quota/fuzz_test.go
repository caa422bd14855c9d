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
	"fmt"
	"math"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

// fuzzBytes hands out the fuzzer's bytes as small choices and counts.
type fuzzBytes []byte

func (b *fuzzBytes) next() byte {
	if len(*b) == 0 {
		return 0
	}
	v := (*b)[0]
	*b = (*b)[1:]
	return v
}

func (b *fuzzBytes) pick(options ...string) string { return options[int(b.next())%len(options)] }

// count is mostly small, sometimes negative or the largest count.
func (b *fuzzBytes) count() int64 {
	switch v := b.next(); v {
	case 255:
		return math.MaxInt64
	case 254:
		return math.MinInt64
	default:
		return int64(int8(v))
	}
}

func (b *fuzzBytes) optional() *int64 {
	if b.next()%2 == 0 {
		return nil
	}
	v := b.count()
	return &v
}

var fuzzResources = []string{string(gpu), string(mig1g), "cpu", "example.com/gpu", "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"}

// fuzzCluster builds a small cluster from bytes: each step adds a node, a flavor, a queue, a
// cohort or a ResourceQuota, with names from short lists so that they meet.
func fuzzCluster(data []byte) Cluster {
	b := fuzzBytes(data)
	c := Cluster{Kueue: &Kueue{Version: "v1beta2"}, DRAResources: []corev1.ResourceName{"example.com/gpu"}}
	flavors := []string{"f0", "f1", "f2", ""}
	for len(b) > 0 && len(c.Nodes)+len(c.Kueue.ClusterQueues) < 64 {
		switch b.next() % 6 {
		case 0:
			c.Nodes = append(c.Nodes, Node{Name: fmt.Sprint("n", len(c.Nodes)), Model: b.pick(a100, h100, ""), Ready: b.next()%3 > 0,
				Labels: map[string]string{"pool": b.pick("a", "b")}, Taints: []corev1.Taint{{Key: b.pick("spot", "gpu"), Effect: corev1.TaintEffectNoSchedule}},
				Resources: []NodeResource{{Name: corev1.ResourceName(b.pick(fuzzResources...)), Capacity: b.count(), Free: b.count()}}})
		case 1:
			f := Flavor{Name: b.pick(flavors...)}
			if b.next()%2 == 0 {
				f.NodeLabels = map[string]string{"pool": b.pick("a", "b", "c")}
			}
			if b.next()%3 == 0 {
				f.NodeTaints = []corev1.Taint{{Key: b.pick("spot", "gpu"), Effect: corev1.TaintEffect(b.pick("NoSchedule", "PreferNoSchedule"))}}
			}
			c.Kueue.Flavors = append(c.Kueue.Flavors, f)
		case 2:
			q := ClusterQueue{Name: b.pick("q0", "q1", "q2", "q3", ""), Cohort: b.pick("", "c0", "c1", "c2"), Pending: int32(b.count()), Admitted: int32(b.count())}
			for range b.next() % 3 {
				l := Limit{Flavor: b.pick(flavors...), Resource: corev1.ResourceName(b.pick(fuzzResources...)), Nominal: b.count(), BorrowingLimit: b.optional(), LendingLimit: b.optional()}
				q.Quotas = append(q.Quotas, l)
				q.Reserved = append(q.Reserved, Usage{Flavor: l.Flavor, Resource: l.Resource, Total: b.count()})
			}
			c.Kueue.ClusterQueues = append(c.Kueue.ClusterQueues, q)
		case 3:
			co := Cohort{Name: b.pick("c0", "c1", "c2", ""), Parent: b.pick("", "c0", "c1", "c2", "c3")}
			if b.next()%2 == 0 {
				co.Quotas = []Limit{{Flavor: b.pick(flavors...), Resource: gpu, Nominal: b.count(), BorrowingLimit: b.optional(), LendingLimit: b.optional()}}
			}
			c.Kueue.Cohorts = append(c.Kueue.Cohorts, co)
		case 4:
			key := corev1.ResourceName(b.pick("requests.nvidia.com/gpu", "requests.cpu", "gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "requests.nvidia.com/mig-1g.10gb"))
			c.ResourceQuotas = append(c.ResourceQuotas, NamespaceQuota{Namespace: b.pick("ml", "cv", ""), Name: b.pick("a", "b"),
				Hard: map[corev1.ResourceName]int64{key: b.count()}, Used: map[corev1.ResourceName]int64{key: b.count()}})
		case 5:
			if b.next()%4 == 0 {
				c.Kueue = nil
				return c
			}
		}
	}
	return c
}

// FuzzCompute: arbitrary clusters never panic, give the same result twice, stay within the
// bounds, keep every figure sane and the totals of the cohort and model lists equal.
func FuzzCompute(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 1, 8, 255, 255, 1, 0, 0, 0, 0, 2, 0, 1, 2, 1, 0, 0, 12, 0, 0, 0}, uint8(32))
	f.Add([]byte{2, 1, 1, 0, 0, 0, 2, 0, 0, 3, 1, 2, 0, 1, 7, 1, 3, 3, 2, 1, 0, 0, 4, 0, 200, 3}, uint8(1))
	f.Add([]byte{4, 0, 20, 1, 4, 2, 1, 5, 0, 3, 0, 1, 0, 0, 9, 1, 2}, uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, bound uint8) {
		c := fuzzCluster(data)
		r := Compute(c, int(bound))
		if again := Compute(c, int(bound)); !reflect.DeepEqual(r, again) {
			t.Fatalf("two results for one cluster:\n%+v\n%+v", r, again)
		}
		if r.Status == nil {
			if c.Kueue != nil {
				t.Fatal("no status while Kueue is served")
			}
			return
		}
		checkFuzzStatus(t, r, int(bound), len(c.Nodes))
	})
}

func checkFuzzStatus(t *testing.T, r Result, bound, nodes int) {
	s := r.Status
	rows := min(bound, MaxRows)
	if len(s.Queues) > rows || len(s.CohortModels) > rows || len(s.NamespaceQuotas) > rows || len(s.Models) > MaxModels {
		t.Fatalf("lists beyond the bound %d: %d queues, %d cohorts, %d namespaces, %d models", bound, len(s.Queues), len(s.CohortModels), len(s.NamespaceQuotas), len(s.Models))
	}
	if int(s.StrandedNodes) > nodes || s.ClusterQueues < 0 || s.Cohorts < 0 || s.Namespaces < 0 {
		t.Fatalf("totals out of range: %+v", s)
	}
	var figures []homelabv1.QuotaFigures
	var cohortSum, modelSum int64
	for _, m := range s.Models {
		figures = append(figures, m.QuotaFigures)
		if m.Source == homelabv1.QuotaSourceKueue {
			modelSum = saturating.Add(modelSum, m.Nominal)
		}
	}
	for _, c := range s.CohortModels {
		figures = append(figures, c.QuotaFigures)
		cohortSum = saturating.Add(cohortSum, c.Nominal)
		if _, n := lineWith(r.Overcommitted, " "+c.Cohort+" (", fmt.Sprint(" ", c.Nominal, " ", c.Resource, " of ", c.Model, ",")); c.Finding == homelabv1.QuotaFindingOvercommitted && n == 0 {
			t.Fatalf("overcommitted cohort %+v without its line in %q", c, r.Overcommitted)
		}
	}
	for _, q := range s.Queues {
		figures = append(figures, q.QuotaFigures)
	}
	for _, f := range figures {
		if f.Free < 0 || f.Free > f.Ready || f.Ready > f.Capacity || f.Nominal < 0 || f.Borrowable < 0 || f.Reserved < 0 || f.Used < 0 ||
			f.PendingWorkloads < 0 || f.AdmittedWorkloads < 0 || (f.Finding != "" && f.Finding != homelabv1.QuotaFindingOvercommitted && f.Finding != homelabv1.QuotaFindingStranded) {
			t.Fatalf("figures out of range: %+v", f)
		}
	}
	if len(s.CohortModels) < rows && len(s.Models) < MaxModels && cohortSum != modelSum {
		t.Fatalf("cohorts hold %d, models %d", cohortSum, modelSum)
	}
}
