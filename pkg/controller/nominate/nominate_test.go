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

package nominate

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

func nominated(u *unstructured.Unstructured) []string {
	names, _, _ := unstructured.NestedStringSlice(u.Object, "status", "nominatedClusterNames")
	return names
}

func gpuFitOf(u *unstructured.Unstructured) map[string]any {
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		if c.(map[string]any)["type"] == ConditionGpuFit {
			return c.(map[string]any)
		}
	}
	return nil
}

// The 16-GPU Workload goes to the one worker with room, in one apply under Kueue's field
// manager carrying the whole status as read, the nomination and the resourceVersion read.
func TestNominatesTheWorkerWithRoomInKueuesApply(t *testing.T) {
	f := newFixture(t, "w1", "w2")
	f.members.set("w1", reachable(1))
	f.members.set("w2", reachable(2))
	wl := workload("llm", 2, 8)
	f.add(WorkloadsResource, wl)
	before := f.get("llm")

	f.sync("llm")
	applies := f.applies()
	if len(applies) != 1 {
		t.Fatalf("%d applies, want 1", len(applies))
	}
	a := applies[0]
	if a.GetSubresource() != "status" || a.GetPatchOptions().FieldManager != KueueFieldManager || a.GetPatchOptions().Force == nil || !*a.GetPatchOptions().Force {
		t.Errorf("apply to %q as %q (force %v), want the status as %s with force", a.GetSubresource(), a.GetPatchOptions().FieldManager, a.GetPatchOptions().Force, KueueFieldManager)
	}
	var body map[string]any
	if err := json.Unmarshal(a.GetPatch(), &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": "llm", "namespace": namespace, "resourceVersion": before.GetResourceVersion()}}
	wantStatus := mustJSON(t, before.Object["status"])
	wantStatus["nominatedClusterNames"] = []any{"w2"}
	want["status"] = wantStatus
	if !reflect.DeepEqual(body, want) {
		t.Errorf("apply body:\n%s\nwant:\n%s", pretty(body), pretty(want))
	}
	if got := nominated(f.get("llm")); !slices.Equal(got, []string{"w2"}) {
		t.Errorf("nominated %q, want [w2]", got)
	}
	if n := testutil.ToFloat64(f.c.opts.Dispatch.Nominations.WithLabelValues(outcomeWritten, whyNew)); n != 1 {
		t.Errorf("nominations written, new: %v, want 1", n)
	}

	f.sync("llm") // nothing changed: no write
	if n := len(f.applies()); n != 1 {
		t.Errorf("%d applies after a second sync, want still 1", n)
	}
}

func mustJSON(t *testing.T, v any) map[string]any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func pretty(v any) string {
	data, _ := json.MarshalIndent(v, "", "  ")
	return string(data)
}

// A nomination stands for the hold, then moves when the worker stops fitting; a worker that
// still fits keeps it even when a better one appears.
func TestRenominatesAfterTheHoldWhenTheWorkerStopsFitting(t *testing.T) {
	f := newFixture(t, "w1", "w2")
	f.members.set("w1", reachable(2))
	f.members.set("w2", reachable(1))
	f.add(WorkloadsResource, workload("llm", 2, 8))
	f.sync("llm")
	if got := nominated(f.get("llm")); !slices.Equal(got, []string{"w1"}) {
		t.Fatalf("nominated %q, want [w1]", got)
	}

	f.members.set("w1", reachable(1)) // w1 has room for one pod only now
	f.sync("llm")
	if got := nominated(f.get("llm")); !slices.Equal(got, []string{"w1"}) {
		t.Errorf("within the hold: nominated %q, want [w1] held", got)
	}
	f.members.set("w2", reachable(4))
	f.clock.Step(31 * time.Second)
	f.sync("llm")
	if got := nominated(f.get("llm")); !slices.Equal(got, []string{"w2"}) {
		t.Errorf("after the hold: nominated %q, want [w2]", got)
	}
	if n := testutil.ToFloat64(f.c.opts.Dispatch.Nominations.WithLabelValues(outcomeWritten, whyStoppedFitting)); n != 1 {
		t.Errorf("re-nominations for stopped fitting: %v, want 1", n)
	}

	f.members.set("w1", reachable(8)) // better now, but w2 still fits
	f.clock.Step(31 * time.Second)
	f.sync("llm")
	if got := nominated(f.get("llm")); !slices.Equal(got, []string{"w2"}) {
		t.Errorf("a better worker appeared: nominated %q, want [w2] kept", got)
	}
}

// Past the timeout without admission, the next best worker that fits is added.
func TestTimeoutAddsTheNextBestWorker(t *testing.T) {
	f := newFixture(t, "w1", "w2", "w3")
	f.members.set("w1", reachable(2))
	f.members.set("w2", reachable(3))
	f.members.set("w3", reachable(1))
	f.add(WorkloadsResource, workload("llm", 2, 8))
	f.sync("llm")
	f.clock.Step(5 * time.Minute)
	f.sync("llm")
	if got := nominated(f.get("llm")); !slices.Equal(got, []string{"w1", "w2"}) {
		t.Errorf("after the timeout: nominated %q, want [w1 w2]", got)
	}
}

// A worker the hub cannot read is never nominated, however well its last-known inventory
// fits; one whose MultiKueueCluster is not Active, or that is no member, neither.
func TestNeverNominatesAWorkerItCannotRead(t *testing.T) {
	f := newFixture(t, "w1", "w2", "w3", "w4")
	down := reachable(8)
	down.State, down.Reason, down.Since = homelabv1.MemberUnreachable, "ConnectionFailed", f.clock.Now()
	f.members.set("w1", down)
	f.members.set("w2", reachable(8))
	f.add(MultiKueueClustersResource, activeCluster("w2", false))
	f.members.set("w4", reachable(1))
	f.add(WorkloadsResource, workload("llm", 2, 8))
	f.sync("llm")
	if got := nominated(f.get("llm")); len(got) != 0 {
		t.Errorf("nominated %q, want none", got)
	}
	cond := gpuFitOf(f.get("llm"))
	msg, _ := cond["message"].(string)
	for _, want := range []string{"w1: unreachable: ConnectionFailed since 12:00:00", "w2: MultiKueueCluster w2 is not Active: client cannot connect",
		"w3: the hub does not read its GpuInventory", "w4: " + h100 + ": 1 of 2 pods of 8 GPUs fit"} {
		if !strings.Contains(msg, want) {
			t.Errorf("condition message %q does not say %q", msg, want)
		}
	}
}

// A Workload that fits nowhere is not nominated; it gets the condition and one event, and
// waiting costs no further writes. A member's change that makes it fit nominates it and
// turns the condition True.
func TestFitsNowhereOnceThenNominatedWhenAMemberChanges(t *testing.T) {
	f := newFixture(t, "w1", "w2")
	f.members.set("w1", reachable(2))
	f.members.set("w2", reachable(1))
	f.add(WorkloadsResource, workload("big", 4, 8))
	f.sync("big")
	applies := f.applies()
	if len(applies) != 1 || applies[0].GetPatchOptions().FieldManager != homelabv1.FleetFieldManager {
		t.Fatalf("applies %v, want one condition apply under %s", applies, homelabv1.FleetFieldManager)
	}
	var body map[string]any
	_ = json.Unmarshal(applies[0].GetPatch(), &body)
	conds := body["status"].(map[string]any)["conditions"].([]any)
	if len(body["status"].(map[string]any)) != 1 || len(conds) != 1 {
		t.Errorf("condition apply carries %v, want the one condition alone", body["status"])
	}
	cond := gpuFitOf(f.get("big"))
	if cond["status"] != "False" || cond["reason"] != ReasonFitsNowhere ||
		!strings.Contains(cond["message"].(string), "w1: "+h100+": 2 of 4 pods") || !strings.Contains(cond["message"].(string), "w2: ") {
		t.Errorf("condition %v, want False FitsNowhere naming both workers", cond)
	}
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning FitsNowhere no worker takes all of it now; w1:") {
		t.Errorf("events %q, want one FitsNowhere warning", ev)
	}
	if n := testutil.ToFloat64(f.c.opts.Dispatch.Workloads.WithLabelValues(resultFitsNowhere)); n != 1 {
		t.Errorf("workloads fitting nowhere: %v, want 1", n)
	}

	f.sync("big")
	if n, ev := len(f.applies()), f.events(); n != 1 || len(ev) != 0 {
		t.Errorf("a second sync wrote %d applies and %d events, want nothing new", n-1, len(ev))
	}

	f.members.set("w2", reachable(4))
	if f.c.queue.Len() != 1 {
		t.Fatalf("a member's change queued %d Workloads, want the one naming it", f.c.queue.Len())
	}
	f.sync("big")
	if got := nominated(f.get("big")); !slices.Equal(got, []string{"w2"}) {
		t.Errorf("nominated %q, want [w2]", got)
	}
	if cond := gpuFitOf(f.get("big")); cond["status"] != "True" || cond["reason"] != ReasonNominated {
		t.Errorf("condition %v, want True Nominated", cond)
	}
}

