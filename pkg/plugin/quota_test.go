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
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/status"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/quota"
)

const (
	h100 = "NVIDIA-H100-80GB-HBM3"
	a100 = "NVIDIA-A100-SXM4-40GB"
	gpuR = "nvidia.com/gpu"
	migR = "nvidia.com/mig-1g.5gb"
)

// figures are QuotaFigures in figureHeaders' order: capacity, ready, free, nominal,
// borrowable, reserved, used, pending and admitted workloads.
func figures(resource string, f [9]int64, finding string) homelabv1.QuotaFigures {
	return homelabv1.QuotaFigures{Resource: resource, Capacity: f[0], Ready: f[1], Free: f[2], Nominal: f[3], Borrowable: f[4],
		Reserved: f[5], Used: f[6], PendingWorkloads: int32(f[7]), AdmittedWorkloads: int32(f[8]), Finding: finding}
}

// quotaStatus is quota on the mixed fleet: cohort research's two queues share 40 H100s of
// quota while their flavors reach 16 Ready (overcommitted), team-a borrowing from team-b;
// serving's quota is in a MIG flavor; ghost's flavor (b200) reaches no node and no flavor
// selects the L4 node (stranded); ResourceQuotas limit GPUs, MIG devices and DRA devices.
// The inventory lists 4 of 41 ClusterQueues, 3 of 12 cohorts and 4 of 9 namespaces.
func quotaStatus() *homelabv1.GpuQuota {
	over, stranded := homelabv1.QuotaFindingOvercommitted, homelabv1.QuotaFindingStranded
	kueue, rq := homelabv1.QuotaSourceKueue, homelabv1.QuotaSourceResourceQuota
	return &homelabv1.GpuQuota{
		Kueue: "v1beta2", ClusterQueues: 41, Cohorts: 12, Namespaces: 9, StrandedNodes: 1,
		Models: []homelabv1.QuotaModel{
			{Model: h100, Source: kueue, QuotaFigures: figures(gpuR, [9]int64{24, 16, 4, 40, 0, 22, 18, 5, 9}, over)},
			{Model: a100, Source: kueue, QuotaFigures: figures(migR, [9]int64{23, 23, 9, 14, 0, 7, 7, 0, 7}, "")},
			{Model: "NVIDIA-L4", Source: kueue, QuotaFigures: figures(gpuR, [9]int64{1, 1, 1, 0, 0, 0, 0, 0, 0}, stranded), StrandedReady: 1},
			{Model: "", Source: kueue, QuotaFigures: figures(gpuR, [9]int64{0, 0, 0, 8, 0, 0, 0, 2, 0}, stranded)},
			{Model: h100, Source: rq, QuotaFigures: figures(gpuR, [9]int64{24, 16, 4, 20, 0, 0, 12, 0, 0}, over)},
		},
		CohortModels: []homelabv1.QuotaCohort{
			{Cohort: "research", Model: h100, Queues: []string{"team-a", "team-b"},
				QuotaFigures: figures(gpuR, [9]int64{24, 16, 4, 40, 0, 22, 18, 5, 9}, over)},
			{Cohort: "serving", Model: a100, Queues: []string{"serving"}, QuotaFigures: figures(migR, [9]int64{23, 23, 9, 14, 0, 7, 7, 0, 7}, "")},
			{Cohort: "ghost", Model: "", Queues: []string{"ghost"}, QuotaFigures: figures(gpuR, [9]int64{0, 0, 0, 8, 0, 0, 0, 2, 0}, stranded)},
		},
		Queues: []homelabv1.QuotaQueue{
			{Name: "team-b", Cohort: "research", Model: h100, Flavors: []string{"h100", "h100-spot"},
				QuotaFigures: figures(gpuR, [9]int64{24, 16, 4, 24, 16, 4, 2, 2, 3}, over)},
			{Name: "team-a", Cohort: "research", Model: h100, Flavors: []string{"h100"},
				QuotaFigures: figures(gpuR, [9]int64{24, 16, 4, 16, 24, 18, 16, 3, 6}, over)},
			{Name: "serving", Model: a100, Flavors: []string{"a100-mig-1g"}, QuotaFigures: figures(migR, [9]int64{23, 23, 9, 14, 0, 7, 7, 0, 7}, "")},
			{Name: "ghost", Model: "", Flavors: []string{"b200"}, QuotaFigures: figures(gpuR, [9]int64{0, 0, 0, 8, 0, 0, 0, 2, 0}, stranded)},
		},
		NamespaceQuotas: []homelabv1.QuotaNamespace{
			{Namespace: "ml-prod", Resource: "requests.nvidia.com/gpu", Hard: 16, Used: 12},
			{Namespace: "inference", Resource: "requests." + migR, Hard: 8, Used: 3},
			{Namespace: "ml-dev", Resource: "requests.nvidia.com/gpu", Hard: 4, Used: 0},
			{Namespace: "dra-lab", Resource: "gpu.nvidia.com.deviceclass.resource.k8s.io/devices", Hard: 2, Used: 1},
		},
	}
}

