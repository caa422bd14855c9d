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

package memberwatch

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fleet"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/member"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

const kueueNS = "kueue-system"

// inventory is a member's GpuInventory with gpus GPUs, free of them free.
func inventory(gpus, free int32) *homelabv1.GpuInventory {
	return &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Status: homelabv1.GpuInventoryStatus{TotalGpus: gpus, ReadyGpus: gpus, Allocation: &homelabv1.GpuAllocation{FreeGpus: free}}}
}

// kubeconfig is a kubeconfig for url, trusting ca, with token.
func kubeconfig(t *testing.T, url string, ca []byte, token string) []byte {
	t.Helper()
	data, err := testenv.Kubeconfig(url, ca, token)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// mkc is a MultiKueueCluster named name whose kubeconfig is the Secret of the same name.
func mkc(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
		"metadata": map[string]any{"name": name, "uid": "uid-" + name, "resourceVersion": "1"},
		"spec":     map[string]any{"clusterSource": map[string]any{"kubeConfig": map[string]any{"location": name, "locationType": "Secret"}}}}}
	return u
}

// secrets is the hub's Secrets in Kueue's namespace, by name.
type secrets struct {
	mu   sync.Mutex
	data map[string][]byte
	gets int
}

func (s *secrets) set(name string, kubeconfig []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data[name] = kubeconfig
}

func (s *secrets) get(_ context.Context, namespace, name string) (*corev1.Secret, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gets++
	data, ok := s.data[name]
	if !ok || namespace != kueueNS {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string][]byte{member.KubeconfigKey: data}}, nil
}

// harness is a running registry over fake members and the Secrets naming them.
type harness struct {
	t       *testing.T
	r       *Registry
	secrets *secrets
	changed chan string
	metrics *metrics.Fleet
}

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	h := &harness{t: t, secrets: &secrets{data: map[string][]byte{}}, changed: make(chan string, 1000), metrics: metrics.NewFleet()}
	opts.Reader = member.Reader{Secret: h.secrets.get, ClusterProfile: func(context.Context, string, string) (*v1alpha1.ClusterProfile, error) {
		return nil, fmt.Errorf("no profiles here")
	}}
	opts.Metrics = h.metrics
	if opts.Backoff == nil {
		opts.Backoff = &wait.Backoff{Duration: 20 * time.Millisecond, Factor: 2, Steps: 1000, Cap: 200 * time.Millisecond}
	}
	if opts.ListTimeout == 0 {
		opts.ListTimeout = 2 * time.Second
	}
	h.r = New(opts)
	h.r.OnChange(func(c string) { h.changed <- c })
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { h.r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	for !h.r.HasSynced() {
		time.Sleep(time.Millisecond)
	}
	return h
}

// member starts a fake member named name and its Secret.
func (h *harness) member(name string, inv *homelabv1.GpuInventory) *testenv.FakeMember {
	m := testenv.StartFakeMember(inv, "token-"+name)
	h.t.Cleanup(m.Close)
	h.secrets.set(name, kubeconfig(h.t, m.URL(), m.CA(), "token-"+name))
	return m
}

// members asks for the MultiKueueClusters names as consumer.
func (h *harness) members(consumer string, names ...string) []fleet.Member {
	var sources []Source
	for _, n := range names {
		sources = append(sources, FromMultiKueueCluster(mkc(n), kueueNS))
	}
	return h.r.Members(context.Background(), consumer, sources, "cluster")
}

// wait asks for names as consumer until check accepts the members, after each change the
// registry tells of.
func (h *harness) wait(what, consumer string, check func([]fleet.Member) error, names ...string) []fleet.Member {
	h.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		got := h.members(consumer, names...)
		err := check(got)
		if err == nil {
			return got
		}
		select {
		case <-h.changed:
		case <-deadline:
			h.t.Fatalf("%s: %v", what, err)
		}
	}
}

