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
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/gang"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/topology"
)

// The gang oracle: for each gang of a table, what the project answers (pkg/gang's
// PlaceAsScheduler over the cluster as listed: fits or not, which domain, which domains are
// equally good, the messages) equals what kube-scheduler v1.37.2 with workload-aware
// scheduling does with the same PodGroup and pods: binds them into one domain, or leaves
// them pending with its condition and events. The scheduler decides everything; the test
// writes no nodeName.

// gangCase is one gang: pods pods of one template.
type gangCase struct {
	name     string
	key      string // the PodGroup's topology key
	pods     int
	minCount int
	res      corev1.ResourceName // each pod asks n of it
	n        int64
	cpu      int64 // CPUs each pod asks
	claim    int64 // devices of the GPU class each pod claims through its own ResourceClaim
	selector map[string]string
	class    string // priority class of the group and its pods
	// want are the domains the project must call equally good, the scheduler choosing
	// among them (after preemption, for a gang that preempts); none when the gang stays
	// pending.
	want []string
	// victims is how many pods the scheduler must evict for the gang.
	victims int
}

func gangCases() []gangCase {
	gpus := func(name string, pods int, n int64) gangCase {
		return gangCase{name: name, key: topology.Rack, pods: pods, res: oracleGPU, n: n, cpu: 8}
	}
	minCount := gpus("min-count", 4, 8)
	minCount.minCount = 2
	mig := gpus("mig", 3, 4)
	mig.res = oracleMIG
	claims := gpus("dra-claims", 2, 0)
	claims.res, claims.claim = "", 4
	cliqueFull := gangCase{name: "clique-full", key: topology.NVLinkClique, pods: cliqueNodes, res: oracleGPU, n: cliqueGPUs, cpu: 8}
	cliquePack := cliqueFull
	cliquePack.name, cliquePack.pods = "clique-pack", cliqueNodes-cliqueHeld
	row := gpus("row", 3, 8)
	row.key = gangRow
	never := gpus("preempt-never", 2, 8)
	never.selector, never.class = map[string]string{gangPool: "preempt"}, "gang-high-never"
	preempt := never
	preempt.name, preempt.class = "preempt", "gang-high"
	return []gangCase{
		with(gpus("two-of-eight", 2, 8), []string{"rack-c", "rack-d", "rack-dra"}, 0),
		with(gpus("three-of-eight", 3, 8), []string{"rack-m"}, 0),
		gpus("too-big", 4, 8),
		with(minCount, []string{"rack-m"}, 0),
		with(mig, []string{"rack-m"}, 0),
		with(claims, []string{"rack-dra"}, 0),
		with(cliqueFull, []string{cliqueFirst}, 0),
		with(cliquePack, []string{cliqueSecond}, 0),
		row,
		never,
		with(preempt, []string{"rack-p"}, 4),
	}
}

func with(tc gangCase, want []string, victims int) gangCase {
	tc.want, tc.victims = want, victims
	return tc
}

// template is the gang's pod, named after the case, and the claim template it uses.
func (tc gangCase) template() (*corev1.Pod, *resourcev1.ResourceClaimTemplate) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: gangNS, Name: tc.name},
		Spec: corev1.PodSpec{NodeSelector: tc.selector, PriorityClassName: tc.class,
			SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To(tc.name)},
			Containers:      []corev1.Container{{Name: "main", Image: "trainer"}}}}
	if tc.res != "" {
		withResources(p, tc.res, tc.n)
	}
	if tc.cpu > 0 {
		withResources(p, corev1.ResourceCPU, tc.cpu)
	}
	if tc.claim == 0 {
		return p, nil
	}
	tmpl := gpuClaimTemplate(tc.name, tc.claim)
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To(tmpl.Name)}}
	p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpus"}}
	return p, tmpl
}

