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
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/nominate"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// dispatchBed is the MultiKueue test bed with the operator on each worker, and the fleet
// hub dispatching on the manager: the fleet bed's hub cluster is the manager, its members
// the workers.
type dispatchBed struct {
	*testenv.MultiKueue
	*fleetBed
}

const (
	dispatchNamespace = "ml"
	dispatchQueue     = "train"
	// fleetLabel selects the ClusterProfiles of the GpuFleet training.
	fleetLabel = "homelab.youngju.dev/fleet"
)

// startDispatchBed starts a manager and workers w1 and w2, H100 nodes of the given sizes on
// each and the operator on each worker. Every worker has a ClusterProfile on the manager;
// MultiKueue reaches w1 through a kubeconfig Secret, w2 through its ClusterProfile. The hub
// runs on the manager with --dispatch and only its RBAC; it reads a worker through its
// ClusterProfile as the member reader (a token Secret of the hub; refused's holds a wrong
// token), through a kubeconfig as MultiKueue does. Its GpuFleet training has the
// MultiKueueClusters and w1's ClusterProfile.
func startDispatchBed(t *testing.T, nodes map[string][]int64, refused string) *dispatchBed {
	t.Helper()
	ctx := testContext(t)
	start := time.Now()
	flavor := testenv.KueueResourceFlavor("h100", map[string]string{"nvidia.com/gpu.product": h100Product})
	bed, err := testenv.StartMultiKueue(ctx, testenv.MultiKueueOptions{Workers: []string{"w1", "w2"},
		DispatcherName: homelabv1.MultiKueueDispatcherName, Namespace: dispatchNamespace, Queue: dispatchQueue,
		WorkerFlavors: []*unstructured.Unstructured{flavor},
		WorkerQuotas:  []testenv.KueueQuota{{Flavor: "h100", Resource: gpuResource, Nominal: "64"}},
		ManagerQuotas: []testenv.KueueQuota{{Resource: gpuResource, Nominal: "1000"}},
		SecretReader:  []string{hubBinary, "secretreader"}, ThroughProfiles: []string{"w2"}})
	if err != nil {
		t.Fatalf("start the MultiKueue bed: %v", err)
	}
	t.Cleanup(bed.Stop)
	t.Logf("manager and two workers ready in %s", time.Since(start).Round(10*time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of the manager's Kueue log:\n%s", bed.Manager.KueueLogTail())
		}
	})
	b := &dispatchBed{MultiKueue: bed, fleetBed: newFleetBed(t, clusterOn(bed.Manager),
		"resources: [%[1]s/hub]\ncomponents: [%[1]s/hub/multikueue, %[1]s/hub/dispatch]\n")}
	for _, name := range []string{"w1", "w2"} {
		c := clusterOn(bed.Workers[name])
		c.ensureNamespace(t, operatorNamespace)
		var gpus int32
		for i, n := range nodes[name] {
			c.gfdNode(t, fmt.Sprintf("%s-h100-%d", name, i+1), h100Product, n)
			gpus += int32(n)
		}
		startOperator(t, c.env.Config, testOptions())
		n := int32(len(nodes[name]))
		c.waitTotals(t, homelabv1.DefaultInventoryName, totals{Nodes: n, ReadyNodes: n, Gpus: gpus, ReadyGpus: gpus})
		b.addMember(t, name, c)
		token := b.tokens[name]
		if name == refused {
			token = "a-wrong-token"
		}
		b.secret(t, hubNamespace, name, map[string][]byte{"token": []byte(token)})
	}
	label := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, fleetLabel, testFleet)
	if _, err := b.dyn.Resource(testenv.ClusterProfilesResource).Namespace(kueueNamespace).Patch(ctx, "w1", types.MergePatchType, []byte(label), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	b.runHub(t, true)
	b.createFleet(t, homelabv1.GpuFleetSpec{MultiKueue: &homelabv1.FleetMultiKueue{}, ClusterProfiles: &homelabv1.FleetClusterProfiles{
		Namespace: kueueNamespace, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{fleetLabel: testFleet}}}})
	return b
}

