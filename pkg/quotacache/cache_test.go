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

package quotacache

import (
	"context"
	"fmt"
	"net/http"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/quota"
)

var resourceQuotas = prototest.Resource{GroupVersionKind: corev1.SchemeGroupVersion.WithKind("ResourceQuota"), Name: "resourcequotas", Namespaced: true}

// fixture is a cache on fakes: the project's fake API server for ResourceQuotas (through
// the real protobuf client), client-go's fake dynamic and metadata clients for Kueue and its
// CRD, and a discovery that serves what the test says.
type fixture struct {
	t        *testing.T
	server   *prototest.Server
	dynamic  *dynamicfake.FakeDynamicClient
	metadata *metadatafake.FakeMetadataClient
	cache    *Cache

	mu      sync.Mutex
	served  map[string][]string // by group version
	changes atomic.Int64
	changed chan struct{} // a change was told
	looked  chan struct{} // discovery was asked
}

var kinds = map[string]string{"resourceflavors": "ResourceFlavor", "clusterqueues": "ClusterQueue", "cohorts": "Cohort", "localqueues": "LocalQueue"}

func newFixture(t *testing.T, opts prototest.Options) *fixture {
	f := &fixture{t: t, served: map[string][]string{}, changed: make(chan struct{}, 1), looked: make(chan struct{}, 1)}
	f.server = prototest.NewServer(t, opts, resourceQuotas)
	listKinds := map[schema.GroupVersionResource]string{}
	for _, v := range versions {
		for r, kind := range kinds {
			listKinds[schema.GroupVersionResource{Group: Group, Version: v, Resource: r}] = kind + "List"
		}
	}
	f.dynamic = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds)
	f.metadata = metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
	quotaLW, err := quotaListWatch(f.server.Config())
	if err != nil {
		t.Fatal(err)
	}
	f.cache = newCache(clients{quotaLW: quotaLW, dynamic: f.dynamic, metadata: f.metadata, discover: f.discover})
	f.cache.OnChange(func(node string) {
		if node != "" {
			t.Errorf("OnChange(%q), want \"\"", node)
		}
		f.changes.Add(1)
		select {
		case f.changed <- struct{}{}:
		default:
		}
	})
	return f
}

func (f *fixture) discover(_ context.Context, gv string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case f.looked <- struct{}{}:
	default:
	}
	return f.served[gv], nil
}

// serve makes discovery serve Kueue's four resources in version ("": none).
func (f *fixture) serve(version string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.served = map[string][]string{}
	if version != "" {
		f.served[Group+"/"+version] = []string{"resourceflavors", "clusterqueues", "cohorts", "localqueues", "workloads"}
	}
}

