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
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/topology"
)

// fitGangNS is the namespace of the gangs fit is asked about.
const fitGangNS = "fit-gangs"

// startWorkloadSchedulingCluster is startSchedulingCluster with workload-aware scheduling:
// the GenericWorkload and TopologyAwareWorkloadScheduling gates on kube-apiserver and
// kube-scheduler, and scheduling.k8s.io/v1beta1 served.
func startWorkloadSchedulingCluster(t *testing.T) *cluster {
	t.Helper()
	gates := "--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
	c := startClusterWith(t, testenv.Options{APIServerArgs: []string{gates, "--runtime-config=scheduling.k8s.io/v1beta1=true"},
		SchedulerArgs: []string{gates}})
	if err := c.env.StartScheduling(testContext(t)); err != nil {
		t.Fatalf("start scheduling: %v", err)
	}
	return c
}

// fitGangFile is a PodGroup (minCount of its pods, one rack) and its pods of gpus GPUs each.
func fitGangFile(name string, pods, minCount int, gpus int64) string {
	s := fmt.Sprintf(`apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: %s, namespace: %s}
spec:
  schedulingPolicy: {gang: {minCount: %d}}
  schedulingConstraints: {topology: [{key: %s}]}
`, name, fitGangNS, minCount, topology.Rack)
	for i := range pods {
		s += fmt.Sprintf(`---
apiVersion: v1
kind: Pod
metadata: {name: %s-%d, namespace: %s}
spec:
  schedulingGroup: {podGroupName: %s}
  containers:
  - name: main
    image: trainer
    resources: {limits: {nvidia.com/gpu: %d}}
`, name, i, fitGangNS, name, gpus)
	}
	return s
}

// `fit -f` of a PodGroup and its pods answers as kube-scheduler v1.37.2 with workload-aware
// scheduling places the same objects: on racks rack-a (fa1 with 6 of its 8 GPUs held, fa2,
// fa3) and rack-b (fb1..fb3), a gang of 3 x 6 GPUs goes to rack-b, then one of 2 x 6 to
// rack-a, and one of 4 x 6 fits nowhere: the same fit, the same rack, and the PodGroup's
// condition is the one fit gives for one of the racks (the scheduler reports a random one
// as "first"). `why` for a pod of that gang quotes the condition.
func TestFitGangMatchesTheScheduler(t *testing.T) {
	c := startWorkloadSchedulingCluster(t)
	c.ensureNamespace(t, fitGangNS)
	gpu8 := corev1.ResourceList{oracleGPU: resource.MustParse("8")}
	var nodes []*corev1.Node
	for _, rack := range []string{"a", "b"} {
		for i := 1; i <= 3; i++ {
			nodes = append(nodes, labelled(kwokNode(fmt.Sprintf("f%s%d", rack, i), gpu8), topology.Rack, "rack-"+rack))
		}
	}
	if err := testenv.CreateNodes(context.Background(), c.kube, nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		c.waitSchedulable(t, n.Name)
	}
	c.waitRunning(t, c.createPod(t, inNamespace(pinned("fa1", "hold-fa1", oracleGPU, 6), fitGangNS)))
	for _, tc := range []struct {
		name           string
		pods, minCount int
		fits           bool
		domain         string
	}{
		{"first", 3, 3, true, "rack-b"},
		{"second", 2, 2, true, "rack-a"},
		{"too-big", 4, 4, false, ""},
	} {
		file := fitGangFile(tc.name, tc.pods, tc.minCount, 6)
		g := c.fitGang(t, file)
		if g.Fits != tc.fits || g.Domain != tc.domain {
			t.Fatalf("%s: fit says fits %v in %q, want %v in %q", tc.name, g.Fits, g.Domain, tc.fits, tc.domain)
		}
		c.createFitGang(t, tc.name, tc.pods, tc.minCount, 6)
		if tc.fits {
			c.expectGangIn(t, tc.name, tc.pods, g.Domain)
			t.Logf("gang %s: the scheduler and fit place it in %s", tc.name, g.Domain)
			continue
		}
		c.expectGangCondition(t, tc.name, g)
		c.whyQuotesTheCondition(t, tc.name+"-0")
	}
}