// quotaInventory is the mixed fleet's inventory with quota and its conditions.
func quotaInventory() *homelabv1.GpuInventory {
	gi := inventoryObject("cluster", fixtures.MixedFleet(), mixedFleetPrevious, nil)
	gi.Status.Quota = quotaStatus()
	at := metav1.NewTime(statusTime)
	gi.Status.Conditions = append(gi.Status.Conditions,
		metav1.Condition{Type: homelabv1.ConditionQuotaOvercommitted, Status: metav1.ConditionTrue, Reason: homelabv1.ReasonQuotaOvercommitted, LastTransitionTime: at,
			Message: "cohort research (ClusterQueues team-a, team-b) can hand out 40 nvidia.com/gpu of NVIDIA-H100-80GB-HBM3; its flavors reach 16 Ready"},
		metav1.Condition{Type: homelabv1.ConditionQuotaStranded, Status: metav1.ConditionTrue, Reason: homelabv1.ReasonQuotaStranded, LastTransitionTime: at,
			Message: "1 Ready GPU node (l4-odd) no ResourceFlavor selects; ClusterQueue ghost's quota in flavor b200 reaches no node"},
		metav1.Condition{Type: homelabv1.ConditionQuotaUnknown, Status: metav1.ConditionFalse, Reason: homelabv1.ReasonQuotaRead, LastTransitionTime: at,
			Message: "read Kueue v1beta2 and ResourceQuotas"})
	return gi
}

// kueueServer answers GETs of LocalQueues as an API server serving Kueue in versions does.
type kueueServer struct {
	versions []string
	// queues maps NAMESPACE/NAME to the LocalQueue's ClusterQueue.
	queues    map[string]string
	forbidden bool

	mu    sync.Mutex
	paths []string
}

func (s *kueueServer) start(t testing.TB) *rest.Config {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

func (s *kueueServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.paths)
}

func (s *kueueServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.paths = append(s.paths, r.Method+" "+r.URL.Path)
	s.mu.Unlock()
	var version, ns, name string
	_, err := fmt.Sscanf(strings.ReplaceAll(r.URL.Path, "/", " "), " apis kueue.x-k8s.io %s namespaces %s localqueues %s", &version, &ns, &name)
	gr := schema.GroupResource{Group: "kueue.x-k8s.io", Resource: "localqueues"}
	switch {
	case err != nil || !slices.Contains(s.versions, version):
		// The API server's answer for a path it does not serve.
		writeStatus(w, &metav1.Status{Status: metav1.StatusFailure, Message: "the server could not find the requested resource",
			Reason: metav1.StatusReasonNotFound, Details: &metav1.StatusDetails{}, Code: http.StatusNotFound})
	case s.forbidden:
		writeStatus(w, &apierrors.NewForbidden(gr, name, fmt.Errorf("User \"dev\" cannot get resource \"localqueues\" in API group %q in the namespace %q", "kueue.x-k8s.io", ns)).ErrStatus)
	case s.queues[ns+"/"+name] == "":
		writeStatus(w, &apierrors.NewNotFound(gr, name).ErrStatus)
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "kueue.x-k8s.io" + "/" + version, "kind": "LocalQueue",
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": map[string]any{"clusterQueue": s.queues[ns+"/"+name]}})
	}
}

func writeStatus(w http.ResponseWriter, s *metav1.Status) {
	s.Kind, s.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(s.Code))
	_ = json.NewEncoder(w).Encode(s)
}

