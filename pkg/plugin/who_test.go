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
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/claimcache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/plugintest"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/podcache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// whoClients serve server's nodes, pods and claims, and the GpuNode records.
func whoClients(t *testing.T, server *plugintest.NodeServer, records []*homelabv1.GpuNode) *factory.Factory {
	t.Helper()
	c := fakeClientsServing(t, server, true)
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

// allocatedServer serves allocatedFleet's nodes, pods and claims.
func allocatedServer() *plugintest.NodeServer {
	nodes, pods, claims := allocatedFleet()
	return &plugintest.NodeServer{Nodes: nodes, Pods: pods, Claims: claims}
}

func allocatedRecords() []*homelabv1.GpuNode {
	nodes, _, _ := allocatedFleet()
	return recordsOf(nodes, mixedFleetPrevious)
}

func TestWhoGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"who", []string{"-A"}},
		{"who-wide", []string{"-A", "-o", "wide"}},
		{"who-by-namespace", []string{"-A", "--by-namespace"}},
		{"who-namespace", []string{"-n", "ml"}},
		{"who-current-namespace", nil}, // the kubeconfig's namespace: default here
		{"who-json", []string{"-A", "-o", "json"}},
		{"who-by-namespace-json", []string{"--all-namespaces", "--by-namespace", "-o", "json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPlugin(context.Background(), whoClients(t, allocatedServer(), allocatedRecords()), false, nil, append([]string{"who"}, tc.args...)...)
			if r.code != factory.ExitOK || r.err != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.err)
			}
			golden(t, tc.name+".golden", r.out)
		})
	}
}

// The totals count a GPU that a claim shares between pods once; the namespaces add up to
// the totals; parts of GPUs are their share of the GPU.
func TestWhoCounts(t *testing.T) {
	run := func(args ...string) printer.Who {
		t.Helper()
		r := runPlugin(context.Background(), whoClients(t, allocatedServer(), allocatedRecords()), false, nil, append([]string{"who", "-o", "json"}, args...)...)
		if r.code != factory.ExitOK {
			t.Fatalf("exit %d, stderr %q", r.code, r.err)
		}
		var a printer.Who
		if err := json.Unmarshal([]byte(r.out), &a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	all := run("-A")
	got := map[string]int64{}
	for _, h := range all.Holders {
		got[h.Namespace+"/"+h.Pod] = h.MilliGpus
	}
	want := map[string]int64{
		"edge/cam-0": 1000, "ml/train-0": 4000, "ml/train-1": 2000,
		"research/notebook-a": 142,                          // one 1g.5gb of 7 slices
		"research/notebook-b": 285,                          // two single-strategy 1g.5gb devices
		"serving/infer-0":     250,                          // one of 4 replicas
		"serving/infer-1":     750,                          // three of 4
		"team-dra/":           1000,                         // the claim orphan, reserved for no pod
		"team-dra/dra-a":      1000, "team-dra/dra-b": 1000, // the same shared GPU
		"team-dra/dra-c": 2000,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("thousandths of a GPU per holder (-want +got):\n%s", diff)
	}
	if all.MilliGpus != 12427 || all.Pods != 10 || all.Nodes != 6 || all.WaitingPods != 3 || all.WaitingGpus != 10 {
		t.Errorf("totals: %d milli, %d pods, %d nodes, %d waiting for %d GPUs; want 12427, 10, 6, 3 waiting for 10",
			all.MilliGpus, all.Pods, all.Nodes, all.WaitingPods, all.WaitingGpus)
	}
	byNS := run("-A", "--by-namespace")
	var sum int64
	var pods int32
	for _, n := range byNS.Namespaces {
		sum += n.MilliGpus
		pods += n.Pods
	}
	if sum != all.MilliGpus || pods != all.Pods || byNS.Holders != nil {
		t.Errorf("namespaces add up to %d milli and %d pods, want %d and %d (holders %v)", sum, pods, all.MilliGpus, all.Pods, byNS.Holders)
	}
}

// Without resource.k8s.io/v1 (a cluster before 1.34, or DRA off) `who` reads pods only, and
// says nothing about it.
func TestWhoWithoutClaimsAPI(t *testing.T) {
	server := allocatedServer()
	server.NoClaims = true
	r := runPlugin(context.Background(), whoClients(t, server, allocatedRecords()), false, nil, "who", "-A")
	if r.code != factory.ExitOK || r.err != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	if strings.Contains(r.out, "team-dra") || !strings.Contains(r.out, "7 pods in 4 namespaces hold 8.43 GPUs on 6 nodes.") {
		t.Errorf("want the device-plugin pods only:\n%s", r.out)
	}
}

// Without GpuNode records (an operator older than them, or no permission) GPUs are counted
// as whole units and models are unknown; a note on stderr says so.
func TestWhoWithoutRecords(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		note string
	}{
		{"no CRD", apierrors.NewGenericServerResponse(http.StatusNotFound, "list", homelabv1.Resource("gpunodes"), "", "", 0, false),
			"Note: the GpuNode CRD is not installed: models are unknown, and GPUs are counted without the nodes' MIG and sharing layout\n"},
		{"forbidden", apierrors.NewForbidden(homelabv1.Resource("gpunodes"), "", nil),
			"Note: cannot list gpunodes.homelab.youngju.dev (forbidden): models are unknown, and GPUs are counted without the nodes' MIG and sharing layout\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := whoClients(t, allocatedServer(), allocatedRecords())
			c.FakeGPU.(fakeGPU).Clientset.PrependReactor("list", "gpunodes", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.err
			})
			r := runPlugin(context.Background(), c, false, nil, "who", "-n", "research")
			if r.code != factory.ExitOK || r.err != tc.note {
				t.Fatalf("exit %d, stderr %q, want %q", r.code, r.err, tc.note)
			}
			// notebook-b's two single-strategy MIG devices count as 2 without the node's layout.
			want := "research   notebook-b  a100-mig-7  <unknown>  2     5m\n"
			if !strings.Contains(r.out, want) {
				t.Errorf("no line %q in:\n%s", want, r.out)
			}
		})
	}
}