// Room promised to one Workload is not promised to the next: the second goes elsewhere.
func TestEarlierNominationsAreAssumed(t *testing.T) {
	f := newFixture(t, "w1", "w2")
	f.members.set("w1", reachable(2))
	f.members.set("w2", reachable(3))
	f.add(WorkloadsResource, workload("first", 2, 8))
	f.add(WorkloadsResource, workload("second", 2, 8))
	f.sync("first")
	f.sync("second")
	if a, b := nominated(f.get("first")), nominated(f.get("second")); !slices.Equal(a, []string{"w1"}) || !slices.Equal(b, []string{"w2"}) {
		t.Errorf("nominated %q and %q, want [w1] then [w2]", a, b)
	}

	// Admitted on w1: still assumed there for a minute, then forgotten.
	admitted := f.get("first")
	delete(admitted.Object["status"].(map[string]any), "nominatedClusterNames")
	_ = unstructured.SetNestedField(admitted.Object, "w1", "status", "clusterName")
	f.add(WorkloadsResource, admitted)
	f.sync("first")
	if got := f.c.assumedOn("w1", cache.ObjectName{Namespace: namespace, Name: "third"}, time.Time{}, f.clock.Now()); len(got) != 1 {
		t.Errorf("%d placements assumed on w1 just after admission, want 1", len(got))
	}
	f.clock.Step(assumeAfterAdmission)
	f.sync("first")
	if got := f.c.assumedOn("w1", cache.ObjectName{Namespace: namespace, Name: "third"}, time.Time{}, f.clock.Now()); len(got) != 0 {
		t.Errorf("%d placements assumed on w1 a minute after admission, want 0", len(got))
	}
}