// quotaClients serve inventories from the fake clientset and Kueue from kueue.
func quotaClients(t *testing.T, kueue *kueueServer, inventories ...*homelabv1.GpuInventory) *factory.Factory {
	t.Helper()
	c := fakeClients(t, nil, true, inventories...)
	c.Base = kueue.start(t)
	return c
}

// kueueV1beta1 serves Kueue v1beta1 only, with LocalQueues ml/train (into team-a) and
// ml/broken (into a ClusterQueue the inventory does not list).
func kueueV1beta1() *kueueServer {
	return &kueueServer{versions: []string{"v1beta1"}, queues: map[string]string{"ml/train": "team-a", "ml/broken": "team-z"}}
}

func noQuotaInventory(conditions ...metav1.Condition) *homelabv1.GpuInventory {
	gi := inventoryObject("cluster", fixtures.MixedFleet(), mixedFleetPrevious, nil)
	gi.Status.Conditions = append(gi.Status.Conditions, conditions...)
	return gi
}

func TestQuotaGolden(t *testing.T) {
	unknown := metav1.Condition{Type: homelabv1.ConditionQuotaUnknown, Status: metav1.ConditionTrue, Reason: homelabv1.ReasonQuotaForbidden,
		Message: `may not list clusterqueues.kueue.x-k8s.io: grant the operator's ClusterRole "list" and "watch" on them`}
	for _, tc := range []struct {
		name string
		inv  *homelabv1.GpuInventory
		args []string
	}{
		{"quota", quotaInventory(), nil},
		{"quota-wide", quotaInventory(), []string{"-o", "wide"}},
		{"quota-json", quotaInventory(), []string{"-o", "json"}},
		{"quota-queue", quotaInventory(), []string{"--queue", "team-a"}},
		{"quota-queue-alone", quotaInventory(), []string{"--queue", "ghost", "-o", "wide"}},
		{"quota-queue-json", quotaInventory(), []string{"--queue", "team-b", "-o", "json"}},
		{"quota-localqueue", quotaInventory(), []string{"--queue", "ml/train"}},
		{"quota-none", noQuotaInventory(), nil},
		{"quota-unknown", noQuotaInventory(unknown), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPlugin(context.Background(), quotaClients(t, kueueV1beta1(), tc.inv), false, nil, append([]string{"quota"}, tc.args...)...)
			if r.code != factory.ExitOK || r.err != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.err)
			}
			golden(t, tc.name+".golden", r.out)
		})
	}
}

// On a terminal the findings are coloured; without the colour codes the output is the
// plain one.
func TestQuotaColours(t *testing.T) {
	c := quotaClients(t, kueueV1beta1(), quotaInventory())
	coloured := runPlugin(context.Background(), c, true, nil, "quota")
	plain := runPlugin(context.Background(), c, false, nil, "quota")
	if !strings.Contains(coloured.out, "\x1b[31mOvercommitted\x1b[0m") || !strings.Contains(coloured.out, "\x1b[33mStranded\x1b[0m") {
		t.Errorf("findings are not red (overcommitted) and yellow (stranded):\n%q", coloured.out)
	}
	if got := ansi.ReplaceAllString(coloured.out, ""); got != plain.out {
		t.Errorf("terminal output without its colour codes differs from the plain output:\n--- terminal\n%s--- plain\n%s", got, plain.out)
	}
}

// quota reads one object: the inventory, with one GET, and nothing else unless --queue
// names a LocalQueue.
func TestQuotaReadsOneObject(t *testing.T) {
	kueue := kueueV1beta1()
	c := quotaClients(t, kueue, quotaInventory())
	for _, args := range [][]string{{"quota"}, {"quota", "-o", "json"}, {"quota", "--queue", "team-a"}} {
		c.FakeGPU.(fakeGPU).Clientset.ClearActions()
		if r := runPlugin(context.Background(), c, false, nil, args...); r.code != factory.ExitOK {
			t.Fatalf("%v: exit %d, stderr %q", args, r.code, r.err)
		}
		var calls []string
		for _, a := range c.FakeGPU.(fakeGPU).Clientset.Actions() {
			calls = append(calls, a.GetVerb()+" "+a.GetResource().Resource)
		}
		if diff := cmp.Diff([]string{"get gpuinventories"}, calls); diff != "" {
			t.Errorf("%v: calls (-want +got):\n%s", args, diff)
		}
	}
	if got := kueue.requests(); len(got) != 0 {
		t.Errorf("without a LocalQueue, quota asked the API server for %v", got)
	}
}

