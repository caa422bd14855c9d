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
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	gpufake "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned/fake"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/plugintest"
)

// recordsOf returns the GpuNode records the operator keeps for nodes: each GPU node's identity,
// last seen at statusTime; previous entries (labels missing) become records with missingSince.
func recordsOf(nodes []*corev1.Node, previous []homelabv1.GpuNodeEntry) []*homelabv1.GpuNode {
	content, _ := inventory.Compute(nodes, previous, statusTime)
	var records []*homelabv1.GpuNode
	for i := range content.Nodes {
		entry := &content.Nodes[i]
		spec := inventory.Identity(entry)
		spec.LastSeen = &metav1.Time{Time: statusTime}
		if entry.LabelsMissing {
			spec.MissingSince = entry.LabelsMissingSince
		}
		if !inventory.KnowsGPUs(&spec) {
			continue
		}
		records = append(records, gpuNodeRecord(entry.Name, spec))
	}
	return records
}

func gpuNodeRecord(name string, spec homelabv1.GpuNodeSpec) *homelabv1.GpuNode {
	return &homelabv1.GpuNode{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1", CreationTimestamp: metav1.NewTime(statusTime.Add(-24 * time.Hour)),
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "gpu-inventory-operator", Operation: metav1.ManagedFieldsOperationApply}}},
		Spec: spec,
	}
}

// recordedFleet is the mixed fleet with its records, and a record whose Node was deleted.
// a100-migfail is made NotReady and l4-odd loses its conditions (its readiness is Unknown,
// as is dgx-09's, which is unreachable).
func recordedFleet() ([]*corev1.Node, []*homelabv1.GpuNode) {
	nodes := fixtures.MixedFleet()
	for _, n := range nodes {
		switch n.Name {
		case "a100-migfail":
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
		case "l4-odd":
			n.Status.Conditions = nil
		}
	}
	records := recordsOf(nodes, mixedFleetPrevious)
	records = append(records, gpuNodeRecord("zz-retired", homelabv1.GpuNodeSpec{
		Product: "Tesla-V100-SXM2-16GB", GpuCount: 8, GpuMemoryMiB: 16384, Source: homelabv1.SourceSeeded,
		LastSeen: &metav1.Time{Time: statusTime.Add(-48 * time.Hour)}}))
	return nodes, records
}

// nodesClients serves nodes and the GpuNode records, both CRDs installed.
func nodesClients(t *testing.T, nodes []*corev1.Node, records []*homelabv1.GpuNode) *factory.Factory {
	t.Helper()
	c := fakeClients(t, nodes, true)
	gpu := c.FakeGPU.(fakeGPU).Clientset
	for _, r := range records {
		if err := gpu.Tracker().Add(r.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	disc := c.FakeDiscovery.(*fakediscovery.FakeDiscovery)
	disc.Resources[0].APIResources = append(disc.Resources[0].APIResources, metav1.APIResource{Name: "gpunodes", Kind: "GpuNode"})
	return c
}

func TestNodesGolden(t *testing.T) {
	nodes, records := recordedFleet()
	for _, tc := range []struct {
		name     string
		args     []string
		terminal bool
	}{
		{"nodes", nil, false},
		{"nodes-terminal", nil, true},
		{"nodes-wide", []string{"-o", "wide"}, false},
		{"nodes-problems", []string{"--problems"}, false},
		{"nodes-model", []string{"--model", "a100"}, false},
		{"nodes-model-problems", []string{"--model", "NVIDIA-H100-80GB-HBM3", "--problems"}, false},
		{"nodes-yaml", []string{"--problems", "-o", "yaml"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPlugin(context.Background(), nodesClients(t, nodes, records), tc.terminal, nil, append([]string{"nodes"}, tc.args...)...)
			if r.code != factory.ExitOK || r.err != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.err)
			}
			golden(t, tc.name+".golden", r.out)
			if tc.terminal {
				plain := runPlugin(context.Background(), nodesClients(t, nodes, records), false, nil, append([]string{"nodes"}, tc.args...)...)
				if !strings.Contains(r.out, "\x1b[31mUnknown") || ansi.ReplaceAllString(r.out, "") != plain.out {
					t.Errorf("terminal output is not the plain output with Unknown in red:\n--- terminal\n%q\n--- plain\n%q", r.out, plain.out)
				}
			}
		})
	}
}

