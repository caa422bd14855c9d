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

package plugin

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	gpufake "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned/fake"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/plugintest"
)

// trainingFleet is a GpuFleet of three members as the hub writes it: one reachable with
// gangs and a quota finding, one unreachable with its last-known figures, one stale.
func trainingFleet(name string) *homelabv1.GpuFleet {
	since := metav1.NewTime(statusTime.Add(-40 * time.Minute))
	return &homelabv1.GpuFleet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1, ResourceVersion: "7"},
		Spec: homelabv1.GpuFleetSpec{
			ClusterProfiles: &homelabv1.FleetClusterProfiles{Namespace: "fleet-system"},
			MultiKueue:      &homelabv1.FleetMultiKueue{},
		},
		Status: homelabv1.GpuFleetStatus{
			FleetHash: "abc", TotalMembers: 3, ReachableMembers: 1, UnreachableMembers: 2, StaleMembers: 1,
			TotalGpus: 48, ReadyGpus: 40, FreeGpus: 20, ListedMembers: 3,
			Models: []homelabv1.FleetModel{{Model: "NVIDIA-H100", Members: 2, Gpus: 48, ReadyGpus: 40, FreeGpus: 20, LargestFit: 8, LargestFitMember: "eu-1"}},
			Members: []homelabv1.FleetMember{
				{Name: "us-2", MultiKueueCluster: "us-2", Server: "https://us-2.example:6443", State: homelabv1.MemberUnreachable, Since: &since,
					Reason: "CredentialsRefused", Message: "the member's API server answers 401 Unauthorized: the token in Secret kueue-system/us-2 is refused"},
				{Name: "ap-1", ClusterProfile: "fleet-system/ap-1", State: homelabv1.MemberStale, Since: &since, Gpus: 16, ReadyGpus: 16, FreeGpus: 4,
					Reason: "NoChange", Message: "no change seen for 40m (staleAfter 30m)"},
				{Name: "eu-1", ClusterProfile: "fleet-system/eu-1", MultiKueueCluster: "eu-1", Server: "https://eu-1.example:6443", State: homelabv1.MemberReachable, Since: &since,
					GpuNodes: 4, ReadyGpuNodes: 4, Gpus: 32, ReadyGpus: 24, FreeGpus: 16,
					Models: []homelabv1.FleetMemberModel{{Model: "NVIDIA-H100", Gpus: 32, ReadyGpus: 24, FreeGpus: 16, LargestFit: 8}},
					Gangs: []homelabv1.FleetMemberGang{{Model: "NVIDIA-H100", Topology: "labels", Level: "topology.kubernetes.io/rack", LargestGang: 8, Domain: "r1",
						Slots: []homelabv1.GangSlots{{Gpus: 8, Gangs: 2}, {Gpus: 16, Gangs: 0}}}},
					Quota:    &homelabv1.FleetMemberQuota{ClusterQueues: 2, Findings: []homelabv1.FleetQuotaFinding{{Model: "NVIDIA-H100", Resource: "nvidia.com/gpu", Finding: "Overcommitted", Nominal: 40, Ready: 24}}},
					Problems: []string{"Degraded"}},
			},
			Conditions: []metav1.Condition{
				{Type: homelabv1.ConditionMembersUnreachable, Status: metav1.ConditionTrue, Reason: "Unreachable", Message: "1 member cannot be read: us-2 (CredentialsRefused)"},
				{Type: homelabv1.ConditionMembersStale, Status: metav1.ConditionTrue, Reason: "Stale", Message: "1 member is stale: ap-1"},
			},
		},
	}
}

// hubClients serves fleets; served is false for an API server without the GpuFleet CRD.
func hubClients(t *testing.T, served bool, fleets ...*homelabv1.GpuFleet) *factory.Factory {
	t.Helper()
	var objs []runtime.Object
	for _, gf := range fleets {
		objs = append(objs, gf.DeepCopy())
	}
	gpu := gpufake.NewClientset(objs...)
	if !served {
		gpu.PrependReactor("*", "gpufleets", func(action clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewGenericServerResponse(http.StatusNotFound, action.GetVerb(), homelabv1.Resource("gpufleets"), "", "", 0, false)
		})
	}
	disc := gpu.Discovery().(*fakediscovery.FakeDiscovery)
	return &factory.Factory{Base: (&plugintest.NodeServer{}).Start(t), Warnings: io.Discard, FakeGPU: fakeGPU{gpu}, FakeDiscovery: disc}
}