// start runs the cache until the test ends.
func (f *fixture) start() {
	_, ctx := ktesting.NewTestContext(f.t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.cache.Run(ctx)
	}()
	f.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// await waits until the cache has synced (as a controller waits for it) and then until the
// snapshot satisfies ok, at each change the cache tells.
func (f *fixture) await(what string, ok func(Snapshot) bool) Snapshot {
	f.t.Helper()
	stop := make(chan struct{})
	timer := time.AfterFunc(30*time.Second, func() { close(stop) })
	defer timer.Stop()
	if !cache.WaitForCacheSync(stop, f.cache.HasSynced) {
		f.t.Fatalf("never synced")
	}
	for {
		if s := f.cache.Snapshot(); ok(s) {
			return s
		}
		select {
		case <-f.changed:
		case <-stop:
			f.t.Fatalf("never %s; snapshot %+v, synced %v", what, f.cache.Snapshot(), f.cache.HasSynced())
		}
	}
}

var crd = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func (f *fixture) createCRD() {
	f.t.Helper()
	obj := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: CRDName, Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"}},
	}
	if _, err := f.metadata.Resource(crd).(metadatafake.MetadataClient).CreateFake(obj, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) deleteCRD() {
	f.t.Helper()
	if err := f.metadata.Resource(crd).Delete(context.Background(), CRDName, metav1.DeleteOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) kueueWrite(u *unstructured.Unstructured, update bool) {
	f.t.Helper()
	gv, _ := schema.ParseGroupVersion(u.GetAPIVersion())
	var plural string
	for r, kind := range kinds {
		if kind == u.GetKind() {
			plural = r
		}
	}
	client := f.dynamic.Resource(gv.WithResource(plural)).Namespace(u.GetNamespace())
	var err error
	if update {
		_, err = client.Update(context.Background(), u, metav1.UpdateOptions{})
	} else {
		_, err = client.Create(context.Background(), u, metav1.CreateOptions{})
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

// kueueObjects are a flavor, a queue in a cohort, the cohort (a child of another) and a
// local queue, as Kueue's API in version writes them; JSON numbers and strings both.
func kueueObjects(version string) []*unstructured.Unstructured {
	cohort, parent := "cohortName", "parentName"
	if version == "v1beta1" {
		cohort, parent = "cohort", "parent" // the Cohort's field as older Kueues wrote it
	}
	obj := func(kind, namespace, name string, fields map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: fields}
		u.SetAPIVersion(Group + "/" + version)
		u.SetKind(kind)
		u.SetNamespace(namespace)
		u.SetName(name)
		return u
	}
	usage := []any{map[string]any{"name": "h100", "resources": []any{
		map[string]any{"name": "cpu", "total": "10"},
		map[string]any{"name": "nvidia.com/gpu", "total": "6", "borrowed": int64(1)},
	}}}
	return []*unstructured.Unstructured{
		obj("ResourceFlavor", "", "h100", map[string]any{"spec": map[string]any{
			"nodeLabels": map[string]any{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
			"nodeTaints": []any{map[string]any{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}},
		}}),
		obj("ClusterQueue", "", "team-a", map[string]any{
			"spec": map[string]any{cohort: "research", "resourceGroups": []any{map[string]any{
				"coveredResources": []any{"cpu", "nvidia.com/gpu"},
				"flavors": []any{map[string]any{"name": "h100", "resources": []any{
					map[string]any{"name": "cpu", "nominalQuota": "64"},
					map[string]any{"name": "nvidia.com/gpu", "nominalQuota": int64(8), "borrowingLimit": "4", "lendingLimit": "2"},
				}}},
			}}},
			"status": map[string]any{"flavorsReservation": usage, "flavorsUsage": usage,
				"pendingWorkloads": int64(3), "reservingWorkloads": int64(1), "admittedWorkloads": int64(2),
				"conditions": []any{map[string]any{"type": "Active", "status": "True", "lastTransitionTime": "2026-12-05T12:00:00Z"}}},
		}),
		obj("Cohort", "", "research", map[string]any{"spec": map[string]any{parent: "org", "resourceGroups": []any{map[string]any{
			"coveredResources": []any{"nvidia.com/mig-1g.10gb", "memory"},
			"flavors": []any{map[string]any{"name": "h100", "resources": []any{
				map[string]any{"name": "nvidia.com/mig-1g.10gb", "nominalQuota": "7"},
				map[string]any{"name": "memory", "nominalQuota": "1Ti"},
			}}},
		}}}}),
		obj("LocalQueue", "ml", "default", map[string]any{"spec": map[string]any{"clusterQueue": "team-a"},
			"status": map[string]any{"pendingWorkloads": int64(2), "reservingWorkloads": int64(1), "admittedWorkloads": int64(1)}}),
	}
}

func ptr(n int64) *int64 { return &n }

// wantKueue is what the cache keeps of kueueObjects.
func wantKueue(version string) *quota.Kueue {
	usage := []quota.Usage{{Flavor: "h100", Resource: "nvidia.com/gpu", Total: 6, Borrowed: 1}}
	return &quota.Kueue{
		Version: version,
		Flavors: []quota.Flavor{{Name: "h100", NodeLabels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
			NodeTaints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}}},
		ClusterQueues: []quota.ClusterQueue{{Name: "team-a", Cohort: "research",
			Quotas:   []quota.Limit{{Flavor: "h100", Resource: "nvidia.com/gpu", Nominal: 8, BorrowingLimit: ptr(4), LendingLimit: ptr(2)}},
			Reserved: usage, Used: usage, Pending: 3, Reserving: 1, Admitted: 2}},
		Cohorts:     []quota.Cohort{{Name: "research", Parent: "org", Quotas: []quota.Limit{{Flavor: "h100", Resource: "nvidia.com/mig-1g.10gb", Nominal: 7}}}},
		LocalQueues: []quota.LocalQueue{{Namespace: "ml", Name: "default", ClusterQueue: "team-a", Pending: 2, Admitted: 1}},
	}
}

// Kueue's objects in v1beta2 and in v1beta1 come out as the same quota types, with only the
// GPU resources (and any other extended one) kept.
func TestKueueVersionsReadAlike(t *testing.T) {
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			f := newFixture(t, prototest.Options{})
			for _, u := range kueueObjects(version) {
				f.kueueWrite(u, false)
			}
			f.createCRD()
			f.serve(version)
			f.start()
			s := f.await("Kueue read", func(s Snapshot) bool { return s.Kueue != nil })
			if diff := cmp.Diff(wantKueue(version), s.Kueue); diff != "" {
				t.Errorf("Kueue (-want +got):\n%s", diff)
			}
			if s.Problem != "" {
				t.Errorf("Problem %q", s.Problem)
			}
		})
	}
}