// Every row's READY is its Node's Ready condition; the summary counts the problems.
func TestNodesJoinsReadinessAndFilters(t *testing.T) {
	nodes, records := recordedFleet()
	c := nodesClients(t, nodes, records)
	r := runPlugin(context.Background(), c, false, nil, "nodes")
	if r.code != factory.ExitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	ready := map[string]string{}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	for _, line := range lines[1 : len(lines)-2] {
		f := strings.Fields(line)
		ready[f[0]] = f[1]
	}
	want := map[string]string{"a100-mig-7": "True", "a100-migfail": "False", "a100-mixed": "True", "dgx-01": "True",
		"dgx-07": "True", "dgx-09": "Unknown", "l4-odd": "Unknown", "t4-shared-1": "True", "zz-retired": "gone"}
	if diff := cmp.Diff(want, ready); diff != "" {
		t.Errorf("READY per node (-want +got):\n%s\n%s", diff, r.out)
	}
	if got, want := lines[len(lines)-1], "9 GPU nodes, 4 problems (3 not Ready, 1 Node gone, 1 with facts missing)"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}

	// --problem (as the issue spells it) is --problems; the filters apply to -o json too.
	names := func(args ...string) []string {
		t.Helper()
		r := runPlugin(context.Background(), c, false, nil, append([]string{"nodes", "-o", "json"}, args...)...)
		if r.code != factory.ExitOK {
			t.Fatalf("nodes -o json %v: exit %d, stderr %q", args, r.code, r.err)
		}
		var list homelabv1.GpuNodeList
		if err := json.Unmarshal([]byte(r.out), &list); err != nil {
			t.Fatalf("nodes -o json %v: %v\n%s", args, err, r.out)
		}
		if list.Kind != "GpuNodeList" || list.APIVersion != homelabv1.SchemeGroupVersion.String() || list.Items == nil {
			t.Errorf("nodes -o json %v: kind %q, apiVersion %q, items %v", args, list.Kind, list.APIVersion, list.Items)
		}
		var names []string
		for _, item := range list.Items {
			if item.Kind != "GpuNode" || item.ManagedFields != nil {
				t.Errorf("nodes -o json %v: item %s has kind %q and managed fields %v", args, item.Name, item.Kind, item.ManagedFields)
			}
			names = append(names, item.Name)
		}
		return names
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--problems"}, []string{"a100-migfail", "dgx-09", "l4-odd", "zz-retired"}},
		{[]string{"--problem"}, []string{"a100-migfail", "dgx-09", "l4-odd", "zz-retired"}},
		{[]string{"--model", "H100"}, []string{"dgx-01", "dgx-07", "dgx-09"}},
		{[]string{"--model", "NVIDIA-A100-SXM4-40GB"}, []string{"a100-mig-7", "a100-migfail", "a100-mixed"}}, // MIG variants included
		{[]string{"--model", "tesla-t4"}, []string{"t4-shared-1"}},                                           // shared variant, any case
		{[]string{"--model", "A100", "--problems"}, []string{"a100-migfail"}},
		{[]string{"--model", "B200"}, []string{}},
	} {
		if got := names(tc.args...); !cmp.Equal(got, tc.want, cmp.Comparer(func(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") })) {
			t.Errorf("nodes %v: %v, want %v", tc.args, got, tc.want)
		}
	}
}

// pagedGpuNodes serves the GpuNode list in pages of the requested limit (the fake clientset
// does not paginate) and records the limits asked for.
func pagedGpuNodes(gpu *gpufake.Clientset, records []*homelabv1.GpuNode, limits *[]int64) {
	gpu.PrependReactor("list", "gpunodes", func(action clienttesting.Action) (bool, runtime.Object, error) {
		opts := action.(clienttesting.ListActionImpl).ListOptions
		*limits = append(*limits, opts.Limit)
		start := 0
		if opts.Continue != "" {
			start, _ = strconv.Atoi(opts.Continue)
		}
		end := len(records)
		if opts.Limit > 0 {
			end = min(end, start+int(opts.Limit))
		}
		list := &homelabv1.GpuNodeList{}
		if end < len(records) {
			list.Continue = strconv.Itoa(end)
		}
		for _, r := range records[start:end] {
			list.Items = append(list.Items, *r.DeepCopy())
		}
		return true, list, nil
	})
}

func TestNodesReadsBothListsInPages(t *testing.T) {
	nodes := fixtures.Fleet(25)
	records := recordsOf(nodes, nil)
	server := &plugintest.NodeServer{Nodes: nodes}
	c := fakeClientsServing(t, server, true)
	var limits []int64
	pagedGpuNodes(c.FakeGPU.(fakeGPU).Clientset, records, &limits)
	r := runPlugin(context.Background(), c, false, nil, "nodes", "--chunk-size", "10")
	if r.code != factory.ExitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	var nodeLimits []int64
	for _, req := range server.ListRequests() {
		nodeLimits = append(nodeLimits, req.Limit)
	}
	if want := []int64{10, 10, 10}; !cmp.Equal(nodeLimits, want) {
		t.Errorf("node list requests with limits %v, want %v", nodeLimits, want)
	}
	if want := []int64{10, 10}; len(records) != 13 || !cmp.Equal(limits, want) {
		t.Errorf("%d records read in requests with limits %v, want 13 in %v", len(records), limits, want)
	}
	if want := fmt.Sprintf("%d GPU nodes, ", len(records)); !strings.Contains(r.out, "\n"+want) {
		t.Errorf("no summary %q in:\n%s", want, r.out)
	}
	for _, rec := range records {
		if !strings.Contains(r.out, "\n"+rec.Name+" ") {
			t.Errorf("record %s from page 2 is not shown:\n%s", rec.Name, r.out)
		}
	}
}

func TestNodesEmptyListReadsNoNodes(t *testing.T) {
	server := &plugintest.NodeServer{Nodes: fixtures.HomeLab()}
	c := nodesClients(t, nil, nil)
	c.Base = server.Start(t)
	r := runPlugin(context.Background(), c, false, nil, "nodes")
	if want := "No GpuNode records: the operator has not recorded any GPU node"; r.code != factory.ExitOK || !strings.HasPrefix(r.out, want) {
		t.Errorf("exit %d, stderr %q, output %q; want exit 0 and %q...", r.code, r.err, r.out, want)
	}
	if n := len(server.ListRequests()); n != 0 {
		t.Errorf("%d node list requests without any record, want none", n)
	}
	r = runPlugin(context.Background(), c, false, nil, "nodes", "-o", "json")
	if want := `"items": []`; r.code != factory.ExitOK || !strings.Contains(r.out, want) {
		t.Errorf("-o json of no records: exit %d, output %q; want %q", r.code, r.out, want)
	}
}

func TestNodesErrorMessagesSayWhatToDo(t *testing.T) {
	nodes, records := recordedFleet()
	// olderOperator serves GpuInventories but not GpuNodes, as an operator from before the records.
	olderOperator := func() *factory.Factory {
		c := fakeClients(t, nodes, true)
		c.FakeGPU.(fakeGPU).Clientset.PrependReactor("*", "gpunodes", func(action clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewGenericServerResponse(http.StatusNotFound, action.GetVerb(), homelabv1.Resource("gpunodes"), "", "", 0, false)
		})
		return c
	}
	noCRDs := func() *factory.Factory {
		c := fakeClients(t, nodes, false)
		c.FakeGPU.(fakeGPU).Clientset.PrependReactor("*", "gpunodes", func(action clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewGenericServerResponse(http.StatusNotFound, action.GetVerb(), homelabv1.Resource("gpunodes"), "", "", 0, false)
		})
		return c
	}
	forbiddenRecords := func() *factory.Factory {
		c := nodesClients(t, nodes, records)
		c.FakeGPU.(fakeGPU).Clientset.PrependReactor("list", "gpunodes", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(homelabv1.Resource("gpunodes"), "", nil)
		})
		return c
	}
	forbiddenNodes := func() *factory.Factory {
		c := nodesClients(t, nodes, records)
		c.Base = (&plugintest.NodeServer{Fail: apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", nil)}).Start(t)
		return c
	}
	for _, tc := range []struct {
		name    string
		clients *factory.Factory
		args    []string
		want    string
	}{
		{"operator older than the plugin", olderOperator(), nil, "error: " + GpuNodeCRDOlderOperator + "\n"},
		{"no CRDs", noCRDs(), nil, "error: " + GpuNodeCRDNotInstalled + "\n"},
		{"forbidden records", forbiddenRecords(), nil,
			`error: permission denied: kubectl gpuinv needs "list" on gpunodes in API group "homelab.youngju.dev" (cluster-scoped); ask a cluster admin for a ClusterRole that grants it (` + "`kubectl auth can-i list gpunodes.homelab.youngju.dev`" + ` checks).`},
		{"forbidden nodes", forbiddenNodes(), nil,
			`error: permission denied: kubectl gpuinv needs "list" on nodes in the core API group ("") (cluster-scoped)`},
		{"unknown output", nodesClients(t, nodes, records), []string{"-o", "table"}, "error: unknown output format \"table\": use wide, json or yaml\nSee 'kubectl gpuinv --help' for usage.\n"},
		{"arguments", nodesClients(t, nodes, records), []string{"dgx-01"}, "error: unknown command \"dgx-01\" for \"kubectl gpuinv nodes\"\n"},
		{"negative chunk size", nodesClients(t, nodes, records), []string{"--chunk-size", "-1"}, "error: --chunk-size must not be negative\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPlugin(context.Background(), tc.clients, false, nil, append([]string{"nodes"}, tc.args...)...)
			if r.code != factory.ExitError {
				t.Errorf("exit %d, want %d", r.code, factory.ExitError)
			}
			if !strings.HasPrefix(r.err, tc.want) {
				t.Errorf("stderr:\n%s\nwant it to start with:\n%s", r.err, tc.want)
			}
			if r.out != "" {
				t.Errorf("stdout %q, want nothing", r.out)
			}
		})
	}
}

// --problems lists a Ready node whose record carries health conditions, with the conditions.
func TestNodesProblemsIncludeHealthConditions(t *testing.T) {
	nodes, records := recordedFleet()
	for _, r := range records {
		if r.Name == "dgx-01" {
			r.Spec.Source = homelabv1.SourceDRA
			r.Spec.Conditions = []string{inventory.NodeDeviceTainted, inventory.NodeXIDError}
		}
	}
	r := runPlugin(context.Background(), nodesClients(t, nodes, records), false, nil, "nodes", "--problems")
	if r.code != factory.ExitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	for _, want := range []string{"\ndgx-01 ", "  dra\n", "\nHealth conditions:\n  dgx-01:  DeviceTainted, XIDError\n",
		"5 of 9 GPU nodes (--problems), 5 problems (3 not Ready, 1 Node gone, 1 with facts missing, 1 with health conditions)\n"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("nodes --problems lacks %q:\n%s", want, r.out)
		}
	}
}
