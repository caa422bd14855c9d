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
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	hubapp "github.com/youngju-dev/gpu-inventory-operator/cmd/gpu-fleet-hub/app"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/member"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/memberwatch"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

const (
	hubNamespace    = "gpu-fleet-system"
	kueueNamespace  = "kueue-system"
	profileNS       = "fleet"
	readerAccount   = "gpu-fleet-hub-reader"
	testFleet       = "training"
	memberMaxObject = 1 << 20
)

// fleetBed is a hub cluster with its RBAC from manifests/hub and member clusters on its etcd,
// each with the operator and manifests/hub/member; the hub runs with only its RBAC.
type fleetBed struct {
	hub       *cluster
	dyn       dynamic.Interface
	members   map[string]*cluster
	tokens    map[string]string // the member reader's token on each member
	cas       map[string][]byte // each member's serving CA
	hubConfig *rest.Config      // the hub ServiceAccount's
	forbidden *forbiddenRecorder
	hubApp    *hubapp.Hub
	stopHub   func()
}

var mkcGVR = memberwatch.MultiKueueClusterGVR

// startFleetBed starts the hub cluster and members, names w1 by a ClusterProfile (the
// secretreader plugin's token Secret) and w2 by a MultiKueueCluster (a kubeconfig Secret),
// creates the GpuFleet training over both, and runs the hub with only its RBAC.
func startFleetBed(t *testing.T, members ...string) *fleetBed {
	t.Helper()
	ctx := testContext(t)
	hub := startCluster(t)
	if err := hub.env.InstallKueueCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	if err := hub.env.InstallClusterProfileCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{kueueNamespace, profileNS} {
		hub.ensureNamespace(t, ns)
	}
	b := newFleetBed(t, hub, "resources: [%[1]s/hub]\ncomponents: [%[1]s/hub/multikueue]\n")
	for _, name := range members {
		b.startMember(t, name)
	}
	b.runHub(t, false)
	b.createFleet(t, homelabv1.GpuFleetSpec{ClusterProfiles: &homelabv1.FleetClusterProfiles{Namespace: profileNS}, MultiKueue: &homelabv1.FleetMultiKueue{}})
	return b
}

// newFleetBed is a bed whose hub cluster is hub, with the hub's RBAC from the kustomization
// overlay (applyOverlay) and the hub ServiceAccount's config; no member yet.
func newFleetBed(t *testing.T, hub *cluster, overlay string) *fleetBed {
	t.Helper()
	b := &fleetBed{hub: hub, dyn: dynamic.NewForConfigOrDie(hub.env.Config), members: map[string]*cluster{}, tokens: map[string]string{},
		cas: map[string][]byte{}, forbidden: &forbiddenRecorder{}}
	applyOverlay(t, hub, overlay)
	hubConfig, err := hub.env.ServiceAccountConfig(testContext(t), hubNamespace, "gpu-fleet-hub")
	if err != nil {
		t.Fatal(err)
	}
	b.hubConfig = hubConfig
	return b
}

// createFleet creates the GpuFleet training once the hub has installed its CRD.
func (b *fleetBed) createFleet(t *testing.T, spec homelabv1.GpuFleetSpec) {
	t.Helper()
	eventually(t, 30*time.Second, "the hub installs the GpuFleet CRD", func() error {
		_, err := b.hub.gpu.HomelabV1().GpuFleets().Create(testContext(t), &homelabv1.GpuFleet{ObjectMeta: metav1.ObjectMeta{Name: testFleet}, Spec: spec},
			metav1.CreateOptions{})
		return err
	})
}

// applyOverlay applies a kustomization (overlay, with %[1]s the path of manifests/) to c.
func applyOverlay(t *testing.T, c *cluster, overlay string) {
	t.Helper()
	dir := t.TempDir()
	manifests, err := filepath.Abs("../../manifests")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, manifests)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(fmt.Sprintf(overlay, rel)), 0o644); err != nil {
		t.Fatal(err)
	}
	objs, err := testenv.Kustomize(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.ApplyObjects(testContext(t), c.env.Config, "integration-test", objs); err != nil {
		t.Fatalf("apply %s: %v", overlay, err)
	}
}

// startMember starts a member cluster on the hub's etcd with the home lab, the operator and
// the member reader.
func (b *fleetBed) startMember(t *testing.T, name string) {
	t.Helper()
	c := startSharedCluster(t, b.hub, "/"+name)
	c.loadHomeLab(t)
	startOperator(t, c.env.Config, testOptions())
	b.addMember(t, name, c)
	c.waitTotals(t, homelabv1.DefaultInventoryName, totals{Nodes: 4, Gpus: 1})
}

