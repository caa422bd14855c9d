//go:build integration

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

package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/gang"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/topology"
)

// The gang oracle for Kueue: for each Job of a table, what the project answers (pkg/gang's
// PlaceAsKueue over the cluster as listed) equals what Kueue v0.17.0's Topology Aware
// Scheduling does with it: admits it with the same topologyAssignment, or leaves it
// pending with the same QuotaReserved message. Kueue admits; the real scheduler then runs
// the pods on the nodes Kueue assigned. The Jobs stay, so that each one after sees the GPUs
// of those before it taken.

const kueueGangNS = "tas"

// The two topologies: racks of hosts, and NVLink cliques of hosts.
var (
	rackLevels   = []string{topology.Rack, topology.Hostname}
	cliqueLevels = []string{topology.NVLinkClique, topology.Hostname}
)

// kueueCase is one Job of pods pods, each asking n of res, in the queue of a topology.
type kueueCase struct {
	name      string
	clique    bool // the NVLink topology's queue; else the racks'
	key       string
	preferred bool // podset-preferred-topology; else podset-required-topology
	pods      int32
	res       corev1.ResourceName
	n         int64
	// want are the domains of key Kueue must give the Job; none when it stays pending.
	want []string
}

func kueueCases() []kueueCase {
	rack := func(name string, pods int32, want ...string) kueueCase {
		return kueueCase{name: name, key: topology.Rack, pods: pods, res: oracleGPU, n: 8, want: want}
	}
	preferred := rack("preferred", 4, "rack-c", "rack-d")
	preferred.preferred = true
	mig := rack("mig", 3, "rack-m")
	mig.res, mig.n = oracleMIG, 4
	clique := func(name string, pods int32, want string) kueueCase {
		return kueueCase{name: name, clique: true, key: topology.NVLinkClique, pods: pods, res: oracleGPU, n: cliqueGPUs, want: []string{want}}
	}
	return []kueueCase{
		rack("best-fit", 2, "rack-b"),
		rack("three", 3, "rack-m"),
		rack("too-big", 4),
		mig,
		preferred,
		rack("after-the-others", 2),
		clique("clique-pack", cliqueNodes-cliqueHeld, cliqueSecond),
		clique("clique-full", cliqueNodes, cliqueFirst),
	}
}

// kueue is how pkg/gang takes the case's flavor and topology.
func (tc kueueCase) kueue() gang.Kueue {
	if tc.clique {
		return gang.Kueue{Topology: "nvlink", Levels: cliqueLevels, Flavor: "nvlink", NodeLabels: map[string]string{kueueFleet: "nvlink"}}
	}
	return gang.Kueue{Topology: "racks", Levels: rackLevels, Flavor: "racks", NodeLabels: map[string]string{kueueFleet: "racks"}}
}

// job is the case's suspended Job in its LocalQueue.
func (tc kueueCase) job() *batchv1.Job {
	queue := tc.kueue().Flavor
	job := testenv.KueueJob(kueueGangNS, tc.name, queue, tc.pods, corev1.ResourceList{tc.res: *resource.NewQuantity(tc.n, resource.DecimalSI)})
	annotation := "kueue.x-k8s.io/podset-required-topology"
	if tc.preferred {
		annotation = "kueue.x-k8s.io/podset-preferred-topology"
	}
	job.Spec.Template.Annotations = map[string]string{annotation: tc.key}
	return job
}

// gang is the Job as pkg/gang takes it: its pod template, pods times.
func (tc kueueCase) gang() gang.Gang {
	job := tc.job()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: kueueGangNS, Name: tc.name, Annotations: job.Spec.Template.Annotations},
		Spec: job.Spec.Template.Spec}
	return gang.Gang{Name: tc.name, Templates: []gang.Template{{Pod: pod, Count: int(tc.pods)}},
		Topology: gang.Topology{Key: tc.key, Preferred: tc.preferred}}
}

func TestGangsAsKueue(t *testing.T) {
	c := startKueueCluster(t)
	c.buildKueueGangCluster(t)
	for _, tc := range kueueCases() {
		t.Run(tc.name, func(t *testing.T) { c.askKueueGang(t, tc) })
	}
}

