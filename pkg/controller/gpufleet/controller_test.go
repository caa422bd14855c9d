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

package gpufleet

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned/fake"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/member"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/memberwatch"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

const kueueNS = "kueue-system"

// statusWriter writes through the fake clientset, as the apply would, and tells each write.
type statusWriter struct {
	client versioned.Interface
	writes atomic.Int32
	wrote  chan homelabv1.GpuFleetStatus
}

func (w *statusWriter) ApplyStatus(ctx context.Context, name string, st homelabv1.GpuFleetStatus) (string, error) {
	gf, err := w.client.HomelabV1().GpuFleets().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	gf.Status = st
	out, err := w.client.HomelabV1().GpuFleets().UpdateStatus(ctx, gf, metav1.UpdateOptions{})
	if err != nil {
		return "", err
	}
	w.writes.Add(1)
	w.wrote <- st
	return out.ResourceVersion, nil
}

// listOnly is a fake dynamic client as an informer's client: it serves no watch-lists.
type listOnly struct{ dynamic.ResourceInterface }

func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

// hub is a running GpuFleet controller over fake members, each named by a
// MultiKueueCluster and its kubeconfig Secret.
type hub struct {
	t        *testing.T
	gpu      *fake.Clientset
	mkcs     *dynamicfake.FakeDynamicClient
	writer   *statusWriter
	metrics  *metrics.Fleet
	recorder *record.FakeRecorder
	mu       sync.Mutex
	secrets  map[string][]byte
}

var mkcGVR = memberwatch.MultiKueueClusterGVR

func startHub(t *testing.T, staleAfter time.Duration) *hub {
	t.Helper()
	gf := &homelabv1.GpuFleet{ObjectMeta: metav1.ObjectMeta{Name: "training", Generation: 1},
		Spec: homelabv1.GpuFleetSpec{MultiKueue: &homelabv1.FleetMultiKueue{}, StaleAfter: &metav1.Duration{Duration: staleAfter}}}
	h := &hub{t: t, gpu: fake.NewClientset(gf), metrics: metrics.NewFleet(), recorder: record.NewFakeRecorder(1000), secrets: map[string][]byte{}}
	h.writer = &statusWriter{client: h.gpu, wrote: make(chan homelabv1.GpuFleetStatus, 1000)}
	h.mkcs = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{mkcGVR: "MultiKueueClusterList"})
	fleets := NewInformer(prototest.ListOnly[*homelabv1.GpuFleetList]{ListWatcher: h.gpu.HomelabV1().GpuFleets()}, 0)
	mkcs := memberwatch.NewMultiKueueClustersFrom(listOnly{h.mkcs.Resource(mkcGVR)})
	registry := memberwatch.New(memberwatch.Options{Reader: member.Reader{Secret: h.secret}, MaxObjectBytes: 1 << 20,
		Metrics: h.metrics, ListTimeout: 300 * time.Millisecond,
		Backoff: &wait.Backoff{Duration: 20 * time.Millisecond, Factor: 2, Steps: 1000, Cap: 200 * time.Millisecond}})
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	_, run, err := NewController(ctx, Options{Fleets: fleets, MultiKueueClusters: mkcs, Members: registry, Writer: h.writer,
		Metrics: h.metrics, Recorder: h.recorder})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { fleets.Run(ctx) })
	wg.Go(func() { mkcs.Run(ctx) })
	wg.Go(func() { registry.Run(ctx) })
	wg.Go(func() {
		if err := run.Run(ctx); err != nil {
			t.Errorf("controller: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return h
}

func (h *hub) secret(_ context.Context, namespace, name string) (*corev1.Secret, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	data, ok := h.secrets[name]
	if !ok || namespace != kueueNS {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
	}
	return &corev1.Secret{Data: map[string][]byte{member.KubeconfigKey: data}}, nil
}

// member starts a fake member with inv and names it by a MultiKueueCluster of that name
// (with a Secret of its own name, or secret's).
func (h *hub) member(name string, inv *homelabv1.GpuInventory) *testenv.FakeMember {
	h.t.Helper()
	m := testenv.StartFakeMember(inv, "token")
	h.t.Cleanup(m.Close)
	h.name(name, m)
	return m
}

// name makes a MultiKueueCluster name the member m.
func (h *hub) name(name string, m *testenv.FakeMember) {
	h.t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["w"] = &clientcmdapi.Cluster{Server: m.URL(), CertificateAuthorityData: m.CA()}
	kc.AuthInfos["w"] = &clientcmdapi.AuthInfo{Token: "token"}
	kc.Contexts["w"] = &clientcmdapi.Context{Cluster: "w", AuthInfo: "w"}
	kc.CurrentContext = "w"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		h.t.Fatal(err)
	}
	h.mu.Lock()
	h.secrets[name] = data
	h.mu.Unlock()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"clusterSource": map[string]any{"kubeConfig": map[string]any{"location": name}}}}}
	if _, err := h.mkcs.Resource(mkcGVR).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// waitStatus waits for a written status that check accepts.