// A LocalQueue is read in the version the inventory says Kueue serves, then in the other;
// a version that is not served is told from a LocalQueue that does not exist.
func TestQuotaLocalQueueVersions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		inventory string // status.quota.kueue
		served    []string
		want      []string
	}{
		{"inventory says v1beta2, served", "v1beta2", []string{"v1beta2", "v1beta1"}, []string{"v1beta2"}},
		{"inventory says v1beta1", "v1beta1", []string{"v1beta2", "v1beta1"}, []string{"v1beta1"}},
		{"v1beta2 no longer served", "v1beta2", []string{"v1beta1"}, []string{"v1beta2", "v1beta1"}},
		{"no Kueue in the inventory", "", []string{"v1beta1"}, []string{"v1beta2", "v1beta1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kueue := kueueV1beta1()
			kueue.versions = tc.served
			gi := quotaInventory()
			gi.Status.Quota.Kueue = tc.inventory
			r := runPlugin(context.Background(), quotaClients(t, kueue, gi), false, nil, "quota", "--queue", "ml/train", "-o", "json")
			if r.code != factory.ExitOK {
				t.Fatalf("exit %d, stderr %q", r.code, r.err)
			}
			var got homelabv1.GpuQuota
			if err := json.Unmarshal([]byte(r.out), &got); err != nil {
				t.Fatal(err)
			}
			if len(got.Queues) != 1 || got.Queues[0].Name != "team-a" {
				t.Errorf("LocalQueue ml/train shows queues %+v, want team-a's row", got.Queues)
			}
			var want []string
			for _, v := range tc.want {
				want = append(want, "GET /apis/kueue.x-k8s.io/"+v+"/namespaces/ml/localqueues/train")
			}
			if diff := cmp.Diff(want, kueue.requests()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

// --queue keeps the queue's rows and its cohort's, and -o json says the same as the table.
func TestQuotaQueueRows(t *testing.T) {
	for _, tc := range []struct {
		queue           string
		queues, cohorts []string
	}{
		{"team-a", []string{"team-a"}, []string{"research"}},
		{"serving", []string{"serving"}, []string{"serving"}},
		{"ghost", []string{"ghost"}, []string{"ghost"}},
	} {
		r := runPlugin(context.Background(), quotaClients(t, kueueV1beta1(), quotaInventory()), false, nil, "quota", "--queue", tc.queue, "-o", "json")
		if r.code != factory.ExitOK {
			t.Fatalf("--queue %s: exit %d, stderr %q", tc.queue, r.code, r.err)
		}
		var got homelabv1.GpuQuota
		if err := json.Unmarshal([]byte(r.out), &got); err != nil {
			t.Fatal(err)
		}
		var queues, cohorts []string
		for _, q := range got.Queues {
			queues = append(queues, q.Name)
		}
		for _, c := range got.CohortModels {
			cohorts = append(cohorts, c.Cohort)
		}
		if diff := cmp.Diff([2][]string{tc.queues, tc.cohorts}, [2][]string{queues, cohorts}); diff != "" || len(got.Models) > 0 || len(got.NamespaceQuotas) > 0 {
			t.Errorf("--queue %s: queues and cohorts (-want +got):\n%s\nmodels %d, namespaces %d (want none)", tc.queue, diff, len(got.Models), len(got.NamespaceQuotas))
		}
	}
}

// --queue completes with the ClusterQueues the inventory lists, and their cohorts.
func TestQuotaCompletesQueues(t *testing.T) {
	r := runPlugin(context.Background(), quotaClients(t, kueueV1beta1(), quotaInventory()), false, nil, "__complete", "quota", "--queue", "")
	want := "team-b\tcohort research\nteam-a\tcohort research\nserving\tcohort <none>\nghost\tcohort <none>\n:4\n"
	if r.code != factory.ExitOK || !strings.HasPrefix(r.out, want) {
		t.Errorf("exit %d, output %q, want it to start %q", r.code, r.out, want)
	}
}

// The plugin prints what the operator's quota.Compute writes: two queues of cohort
// research with 16 H100s of quota each against 16 Ready (overcommitted), an L4 node no
// flavor selects (stranded).
func TestQuotaPrintsComputedStatus(t *testing.T) {
	var nodes []quota.Node
	for i, model := range []string{h100, h100, "NVIDIA-L4"} {
		nodes = append(nodes, quota.Node{Name: fmt.Sprintf("node-%d", i), Model: model, Ready: true,
			Labels:    map[string]string{"nvidia.com/gpu.product": model},
			Resources: []quota.NodeResource{{Name: gpuR, Capacity: 8, Free: 4}}})
	}
	h100Quota := []quota.Limit{{Flavor: "h100", Resource: gpuR, Nominal: 16}}
	res := quota.Compute(quota.Cluster{Nodes: nodes, Kueue: &quota.Kueue{Version: "v1beta2",
		Flavors:       []quota.Flavor{{Name: "h100", NodeLabels: map[string]string{"nvidia.com/gpu.product": h100}}},
		ClusterQueues: []quota.ClusterQueue{{Name: "team-a", Cohort: "research", Quotas: h100Quota}, {Name: "team-b", Cohort: "research", Quotas: h100Quota}},
	}}, quota.MaxRows)
	gi := noQuotaInventory()
	gi.Status.Quota = res.Status
	c := quotaClients(t, kueueV1beta1(), gi)

	r := runPlugin(context.Background(), c, false, nil, "quota")
	cohortRow := regexp.MustCompile(`(?m)^research +NVIDIA-H100-80GB-HBM3 +nvidia.com/gpu +16 +16 +8 +32 .*Overcommitted$`)
	strandedRow := regexp.MustCompile(`(?m)^NVIDIA-L4 +Kueue +nvidia.com/gpu +8 +8 +4 +0 .*Stranded$`)
	if r.code != factory.ExitOK || !cohortRow.MatchString(r.out) || !strandedRow.MatchString(r.out) {
		t.Errorf("exit %d, stderr %q; want an overcommitted research row and a stranded L4 row in:\n%s", r.code, r.err, r.out)
	}
	r = runPlugin(context.Background(), c, false, nil, "quota", "--queue", "team-b")
	if r.code != factory.ExitOK || !strings.HasPrefix(r.out, "ClusterQueue team-b in cohort research,") || !cohortRow.MatchString(r.out) ||
		!regexp.MustCompile(`(?m)^team-b +research +NVIDIA-H100-80GB-HBM3 `).MatchString(r.out) || strings.Contains(r.out, "team-a") {
		t.Errorf("--queue team-b: exit %d, stderr %q, output:\n%s", r.code, r.err, r.out)
	}
}

// Kueue served without GPU quota anywhere is no quota, said as such.
func TestQuotaKueueWithoutGPUQuota(t *testing.T) {
	gi := noQuotaInventory()
	gi.Status.Quota = quota.Compute(quota.Cluster{Kueue: &quota.Kueue{Version: "v1beta1"}}, quota.MaxRows).Status
	r := runPlugin(context.Background(), quotaClients(t, kueueV1beta1(), gi), false, nil, "quota")
	want := "GpuInventory cluster: no quota names a GPU resource: no ClusterQueue of Kueue v1beta1 has quota for one, and no ResourceQuota limits a GPU resource.\n"
	if r.code != factory.ExitOK || r.out != want {
		t.Errorf("exit %d, stderr %q, output %q, want %q", r.code, r.err, r.out, want)
	}
}

// Without quota, -o json prints an empty quota for scripts and says why on stderr.
func TestQuotaNoneJSON(t *testing.T) {
	r := runPlugin(context.Background(), quotaClients(t, kueueV1beta1(), noQuotaInventory()), false, nil, "quota", "-o", "json")
	if r.code != factory.ExitOK || strings.TrimSpace(r.out) != "{}" || r.err != "GpuInventory cluster: "+status.NoGPUQuota+"\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
}

func TestQuotaErrors(t *testing.T) {
	selected := inventoryObject("a100-pool", fixtures.MixedFleet(), nil, &metav1.LabelSelector{MatchLabels: map[string]string{"nvidia.com/gpu.family": "ampere"}})
	fresh := &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: "new", ResourceVersion: "1"}}
	partial := quotaInventory()
	partial.Name = "partial"
	partial.Status.Conditions = append(partial.Status.Conditions[:len(partial.Status.Conditions)-1], metav1.Condition{Type: homelabv1.ConditionQuotaUnknown,
		Status: metav1.ConditionTrue, Reason: homelabv1.ReasonQuotaForbidden, Message: "may not list cohorts.kueue.x-k8s.io"})
	notServed := &kueueServer{}
	forbidden := kueueV1beta1()
	forbidden.forbidden = true
	for _, tc := range []struct {
		name  string
		kueue *kueueServer
		crd   bool
		args  []string
		want  string
	}{
		{"no such inventory", kueueV1beta1(), true, []string{"nope"}, "error: GpuInventory \"nope\" not found; `kubectl gpuinv list` shows the inventories that exist\n"},
		{"no CRD", kueueV1beta1(), false, nil, "error: " + factory.CRDNotInstalled + "\n"},
		{"no status yet", kueueV1beta1(), true, []string{"new"}, "error: GpuInventory \"new\" has no status yet: is the operator running?\n"},
		{"inventory of a selector", kueueV1beta1(), true, []string{"a100-pool"},
			"error: GpuInventory \"a100-pool\" covers the nodes of a selector (nvidia.com/gpu.family=ampere): quota is the cluster's, reported on an inventory without a node selector, such as \"cluster\"\n"},
		{"queue not listed", kueueV1beta1(), true, []string{"--queue", "team-z"},
			"error: ClusterQueue \"team-z\" is not listed in GpuInventory \"cluster\": it lists 4 of the 41 ClusterQueues with GPU quota (those with the largest quotas); a ClusterQueue without GPU quota is not counted (`kubectl get clusterqueue team-z -o yaml` shows its quota)\n"},
		{"LocalQueue into a queue not listed", kueueV1beta1(), true, []string{"--queue", "ml/broken"},
			"error: ClusterQueue \"team-z\" (of LocalQueue ml/broken) is not listed in GpuInventory \"cluster\": it lists 4 of the 41 ClusterQueues with GPU quota (those with the largest quotas); a ClusterQueue without GPU quota is not counted (`kubectl get clusterqueue team-z -o yaml` shows its quota)\n"},
		{"queue not listed, quota partly unknown", kueueV1beta1(), true, []string{"partial", "--queue", "team-z"},
			"error: ClusterQueue \"team-z\" is not listed in GpuInventory \"partial\": it lists 4 of the 41 ClusterQueues with GPU quota (those with the largest quotas); a ClusterQueue without GPU quota is not counted (`kubectl get clusterqueue team-z -o yaml` shows its quota); and the operator read only part of the quota: may not list cohorts.kueue.x-k8s.io\n"},
		{"no such LocalQueue", kueueV1beta1(), true, []string{"--queue", "ml/nope"},
			"error: LocalQueue \"nope\" not found in namespace \"ml\" (`kubectl get localqueues -n ml` lists them); give a ClusterQueue's name without a namespace\n"},
		{"Kueue not served", notServed, true, []string{"--queue", "ml/train"},
			"error: the API server serves no Kueue (kueue.x-k8s.io v1beta2 or v1beta1), so there is no LocalQueue ml/train; give a ClusterQueue's name without a namespace\n"},
		{"LocalQueue forbidden", forbidden, true, []string{"--queue", "ml/train"},
			"error: permission denied: kubectl gpuinv needs \"get\" on localqueues in API group \"kueue.x-k8s.io\" in namespace \"ml\"; ask a cluster admin for a Role that grants it (`kubectl auth can-i get localqueues.kueue.x-k8s.io -n ml` checks). The API server said: localqueues.kueue.x-k8s.io \"train\" is forbidden: User \"dev\" cannot get resource \"localqueues\" in API group \"kueue.x-k8s.io\" in the namespace \"ml\"\n"},
		{"bad --queue", kueueV1beta1(), true, []string{"--queue", "ml/"},
			"error: --queue \"ml/\": give a ClusterQueue's NAME or a LocalQueue's NAMESPACE/NAME\nSee 'kubectl gpuinv --help' for usage.\n"},
		{"bad -o", kueueV1beta1(), true, []string{"-o", "name"}, "error: unknown output format \"name\": use wide, json or yaml\nSee 'kubectl gpuinv --help' for usage.\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c *factory.Factory
			if tc.crd {
				c = quotaClients(t, tc.kueue, quotaInventory(), selected, fresh, partial)
			} else {
				c = fakeClients(t, nil, false)
			}
			r := runPlugin(context.Background(), c, false, nil, append([]string{"quota"}, tc.args...)...)
			if r.code != factory.ExitError || r.err != tc.want || r.out != "" {
				t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit 1, no stdout and:\n%s", r.code, r.out, r.err, tc.want)
			}
		})
	}
}

// fullQuotaInventory is a whole-cluster inventory of 500 listed nodes (of 5,000) whose
// quota lists are full: 64 models, 32 cohorts, 32 queues and 32 namespaces, of 1,000
// ClusterQueues, 400 cohorts and 200 namespaces.
func fullQuotaInventory() *homelabv1.GpuInventory {
	gi := quotaInventory()
	s := &gi.Status
	s.TotalGpuNodes, s.ListedNodes = 5000, 500
	s.Nodes = nil
	for i := range 500 {
		s.Nodes = append(s.Nodes, homelabv1.GpuNodeEntry{Name: fmt.Sprintf("gpu-%04d", i), Ready: true, Product: h100, GpuCount: 8,
			GpuMemoryMiB: 81559, Family: "hopper", ComputeCapability: "9.0", DriverVersion: "580.126.9", WorkloadConfig: "container"})
	}
	q := &homelabv1.GpuQuota{Kueue: "v1beta2", ClusterQueues: 1000, Cohorts: 400, Namespaces: 200}
	f := figures(gpuR, [9]int64{4000, 3900, 120, 5000, 800, 3500, 3400, 900, 1200}, homelabv1.QuotaFindingOvercommitted)
	for i := range 64 {
		q.Models = append(q.Models, homelabv1.QuotaModel{Model: fmt.Sprintf("NVIDIA-MODEL-%02d", i), Source: homelabv1.QuotaSourceKueue, QuotaFigures: f})
	}
	for i := range 32 {
		cohort := fmt.Sprintf("cohort-%03d", i)
		q.CohortModels = append(q.CohortModels, homelabv1.QuotaCohort{Cohort: cohort, Model: h100,
			Queues: []string{"q-1", "q-2", "q-3", "q-4", "q-5", "q-6", "q-7", "q-8"}, QuotaFigures: f})
		q.Queues = append(q.Queues, homelabv1.QuotaQueue{Name: fmt.Sprintf("queue-%04d", i), Cohort: cohort, Model: h100,
			Flavors: []string{"h100-a", "h100-b"}, QuotaFigures: f})
		q.NamespaceQuotas = append(q.NamespaceQuotas, homelabv1.QuotaNamespace{Namespace: fmt.Sprintf("team-%03d", i),
			Resource: "requests.nvidia.com/gpu", Hard: 64, Used: 40})
	}
	s.Quota = q
	return gi
}

// BenchmarkQuota runs `kubectl gpuinv quota` against an API server answering the GET with
// the inventory's JSON, over the real client: what the command costs beyond the network.
func BenchmarkQuota(b *testing.B) {
	gi := fullQuotaInventory()
	gi.SetGroupVersionKind(homelabv1.SchemeGroupVersion.WithKind("GpuInventory"))
	body, err := json.Marshal(gi)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/homelab.youngju.dev/v1/gpuinventories/cluster" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	b.Cleanup(srv.Close)
	for _, tc := range []struct {
		name string
		args []string
	}{{"table", nil}, {"json", []string{"-o", "json"}}, {"queue", []string{"--queue", "queue-0031"}}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				// New clients each time: a run of the plugin makes its client once.
				c := &factory.Factory{Base: &rest.Config{Host: srv.URL}, Warnings: io.Discard}
				r := runPlugin(context.Background(), c, false, nil, append([]string{"quota"}, tc.args...)...)
				if r.code != factory.ExitOK {
					b.Fatalf("exit %d, stderr %q", r.code, r.err)
				}
			}
			b.ReportMetric(float64(len(body)), "object-bytes")
		})
	}
}

// Over full lists, the line under the tables counts what they leave out.
func TestQuotaFullLists(t *testing.T) {
	r := runPlugin(context.Background(), fakeClients(t, nil, true, fullQuotaInventory()), false, nil, "quota")
	if r.code != factory.ExitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	if !strings.Contains(r.out, "\nNot listed: 968 of 1000 ClusterQueues, 368 of 400 cohorts and 168 of 200 namespaces (") {
		t.Errorf("the bounded lists' line is missing:\n%s", r.out)
	}
}