// With both versions served, v1beta2 is read.
func TestKueuePrefersV1beta2(t *testing.T) {
	f := newFixture(t, prototest.Options{})
	f.mu.Lock()
	f.served = map[string][]string{Group + "/v1beta1": {"clusterqueues"}, Group + "/v1beta2": {"clusterqueues", "resourceflavors"}}
	f.mu.Unlock()
	f.createCRD()
	f.start()
	s := f.await("Kueue read", func(s Snapshot) bool { return s.Kueue != nil })
	if s.Kueue.Version != "v1beta2" {
		t.Errorf("read %s, want v1beta2", s.Kueue.Version)
	}
	if got := f.cache.currentRun().resources; !cmp.Equal(got, []string{"resourceflavors", "clusterqueues"}) {
		t.Errorf("informers of %v, want only the served resourceflavors and clusterqueues", got)
	}
}

// Without Kueue nothing but the CRD watch runs; Kueue installed while the cache runs is read
// (once its CRD is served), changes of what the cache keeps are told and status churn is not,
// and Kueue removed is forgotten.
func TestKueueComesAndGoes(t *testing.T) {
	f := newFixture(t, prototest.Options{})
	f.start()
	s := f.await("synced", func(Snapshot) bool { return true })
	if s.Kueue != nil || s.Problem != "" {
		t.Fatalf("without Kueue: %+v", s)
	}
	if actions := f.dynamic.Actions(); len(actions) != 0 {
		t.Errorf("without Kueue the cache read Kueue: %v", actions)
	}

	// The CRD appears before the API server serves it, as while it is not yet Established.
	f.createCRD()
	select {
	case <-f.looked:
	case <-time.After(30 * time.Second):
		t.Fatal("the new CRD was never noticed")
	}
	for _, u := range kueueObjects("v1beta2") {
		f.kueueWrite(u, false)
	}
	f.serve("v1beta2")
	s = f.await("Kueue read", func(s Snapshot) bool { return s.Kueue != nil })
	if diff := cmp.Diff(wantKueue("v1beta2"), s.Kueue); diff != "" {
		t.Errorf("Kueue (-want +got):\n%s", diff)
	}

	// Status churn (a condition, the CPU in use) is not a change; a GPU count is.
	before := f.changes.Load()
	cq := kueueObjects("v1beta2")[1]
	status := cq.Object["status"].(map[string]any)
	status["conditions"] = []any{map[string]any{"type": "Active", "status": "True", "lastTransitionTime": "2026-12-05T12:30:00Z"}}
	status["flavorsUsage"].([]any)[0].(map[string]any)["resources"].([]any)[0].(map[string]any)["total"] = "12"
	f.kueueWrite(cq, true)
	cq = cq.DeepCopy()
	cq.Object["status"].(map[string]any)["pendingWorkloads"] = int64(5)
	f.kueueWrite(cq, true)
	f.await("the pending count", func(s Snapshot) bool { return s.Kueue != nil && s.Kueue.ClusterQueues[0].Pending == 5 })
	if n := f.changes.Load() - before; n != 1 {
		t.Errorf("told %d changes for a status churn and a pending count, want 1", n)
	}

	f.deleteCRD()
	f.await("Kueue forgotten", func(s Snapshot) bool { return s.Kueue == nil })
	if f.cache.currentRun() != nil {
		t.Errorf("Kueue's informers still run without the CRD")
	}
}