func (h *hub) waitStatus(what string, check func(*homelabv1.GpuFleetStatus) error) homelabv1.GpuFleetStatus {
	h.t.Helper()
	deadline := time.After(20 * time.Second)
	var err error
	for {
		select {
		case st := <-h.writer.wrote:
			if err = check(&st); err == nil {
				return st
			}
		case <-deadline:
			h.t.Fatalf("%s: no such status written; the last: %v", what, err)
		}
	}
}

func inventory(gpus, free int32) *homelabv1.GpuInventory {
	return &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Status: homelabv1.GpuInventoryStatus{TotalGpuNodes: 1, ReadyGpuNodes: 1, TotalGpus: gpus, ReadyGpus: gpus,
			Allocation: &homelabv1.GpuAllocation{FreeGpus: free},
			Models:     []homelabv1.GpuModel{{Product: "NVIDIA-H100-80GB-HBM3", Gpus: gpus, ReadyGpus: gpus, FreeGpus: free, LargestFit: free}}}}
}

// rowIs checks the state and reason of member name's row.
func rowIs(name, state, reason string) func(*homelabv1.GpuFleetStatus) error {
	return func(st *homelabv1.GpuFleetStatus) error {
		r := testenv.FleetRow(st, name)
		if r == nil {
			return fmt.Errorf("no row %s", name)
		}
		if r.State != state || r.Reason != reason {
			return fmt.Errorf("%s is %s (%s: %s), want %s (%s)", name, r.State, r.Reason, r.Message, state, reason)
		}
		return nil
	}
}