// The fleet as a user reads it: members that cannot be read say why and exit 5; the
// reachable member's gangs and quota findings have their rows.
func TestFleetCommand(t *testing.T) {
	r := runPlugin(context.Background(), hubClients(t, true, trainingFleet("training")), false, nil, "fleet")
	if r.code != factory.ExitPartial || r.err != "" {
		t.Fatalf("exit %d, stderr %q; want %d (members unreachable)", r.code, r.err, factory.ExitPartial)
	}
	golden(t, "gpufleet.golden", r.out)
	for _, want := range []string{"1/3 reachable", "CredentialsRefused: the member's API server answers 401", "8 (r1)", "8:2 16:0", "Overcommitted", "MembersUnreachable: 1 member cannot be read"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	wide := runPlugin(context.Background(), hubClients(t, true, trainingFleet("training")), false, nil, "fleet", "training", "-o", "wide")
	if !strings.Contains(wide.out, "https://eu-1.example:6443") || !strings.Contains(wide.out, "fleet-system/eu-1") {
		t.Errorf("-o wide lacks the member's server and ClusterProfile:\n%s", wide.out)
	}
	healthy := trainingFleet("training")
	healthy.Status.Members = healthy.Status.Members[2:]
	healthy.Status.UnreachableMembers, healthy.Status.StaleMembers, healthy.Status.Conditions = 0, 0, nil
	if r := runPlugin(context.Background(), hubClients(t, true, healthy), false, nil, "fleet"); r.code != factory.ExitOK {
		t.Errorf("every member reachable: exit %d, stderr %q; want 0", r.code, r.err)
	}
}

func TestFleetCommandJSON(t *testing.T) {
	r := runPlugin(context.Background(), hubClients(t, true, trainingFleet("training")), false, nil, "fleet", "-o", "json")
	var got homelabv1.GpuFleet
	if err := json.Unmarshal([]byte(r.out), &got); err != nil {
		t.Fatalf("exit %d, output %q: %v", r.code, r.out, err)
	}
	if got.Kind != "GpuFleet" || got.APIVersion != homelabv1.SchemeGroupVersion.String() {
		t.Errorf("-o json: kind %q apiVersion %q; want the object's own", got.Kind, got.APIVersion)
	}
	want := trainingFleet("training")
	if diff := cmp.Diff(want.Status, got.Status); diff != "" {
		t.Errorf("-o json status (-want +got):\n%s", diff)
	}
}

// No hub, several fleets, a name that is not there, an unknown format: each says what to do.
func TestFleetCommandErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		served bool
		fleets []*homelabv1.GpuFleet
		args   []string
		code   int
		stderr string
	}{
		{name: "no CRD", args: []string{"fleet"}, code: factory.ExitError, stderr: "no GpuFleet here"},
		{name: "none", served: true, args: []string{"fleet"}, code: factory.ExitError, stderr: "--all-contexts"},
		{name: "two", served: true, fleets: []*homelabv1.GpuFleet{trainingFleet("a"), trainingFleet("b")}, args: []string{"fleet"}, code: factory.ExitError, stderr: "2 GpuFleets here (a, b)"},
		{name: "missing", served: true, fleets: []*homelabv1.GpuFleet{trainingFleet("a")}, args: []string{"fleet", "b"}, code: factory.ExitError, stderr: `GpuFleet "b" not found`},
		{name: "bad output", served: true, args: []string{"fleet", "-o", "csv"}, code: factory.ExitError, stderr: `unknown output format "csv"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPlugin(context.Background(), hubClients(t, tc.served, tc.fleets...), false, nil, tc.args...)
			if r.code != tc.code || !strings.Contains(r.err, tc.stderr) || r.out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and %q", r.code, r.out, r.err, tc.code, tc.stderr)
			}
		})
	}
}