// A Workload asking for no GPU goes to every Active worker; MIG is not judged and says so.
func TestWorkloadsWithoutJudgedGPUs(t *testing.T) {
	f := newFixture(t, "w1", "w2", "w3")
	f.add(MultiKueueClustersResource, activeCluster("w3", false))
	f.add(WorkloadsResource, workload("cpu", 2, 0))
	f.sync("cpu")
	if got := nominated(f.get("cpu")); !slices.Equal(got, []string{"w1", "w2"}) {
		t.Errorf("nominated %q, want the Active workers [w1 w2]", got)
	}
	if cond := gpuFitOf(f.get("cpu")); cond != nil {
		t.Errorf("condition %v on a Workload without GPUs, want none", cond)
	}

	mig := workload("mig", 1, 0)
	podSets, _, _ := unstructured.NestedSlice(mig.Object, "spec", "podSets")
	_ = unstructured.SetNestedField(podSets[0].(map[string]any), map[string]any{"nvidia.com/mig-1g.10gb": "1"},
		"template", "spec", "containers")
	podSets[0].(map[string]any)["template"] = map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "main",
		"resources": map[string]any{"limits": map[string]any{"nvidia.com/mig-1g.10gb": "1"}}}}}}
	_ = unstructured.SetNestedSlice(mig.Object, podSets, "spec", "podSets")
	f.add(WorkloadsResource, mig)
	f.sync("mig")
	if cond := gpuFitOf(f.get("mig")); cond["status"] != "Unknown" || cond["reason"] != ReasonNotJudged ||
		!strings.Contains(cond["message"].(string), "nvidia.com/mig-1g.10gb") {
		t.Errorf("condition %v, want Unknown NotJudged naming the MIG resource", cond)
	}
}

// Workloads that are not the dispatcher's are left alone: no MultiKueue check, the check
// decided, a cluster chosen, no quota reserved.
func TestLeavesOtherWorkloadsAlone(t *testing.T) {
	f := newFixture(t, "w1")
	f.members.set("w1", reachable(4))
	edits := map[string]func(u *unstructured.Unstructured){
		"other-check": func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "provisioning", "state": "Pending"}}, "status", "admissionChecks")
		},
		"ready": func(u *unstructured.Unstructured) { setCheckState(u, "Ready") },
		"admitted": func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "w1", "status", "clusterName")
		},
		"no-quota": func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, nil, "status", "conditions")
		},
	}
	for name, edit := range edits {
		u := workload(name, 1, 8)
		edit(u)
		f.add(WorkloadsResource, u)
		f.sync(name)
	}
	if n := len(f.applies()); n != 0 {
		t.Errorf("%d applies, want none", n)
	}
}

func setCheckState(u *unstructured.Unstructured, state string) {
	checks, _, _ := unstructured.NestedSlice(u.Object, "status", "admissionChecks")
	checks[0].(map[string]any)["state"] = state
	_ = unstructured.SetNestedSlice(u.Object, checks, "status", "admissionChecks")
}

// A nomination that changed on the server since the cache read it is not overwritten: the
// sync fails and runs again on the newer object.
func TestNominationChangedOnTheServerIsAConflict(t *testing.T) {
	f := newFixture(t, "w1")
	f.members.set("w1", reachable(4))
	f.add(WorkloadsResource, workload("llm", 1, 8))
	stored := f.get("llm").DeepCopy()
	_ = unstructured.SetNestedStringSlice(stored.Object, []string{"elsewhere"}, "status", "nominatedClusterNames")
	if err := f.client.Tracker().Update(WorkloadsResource, stored, namespace); err != nil {
		t.Fatal(err)
	}
	err := f.c.sync(f.ctx, cache.ObjectName{Namespace: namespace, Name: "llm"})
	if err == nil || !strings.Contains(err.Error(), "changed since it was read") {
		t.Errorf("sync: %v, want a conflict", err)
	}
	if n := testutil.ToFloat64(f.c.opts.Dispatch.Nominations.WithLabelValues(outcomeConflict, whyNew)); n != 1 {
		t.Errorf("conflicts counted: %v, want 1", n)
	}
}