// addMember makes c the member name: the member reader (manifests/hub/member) on it, whose
// token the bed keeps with c's serving CA.
func (b *fleetBed) addMember(t *testing.T, name string, c *cluster) {
	t.Helper()
	applyOverlay(t, c, "resources: [%s/hub/member]\n")
	reader, err := c.env.ServiceAccountConfig(testContext(t), operatorNamespace, readerAccount)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := c.env.ServingCA()
	if err != nil {
		t.Fatal(err)
	}
	b.members[name], b.tokens[name], b.cas[name] = c, reader.BearerToken, ca
}

// runHub runs the hub in the test process as its ServiceAccount, with the secretreader
// plugin of its binary as the access provider; with dispatch, as MultiKueue's dispatcher.
func (b *fleetBed) runHub(t *testing.T, dispatch bool) {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "hub-kubeconfig")
	if err := b.hub.env.WriteKubeconfig(kubeconfig, b.hubConfig); err != nil {
		t.Fatal(err)
	}
	providers, _ := json.Marshal(map[string]any{"providers": []any{map[string]any{"name": member.SecretReaderProvider,
		"execConfig": map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "command": hubBinary,
			"args": []string{"secretreader", "--kubeconfig=" + kubeconfig, "--namespace=" + hubNamespace}, "provideClusterInfo": true}}}})
	providerFile := filepath.Join(dir, "providers.json")
	if err := os.WriteFile(providerFile, providers, 0o600); err != nil {
		t.Fatal(err)
	}
	opts := hubapp.NewOptions()
	opts.Namespace, opts.ClusterProfileProviderFile, opts.MemberMaxObjectBytes = hubNamespace, providerFile, memberMaxObject
	opts.MetricsAddress, opts.HealthAddress, opts.LeaderElect = "127.0.0.1:0", "127.0.0.1:0", true
	opts.Dispatch, opts.MemberListTimeout = dispatch, 5*time.Second
	opts.MemberBackoff = &wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: 1000, Cap: 2 * time.Second}
	h, err := hubapp.NewForConfig(opts, b.forbidden.wrap(b.hubConfig), hubNamespace)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), testLogger(t)))
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	b.hubApp = h
	b.stopHub = func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the hub stopped with %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("the hub did not stop within 5s of cancellation")
		}
	}
	t.Cleanup(func() { b.stopHub() })
}

// profile names a cluster at server by a ClusterProfile fleet/name whose access provider is
// secretreader, with a token Secret of the hub (clusterName: name); no token: no Secret.
func (b *fleetBed) profile(t *testing.T, name, server string, ca []byte, token string) {
	t.Helper()
	if token != "" {
		b.secret(t, hubNamespace, name, map[string][]byte{"token": []byte(token)})
	}
	if err := testenv.CreateClusterProfile(testContext(t), b.hub.env.Config, profileNS, name, nil, server, ca); err != nil {
		t.Fatal(err)
	}
}