func TestWhoErrors(t *testing.T) {
	forbiddenPods := apierrors.NewForbidden(corev1.Resource("pods"), "", nil)
	forbiddenClaims := apierrors.NewForbidden(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, "", nil)
	for _, tc := range []struct {
		name   string
		server func(*plugintest.NodeServer)
		args   []string
		want   string
	}{
		{"pods forbidden, all namespaces", func(s *plugintest.NodeServer) { s.FailPods = forbiddenPods }, []string{"-A"},
			`error: permission denied: kubectl gpuinv needs "list" on pods in the core API group ("") in all namespaces; ask a cluster admin for a ClusterRole that grants it (or ask for one namespace with -n NAMESPACE) (` + "`kubectl auth can-i list pods -A`" + ` checks). The API server said: `},
		{"pods forbidden, one namespace", func(s *plugintest.NodeServer) { s.FailPods = forbiddenPods }, []string{"-n", "ml"},
			`error: permission denied: kubectl gpuinv needs "list" on pods in the core API group ("") in namespace "ml"; ask a cluster admin for a Role that grants it (` + "`kubectl auth can-i list pods -n ml`" + ` checks). The API server said: `},
		{"claims forbidden", func(s *plugintest.NodeServer) { s.FailClaims = forbiddenClaims }, []string{"-A"},
			`error: permission denied: kubectl gpuinv needs "list" on resourceclaims in API group "resource.k8s.io" in all namespaces; ask a cluster admin for a ClusterRole that grants it (or ask for one namespace with -n NAMESPACE) (` + "`kubectl auth can-i list resourceclaims.resource.k8s.io -A`" + ` checks). The API server said: `},
		{"pods fail", func(s *plugintest.NodeServer) { s.FailPods = apierrors.NewInternalError(fmt.Errorf("etcd is down")) }, []string{"-A"},
			"error: list pods: Internal error occurred: etcd is down\n"},
		{"-A and -n", nil, []string{"-A", "-n", "ml"}, "error: -A lists all namespaces: do not combine it with -n\nSee 'kubectl gpuinv --help' for usage.\n"},
		{"unknown output", nil, []string{"-o", "table"}, "error: unknown output format \"table\": use wide, json or yaml\nSee 'kubectl gpuinv --help' for usage.\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := allocatedServer()
			if tc.server != nil {
				tc.server(server)
			}
			r := runPlugin(context.Background(), whoClients(t, server, allocatedRecords()), false, nil, append([]string{"who"}, tc.args...)...)
			if r.code != factory.ExitError || !strings.HasPrefix(r.err, tc.want) || r.out != "" {
				t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit 1, no stdout and a stderr starting with:\n%s", r.code, r.out, r.err, tc.want)
			}
		})
	}
}