// state checks the member named name.
func state(name, state, reason string) func([]fleet.Member) error {
	return func(ms []fleet.Member) error {
		for _, m := range ms {
			if m.Name == name {
				if m.State != state || m.Reason != reason {
					return fmt.Errorf("%s is %s (%s: %s), want %s (%s)", name, m.State, m.Reason, m.Message, state, reason)
				}
				return nil
			}
		}
		return fmt.Errorf("no member %s among %v", name, ms)
	}
}

func TestRegistryFollowsAMembersInventory(t *testing.T) {
	h := newHarness(t, Options{})
	w1 := h.member("w1", inventory(8, 3))
	got := h.wait("w1 read", "fleet", state("w1", homelabv1.MemberReachable, ""), "w1")
	m := got[0]
	if m.MultiKueueCluster != "w1" || m.Server != strings.ToLower(w1.URL()) || m.Inventory == nil || m.Inventory.Status.Allocation.FreeGpus != 3 {
		t.Fatalf("member = %+v", m)
	}
	w1.SetInventory(inventory(8, 5))
	h.wait("w1's change read", "fleet", func(ms []fleet.Member) error {
		if free := ms[0].Inventory.Status.Allocation.FreeGpus; free != 5 {
			return fmt.Errorf("free GPUs %d", free)
		}
		return nil
	}, "w1")
	w1.SetInventory(nil)
	h.wait("w1's inventory gone", "fleet", state("w1", homelabv1.MemberUnreachable, homelabv1.ReasonInventoryNotFound), "w1")
}

// Every way a member can fail to answer is its state, with the reason its row shows; a
// member that answers again is Reachable again, its last-known inventory kept meanwhile.
func TestRegistryStatesOfAMember(t *testing.T) {
	h := newHarness(t, Options{MaxObjectBytes: 1 << 20, ListTimeout: 300 * time.Millisecond})
	w1 := h.member("w1", inventory(8, 3))
	h.wait("w1 read", "fleet", state("w1", homelabv1.MemberReachable, ""), "w1")
	for _, tc := range []struct{ mode, reason string }{
		{testenv.MemberUnauthorized, homelabv1.ReasonUnauthorized},
		{testenv.MemberForbidden, homelabv1.ReasonForbidden},
		{testenv.MemberSlow, member.ReasonAnswerTooSlow},
		{testenv.MemberHuge, homelabv1.ReasonAnswerTooLarge},
		{"stopped", homelabv1.ReasonConnectionFailed},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			if tc.mode == "stopped" {
				w1.Stop()
			} else {
				w1.SetMode(tc.mode)
			}
			got := h.wait("w1 fails", "fleet", state("w1", homelabv1.MemberUnreachable, tc.reason), "w1")
			if got[0].Inventory == nil || got[0].Inventory.Status.TotalGpus != 8 {
				t.Errorf("the last-known inventory was not kept: %+v", got[0].Inventory)
			}
			if since := got[0].Since; time.Since(since) > 15*time.Second {
				t.Errorf("since %s", since)
			}
			if tc.mode == "stopped" {
				if err := w1.Start(); err != nil {
					t.Fatal(err)
				}
			}
			w1.SetMode(testenv.MemberAnswers)
			h.wait("w1 answers again", "fleet", state("w1", homelabv1.MemberReachable, ""), "w1")
		})
	}
	if n := testutilCount(h.metrics, "w1"); n == 0 {
		t.Errorf("no failed read of w1 counted")
	}
}

// A failure that goes on is one state: its since does not move with every try.
func TestRegistryKeepsTheSinceOfAFailure(t *testing.T) {
	h := newHarness(t, Options{})
	w1 := h.member("w1", inventory(8, 3))
	w1.SetMode(testenv.MemberForbidden)
	first := h.wait("w1 forbidden", "fleet", state("w1", homelabv1.MemberUnreachable, homelabv1.ReasonForbidden), "w1")[0]
	tries := w1.Requests()
	for w1.Requests() < tries+3 {
		<-time.After(10 * time.Millisecond) // the reflector retries on its own
	}
	if again := h.members("fleet", "w1")[0]; !again.Since.Equal(first.Since) || again.Message != first.Message {
		t.Errorf("after more tries: since %s, message %q; first %s, %q", again.Since, again.Message, first.Since, first.Message)
	}
}

