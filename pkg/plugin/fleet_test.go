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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	gpufake "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned/fake"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
)

// cluster is the fake of one kubeconfig context: its API server's address and a clientset
// serving inventories (the GpuInventory CRD installed when crd is true).
func cluster(host string, crd bool, inventories ...*homelabv1.GpuInventory) *factory.Factory {
	var objs []runtime.Object
	for _, gi := range inventories {
		objs = append(objs, gi.DeepCopy())
	}
	gpu := gpufake.NewClientset(objs...)
	disc := gpu.Discovery().(*fakediscovery.FakeDiscovery)
	if crd {
		disc.Resources = []*metav1.APIResourceList{{GroupVersion: homelabv1.SchemeGroupVersion.String(),
			APIResources: []metav1.APIResource{{Name: "gpuinventories", Kind: "GpuInventory"}}}}
	} else {
		gpu.PrependReactor("*", "gpuinventories", func(action clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewGenericServerResponse(404, action.GetVerb(), homelabv1.Resource("gpuinventories"), "", "", 0, false)
		})
	}
	return &factory.Factory{Base: &rest.Config{Host: host}, Warnings: io.Discard, FakeGPU: fakeGPU{gpu}, FakeDiscovery: disc}
}

// failing makes every request of verb on gpuinventories fail with err.
func failing(c *factory.Factory, verb string, err error) *factory.Factory {
	c.FakeGPU.(fakeGPU).Clientset.PrependReactor(verb, "gpuinventories", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, err
	})
	return c
}

// refused is the error of a request to an API server that nothing listens for.
func refused(host string) error {
	return &url.Error{Op: "Get", URL: host + "/apis/homelab.youngju.dev/v1/gpuinventories/cluster",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
}

// readyNodes are nodes with a Ready condition that is True.
func readyNodes(nodes []*corev1.Node) []*corev1.Node {
	for _, n := range nodes {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue})
	}
	return nodes
}

// fleetFixtures are the inventories of three clusters: prod (the mixed fleet with pods holding
// GPUs: allocation data, Degraded), lab (the home lab, Degraded, no allocation data) and edge
// (the demo's three healthy nodes, whose models prod has too; no allocation data).
func fleetFixtures(t *testing.T) (prod, lab, edge *homelabv1.GpuInventory) {
	nodes, pods, claims := allocatedFleet()
	prod = allocatedInventory(t, "cluster", nodes, mixedFleetPrevious, pods, claims, 0)
	home := fixtures.HomeLab()
	lab = inventoryObject("cluster", home, nil, nil)
	healthy := readyNodes(fixtures.HealthyNodes())
	edge = inventoryObject("cluster", healthy, nil, nil)
	return prod, lab, edge
}

// fleetClients are the kubeconfig contexts of the fleet tests, current context prod, plus
// the given extra ones.
func fleetClients(t *testing.T, extra map[string]*factory.Factory) *factory.Factory {
	prod, lab, edge := fleetFixtures(t)
	fleet := map[string]*factory.Factory{
		"prod": cluster("https://prod.example:6443", true, prod),
		"lab":  cluster("https://lab.example:6443", true, lab),
		"edge": cluster("https://edge.example:6443", true, edge),
	}
	for name, c := range extra {
		fleet[name] = c
	}
	return &factory.Factory{Contexts: fleet, CurrentContext: "prod", Warnings: io.Discard}
}

func TestFleetGolden(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		terminal bool
	}{
		{"table", []string{"--context", "prod,lab", "--context", "edge"}, false},
		{"table-terminal", []string{"--context", "prod,lab,edge"}, true},
		{"wide", []string{"--context", "prod,lab,edge", "-o", "wide"}, false},
		{"problems", []string{"--context", "prod,lab,edge", "--problems"}, false},
		{"all-contexts", []string{"--all-contexts"}, false},
		{"json", []string{"--context", "prod,lab,edge", "-o", "json"}, false},
		{"yaml", []string{"--context", "prod,lab,edge", "-o", "yaml"}, false},
		{"no-allocation", []string{"--context", "lab,edge"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPlugin(context.Background(), fleetClients(t, nil), tc.terminal, nil, tc.args...)
			if r.code != factory.ExitOK || r.err != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.err)
			}
			golden(t, "fleet-"+tc.name+".golden", r.out)
			if tc.terminal {
				plain := runPlugin(context.Background(), fleetClients(t, nil), false, nil, tc.args...)
				if got := ansi.ReplaceAllString(r.out, ""); got != plain.out {
					t.Errorf("terminal output without its colour codes differs from the plain output:\n--- terminal\n%s--- plain\n%s", got, plain.out)
				}
			} else if strings.Contains(r.out, "\x1b") {
				t.Errorf("output to a non-terminal contains escape codes")
			}
		})
	}
}