// Kueue's CRDs are installed together but served one by one: a cache that saw only
// ClusterQueues served waits for the ResourceFlavors, and reads them once served.
func TestKueueServedOneCRDAtATime(t *testing.T) {
	f := newFixture(t, prototest.Options{})
	f.start()
	f.await("synced", func(Snapshot) bool { return true })
	for _, u := range kueueObjects("v1beta2") {
		f.kueueWrite(u, false)
	}
	f.mu.Lock()
	f.served = map[string][]string{Group + "/v1beta2": {"clusterqueues"}}
	f.mu.Unlock()
	f.createCRD()
	<-f.looked
	f.mu.Lock()
	f.served = map[string][]string{Group + "/v1beta2": {"clusterqueues", "resourceflavors"}}
	f.mu.Unlock()
	s := f.await("flavors read", func(s Snapshot) bool { return s.Kueue != nil && len(s.Kueue.Flavors) > 0 })
	if len(s.Kueue.ClusterQueues) == 0 {
		t.Errorf("Kueue read without its ClusterQueues: %+v", s.Kueue)
	}
	f.serve("v1beta2")
	f.await("every resource read", func(s Snapshot) bool { return s.Kueue != nil && len(s.Kueue.LocalQueues) > 0 })
}

func rq(namespace, name string, hard, used corev1.ResourceList) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.ResourceQuotaSpec{Hard: hard}, Status: corev1.ResourceQuotaStatus{Hard: hard, Used: used}}
}

func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// A ResourceQuota keeps only its GPU keys; one without any is left out, and a change of its
// other keys is not told.
func TestResourceQuotasKeepGPUKeys(t *testing.T) {
	f := newFixture(t, prototest.Options{})
	f.server.Set(
		rq("ml", "gpus", list("requests.cpu", "64", "limits.memory", "1Ti", "requests.nvidia.com/gpu", "8", "nvidia.com/gpu", "8",
			"requests.nvidia.com/mig-1g.10gb", "14", "gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "4",
			"requests.example.com/fpga", "2", "count/pods", "100"),
			list("requests.cpu", "10", "requests.nvidia.com/gpu", "3")),
		rq("web", "cpu-only", list("requests.cpu", "8"), list("requests.cpu", "1")),
	)
	f.start()
	s := f.await("synced", func(Snapshot) bool { return true })
	want := []quota.NamespaceQuota{{Namespace: "ml", Name: "gpus",
		Hard: map[corev1.ResourceName]int64{"requests.nvidia.com/gpu": 8, "nvidia.com/gpu": 8, "requests.nvidia.com/mig-1g.10gb": 14,
			"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": 4},
		Used: map[corev1.ResourceName]int64{"requests.nvidia.com/gpu": 3}}}
	if diff := cmp.Diff(want, s.ResourceQuotas); diff != "" {
		t.Errorf("ResourceQuotas (-want +got):\n%s", diff)
	}

	before := f.changes.Load()
	f.server.Apply(watch.Modified, rq("web", "cpu-only", list("requests.cpu", "8"), list("requests.cpu", "2")))
	f.server.Apply(watch.Modified, rq("ml", "gpus", list("requests.nvidia.com/gpu", "8"), list("requests.cpu", "11", "requests.nvidia.com/gpu", "4")))
	s = f.await("the GPU use", func(s Snapshot) bool {
		return len(s.ResourceQuotas) == 1 && s.ResourceQuotas[0].Used["requests.nvidia.com/gpu"] == 4
	})
	if n := f.changes.Load() - before; n != 1 {
		t.Errorf("told %d changes for a CPU-only quota and a GPU one, want 1", n)
	}
	f.server.Apply(watch.Deleted, rq("ml", "gpus", nil, nil))
	f.await("the quota gone", func(s Snapshot) bool { return len(s.ResourceQuotas) == 0 })
}