// Two consumers asking for one member share its reflector; it stops once neither asks.
func TestRegistrySharesAMemberAmongConsumers(t *testing.T) {
	h := newHarness(t, Options{})
	h.member("w1", inventory(8, 3))
	h.wait("w1 read by the fleet", "fleet", state("w1", homelabv1.MemberReachable, ""), "w1")
	h.wait("w1 read by the dispatcher", "dispatch", state("w1", homelabv1.MemberReachable, ""), "w1")
	if n := h.watching(); n != 1 {
		t.Fatalf("%d reflectors for one member", n)
	}
	h.r.Forget("fleet")
	if n := h.watching(); n != 1 {
		t.Fatalf("%d reflectors once the fleet forgot it, want the dispatcher's", n)
	}
	h.members("dispatch")
	if n := h.watching(); n != 0 {
		t.Fatalf("%d reflectors once nobody asks", n)
	}
}

func (h *harness) watching() int {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	return len(h.r.watchers)
}

// A Secret that does not make a usable config is the member's state, never read; one that
// is fixed makes it read.
func TestRegistryBadKubeconfigs(t *testing.T) {
	h := newHarness(t, Options{})
	w1 := h.member("w1", inventory(8, 3))
	h.secrets.set("w1", []byte("not: [a kubeconfig"))
	got := h.wait("w1 malformed", "fleet", state("w1", homelabv1.MemberUnreachable, homelabv1.ReasonMalformedKubeconfig), "w1")
	if !strings.Contains(got[0].Message, "Secret kueue-system/w1") {
		t.Errorf("message %q does not name the Secret", got[0].Message)
	}
	h.wait("w2's Secret missing", "fleet", state("w2", homelabv1.MemberUnreachable, homelabv1.ReasonKubeconfigSecretMissing), "w1", "w2")
	if w1.Requests() != 0 {
		t.Errorf("the member was asked %d times with no usable config", w1.Requests())
	}
	// A fixed Secret is read again when the MultiKueueCluster changes (a Secret is not watched).
	h.secrets.set("w1", kubeconfig(t, w1.URL(), w1.CA(), "token-w1"))
	fixed := mkc("w1")
	fixed.SetResourceVersion("2")
	got = h.r.Members(context.Background(), "fleet", []Source{FromMultiKueueCluster(fixed, kueueNS)}, "cluster")
	if got[0].State != homelabv1.MemberConnecting && got[0].State != homelabv1.MemberReachable {
		t.Errorf("w1 is %s (%s) once its Secret is fixed", got[0].State, got[0].Message)
	}
}

// A token refused (401) makes the hub read the Secret again: a Secret rotated in place is
// picked up without a change of its MultiKueueCluster.
func TestRegistryRereadsRotatedCredentials(t *testing.T) {
	h := newHarness(t, Options{})
	w1 := h.member("w1", inventory(8, 3))
	h.secrets.set("w1", kubeconfig(t, w1.URL(), w1.CA(), "expired"))
	h.wait("w1 refuses the expired token", "fleet", state("w1", homelabv1.MemberUnreachable, homelabv1.ReasonUnauthorized), "w1")
	h.secrets.set("w1", kubeconfig(t, w1.URL(), w1.CA(), "token-w1"))
	h.wait("w1 read with the rotated token", "fleet", state("w1", homelabv1.MemberReachable, ""), "w1")
}

func testutilCount(m *metrics.Fleet, name string) int {
	n := 0
	for _, reason := range []string{homelabv1.ReasonUnauthorized, homelabv1.ReasonForbidden, member.ReasonAnswerTooSlow,
		homelabv1.ReasonAnswerTooLarge, homelabv1.ReasonConnectionFailed} {
		n += int(testutil.ToFloat64(m.MemberReadErrors.WithLabelValues(name, reason)))
	}
	return n
}