func rowJSON(t *testing.T, st *homelabv1.GpuFleetStatus, name string) string {
	t.Helper()
	data, err := json.Marshal(testenv.FleetRow(st, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// One member appears, changes, answers too slowly, turns stale, returns, sends a huge
// inventory and vanishes: every status written meanwhile has the other members' rows as
// they were.
func TestAMemberChangesOnlyItsOwnRow(t *testing.T) {
	h := startHub(t, time.Second)
	h.member("b", inventory(16, 4))
	h.member("c", inventory(32, 8))
	st := h.waitStatus("b and c read", func(st *homelabv1.GpuFleetStatus) error {
		if st.ReachableMembers != 2 {
			return fmt.Errorf("%d reachable", st.ReachableMembers)
		}
		return nil
	})
	others := map[string]string{"b": rowJSON(t, &st, "b"), "c": rowJSON(t, &st, "c")}
	unmoved := func(check func(*homelabv1.GpuFleetStatus) error) func(*homelabv1.GpuFleetStatus) error {
		return func(st *homelabv1.GpuFleetStatus) error {
			for name, want := range others {
				if got := rowJSON(t, st, name); got != want {
					t.Errorf("%s's row moved:\n%s\nwas\n%s", name, got, want)
				}
			}
			return check(st)
		}
	}

	a := h.member("a", inventory(8, 3))
	h.waitStatus("a appears", unmoved(rowIs("a", homelabv1.MemberReachable, "")))
	a.SetInventory(inventory(8, 5))
	st = h.waitStatus("a changes", unmoved(func(st *homelabv1.GpuFleetStatus) error {
		if r := testenv.FleetRow(st, "a"); r == nil || r.FreeGpus != 5 {
			return fmt.Errorf("a's row: %+v", r)
		}
		return nil
	}))
	if st.FreeGpus != 17 || st.TotalGpus != 56 {
		t.Errorf("totals: %d free of %d, want 17 of 56", st.FreeGpus, st.TotalGpus)
	}
	a.SetMode(testenv.MemberSlow)
	st = h.waitStatus("a too slow", unmoved(rowIs("a", homelabv1.MemberUnreachable, member.ReasonAnswerTooSlow)))
	if st.TotalGpus != 56 {
		t.Errorf("an unreachable member's last-known GPUs left the totals before it was stale: %d", st.TotalGpus)
	}
	st = h.waitStatus("a stale", unmoved(rowIs("a", homelabv1.MemberStale, member.ReasonAnswerTooSlow)))
	if c := meta.FindStatusCondition(st.Conditions, homelabv1.ConditionMembersStale); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "a since") {
		t.Errorf("MembersStale = %+v", c)
	}
	if st.TotalGpus != 48 {
		t.Errorf("a stale member's GPUs are still in the totals: %d", st.TotalGpus)
	}
	a.SetMode(testenv.MemberAnswers)
	h.waitStatus("a returns", unmoved(rowIs("a", homelabv1.MemberReachable, "")))
	a.SetMode(testenv.MemberHuge)
	h.waitStatus("a too large", unmoved(rowIs("a", homelabv1.MemberUnreachable, homelabv1.ReasonAnswerTooLarge)))
	if err := h.mkcs.Resource(mkcGVR).Delete(context.Background(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitStatus("a vanishes", unmoved(func(st *homelabv1.GpuFleetStatus) error {
		if r := testenv.FleetRow(st, "a"); r != nil || st.TotalMembers != 2 {
			return fmt.Errorf("a's row: %+v, %d members", r, st.TotalMembers)
		}
		return nil
	}))
	events := drain(h.recorder.Events)
	for _, want := range []string{"MemberUnreachable member a: Reachable → Unreachable (AnswerTooSlow", "MemberStale member a: Unreachable → Stale",
		"MemberReachable member a: Stale → Reachable"} {
		if !strings.Contains(events, want) {
			t.Errorf("no event %q among\n%s", want, events)
		}
	}
}

func drain(ch chan string) string {
	var out []string
	for {
		select {
		case e := <-ch:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

// Nothing changing costs no write, however often the fleet is synced; a change costs one.
func TestOneWritePerChange(t *testing.T) {
	h := startHub(t, time.Minute)
	a := h.member("a", inventory(8, 3))
	h.waitStatus("a read", rowIs("a", homelabv1.MemberReachable, ""))
	writes := h.writer.writes.Load()
	syncs := testutil.ToFloat64(h.metrics.Syncs.WithLabelValues(Name, "success"))
	for i := range 5 { // a MultiKueueCluster's label: every fleet synced, nothing to write
		u, err := h.mkcs.Resource(mkcGVR).Get(context.Background(), "a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u.SetLabels(map[string]string{"touched": fmt.Sprint(i)})
		if _, err := h.mkcs.Resource(mkcGVR).Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return testutil.ToFloat64(h.metrics.Syncs.WithLabelValues(Name, "success")) >= syncs+1, nil
	}); err != nil {
		t.Fatal("the fleet was not synced after its members' objects changed")
	}
	if got := h.writer.writes.Load(); got != writes {
		t.Errorf("%d writes while nothing changed", got-writes)
	}
	a.SetInventory(inventory(8, 1))
	h.waitStatus("a's change", func(st *homelabv1.GpuFleetStatus) error {
		if st.FreeGpus != 1 {
			return fmt.Errorf("free %d", st.FreeGpus)
		}
		return nil
	})
	if got := h.writer.writes.Load(); got != writes+1 {
		t.Errorf("%d writes for one change", got-writes)
	}
	if n := testutil.CollectAndCount(h.metrics.MemberChange); n != 1 {
		t.Errorf("member change latency: %d series", n)
	}
}

// Two MultiKueueClusters naming one cluster are one member and a Duplicate, named by the
// condition; a MultiKueueCluster whose Secret is missing is a row with the reason, and the
// others are read as ever.
func TestBadInputIsARowNamingTheMember(t *testing.T) {
	h := startHub(t, time.Minute)
	w1 := h.member("w1", inventory(8, 3))
	h.name("w1-again", w1)
	h.mu.Lock()
	h.secrets["broken"] = []byte("{not a kubeconfig")
	h.mu.Unlock()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
		"metadata": map[string]any{"name": "broken"}, "spec": map[string]any{"clusterSource": map[string]any{"kubeConfig": map[string]any{"location": "broken"}}}}}
	if _, err := h.mkcs.Resource(mkcGVR).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := h.waitStatus("one member, a duplicate, a broken one", func(st *homelabv1.GpuFleetStatus) error {
		for _, check := range []func(*homelabv1.GpuFleetStatus) error{rowIs("w1", homelabv1.MemberReachable, ""),
			rowIs("w1-again", homelabv1.MemberDuplicate, homelabv1.ReasonSameCluster),
			rowIs("broken", homelabv1.MemberUnreachable, homelabv1.ReasonMalformedKubeconfig)} {
			if err := check(st); err != nil {
				return err
			}
		}
		return nil
	})
	if st.TotalGpus != 8 {
		t.Errorf("a duplicate counted twice: %d GPUs", st.TotalGpus)
	}
	for typ, want := range map[string]string{homelabv1.ConditionDuplicateMembers: "w1-again: the same cluster as member w1",
		homelabv1.ConditionMembersUnreachable: "broken (MalformedKubeconfig)"} {
		if c := meta.FindStatusCondition(st.Conditions, typ); c == nil || !strings.Contains(c.Message, want) {
			t.Errorf("%s = %+v, want it to say %q", typ, c, want)
		}
	}
}