// Each cluster that cannot be read is one line on stderr naming the context and why; the
// others are printed, and the exit status is 5.
func TestFleetPartial(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	slow := cluster("https://slow.example:6443", true)
	slow.FakeGPU.(fakeGPU).Clientset.PrependReactor("get", "gpuinventories", func(clienttesting.Action) (bool, runtime.Object, error) {
		<-hang // an API server that never answers
		return true, nil, errors.New("unreachable")
	})
	extra := map[string]*factory.Factory{
		"down":   failing(cluster("https://10.0.0.9:6443", true), "get", refused("https://10.0.0.9:6443")),
		"nocrd":  cluster("https://nocrd.example:6443", false),
		"denied": failing(cluster("https://denied.example:6443", true), "get", apierrors.NewForbidden(homelabv1.Resource("gpuinventories"), "cluster", errors.New(`User "dev" cannot get resource "gpuinventories"`))),
		"authn":  failing(cluster("https://authn.example:6443", true), "get", apierrors.NewUnauthorized("Unauthorized")),
		"empty":  cluster("https://empty.example:6443", true),
		"slow":   slow,
	}
	start := time.Now()
	r := runPlugin(context.Background(), fleetClients(t, extra), false, nil,
		"--context", "prod,down,nocrd,denied,authn,empty,slow,lab", "--cluster-timeout", "300ms")
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %s: the silent cluster held the others up", took)
	}
	if r.code != factory.ExitPartial {
		t.Errorf("exit %d, want %d", r.code, factory.ExitPartial)
	}
	want := `error: context "down": cannot reach the API server at https://10.0.0.9:6443 (dial tcp: connect: connection refused)
error: context "nocrd": the GpuInventory CRD is not installed
error: context "denied": permission denied: the user may not get gpuinventories.homelab.youngju.dev (403 Forbidden)
error: context "authn": the API server at https://authn.example:6443 did not accept the credentials (401 Unauthorized)
error: context "empty": GpuInventory "cluster" not found
error: context "slow": no answer from the API server at https://slow.example:6443 within 300ms
`
	if r.err != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", r.err, want)
	}
	golden(t, "fleet-partial.golden", r.out)

	// -o json prints the clusters read, still with exit status 5.
	r = runPlugin(context.Background(), fleetClients(t, extra), false, nil, "--context", "prod,down", "-o", "json")
	if r.code != factory.ExitPartial || r.err != `error: context "down": cannot reach the API server at https://10.0.0.9:6443 (dial tcp: connect: connection refused)`+"\n" {
		t.Errorf("-o json: exit %d, stderr %q", r.code, r.err)
	}
	if got := listContexts(t, r.out); strings.Join(got, ",") != "prod" {
		t.Errorf("-o json lists the inventories of %v, want prod's", got)
	}
}