// multiKueueCluster names a cluster by a MultiKueueCluster whose kubeconfig is the Secret
// kueue-system/name holding kubeconfig.
func (b *fleetBed) multiKueueCluster(t *testing.T, name string, kubeconfig []byte) {
	t.Helper()
	b.secret(t, kueueNamespace, name, map[string][]byte{member.KubeconfigKey: kubeconfig})
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"clusterSource": map[string]any{"kubeConfig": map[string]any{"location": name, "locationType": "Secret"}}}}}
	if _, err := b.dyn.Resource(mkcGVR).Create(testContext(t), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (b *fleetBed) secret(t *testing.T, namespace, name string, data map[string][]byte) {
	t.Helper()
	if _, err := b.hub.kube.CoreV1().Secrets(namespace).Create(testContext(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Data: data}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// kubeconfigFor is a kubeconfig of server, trusting ca, with token.
func kubeconfigFor(t *testing.T, server string, ca []byte, token string) []byte {
	t.Helper()
	data, err := testenv.Kubeconfig(server, ca, token)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// fleet is the GpuFleet's status now.
func (b *fleetBed) fleet(t *testing.T) *homelabv1.GpuFleetStatus {
	t.Helper()
	gf, err := b.hub.gpu.HomelabV1().GpuFleets().Get(testContext(t), testFleet, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &gf.Status
}

// waitRows waits until every named member's row is in the state (and reason) wanted,
// "State" or "State/Reason".
func (b *fleetBed) waitRows(t *testing.T, timeout time.Duration, want map[string]string) *homelabv1.GpuFleetStatus {
	t.Helper()
	var st *homelabv1.GpuFleetStatus
	eventually(t, timeout, fmt.Sprintf("rows %v", want), func() error {
		st = b.fleet(t)
		for name, w := range want {
			r := testenv.FleetRow(st, name)
			if r == nil {
				return fmt.Errorf("no row %s", name)
			}
			if got := strings.TrimSuffix(r.State+"/"+r.Reason, "/"); got != w {
				return fmt.Errorf("%s is %s (%s), want %s", name, got, r.Message, w)
			}
		}
		return nil
	})
	return st
}

func rowJSONOf(t *testing.T, st *homelabv1.GpuFleetStatus, name string) string {
	t.Helper()
	data, err := json.Marshal(testenv.FleetRow(st, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// The fleet hub on real API servers, with only its RBAC: a member through a ClusterProfile
// (the secretreader plugin's token), one through a MultiKueueCluster (a kubeconfig Secret);
// a member's change shows in its row; a member's API server stopped and started again is
// Unreachable then Reachable, and only its row moves; bad input of every kind is a row
// naming the member, never a stop of the rest; credentials refused are Unauthorized.
func TestFleetHub(t *testing.T) {
	b := startFleetBed(t, "w1", "w2")
	w1, w2 := b.members["w1"], b.members["w2"]
	b.profile(t, "w1", w1.env.Config.Host, b.cas["w1"], b.tokens["w1"])
	b.multiKueueCluster(t, "w2", kubeconfigFor(t, w2.env.Config.Host, b.cas["w2"], b.tokens["w2"]))

	st := b.waitRows(t, 60*time.Second, map[string]string{"fleet/w1": homelabv1.MemberReachable, "w2": homelabv1.MemberReachable})
	if r := testenv.FleetRow(st, "fleet/w1"); r.ClusterProfile != "fleet/w1" || r.Gpus != 1 || r.Server != strings.ToLower(w1.env.Config.Host) {
		t.Errorf("w1's row: %+v", r)
	}
	if r := testenv.FleetRow(st, "w2"); r.MultiKueueCluster != "w2" || r.Gpus != 1 {
		t.Errorf("w2's row: %+v", r)
	}
	if st.TotalGpus != 2 || st.TotalMembers != 2 || st.ReachableMembers != 2 {
		t.Errorf("totals: %d GPUs, %d members, %d reachable", st.TotalGpus, st.TotalMembers, st.ReachableMembers)
	}

	t.Run("a member's change shows in its row", func(t *testing.T) {
		before := rowJSONOf(t, b.fleet(t), "w2")
		w1.setReady(t, "nuc1", corev1.ConditionTrue)
		eventually(t, 30*time.Second, "w1's ready GPU in its row", func() error {
			if r := testenv.FleetRow(b.fleet(t), "fleet/w1"); r.ReadyGpus != 1 {
				return fmt.Errorf("w1 has %d ready GPUs", r.ReadyGpus)
			}
			return nil
		})
		if after := rowJSONOf(t, b.fleet(t), "w2"); after != before {
			t.Errorf("w2's row moved:\n%s\nwas\n%s", after, before)
		}
	})

	t.Run("a member stopped and started again", func(t *testing.T) {
		before := rowJSONOf(t, b.fleet(t), "w2")
		if err := w1.env.StopAPIServer(); err != nil {
			t.Fatal(err)
		}
		st := b.waitRows(t, 90*time.Second, map[string]string{"fleet/w1": homelabv1.MemberUnreachable + "/" + homelabv1.ReasonConnectionFailed})
		if c := meta.FindStatusCondition(st.Conditions, homelabv1.ConditionMembersUnreachable); c == nil || !strings.Contains(c.Message, "fleet/w1 (ConnectionFailed)") {
			t.Errorf("MembersUnreachable = %+v", c)
		}
		if st.TotalGpus != 2 {
			t.Errorf("w1's last-known GPUs left the totals before it was stale: %d", st.TotalGpus)
		}
		if err := w1.env.StartAPIServer(testContext(t)); err != nil {
			t.Fatal(err)
		}
		b.waitRows(t, 90*time.Second, map[string]string{"fleet/w1": homelabv1.MemberReachable})
		if after := rowJSONOf(t, b.fleet(t), "w2"); after != before {
			t.Errorf("w2's row moved:\n%s\nwas\n%s", after, before)
		}
	})

	t.Run("bad input is a row naming the member", func(t *testing.T) {
		b.badInput(t)
	})

	t.Run("the hub's metrics serve what its alerts read", func(t *testing.T) {
		checkHubMetrics(t, b.hubApp.MetricsAddress(), false)
	})

	t.Run("least privilege", func(t *testing.T) {
		b.checkMemberReader(t, w2)
		if forbidden := b.forbidden.requests(); len(forbidden) != 0 {
			t.Errorf("the hub made requests its RBAC does not allow:\n%v", forbidden)
		}
	})

	t.Run("credentials refused", func(t *testing.T) {
		before := rowJSONOf(t, b.fleet(t), "fleet/w1")
		if err := w2.kube.CoreV1().ServiceAccounts(operatorNamespace).Delete(testContext(t), readerAccount, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// An open watch outlives its token: the restart makes the hub ask again.
		if err := w2.env.StopAPIServer(); err != nil {
			t.Fatal(err)
		}
		if err := w2.env.StartAPIServer(testContext(t)); err != nil {
			t.Fatal(err)
		}
		st := b.waitRows(t, 90*time.Second, map[string]string{"w2": homelabv1.MemberUnreachable + "/" + homelabv1.ReasonUnauthorized})
		if r := testenv.FleetRow(st, "w2"); !strings.Contains(r.Message, "refused the hub's credentials") {
			t.Errorf("w2's message: %s", r.Message)
		}
		if after := rowJSONOf(t, st, "fleet/w1"); after != before {
			t.Errorf("w1's row moved:\n%s\nwas\n%s", after, before)
		}
	})
}

// badInput names members in every bad way at once: each is a row with its reason, w1 and
// w2 read as before.
func (b *fleetBed) badInput(t *testing.T) {
	w1 := b.members["w1"]
	before := b.fleet(t)
	// A ClusterProfile without a usable access provider.
	b.profile(t, "no-provider", "", nil, "")
	// A member that answers with a 100 MiB object; one that refuses the token it is given.
	huge := testenv.StartFakeMember(&homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}, "huge-token")
	t.Cleanup(huge.Close)
	huge.SetMode(testenv.MemberHuge)
	b.profile(t, "huge", huge.URL(), huge.CA(), "huge-token")
	refusing := testenv.StartFakeMember(&homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}, "the-right-token")
	t.Cleanup(refusing.Close)
	b.profile(t, "wrong-token", refusing.URL(), refusing.CA(), "a-wrong-token")
	// Two profiles naming the same cluster.
	b.profile(t, "w1-again", w1.env.Config.Host, b.cas["w1"], b.tokens["w1"])
	// A malformed kubeconfig Secret; one pointing at a dead address.
	b.multiKueueCluster(t, "broken", []byte("{this is not a kubeconfig"))
	b.multiKueueCluster(t, "dead", kubeconfigFor(t, "https://"+freeAddress(t), b.cas["w1"], "token"))

	st := b.waitRows(t, 90*time.Second, map[string]string{
		"fleet/no-provider": homelabv1.MemberUnreachable + "/" + homelabv1.ReasonNoUsableAccessProvider,
		"fleet/huge":        homelabv1.MemberUnreachable + "/" + homelabv1.ReasonAnswerTooLarge,
		"fleet/wrong-token": homelabv1.MemberUnreachable + "/" + homelabv1.ReasonUnauthorized,
		"fleet/w1-again":    homelabv1.MemberDuplicate + "/" + homelabv1.ReasonSameCluster,
		"broken":            homelabv1.MemberUnreachable + "/" + homelabv1.ReasonMalformedKubeconfig,
		"dead":              homelabv1.MemberUnreachable + "/" + homelabv1.ReasonConnectionFailed,
		"fleet/w1":          homelabv1.MemberReachable,
		"w2":                homelabv1.MemberReachable,
	})
	for _, name := range []string{"fleet/w1", "w2"} {
		if got, was := rowJSONOf(t, st, name), rowJSONOf(t, before, name); got != was {
			t.Errorf("%s's row moved:\n%s\nwas\n%s", name, got, was)
		}
	}
	if st.TotalGpus != 2 {
		t.Errorf("the totals count %d GPUs, want w1's and w2's 2", st.TotalGpus)
	}
	for typ, words := range map[string][]string{
		homelabv1.ConditionMembersUnreachable: {"fleet/huge (AnswerTooLarge)", "broken (MalformedKubeconfig)"},
		homelabv1.ConditionDuplicateMembers:   {"fleet/w1-again: the same cluster as member fleet/w1"},
	} {
		c := meta.FindStatusCondition(st.Conditions, typ)
		for _, w := range words {
			if c == nil || !strings.Contains(c.Message, w) {
				t.Errorf("%s = %+v, want it to say %q", typ, c, w)
			}
		}
	}
	if r := testenv.FleetRow(st, "fleet/no-provider"); !strings.Contains(r.Message, "lists no access provider") {
		t.Errorf("no-provider's message: %s", r.Message)
	}
	if r := testenv.FleetRow(st, "fleet/huge"); !strings.Contains(r.Message, "--member-max-object-bytes") {
		t.Errorf("huge's message: %s", r.Message)
	}
}

// checkMemberReader: the member reader's token reads the inventory "cluster" (list and
// watch by name, as the hub does) and is refused anything else.
func (b *fleetBed) checkMemberReader(t *testing.T, c *cluster) {
	t.Helper()
	ctx := testContext(t)
	cfg := rest.CopyConfig(c.env.Config)
	cfg.BearerToken = b.tokens["w2"]
	reader := dynamic.NewForConfigOrDie(cfg)
	inventories := reader.Resource(homelabv1.SchemeGroupVersion.WithResource("gpuinventories"))
	byName := metav1.ListOptions{FieldSelector: "metadata.name=" + homelabv1.DefaultInventoryName}
	if _, err := inventories.List(ctx, byName); err != nil {
		t.Errorf("the member reader cannot list the inventory by name: %v", err)
	}
	w, err := inventories.Watch(ctx, byName)
	if err != nil {
		t.Errorf("the member reader cannot watch the inventory by name: %v", err)
	} else {
		w.Stop()
	}
	for what, try := range map[string]func() error{
		"list every inventory": func() error { _, err := inventories.List(ctx, metav1.ListOptions{}); return err },
		"get another inventory": func() error {
			_, err := inventories.Get(ctx, "other", metav1.GetOptions{})
			return err
		},
		"list nodes": func() error {
			_, err := reader.Resource(corev1.SchemeGroupVersion.WithResource("nodes")).List(ctx, metav1.ListOptions{})
			return err
		},
		"get a Secret": func() error {
			_, err := reader.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(operatorNamespace).Get(ctx, "any", metav1.GetOptions{})
			return err
		},
	} {
		if err := try(); !apierrors.IsForbidden(err) {
			t.Errorf("the member reader may %s: %v", what, err)
		}
	}
}

// checkHubMetrics: every metric the hub's alerts read is on its /metrics (the dispatch group
// only where the hub dispatches).
func checkHubMetrics(t *testing.T, addr string, dispatching bool) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	objs, err := testenv.ReadManifests("../../manifests/monitoring/hub/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	groups, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "groups")
	metric := regexp.MustCompile(`gpu_fleet_[a-z_]+`)
	var named []string
	for _, g := range groups {
		if name, _, _ := unstructured.NestedString(g.(map[string]any), "name"); name == "gpu-fleet.dispatch" && !dispatching {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			expr, _, _ := unstructured.NestedString(r.(map[string]any), "expr")
			named = append(named, metric.FindAllString(expr, -1)...)
		}
	}
	slices.Sort(named)
	for _, name := range slices.Compact(named) {
		if !regexp.MustCompile(`(?m)^` + name + `[{ ]`).Match(body) {
			t.Errorf("the hub's /metrics has no %s, which its alerts read", name)
		}
	}
}

// After SIGTERM the hub process exits with status 0 within a second, every time: with and
// without leader election, once ready and while it starts.
func TestHubExitsWithinASecondOfSIGTERM(t *testing.T) {
	c := startCluster(t)
	cases := []struct {
		args  []string
		after time.Duration
	}{
		{nil, 0}, {[]string{"--leader-elect"}, 0}, {nil, 100 * time.Millisecond}, {[]string{"--leader-elect"}, 100 * time.Millisecond},
		{[]string{"--leader-elect"}, 300 * time.Millisecond},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprintf("run %d %v after %s", i, tc.args, tc.after), func(t *testing.T) {
			took, out, err := stopProcessAfter(t, hubBinary, append([]string{"--kubeconfig=" + c.env.KubeconfigPath(),
				"--namespace=" + operatorNamespace, "--metrics-bind-address=0"}, tc.args...), tc.after)
			if err != nil {
				t.Fatalf("exited with %v after SIGTERM, want status 0\n%s", err, out.String())
			}
			if took > exitWithin {
				t.Errorf("exited %s after SIGTERM, want within %s\n%s", took.Round(time.Millisecond), exitWithin, out.String())
			}
		})
	}
}