// A read the RBAC forbids is the snapshot's Problem, the rest is read, and granting it later
// clears the Problem without a restart.
func TestForbiddenIsAProblemUntilGranted(t *testing.T) {
	var forbidQuotas, forbidQueues atomic.Bool
	forbidQuotas.Store(true)
	forbidQueues.Store(true)
	f := newFixture(t, prototest.Options{Wrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if forbidQuotas.Load() {
				prototest.WriteStatus(w, apierrors.NewForbidden(corev1.Resource("resourcequotas"), "", nil))
				return
			}
			next.ServeHTTP(w, r)
		})
	}})
	f.dynamic.PrependReactor("list", "clusterqueues", func(clienttesting.Action) (bool, runtime.Object, error) {
		if forbidQueues.Load() {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: Group, Resource: "clusterqueues"}, "", nil)
		}
		return false, nil, nil
	})
	f.server.Set(rq("ml", "gpus", list("requests.nvidia.com/gpu", "8"), nil))
	for _, u := range kueueObjects("v1beta2") {
		f.kueueWrite(u, false)
	}
	f.createCRD()
	f.serve("v1beta2")
	f.start()

	const want = "cannot list core/v1 resourcequotas, kueue.x-k8s.io/v1beta2 clusterqueues: forbidden; grant get/list/watch (see docs/install.md)"
	s := f.await("both forbidden", func(s Snapshot) bool { return s.Problem == want })
	if s.Kueue != nil || len(s.ResourceQuotas) != 0 {
		t.Errorf("read what is forbidden: %+v", s)
	}
	forbidQueues.Store(false)
	s = f.await("ClusterQueues read", func(s Snapshot) bool { return s.Kueue != nil })
	if s.Problem != "cannot list core/v1 resourcequotas: forbidden; grant get/list/watch (see docs/install.md)" {
		t.Errorf("Problem %q", s.Problem)
	}
	if len(s.Kueue.ClusterQueues) != 1 {
		t.Errorf("ClusterQueues %+v", s.Kueue.ClusterQueues)
	}
	forbidQuotas.Store(false)
	f.await("everything read", func(s Snapshot) bool { return s.Problem == "" && len(s.ResourceQuotas) == 1 })
}