// gang is the case as pkg/gang takes it; the pods' priority is resolved from the class as
// the API server's admission does.
func (c *cluster) gang(t *testing.T, tc gangCase) gang.Gang {
	t.Helper()
	pod, tmpl := tc.template()
	if tc.class != "" {
		pc, err := c.kube.SchedulingV1().PriorityClasses().Get(context.Background(), tc.class, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Spec.Priority, pod.Spec.PreemptionPolicy = ptr.To(pc.Value), pc.PreemptionPolicy
	}
	g := gang.Gang{Name: tc.name, MinCount: tc.minCount, Topology: gang.Topology{Key: tc.key},
		Templates: []gang.Template{{Pod: pod, Count: tc.pods}}}
	if tmpl != nil {
		g.Templates[0].ClaimTemplates = map[string]*resourcev1.ResourceClaimTemplate{tmpl.Name: tmpl}
	}
	return g
}

func TestGangsAsTheScheduler(t *testing.T) {
	// A gang that preempts waits, once its victims are gone, for the scheduler's periodic
	// retry of what it holds back (gangs.md): every 30 seconds, of what it has held for
	// --pod-max-in-unschedulable-pods-duration (5 minutes by default).
	opts := testenv.Options{SchedulerArgs: []string{"--pod-max-in-unschedulable-pods-duration=1s"}}
	c := startClusterWith(t, testenv.WithWorkloadScheduling(opts))
	if err := c.env.StartScheduling(testContext(t)); err != nil {
		t.Fatalf("start scheduling: %v", err)
	}
	c.buildGangCluster(t)
	for _, tc := range gangCases() {
		t.Run(tc.name, func(t *testing.T) { c.askSchedulerGang(t, tc) })
	}
}

// askSchedulerGang compares the project's answer for the gang with the scheduler's, then
// removes the gang.
func (c *cluster) askSchedulerGang(t *testing.T, tc gangCase) {
	res, err := gang.PlaceAsScheduler(c.snapshot(t), c.gang(t, tc))
	if err != nil {
		t.Fatalf("PlaceAsScheduler: %v", err)
	}
	choices := res.Choices
	if !res.Fits && len(res.Preemption.Victims) > 0 {
		choices = res.Preemption.Choices
	}
	if !slices.Equal(choices, tc.want) {
		t.Errorf("the project places the gang in %q (%s), the table expects %q", choices, res.Message, tc.want)
	}
	defer c.removeGang(t, tc)
	c.createGang(t, tc)
	switch {
	case res.Fits:
		c.expectPlaced(t, tc, res.Choices, res.Pods)
	case len(res.Preemption.Victims) > 0:
		c.expectPreemption(t, tc, res)
	default:
		c.expectPending(t, tc, res)
	}
}

// expectPlaced: the scheduler binds the gang's pods that the project places, all into one
// of the domains the project calls equally good; a pod the project leaves out stays
// pending with the project's FailedScheduling text.
func (c *cluster) expectPlaced(t *testing.T, tc gangCase, choices []string, pods []gang.Pod) {
	t.Helper()
	placed := 0
	for _, p := range pods {
		if p.Node != "" || p.Nominated != "" {
			placed++
		}
	}
	bound := c.waitGangBound(t, tc, placed)
	// The pods left out are tried again at once, in the gang's domain alone; that cycle's
	// condition can overwrite the scheduled one, the scheduler not having seen its own
	// update yet (gangs.md).
	c.waitPodGroupCondition(t, tc.name, func(cond *metav1.Condition) bool {
		return cond.Status == metav1.ConditionTrue || placed < len(pods) && cond.Message == leftOutCondition
	})
	domains := map[string]bool{}
	for _, p := range bound {
		domains[c.nodeDomain(t, p.Spec.NodeName, tc.key)] = true
	}
	if len(domains) != 1 || !slices.Contains(choices, slices.Collect(maps.Keys(domains))[0]) {
		t.Errorf("the scheduler bound the gang's pods in %v; the project says one of %q", slices.Sorted(maps.Keys(domains)), choices)
	}
	t.Logf("the scheduler bound %d pods in %v; the project says one of %q", len(bound), slices.Sorted(maps.Keys(domains)), choices)
	// The pods left out say why, as the project says (which pods they are depends on the
	// order the scheduler tried them in).
	var want, got []string
	for _, p := range pods {
		if p.Node == "" && p.Nominated == "" {
			want = append(want, p.Message)
		}
	}
	for _, p := range c.gangPods(t, tc) {
		if p.Spec.NodeName == "" {
			texts := c.waitEvents(t, p.Name)
			slices.Sort(texts)
			got = append(got, slices.Compact(texts)...)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the gang's pods left pending say\n  %s\nthe project says\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// leftOutCondition is what a placed gang's PodGroup may say once the scheduler has tried
// its pods left out again: no placement to report, none to preempt for.
const leftOutCondition = "pod group is unschedulable, pod group preemption: No preemption victims found for incoming preemptor"

// expectPending: the scheduler leaves every pod pending, with a PodGroup condition and
// FailedScheduling events the project says it may write.
func (c *cluster) expectPending(t *testing.T, tc gangCase, res gang.Result) {
	t.Helper()
	c.waitPodGroupCondition(t, tc.name, func(cond *metav1.Condition) bool {
		return cond.Status == metav1.ConditionFalse && cond.Reason == schedulingv1beta1.PodGroupReasonUnschedulable && slices.Contains(res.Messages, cond.Message)
	})
	for _, p := range res.Pods {
		c.expectEvent(t, p.Name, p.Messages)
	}
	for _, p := range c.gangPods(t, tc) {
		if p.Spec.NodeName != "" {
			t.Errorf("the scheduler bound %s to %s; the project places no pod of the gang", p.Name, p.Spec.NodeName)
		}
	}
}

// expectPreemption: the scheduler evicts the victims the project names, says so in the
// PodGroup's condition, then binds the gang into the project's domain.
func (c *cluster) expectPreemption(t *testing.T, tc gangCase, res gang.Result) {
	t.Helper()
	pre := res.Preemption
	if len(pre.Victims) != tc.victims {
		t.Errorf("the project evicts %d pods, the table expects %d", len(pre.Victims), tc.victims)
	}
	others := c.podsBesides(t, tc)
	c.waitPodGroupCondition(t, tc.name, func(cond *metav1.Condition) bool {
		return cond.Status == metav1.ConditionFalse && slices.Contains(res.Messages, cond.Message)
	})
	var nominated, want []string
	for _, p := range res.Pods {
		c.expectEvent(t, p.Name, p.Messages)
		want = append(want, p.Nominated)
	}
	for _, p := range c.gangPods(t, tc) {
		nominated = append(nominated, cmp.Or(p.Spec.NodeName, p.Status.NominatedNodeName))
	}
	slices.Sort(nominated)
	slices.Sort(want)
	if !slices.Equal(nominated, want) {
		t.Errorf("the scheduler nominates (or binds) the gang's pods to %q; the project nominates %q", nominated, want)
	}
	var victims []string
	for _, v := range pre.Victims {
		waitGone(t, c.kube, v)
		victims = append(victims, v.Name)
	}
	if left := c.podsBesides(t, tc); len(left) != len(others)-len(victims) {
		t.Errorf("the scheduler evicted %q; the project evicts %q", slices.DeleteFunc(others, func(n string) bool { return slices.Contains(left, n) }), victims)
	}
	placed := res.Pods
	for i := range placed {
		placed[i].Node = placed[i].Nominated
	}
	c.expectPlaced(t, tc, pre.Choices, placed)
}

// podsBesides names the pods of the gangs' namespace that are not the gang's.
func (c *cluster) podsBesides(t *testing.T, tc gangCase) []string {
	t.Helper()
	list, err := c.kube.CoreV1().Pods(gangNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		if p.Spec.SchedulingGroup == nil || ptr.Deref(p.Spec.SchedulingGroup.PodGroupName, "") != tc.name {
			out = append(out, p.Name)
		}
	}
	return out
}

// waitGangBound waits until n of the gang's pods are bound, and returns them.
func (c *cluster) waitGangBound(t *testing.T, tc gangCase, n int) []corev1.Pod {
	t.Helper()
	var bound []corev1.Pod
	eventually(t, time.Minute, fmt.Sprintf("%d pods of gang %s bound", n, tc.name), func() error {
		bound = nil
		for _, p := range c.gangPods(t, tc) {
			if p.Spec.NodeName != "" {
				bound = append(bound, p)
			}
		}
		if len(bound) != n {
			return fmt.Errorf("%d bound", len(bound))
		}
		return nil
	})
	return bound
}

// expectEvent waits for the pod's FailedScheduling event and requires each one to say
// one of want.
func (c *cluster) expectEvent(t *testing.T, pod string, want []string) {
	t.Helper()
	for _, m := range c.waitEvents(t, pod) {
		if !slices.Contains(want, m) {
			t.Errorf("pod %s: the scheduler's FailedScheduling says\n  %s\nthe project says one of\n  %s", pod, m, strings.Join(want, "\n  "))
		}
	}
}

// createGang creates the gang's claim template, its PodGroup, then its pods one after the
// other, as a workload controller does: the scheduler holds them back until minCount of them
// are there, and tries them in the order they came. A gang whose minCount is below its pods
// is created while the scheduler is stopped, and the scheduler started again: a running
// scheduler would try the group as soon as minCount pods are there, with those it has.
func (c *cluster) createGang(t *testing.T, tc gangCase) {
	t.Helper()
	ctx := context.Background()
	restart := tc.minCount > 0 && tc.minCount < tc.pods
	if restart {
		c.env.StopScheduler()
	}
	pod, tmpl := tc.template()
	if tmpl != nil {
		if _, err := c.kube.ResourceV1().ResourceClaimTemplates(gangNS).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: gangNS, Name: tc.name},
		Spec: schedulingv1beta1.PodGroupSpec{PriorityClassName: tc.class}}
	minCount := int32(tc.pods)
	if tc.minCount > 0 {
		minCount = int32(tc.minCount)
	}
	pg.Spec.SchedulingPolicy.Gang = &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}
	if tc.key != "" {
		pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: tc.key}}}
	}
	if _, err := c.kube.SchedulingV1beta1().PodGroups(gangNS).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PodGroup %s: %v", tc.name, err)
	}
	for i := range tc.pods {
		p := pod.DeepCopy()
		p.Name = fmt.Sprintf("%s-%d", tc.name, i)
		c.createPod(t, p)
	}
	if !restart {
		return
	}
	if tmpl != nil {
		eventually(t, 30*time.Second, "the gang's claims made", func() error { return c.claimsMade(tc) })
	}
	if err := c.env.StartScheduler(testContext(t)); err != nil {
		t.Fatalf("start kube-scheduler: %v", err)
	}
}