// fitGang runs `fit -f` of the file and returns its one gang's answer.
func (c *cluster) fitGang(t *testing.T, file string) printer.GangAnswer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gang.yaml")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runPlugin(context.Background(), c.env.KubeconfigPath(), "fit", "-f", path, "-o", "json")
	var a printer.GangFit
	if err := json.Unmarshal([]byte(r.out), &a); err != nil || len(a.Gangs) != 1 {
		t.Fatalf("fit -f: exit %d, stderr %s, output %s: %v", r.code, r.err, r.out, err)
	}
	if want := map[bool]int{true: 0, false: 1}[a.Fits]; r.code != want {
		t.Errorf("fit -f: exit %d with fits %v, want %d", r.code, a.Fits, want)
	}
	return a.Gangs[0]
}

// createFitGang creates the PodGroup, then its pods.
func (c *cluster) createFitGang(t *testing.T, name string, pods, minCount int, gpus int64) {
	t.Helper()
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: fitGangNS, Name: name},
		Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy:      schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(minCount)}},
			SchedulingConstraints: &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: topology.Rack}}}}}
	if _, err := c.kube.SchedulingV1beta1().PodGroups(fitGangNS).Create(context.Background(), pg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PodGroup %s: %v", name, err)
	}
	for i := range pods {
		p := withResources(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: fitGangNS, Name: fmt.Sprintf("%s-%d", name, i)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "trainer"}},
				SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To(name)}}}, oracleGPU, gpus)
		c.createPod(t, p)
	}
}

// expectGangIn waits until the gang's pods are bound and requires them all in domain.
func (c *cluster) expectGangIn(t *testing.T, name string, pods int, domain string) {
	t.Helper()
	eventually(t, time.Minute, "gang "+name+" bound", func() error {
		racks := map[string]int{}
		for i := range pods {
			p, err := c.kube.CoreV1().Pods(fitGangNS).Get(context.Background(), fmt.Sprintf("%s-%d", name, i), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Spec.NodeName == "" {
				return fmt.Errorf("pod %s not bound", p.Name)
			}
			n, err := c.kube.CoreV1().Nodes().Get(context.Background(), p.Spec.NodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			racks[n.Labels[topology.Rack]]++
		}
		if racks[domain] != pods {
			t.Fatalf("gang %s: the scheduler placed it in %v, fit in %s", name, racks, domain)
		}
		return nil
	})
}

// expectGangCondition waits for the PodGroup's PodGroupInitiallyScheduled=False and
// requires the message fit gives with one of its racks as the first placement.
func (c *cluster) expectGangCondition(t *testing.T, name string, g printer.GangAnswer) {
	t.Helper()
	var want []string
	for _, d := range g.Domains {
		msg := fmt.Sprintf("pod group is unschedulable, %d/%d placements are available, first placement status: %s", 0, len(g.Domains), d.Status)
		if g.Preemption != nil {
			msg += ", " + g.Preemption.Message
		}
		want = append(want, msg)
	}
	var got string
	eventually(t, time.Minute, "PodGroup "+name+" unschedulable", func() error {
		pg, err := c.kube.SchedulingV1beta1().PodGroups(fitGangNS).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cond := apimeta.FindStatusCondition(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)
		if cond == nil || cond.Status != metav1.ConditionFalse {
			return fmt.Errorf("condition %+v", cond)
		}
		got = cond.Message
		return nil
	})
	for _, w := range want {
		if got == w {
			t.Logf("PodGroup %s: the scheduler and fit say %s", name, got)
			return
		}
	}
	t.Errorf("PodGroup %s: the scheduler says\n  %s\nfit says one of\n  %s", name, got, strings.Join(want, "\n  "))
}

// whyQuotesTheCondition runs `why` for a pod of a waiting gang: it names the gang and quotes
// its condition.
func (c *cluster) whyQuotesTheCondition(t *testing.T, pod string) {
	t.Helper()
	r := runPlugin(context.Background(), c.env.KubeconfigPath(), "why", "-n", fitGangNS, pod, "-o", "json")
	var a printer.Why
	if err := json.Unmarshal([]byte(r.out), &a); err != nil || r.code != 0 {
		t.Fatalf("why %s: exit %d, stderr %s: %v", pod, r.code, r.err, err)
	}
	if a.Gang == nil || a.Gang.Fits || !strings.HasPrefix(a.GroupCondition, "pod group is unschedulable") {
		t.Errorf("why %s: group %q, condition %q, gang %+v", pod, a.Group, a.GroupCondition, a.Gang)
	}
}