// askKueueGang compares the project's answer for the Job with Kueue's.
func (c *cluster) askKueueGang(t *testing.T, tc kueueCase) {
	res, err := gang.PlaceAsKueue(c.snapshot(t), tc.gang(), tc.kueue())
	if err != nil {
		t.Fatalf("PlaceAsKueue: %v", err)
	}
	var chosen []string
	if res.Fits {
		chosen = res.Kueue.Assignments[0].Chosen
	}
	if !slices.Equal(chosen, tc.want) {
		t.Errorf("the project gives the Job %q (%s: %s), the table expects %q", chosen, res.Kueue.Mode, res.Message, tc.want)
	}
	job, err := c.kube.BatchV1().Jobs(kueueGangNS).Create(context.Background(), tc.job(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Fits {
		wl := c.waitWorkload(t, job, "pending with a QuotaReserved message", func(wl *unstructured.Unstructured) bool {
			return hasCondition(wl, "QuotaReserved") && !testenv.KueueConditionTrue(wl, "QuotaReserved")
		})
		if got := conditionMessage(wl, "QuotaReserved"); got != res.Message {
			t.Errorf("Kueue's QuotaReserved says\n  %s\nthe project says (%s)\n  %s", got, res.Kueue.Mode, res.Message)
		}
		t.Logf("Kueue and the project (%s): %s", res.Kueue.Mode, res.Message)
		return
	}
	wl := c.waitWorkload(t, job, "admitted", func(wl *unstructured.Unstructured) bool { return testenv.KueueConditionTrue(wl, "Admitted") })
	levels, domains := topologyAssignment(wl)
	want := res.Kueue.Assignments[0]
	if !slices.Equal(levels, want.Levels) || !slices.EqualFunc(domains, want.Domains, func(a, b gang.DomainCount) bool {
		return a.Count == b.Count && slices.Equal(a.Values, b.Values)
	}) {
		t.Errorf("Kueue assigns %v %+v; the project assigns %v %+v", levels, domains, want.Levels, want.Domains)
	}
	t.Logf("Kueue and the project assign %v %+v", levels, domains)
	c.expectPodsWhereAssigned(t, job, domains)
}

// expectPodsWhereAssigned: the scheduler runs the Job's pods on the hosts Kueue assigned,
// as many on each as assigned.
func (c *cluster) expectPodsWhereAssigned(t *testing.T, job *batchv1.Job, domains []gang.DomainCount) {
	t.Helper()
	want := map[string]int{}
	total := 0
	for _, d := range domains {
		want[d.Values[len(d.Values)-1]] += int(d.Count)
		total += int(d.Count)
	}
	got := map[string]int{}
	for _, p := range c.waitJobPodsRunning(t, job, total) {
		got[p.Spec.NodeName]++
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the Job's pods run on %v; Kueue assigned %v", got, want)
	}
}

// conditionMessage is the message of a Kueue object's condition of that type.
func conditionMessage(obj *unstructured.Unstructured, conditionType string) string {
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		if c, ok := c.(map[string]any); ok && c["type"] == conditionType {
			m, _ := c["message"].(string)
			return m
		}
	}
	return ""
}

// topologyAssignment decodes the first PodSet's status.admission topologyAssignment: its
// levels, and each domain's values and pods (slices of domains, a value or a count either
// universal to the slice or individual, an individual value prefix+root+suffix).
func topologyAssignment(wl *unstructured.Unstructured) ([]string, []gang.DomainCount) {
	assignments, _, _ := unstructured.NestedSlice(wl.Object, "status", "admission", "podSetAssignments")
	if len(assignments) == 0 {
		return nil, nil
	}
	ta, _, _ := unstructured.NestedMap(assignments[0].(map[string]any), "topologyAssignment")
	levels, _, _ := unstructured.NestedStringSlice(ta, "levels")
	slicesOf, _, _ := unstructured.NestedSlice(ta, "slices")
	var domains []gang.DomainCount
	for _, s := range slicesOf {
		s := s.(map[string]any)
		n, _, _ := unstructured.NestedInt64(s, "domainCount")
		perLevel, _, _ := unstructured.NestedSlice(s, "valuesPerLevel")
		for i := range int(n) {
			d := gang.DomainCount{Count: int32(individualOr(s, i, "podCounts"))}
			for _, v := range perLevel {
				d.Values = append(d.Values, valueAt(v.(map[string]any), i))
			}
			domains = append(domains, d)
		}
	}
	return levels, domains
}

// individualOr is the i-th count of a slice's podCounts.
func individualOr(s map[string]any, i int, field string) int64 {
	if u, ok, _ := unstructured.NestedInt64(s, field, "universal"); ok {
		return u
	}
	list, _, _ := unstructured.NestedSlice(s, field, "individual")
	if i < len(list) {
		n, _ := list[i].(int64)
		return n
	}
	return -1
}

// valueAt is the i-th value of one level of a slice.
func valueAt(v map[string]any, i int) string {
	if u, ok, _ := unstructured.NestedString(v, "universal"); ok {
		return u
	}
	roots, _, _ := unstructured.NestedStringSlice(v, "individual", "roots")
	prefix, _, _ := unstructured.NestedString(v, "individual", "prefix")
	suffix, _, _ := unstructured.NestedString(v, "individual", "suffix")
	if i >= len(roots) {
		return ""
	}
	return prefix + roots[i] + suffix
}