// Pods and claims are read in pages of podcache.PageSize and claimcache.StreamPageSize, as
// protobuf (the test server answers nothing else), from the namespace asked for; the records
// only when something is held.
func TestWhoStreamsPages(t *testing.T) {
	nodes, _, _ := allocatedFleet()
	var pods []*corev1.Pod
	for i := range 2*podcache.PageSize + 3 {
		ns := fmt.Sprintf("team-%d", i%3)
		switch {
		case i%4 == 0:
			pods = append(pods, gpuPod(ns, fmt.Sprintf("gpu-%04d", i), fmt.Sprintf("node-%d", i%50), statusTime, "nvidia.com/gpu", 1))
		default:
			pods = append(pods, gpuPod(ns, fmt.Sprintf("web-%04d", i), "dgx-01", statusTime))
		}
	}
	server := &plugintest.NodeServer{Nodes: nodes, Pods: pods}
	r := runPlugin(context.Background(), whoClients(t, server, allocatedRecords()), false, nil, "who", "-A", "--by-namespace")
	if r.code != factory.ExitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	if !strings.Contains(r.out, "2501 pods in 3 namespaces hold 2501 GPUs on 25 nodes.") {
		t.Errorf("output:\n%s", r.out)
	}
	var got []string
	for _, req := range server.ListRequests() {
		got = append(got, fmt.Sprintf("%s limit=%d", req.Path, req.Limit))
	}
	slices.Sort(got) // pods and claims are listed at once
	pages := fmt.Sprintf("/api/v1/pods limit=%d", podcache.PageSize)
	want := []string{pages, pages, pages, fmt.Sprintf("/apis/resource.k8s.io/v1/resourceclaims limit=%d", claimcache.StreamPageSize)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("list requests (-want +got):\n%s", diff)
	}

	server.ResetRequests()
	r = runPlugin(context.Background(), whoClients(t, server, allocatedRecords()), false, nil, "who", "-n", "team-1")
	if r.code != factory.ExitOK || !strings.Contains(r.out, "834 pods hold 834 GPUs on 25 nodes.") {
		t.Errorf("exit %d, stderr %q, output ends:\n%s", r.code, r.err, r.out[max(0, len(r.out)-200):])
	}
	got = nil
	for _, req := range server.ListRequests() {
		got = append(got, req.Path)
	}
	slices.Sort(got)
	want = []string{"/api/v1/namespaces/team-1/pods", "/apis/resource.k8s.io/v1/namespaces/team-1/resourceclaims"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("list requests for -n team-1 (-want +got):\n%s", diff)
	}
}

// Where namespaces can be listed, -A lists each namespace's pods apart, several at a time,
// and says the same as one list of all pods; a failed list fails the whole answer.
func TestWhoListsNamespacesApart(t *testing.T) {
	nodes, _, _ := allocatedFleet()
	var pods []*corev1.Pod
	for i := range 600 {
		ns := fmt.Sprintf("team-%d", i%7)
		if i%3 == 0 {
			pods = append(pods, gpuPod(ns, fmt.Sprintf("gpu-%04d", i), fmt.Sprintf("node-%d", i%50), statusTime, "nvidia.com/gpu", 1))
		} else {
			pods = append(pods, gpuPod(ns, fmt.Sprintf("web-%04d", i), "dgx-01", statusTime))
		}
	}
	whole := &plugintest.NodeServer{Nodes: nodes, Pods: pods}
	want := runPlugin(context.Background(), whoClients(t, whole, allocatedRecords()), false, nil, "who", "-A", "-o", "json")
	apart := &plugintest.NodeServer{Nodes: nodes, Pods: pods, Namespaces: true}
	got := runPlugin(context.Background(), whoClients(t, apart, allocatedRecords()), false, nil, "who", "-A", "-o", "json")
	if want.code != factory.ExitOK || got.code != factory.ExitOK {
		t.Fatalf("exit %d and %d, stderr %q and %q", want.code, got.code, want.err, got.err)
	}
	if diff := cmp.Diff(want.out, got.out); diff != "" {
		t.Errorf("namespaces listed apart (-one list +apart):\n%s", diff)
	}
	var paths []string
	for _, req := range apart.ListRequests() {
		if strings.HasSuffix(req.Path, "/pods") {
			paths = append(paths, req.Path)
		}
	}
	slices.Sort(paths)
	var wantPaths []string
	for i := range 7 {
		wantPaths = append(wantPaths, fmt.Sprintf("/api/v1/namespaces/team-%d/pods", i))
	}
	if diff := cmp.Diff(wantPaths, paths); diff != "" {
		t.Errorf("pod lists (-want +got):\n%s", diff)
	}

	apart.FailPods = apierrors.NewForbidden(corev1.Resource("pods"), "", errors.New("no"))
	r := runPlugin(context.Background(), whoClients(t, apart, allocatedRecords()), false, nil, "who", "-A")
	if r.code == factory.ExitOK || !strings.Contains(r.err, "forbidden") {
		t.Errorf("a forbidden pod list: exit %d, stderr %q", r.code, r.err)
	}
}