// claimsMade reports whether the ResourceClaim controller made every pod's claim.
func (c *cluster) claimsMade(tc gangCase) error {
	claims, err := c.kube.ResourceV1().ResourceClaims(gangNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err
	}
	n := 0
	for _, cl := range claims.Items {
		if strings.HasPrefix(cl.Name, tc.name+"-") {
			n++
		}
	}
	if n != tc.pods {
		return fmt.Errorf("%d of %d claims", n, tc.pods)
	}
	return nil
}

// waitPodGroupCondition waits until the PodGroup's PodGroupInitiallyScheduled condition
// exists and satisfies cond.
func (c *cluster) waitPodGroupCondition(t *testing.T, name string, cond func(*metav1.Condition) bool) *schedulingv1beta1.PodGroup {
	t.Helper()
	return waitFor(t, time.Minute, "PodGroup "+name+" condition", named(c.kube.SchedulingV1beta1().RESTClient(), "podgroups", gangNS, name),
		func(pg *schedulingv1beta1.PodGroup) bool {
			got := apimeta.FindStatusCondition(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)
			if got != nil {
				t.Logf("PodGroup %s: %s/%s %q", name, got.Status, got.Reason, got.Message)
			}
			return got != nil && cond(got)
		})
}

// gangPods lists the gang's pods by name.
func (c *cluster) gangPods(t *testing.T, tc gangCase) []corev1.Pod {
	t.Helper()
	list, err := c.kube.CoreV1().Pods(gangNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.Spec.SchedulingGroup != nil && ptr.Deref(p.Spec.SchedulingGroup.PodGroupName, "") == tc.name {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// nodeDomain is the node's value of key ("" for no node).
func (c *cluster) nodeDomain(t *testing.T, node, key string) string {
	t.Helper()
	if node == "" {
		return ""
	}
	n, err := c.kube.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Labels[key]
}

// waitEvents waits for the pod's first FailedScheduling event and returns the texts of
// all so far.
func (c *cluster) waitEvents(t *testing.T, pod string) []string {
	t.Helper()
	var got []string
	eventually(t, 30*time.Second, "FailedScheduling event of "+pod, func() error {
		if got = c.failedScheduling(t, pod); len(got) == 0 {
			return fmt.Errorf("none yet")
		}
		return nil
	})
	return got
}

// failedScheduling returns the messages of the pod's FailedScheduling events so far.
func (c *cluster) failedScheduling(t *testing.T, pod string) []string {
	t.Helper()
	selector := fields.Set{"involvedObject.name": pod, "reason": "FailedScheduling"}.AsSelector().String()
	list, err := c.kube.CoreV1().Events(gangNS).List(context.Background(), metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		out = append(out, ev.Message)
	}
	return out
}

// removeGang deletes the gang's pods (at once), its PodGroup, its claim template and
// claims, and waits until the pods and claims are gone.
func (c *cluster) removeGang(t *testing.T, tc gangCase) {
	t.Helper()
	ctx := context.Background()
	pods := c.gangPods(t, tc)
	for _, p := range pods {
		c.deletePod(t, gangNS, p.Name)
	}
	for i := range pods {
		waitGone(t, c.kube, &pods[i])
	}
	if err := c.kube.SchedulingV1beta1().PodGroups(gangNS).Delete(ctx, tc.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete PodGroup %s: %v", tc.name, err)
	}
	if tc.claim == 0 {
		return
	}
	_ = c.kube.ResourceV1().ResourceClaimTemplates(gangNS).Delete(ctx, tc.name, metav1.DeleteOptions{})
	claims, err := c.kube.ResourceV1().ResourceClaims(gangNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range claims.Items {
		if strings.HasPrefix(cl.Name, tc.name+"-") {
			if err := c.kube.ResourceV1().ResourceClaims(gangNS).Delete(ctx, cl.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete claim %s: %v", cl.Name, err)
			}
		}
	}
	eventually(t, time.Minute, "the gang's claims gone", func() error {
		claims, err := c.kube.ResourceV1().ResourceClaims(gangNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, cl := range claims.Items {
			if strings.HasPrefix(cl.Name, tc.name+"-") {
				return fmt.Errorf("claim %s still there", cl.Name)
			}
		}
		return nil
	})
}