func clusterOn(env *testenv.Env) *cluster {
	return &cluster{env: env, kube: kubernetes.NewForConfigOrDie(env.Config), gpu: versioned.NewForConfigOrDie(env.Config)}
}

// submit creates a Job of pods pods of gpus GPUs on the manager.
func (b *dispatchBed) submit(t *testing.T, name string, pods int32, gpus int64) *batchv1.Job {
	t.Helper()
	job := testenv.MultiKueueJob(dispatchNamespace, name, dispatchQueue, pods, corev1.ResourceList{gpuResource: *resource.NewQuantity(gpus, resource.DecimalSI)})
	created, err := b.hub.kube.BatchV1().Jobs(dispatchNamespace).Create(context.Background(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Job %s: %v", name, err)
	}
	return created
}

// sentTo waits until MultiKueue sent the Job's Workload to a worker, and returns its name;
// it fails when the Workload was ever nominated to another worker on the way.
func (b *dispatchBed) sentTo(t *testing.T, job *batchv1.Job) string {
	t.Helper()
	var nominations [][]string
	wl := b.hub.waitWorkload(t, job, "sent to a worker", func(wl *unstructured.Unstructured) bool {
		if names, _, _ := unstructured.NestedStringSlice(wl.Object, "status", "nominatedClusterNames"); len(names) > 0 {
			nominations = append(nominations, names)
		}
		name, _, _ := unstructured.NestedString(wl.Object, "status", "clusterName")
		return name != ""
	})
	name, _, _ := unstructured.NestedString(wl.Object, "status", "clusterName")
	for _, names := range nominations {
		if !slices.Equal(names, []string{name}) {
			t.Errorf("Job %s was nominated to %v on its way to %s", job.Name, names, name)
		}
	}
	return name
}

// fitsNowhere waits until the dispatcher says the Job fits nowhere, and returns its message.
func (b *dispatchBed) fitsNowhere(t *testing.T, job *batchv1.Job, saying ...string) *unstructured.Unstructured {
	t.Helper()
	return b.hub.waitWorkload(t, job, "fitting nowhere", func(wl *unstructured.Unstructured) bool {
		conditions, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
		for _, c := range conditions {
			c := c.(map[string]any)
			if c["type"] == nominate.ConditionGpuFit && c["reason"] == nominate.ReasonFitsNowhere {
				msg, _ := c["message"].(string)
				return !slices.ContainsFunc(saying, func(s string) bool { return !strings.Contains(msg, s) })
			}
		}
		return false
	})
}

// copies are the workers holding a copy of the manager's Workload wl.
func (b *dispatchBed) copies(t *testing.T, wl *unstructured.Unstructured) []string {
	t.Helper()
	var on []string
	for name, w := range b.members {
		_, err := dynamic.NewForConfigOrDie(w.env.Config).Resource(testenv.WorkloadsResource).Namespace(dispatchNamespace).
			Get(context.Background(), wl.GetName(), metav1.GetOptions{})
		if err == nil {
			on = append(on, name)
		}
	}
	return on
}

// runsOn waits until the Job's pods run on the worker, placed by its scheduler on its nodes.
func (b *dispatchBed) runsOn(t *testing.T, worker string, job *batchv1.Job, pods int) {
	t.Helper()
	for _, pod := range b.members[worker].waitJobPodsRunning(t, job, pods) {
		if !strings.HasPrefix(pod.Spec.NodeName, worker+"-") {
			t.Errorf("pod %s of Job %s runs on %s, want a node of %s", pod.Name, job.Name, pod.Spec.NodeName, worker)
		}
	}
}

// The hub, with --dispatch and only its RBAC, sends each Job only where all of it fits, and
// MultiKueue and the worker's own Kueue and scheduler run it there: 16 GPUs go to the worker
// with two free 8-GPU nodes; once it is full, an 8-GPU Job goes to the other; 32 GPUs go
// nowhere and are never copied; a worker whose API server is stopped is not nominated until
// it answers again. Its GpuFleet counts each worker once, however it is named, and says
// which member refuses its credentials.
func TestDispatchSendsJobsWhereTheyFit(t *testing.T) {
	b := startDispatchBed(t, map[string][]int64{"w1": {8, 8}, "w2": {8, 4}}, "w2")
	w1 := kueueNamespace + "/w1" // w1's ClusterProfile, the row that counts it

	st := b.waitRows(t, 60*time.Second, map[string]string{w1: homelabv1.MemberReachable, "w1": homelabv1.MemberDuplicate + "/" + homelabv1.ReasonSameCluster,
		"w2": homelabv1.MemberUnreachable + "/" + homelabv1.ReasonUnauthorized})
	if c := meta.FindStatusCondition(st.Conditions, homelabv1.ConditionMembersUnreachable); c == nil || !strings.Contains(c.Message, "w2 (Unauthorized)") {
		t.Errorf("MembersUnreachable = %+v, want it to name w2 (Unauthorized)", c)
	}
	before := rowJSONOf(t, st, w1)
	if _, err := b.hub.kube.CoreV1().Secrets(hubNamespace).Update(testContext(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hubNamespace, Name: "w2"},
		Data: map[string][]byte{"token": []byte(b.tokens["w2"])}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	st = b.waitRows(t, 60*time.Second, map[string]string{w1: homelabv1.MemberReachable, "w1": homelabv1.MemberDuplicate + "/" + homelabv1.ReasonSameCluster,
		"w2": homelabv1.MemberReachable})
	b.checkFleet(t, st, before)

	first := b.submit(t, "first", 2, 8)
	if w := b.sentTo(t, first); w != "w1" {
		t.Fatalf("a Job of 2 x 8 GPUs sent to %s, want w1, the only worker with two free 8-GPU nodes", w)
	}
	b.runsOn(t, "w1", first, 2)

	second := b.submit(t, "second", 1, 8)
	if w := b.sentTo(t, second); w != "w2" {
		t.Fatalf("a Job of 1 x 8 GPUs sent to %s, want w2 (w1 is full)", w)
	}
	b.runsOn(t, "w2", second, 1)

	big := b.submit(t, "big", 4, 8)
	wl := b.fitsNowhere(t, big, "w1: ", "w2: ")
	if on := b.copies(t, wl); len(on) != 0 {
		t.Errorf("a Job that fits nowhere was copied to %v", on)
	}
	if names, _, _ := unstructured.NestedStringSlice(wl.Object, "status", "nominatedClusterNames"); len(names) != 0 {
		t.Errorf("a Job that fits nowhere was nominated to %v", names)
	}
	if ev := b.hub.waitEventIn(t, dispatchNamespace, wl.GetName(), nominate.ReasonFitsNowhere); !strings.Contains(ev.Message, "w1: ") || !strings.Contains(ev.Message, "w2: ") {
		t.Errorf("the FitsNowhere event says %q, want both workers' reasons", ev.Message)
	}

	b.stopAndStart(t, "w2", w1, big)
	if forbidden := b.forbidden.requests(); len(forbidden) != 0 {
		t.Errorf("the hub made requests its RBAC does not allow:\n%v", forbidden)
	}
}

// checkFleet: the fleet counts w1 once, through its ClusterProfile (the MultiKueueCluster
// of the same cluster a Duplicate), and w2 through its MultiKueueCluster; w1's row did not
// move while w2 refused the hub's credentials and once it accepted them.
func (b *dispatchBed) checkFleet(t *testing.T, st *homelabv1.GpuFleetStatus, before string) {
	t.Helper()
	w1 := kueueNamespace + "/w1"
	if r := testenv.FleetRow(st, w1); r.ClusterProfile != w1 || r.MultiKueueCluster != "w1" || r.Gpus != 16 {
		t.Errorf("w1's row: %+v", r)
	}
	if r := testenv.FleetRow(st, "w1"); !strings.Contains(r.Message, "the same cluster as member "+w1) {
		t.Errorf("w1's MultiKueueCluster's row: %+v, want a Duplicate of %s", r, w1)
	}
	if r := testenv.FleetRow(st, "w2"); r.MultiKueueCluster != "w2" || r.ClusterProfile != "" || r.Gpus != 12 {
		t.Errorf("w2's row: %+v", r)
	}
	if st.TotalGpus != 28 || len(st.Members) != 3 {
		t.Errorf("the fleet counts %d GPUs in %d rows, want 28 in 3", st.TotalGpus, len(st.Members))
	}
	if after := rowJSONOf(t, st, w1); after != before {
		t.Errorf("w1's row moved:\n%s\nwas\n%s", after, before)
	}
}

// stopAndStart stops the worker's API server: it is not nominated (a Job that fits only
// there fits nowhere, and is copied nowhere) and no other row of the fleet moves; once it
// answers again the Job goes there, and big is still copied nowhere.
func (b *dispatchBed) stopAndStart(t *testing.T, worker, other string, big *batchv1.Job) {
	t.Helper()
	b.waitRowFree(t, other, 0)
	before := rowJSONOf(t, b.fleet(t), other)
	if err := b.Workers[worker].StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	b.waitRows(t, 90*time.Second, map[string]string{worker: homelabv1.MemberUnreachable + "/" + homelabv1.ReasonConnectionFailed})
	small := b.submit(t, "small", 1, 4)
	wl := b.fitsNowhere(t, small, worker+": ")
	if msg := gpuFitMessage(wl); !strings.Contains(msg, worker+": unreachable") && !strings.Contains(msg, worker+": MultiKueueCluster "+worker+" is not Active") {
		t.Errorf("while %s is down the dispatcher says %q, want it unreachable or not Active", worker, msg)
	}
	if on := b.copies(t, wl); len(on) != 0 {
		t.Errorf("a Job sent while %s was down was copied to %v", worker, on)
	}
	if err := b.Workers[worker].StartAPIServer(testContext(t)); err != nil {
		t.Fatal(err)
	}
	b.waitReconnected(t, worker)
	if w := b.sentTo(t, small); w != worker {
		t.Fatalf("a Job of 1 x 4 GPUs sent to %s, want %s once it answers again", w, worker)
	}
	b.runsOn(t, worker, small, 1)
	if after := rowJSONOf(t, b.fleet(t), other); after != before {
		t.Errorf("%s's row moved while %s was away:\n%s\nwas\n%s", other, worker, after, before)
	}
	if on := b.copies(t, b.fitsNowhere(t, big)); len(on) != 0 {
		t.Errorf("the Job that fits nowhere was copied to %v in the end", on)
	}
}

// waitRowFree waits until the fleet's row name shows free GPUs.
func (b *dispatchBed) waitRowFree(t *testing.T, name string, free int32) {
	t.Helper()
	eventually(t, 60*time.Second, fmt.Sprintf("%s's row with %d free GPUs", name, free), func() error {
		if r := testenv.FleetRow(b.fleet(t), name); r == nil || r.FreeGpus != free {
			return fmt.Errorf("row %+v", r)
		}
		return nil
	})
}

// waitReconnected waits until MultiKueue reaches the worker again (its reconnection backs
// off from 5 seconds) and the hub reads it.
func (b *dispatchBed) waitReconnected(t *testing.T, worker string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := testenv.WaitObject(ctx, b.Manager.Config, testenv.MultiKueueClustersResource, "", worker, func(o *unstructured.Unstructured) bool {
		return o != nil && testenv.KueueConditionTrue(o, "Active")
	}); err != nil {
		t.Fatalf("MultiKueueCluster %s not Active again: %v", worker, err)
	}
	b.waitRows(t, 60*time.Second, map[string]string{worker: homelabv1.MemberReachable})
}

func gpuFitMessage(wl *unstructured.Unstructured) string {
	conditions, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	for _, c := range conditions {
		if c := c.(map[string]any); c["type"] == nominate.ConditionGpuFit {
			msg, _ := c["message"].(string)
			return msg
		}
	}
	return ""
}