// A finished pod holds nothing; a pod waiting holds nothing but counts as waiting, a gated
// one as queued, and a waiting one being deleted not at all.
func TestWhoSkipsFinishedAndWaitingPods(t *testing.T) {
	at := statusTime.Add(-time.Hour)
	done := gpuPod("ml", "done", "dgx-01", at, "nvidia.com/gpu", 8)
	done.Status.Phase = corev1.PodFailed
	gated := gpuPod("ml", "gated", "", at, "nvidia.com/gpu", 4)
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}}
	leaving := gpuPod("ml", "leaving", "", at, "nvidia.com/gpu", 1)
	leaving.DeletionTimestamp = &metav1.Time{Time: at}
	server := &plugintest.NodeServer{Pods: []*corev1.Pod{done, gpuPod("ml", "waits", "", at, "nvidia.com/gpu", 2), gated, leaving}}
	r := runPlugin(context.Background(), whoClients(t, server, nil), false, nil, "who", "-n", "ml")
	want := "No pod holds GPUs in namespace \"ml\".\nWaiting to be scheduled in namespace \"ml\": 1 pod asking for 2 GPUs (`kubectl gpuinv free` shows where they could run).\n" +
		"Queued behind scheduling gates in namespace \"ml\": 1 pod asking for 4 GPUs (the scheduler does not try them yet).\n"
	if r.code != factory.ExitOK || r.out != want {
		t.Errorf("exit %d, stderr %q, output:\n%s\nwant:\n%s", r.code, r.err, r.out, want)
	}
}

// Without -n, the namespace is the kubeconfig context's, as for kubectl get.
func TestWhoUsesTheContextNamespace(t *testing.T) {
	server := allocatedServer()
	cfg := server.Start(t)
	kubeconfig := filepath.Join(t.TempDir(), "config")
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: ctx, context: {cluster: c, user: u, namespace: serving}}]
current-context: ctx
`, cfg.Host)
	if err := os.WriteFile(kubeconfig, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := factory.NewConfigFlags()
	fs := pflag.NewFlagSet("who", pflag.ContinueOnError)
	flags.AddFlags(fs)
	if err := fs.Set("kubeconfig", kubeconfig); err != nil {
		t.Fatal(err)
	}
	r := runPlugin(context.Background(), &factory.Factory{Flags: flags, Warnings: io.Discard}, false, nil, "who")
	// The test server serves no GpuNode records: models are unknown.
	want := `NAMESPACE  POD      NODE         MODEL      GPUS  SINCE
serving    infer-0  t4-shared-1  <unknown>  1     8h
serving    infer-1  t4-shared-1  <unknown>  3     7h5m

2 pods hold 4 GPUs on 1 node.
`
	if r.code != factory.ExitOK || r.out != want || !strings.HasPrefix(r.err, "Note: the GpuNode CRD is not installed") {
		t.Errorf("exit %d, stderr %q, output:\n%s\nwant:\n%s", r.code, r.err, r.out, want)
	}
	var paths []string
	for _, req := range server.ListRequests() {
		paths = append(paths, req.Path)
	}
	slices.Sort(paths) // pods and claims are listed at once
	if diff := cmp.Diff([]string{"/api/v1/namespaces/serving/pods", "/apis/resource.k8s.io/v1/namespaces/serving/resourceclaims"}, paths); diff != "" {
		t.Errorf("list requests (-want +got):\n%s", diff)
	}
}