// listContexts decodes a fleet's -o json and returns the context of each item, checking that
// each is a GpuInventory as stored.
func listContexts(t *testing.T, out string) []string {
	t.Helper()
	var list struct {
		APIVersion string                   `json:"apiVersion"`
		Kind       string                   `json:"kind"`
		Items      []homelabv1.GpuInventory `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if list.APIVersion != "v1" || list.Kind != "List" {
		t.Errorf("-o json is apiVersion %q kind %q, want a v1 List", list.APIVersion, list.Kind)
	}
	var contexts []string
	for _, gi := range list.Items {
		if gi.Kind != "GpuInventory" || gi.APIVersion != homelabv1.SchemeGroupVersion.String() || gi.Name != "cluster" || gi.ManagedFields != nil {
			t.Errorf("item %s %s %s (managedFields %v), want GpuInventory cluster without managed fields", gi.APIVersion, gi.Kind, gi.Name, gi.ManagedFields)
		}
		contexts = append(contexts, gi.Annotations[ContextAnnotation])
	}
	return contexts
}

func TestFleetJSONAndYAMLAreListsOfTheInventories(t *testing.T) {
	prod, lab, _ := fleetFixtures(t)
	r := runPlugin(context.Background(), fleetClients(t, nil), false, nil, "--context", "lab,prod", "-o", "json")
	if r.code != factory.ExitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	if got := listContexts(t, r.out); strings.Join(got, ",") != "lab,prod" {
		t.Errorf("items of contexts %v, want lab,prod in the order given", got)
	}
	y := runPlugin(context.Background(), fleetClients(t, nil), false, nil, "--context", "lab,prod", "-o", "yaml")
	asJSON, err := yaml.YAMLToJSON([]byte(y.out))
	if err != nil {
		t.Fatalf("-o yaml: %v", err)
	}
	var fromJSON, fromYAML any
	if err := json.Unmarshal([]byte(r.out), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(asJSON, &fromYAML); err != nil {
		t.Fatal(err)
	}
	if !equalJSON(fromJSON, fromYAML) {
		t.Errorf("-o yaml and -o json differ:\n%s\n%s", y.out, r.out)
	}
	// Each item's status is the object's, as a single context's -o json prints it.
	var list struct {
		Items []homelabv1.GpuInventory `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.out), &list); err != nil {
		t.Fatal(err)
	}
	for i, want := range []*homelabv1.GpuInventory{lab, prod} {
		got, _ := json.Marshal(list.Items[i].Status)
		wantJSON, _ := json.Marshal(want.Status)
		if string(got) != string(wantJSON) {
			t.Errorf("item %d: status differs from the stored one", i)
		}
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// The clusters are read at once: each answers only when all have been asked.
func TestFleetFetchesInParallel(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f"}
	var asked sync.WaitGroup
	asked.Add(len(names))
	all := make(chan struct{})
	go func() { asked.Wait(); close(all) }()
	fleet := map[string]*factory.Factory{}
	_, _, edge := fleetFixtures(t)
	for _, n := range names {
		c := cluster("https://"+n+".example:6443", true, edge)
		var once sync.Once
		c.FakeGPU.(fakeGPU).Clientset.PrependReactor("get", "gpuinventories", func(clienttesting.Action) (bool, runtime.Object, error) {
			once.Do(asked.Done)
			select {
			case <-all:
				return false, nil, nil // the tracker answers
			case <-time.After(5 * time.Second):
				return true, nil, errors.New("the other clusters were not asked while this one was")
			}
		})
		fleet[n] = c
	}
	r := runPlugin(context.Background(), &factory.Factory{Contexts: fleet}, false, nil, "--all-contexts", "--cluster-timeout", "20s")
	if r.code != factory.ExitOK || r.err != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	if !strings.Contains(r.out, "Clusters:        6 read") {
		t.Errorf("output does not say that all 6 clusters were read:\n%s", r.out)
	}
}

func TestFleetExitCodes(t *testing.T) {
	_, _, edge := fleetFixtures(t)
	extra := map[string]*factory.Factory{
		"down":  failing(cluster("https://10.0.0.9:6443", true), "get", refused("https://10.0.0.9:6443")),
		"down2": failing(cluster("https://10.0.0.10:6443", true), "get", refused("https://10.0.0.10:6443")),
		"edge2": cluster("https://edge2.example:6443", true, edge),
	}
	for _, tc := range []struct {
		args []string
		want int
		// stderr: the start of what it must say (empty: nothing).
		stderr string
	}{
		{[]string{"--context", "prod,lab"}, factory.ExitOK, ""},
		{[]string{"--context", "prod,lab", "--fail-on-degraded"}, factory.ExitDegraded, ""},
		{[]string{"--context", "edge,edge2", "--fail-on-degraded"}, factory.ExitOK, ""},
		{[]string{"--context", "edge,down", "--fail-on-degraded"}, factory.ExitPartial, `error: context "down"`},
		{[]string{"--context", "prod,down", "--fail-on-degraded"}, factory.ExitPartial, `error: context "down"`},
		{[]string{"--context", "prod,down", "--fail-on-degraded", "-o", "yaml"}, factory.ExitPartial, `error: context "down"`},
		{[]string{"--context", "down,down2"}, factory.ExitError, "error: context \"down\": cannot reach the API server at https://10.0.0.9:6443 (dial tcp: connect: connection refused)\nerror: context \"down2\""},
		{[]string{"--all-contexts", "--context", "prod"}, factory.ExitError, "error: --all-contexts reads every context of the kubeconfig: give it or --context, not both"},
		{[]string{"--context", "prod,nope"}, factory.ExitError, `error: context "nope" is not in the kubeconfig; its contexts are: down, down2, edge, edge2, lab, prod`},
		{[]string{"--context", "prod,lab", "--problems", "-o", "json"}, factory.ExitError, "error: --problems filters tables"},
		{[]string{"--context", "prod,lab", "--cluster-timeout", "0s"}, factory.ExitError, "error: --cluster-timeout must be more than 0"},
		{[]string{"nodes", "--context", "prod,lab"}, factory.ExitError, "error: `kubectl gpuinv nodes` reads one cluster: give one --context"},
		{[]string{"free", "--context", "prod", "--context", "lab"}, factory.ExitError, "error: `kubectl gpuinv free` reads one cluster"},
		{[]string{"list", "--all-contexts"}, factory.ExitError, "error: unknown flag: --all-contexts"},
	} {
		r := runPlugin(context.Background(), fleetClients(t, extra), false, nil, tc.args...)
		args := strings.Join(tc.args, " ")
		if r.code != tc.want {
			t.Errorf("kubectl gpuinv %s: exit %d, want %d (stderr %q)", args, r.code, tc.want, r.err)
		}
		if !strings.HasPrefix(r.err, tc.stderr) || (tc.stderr == "") != (r.err == "") {
			t.Errorf("kubectl gpuinv %s: stderr %q, want it to start with %q", args, r.err, tc.stderr)
		}
		if printed := r.out != ""; printed != (tc.want == factory.ExitOK || tc.want == factory.ExitDegraded || tc.want == factory.ExitPartial) {
			t.Errorf("kubectl gpuinv %s: exit %d with stdout %.200q", args, r.code, r.out)
		}
	}
}

// The contexts of a real kubeconfig: one served, one whose credential plugin fails, one that
// nothing listens for and one that never answers, within --request-timeout when only that is
// given.
func TestFleetFromAKubeconfig(t *testing.T) {
	_, _, edge := fleetFixtures(t)
	edge = edge.DeepCopy()
	factory.SetKinds(edge)
	body, err := json.Marshal(edge)
	if err != nil {
		t.Fatal(err)
	}
	served := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/homelab.youngju.dev/v1/gpuinventories/cluster" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	defer served.Close()
	silent := httptest.NewTLSServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer silent.Close()
	kc := clientcmdapi.NewConfig()
	for name, server := range map[string]string{"edge": served.URL, "down": "https://127.0.0.1:1", "silent": silent.URL} {
		kc.Clusters[name] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
		kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: "t"}
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	kc.AuthInfos["broken"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: filepath.Join(t.TempDir(), "no-such-plugin"),
		APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
	kc.Contexts["broken"] = &clientcmdapi.Context{Cluster: "edge", AuthInfo: "broken"}
	kc.CurrentContext = "edge"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := Run(context.Background(), []string{"--kubeconfig", path, "--all-contexts", "--request-timeout", "300ms"},
		factory.Environment{Out: &out, ErrOut: &errOut, Getenv: func(string) string { return "" }, Now: func() time.Time { return now }})
	if code != factory.ExitPartial {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, factory.ExitPartial, errOut.String())
	}
	lines := strings.Split(strings.TrimSuffix(errOut.String(), "\n"), "\n")
	wants := []string{
		`error: context "broken": the request to the API server at ` + served.URL + ` failed: getting credentials: exec: `,
		`error: context "down": cannot reach the API server at https://127.0.0.1:1 (dial tcp 127.0.0.1:1: connect: connection refused)`,
		`error: context "silent": no answer from the API server at ` + silent.URL + ` within 300ms`,
	}
	if len(lines) != len(wants) {
		t.Fatalf("stderr has %d lines, want one per context not read:\n%s", len(lines), errOut.String())
	}
	for i, want := range wants {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("stderr line %d: %q, want it to start with %q", i+1, lines[i], want)
		}
	}
	if !strings.Contains(out.String(), "Clusters:        1 of 4 read\n") || !strings.Contains(out.String(), "\nedge     dgx-h100-1  true") {
		t.Errorf("output without the edge cluster's report:\n%s", out.String())
	}
}

func TestContextCompletion(t *testing.T) {
	r := runPlugin(context.Background(), fleetClients(t, nil), false, nil, "__complete", "--context", "")
	if r.code != factory.ExitOK || !strings.HasPrefix(r.out, "edge\nlab\nprod\n:4\n") {
		t.Errorf("completion of --context: exit %d, output %q, want the kubeconfig's contexts", r.code, r.out)
	}
}