func TestValue(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want int64
		ok   bool
	}{
		{"8", 8, true}, {int64(8), 8, true}, {float64(2), 2, true}, {"500m", 1, true}, {"-1", -1, true},
		{"1e30", 1<<63 - 1, true}, {"-1e30", -1 << 63, true}, {"1e4000", 1<<63 - 1, false},
		{strings.Repeat("9", 80), 1<<63 - 1, false}, {"lots", 0, false}, {true, 0, false},
	} {
		if got, ok := value(tc.in); got != tc.want || ok != tc.ok {
			t.Errorf("value(%v) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// What the cache keeps of 1,000 ClusterQueues (two flavors of two GPU resources each, and
// CPU and memory it drops) and 100 ResourceFlavors stays well under the 8 MiB.
func TestKeptKueueIsSmall(t *testing.T) {
	queue := kueueObjects("v1beta2")[1]
	spec := queue.Object["spec"].(map[string]any)
	group := spec["resourceGroups"].([]any)[0].(map[string]any)
	group["coveredResources"] = []any{"cpu", "memory", "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"}
	resources := []any{
		map[string]any{"name": "cpu", "nominalQuota": "64"}, map[string]any{"name": "memory", "nominalQuota": "512Gi"},
		map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "4"},
		map[string]any{"name": "nvidia.com/mig-1g.10gb", "nominalQuota": "14"},
	}
	group["flavors"] = []any{map[string]any{"name": "h100", "resources": resources}, map[string]any{"name": "a100", "resources": resources}}
	flavor := kueueObjects("v1beta2")[0]

	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	kept := make([]any, 0, 1100)
	for i := range 1000 {
		q := queue.DeepCopy()
		q.SetName(fmt.Sprintf("team-%04d", i))
		q.SetResourceVersion(fmt.Sprint(1000000 + i))
		kept = append(kept, kueueResources[1].read(q, "v1beta2"))
	}
	for i := range 100 {
		f := flavor.DeepCopy()
		f.SetName(fmt.Sprintf("flavor-%03d", i))
		kept = append(kept, kueueResources[0].read(f, "v1beta2"))
	}
	goruntime.GC()
	goruntime.ReadMemStats(&after)
	size := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("1,000 ClusterQueues and 100 ResourceFlavors kept in %d KiB", size>>10)
	if size > 2<<20 {
		t.Errorf("1,000 ClusterQueues and 100 ResourceFlavors kept in %d KiB, want under 2 MiB", size>>10)
	}
	goruntime.KeepAlive(kept)
}

// A Cohort's parent is spec.parentName in both versions Kueue v0.17 serves; a v1beta1 Cohort
// of an older Kueue wrote spec.parent.
func TestCohortParent(t *testing.T) {
	for _, tc := range []struct {
		version string
		spec    map[string]any
		want    string
	}{
		{"v1beta2", map[string]any{"parentName": "org"}, "org"},
		{"v1beta2", map[string]any{"parent": "org"}, ""},
		{"v1beta1", map[string]any{"parentName": "org"}, "org"},
		{"v1beta1", map[string]any{"parent": "org"}, "org"},
		{"v1beta1", map[string]any{"parentName": 7}, ""},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": tc.spec}}
		if got := cohortOf(u, tc.version).Parent; got != tc.want {
			t.Errorf("%s %v: parent %q, want %q", tc.version, tc.spec, got, tc.want)
		}
	}
}

// Kueue upgraded to serve v1beta2 (its CRD changes) is read in v1beta2 from then on.
func TestKueueUpgradeSwitchesVersion(t *testing.T) {
	f := newFixture(t, prototest.Options{})
	for _, v := range versions {
		for _, u := range kueueObjects(v) {
			f.kueueWrite(u, false)
		}
	}
	f.createCRD()
	f.serve("v1beta1")
	f.start()
	f.await("v1beta1 read", func(s Snapshot) bool { return s.Kueue != nil && s.Kueue.Version == "v1beta1" })

	f.serve("v1beta2")
	obj := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: CRDName, ResourceVersion: "2"},
	}
	if _, err := f.metadata.Resource(crd).(metadatafake.MetadataClient).UpdateFake(obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := f.await("v1beta2 read", func(s Snapshot) bool { return s.Kueue != nil && s.Kueue.Version == "v1beta2" })
	if diff := cmp.Diff(wantKueue("v1beta2"), s.Kueue); diff != "" {
		t.Errorf("Kueue (-want +got):\n%s", diff)
	}
}
