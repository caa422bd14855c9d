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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/crd"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// pluginResult is what one in-process run of `kubectl gpuinv` printed and returned.
type pluginResult struct {
	out, err string
	code     int
}

// runPlugin runs `kubectl gpuinv --kubeconfig kubeconfig args...` in the test process, its
// output not a terminal.
func runPlugin(ctx context.Context, kubeconfig string, args ...string) pluginResult {
	var out, errOut bytes.Buffer
	code := plugin.Run(ctx, append([]string{"--kubeconfig", kubeconfig}, args...), plugin.Environment{
		Out: &out, ErrOut: &errOut, Getenv: func(string) string { return "" }})
	return pluginResult{out.String(), errOut.String(), code}
}

// pluginJSON runs the plugin with -o json and decodes the GpuInventory it prints.
func pluginJSON(t *testing.T, kubeconfig string, args ...string) *homelabv1.GpuInventory {
	t.Helper()
	r := runPlugin(context.Background(), kubeconfig, append(args, "-o", "json")...)
	if r.code != plugin.ExitOK {
		t.Fatalf("kubectl gpuinv %s: exit %d, stderr %s", strings.Join(args, " "), r.code, r.err)
	}
	gi := &homelabv1.GpuInventory{}
	if err := json.Unmarshal([]byte(r.out), gi); err != nil {
		t.Fatalf("kubectl gpuinv %s -o json: %v\n%s", strings.Join(args, " "), err, r.out)
	}
	return gi
}

// ignoreTimes leaves out of a status comparison what depends on when and for which object
// generation it was computed.
var ignoreTimes = cmp.Options{
	cmpopts.IgnoreFields(homelabv1.GpuInventoryStatus{}, "ObservedAt", "ObservedGeneration"),
	cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime", "ObservedGeneration"),
}

func TestPluginScanEqualsOperatorStatus(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	ctx := context.Background()
	// The demo's GPU nodes add MIG, more models and a selector to compare; without kwok they
	// stay NotReady.
	if err := testenv.CreateNodes(ctx, c.kube, fixtures.HealthyNodes()); err != nil {
		t.Fatal(err)
	}
	// scan reads Nodes only: it reports no allocation, so the operator reads no pods here.
	opts := testOptions()
	opts.Allocation = false
	startOperator(t, c.env.Config, opts)
	c.waitTotals(t, "cluster", totals{Nodes: 7, Gpus: 24})
	if _, err := c.gpu.HomelabV1().GpuInventories().Create(ctx, &homelabv1.GpuInventory{
		ObjectMeta: metav1.ObjectMeta{Name: "kwok"},
		Spec:       homelabv1.GpuInventorySpec{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"type": "kwok"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitTotals(t, "kwok", totals{Nodes: 3, Gpus: 23})
	kubeconfig := c.env.KubeconfigPath()

	for _, tc := range []struct {
		inventory string
		scanArgs  []string
	}{
		{"cluster", []string{"scan"}},
		{"kwok", []string{"scan", "--selector", "type=kwok"}},
	} {
		stored := c.inventory(t, tc.inventory)
		scanned := pluginJSON(t, kubeconfig, tc.scanArgs...)
		if diff := cmp.Diff(stored.Status, scanned.Status, ignoreTimes); diff != "" {
			t.Errorf("%s differs from the operator's status of %s (-operator +scan):\n%s", strings.Join(tc.scanArgs, " "), tc.inventory, diff)
		}
		if !cmp.Equal(stored.Spec.NodeSelector, scanned.Spec.NodeSelector) {
			t.Errorf("%s: spec.nodeSelector %v, the inventory's is %v", strings.Join(tc.scanArgs, " "), scanned.Spec.NodeSelector, stored.Spec.NodeSelector)
		}
		// -o json prints the status exactly as stored.
		shown := pluginJSON(t, kubeconfig, tc.inventory)
		if diff := cmp.Diff(stored.Status, shown.Status); diff != "" {
			t.Errorf("kubectl gpuinv %s -o json differs from the stored status (-stored +printed):\n%s", tc.inventory, diff)
		}
	}

	// The tables agree too: the node table of the scan is the inventory's.
	shown := runPlugin(ctx, kubeconfig)
	scanned := runPlugin(ctx, kubeconfig, "scan")
	if shown.code != 0 || scanned.code != 0 {
		t.Fatalf("exit codes %d and %d; stderr %s %s", shown.code, scanned.code, shown.err, scanned.err)
	}
	if a, b := tableFrom(shown.out, "MODEL"), tableFrom(scanned.out, "MODEL"); a != b || a == "" {
		t.Errorf("model summary and node table differ:\n--- kubectl gpuinv\n%s--- kubectl gpuinv scan\n%s", a, b)
	}
}

// tableFrom returns the output from the line starting with header on.
func tableFrom(out, header string) string {
	if i := strings.Index(out, "\n"+header); i >= 0 {
		return out[i+1:]
	}
	return ""
}

func TestPluginWatchSeesNodeFlip(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	startOperator(t, c.env.Config, testOptions())
	c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errOut := &testenv.Buffer{}, &testenv.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- plugin.Run(ctx, []string{"--kubeconfig", c.env.KubeconfigPath(), "--watch"}, plugin.Environment{
			Out: out, ErrOut: errOut, Getenv: func(string) string { return "" }})
	}()
	// The output under test is polled; the plugin itself follows a watch.
	waitLine := func(n int, want string) {
		t.Helper()
		eventually(t, 20*time.Second, fmt.Sprintf("line %d of --watch says %q", n, want), func() error {
			lines := out.Lines()
			if len(lines) < n || !strings.Contains(lines[n-1], want) {
				return fmt.Errorf("output %q, stderr %q", lines, errOut.Lines())
			}
			return nil
		})
	}
	waitLine(1, "cluster: 4 GPU nodes, 0 ready; 1 GPU, 0 ready; degraded: 4 of 4 GPU nodes are not Ready")
	c.setReady(t, "nuc1", corev1.ConditionTrue)
	waitLine(2, "cluster: 4 GPU nodes, 1 ready; 1 GPU, 1 ready; degraded: 3 of 4 GPU nodes are not Ready: nuc2, omen, omen2")
	c.setReady(t, "nuc1", corev1.ConditionFalse)
	waitLine(3, "cluster: 4 GPU nodes, 0 ready; 1 GPU, 0 ready; degraded: 4 of 4 GPU nodes are not Ready")
	cancel()
	select {
	case code := <-done:
		if code != plugin.ExitOK {
			t.Errorf("--watch exited %d when cancelled; stderr %q", code, errOut.Lines())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("--watch did not return within 5s of cancellation")
	}
	if lines := out.Lines(); len(lines) != 3 {
		t.Errorf("--watch printed %d lines for 2 changes, want 3:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

func TestPluginErrorsAndExitCodes(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	ctx := context.Background()
	admin := c.env.KubeconfigPath()

	// No operator, no CRD: the inventory commands say so; scan works.
	for _, args := range [][]string{nil, {"list"}, {"cluster", "--watch"}} {
		r := runPlugin(ctx, admin, args...)
		if want := "error: " + plugin.CRDNotInstalled + "\n"; r.code != plugin.ExitError || r.err != want || r.out != "" {
			t.Errorf("kubectl gpuinv %s without the CRD: exit %d, stderr %q, stdout %q; want exit 1 and %q", strings.Join(args, " "), r.code, r.err, r.out, want)
		}
	}
	if r := runPlugin(ctx, admin, "scan"); r.code != plugin.ExitOK || !strings.Contains(r.out, "GPU nodes:       0/4 ready") {
		t.Errorf("scan without the operator: exit %d, stderr %q, output:\n%s", r.code, r.err, r.out)
	}
	if r := runPlugin(ctx, admin, "scan", "--fail-on-degraded"); r.code != plugin.ExitDegraded {
		t.Errorf("scan --fail-on-degraded on the home lab: exit %d, want %d", r.code, plugin.ExitDegraded)
	}

	// The CRD, but no inventory yet.
	apiext := apiextensionsclient.NewForConfigOrDie(c.env.Config)
	if _, err := crd.Ensure(ctx, apiext.ApiextensionsV1().CustomResourceDefinitions()); err != nil {
		t.Fatal(err)
	}
	if err := crd.WaitEstablished(ctx, apiext.ApiextensionsV1().CustomResourceDefinitions(), homelabv1.CustomResourceDefinitionName, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the plugin sees the CRD", func() error {
		r := runPlugin(ctx, admin)
		if want := "error: GpuInventory \"cluster\" not found; `kubectl gpuinv list` shows the inventories that exist\n"; r.code != plugin.ExitError || r.err != want {
			return fmt.Errorf("exit %d, stderr %q; want exit 1 and %q", r.code, r.err, want)
		}
		return nil
	})

	// A ServiceAccount without any RBAC: the message names the missing permission.
	if _, err := c.kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	saConfig, err := c.env.ServiceAccountConfig(ctx, "default", "nobody")
	if err != nil {
		t.Fatal(err)
	}
	nobody := filepath.Join(t.TempDir(), "kubeconfig")
	if err := c.env.WriteKubeconfig(nobody, saConfig); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, `error: permission denied: kubectl gpuinv needs "get" on gpuinventories in API group "homelab.youngju.dev" (cluster-scoped); ask a cluster admin for a ClusterRole that grants it (` + "`kubectl auth can-i get gpuinventories.homelab.youngju.dev`" + ` checks). The API server said: gpuinventories.homelab.youngju.dev "cluster" is forbidden: User "system:serviceaccount:default:nobody" cannot get resource "gpuinventories" in API group "homelab.youngju.dev" at the cluster scope`},
		{[]string{"list"}, `error: permission denied: kubectl gpuinv needs "list" on gpuinventories in API group "homelab.youngju.dev" (cluster-scoped)`},
		{[]string{"scan"}, `error: permission denied: kubectl gpuinv needs "list" on nodes in the core API group ("") (cluster-scoped); ask a cluster admin for a ClusterRole that grants it (` + "`kubectl auth can-i list nodes`" + ` checks). The API server said: nodes is forbidden: User "system:serviceaccount:default:nobody" cannot list resource "nodes" in API group "" at the cluster scope`},
	} {
		r := runPlugin(ctx, nobody, tc.args...)
		if r.code != plugin.ExitError || !strings.HasPrefix(r.err, tc.want) {
			t.Errorf("kubectl gpuinv %s as a ServiceAccount without RBAC: exit %d, stderr:\n%s\nwant exit 1 and a message starting:\n%s", strings.Join(tc.args, " "), r.code, r.err, tc.want)
		}
	}

	// An API server that does not answer.
	if r := runPlugin(ctx, admin, "--server", "https://127.0.0.1:1"); r.code != plugin.ExitError || !strings.HasPrefix(r.err, "error: cannot reach the Kubernetes API server at https://127.0.0.1:1:") {
		t.Errorf("unreachable server: exit %d, stderr %q", r.code, r.err)
	}

	// With the operator: the home lab's GPU nodes are all NotReady, so it is Degraded.
	startOperator(t, c.env.Config, testOptions())
	c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, plugin.ExitOK},
		{[]string{"--fail-on-degraded"}, plugin.ExitDegraded},
		{[]string{"--fail-on-degraded", "-o", "yaml"}, plugin.ExitDegraded},
		{[]string{"list", "--fail-on-degraded"}, plugin.ExitDegraded},
	} {
		r := runPlugin(ctx, admin, tc.args...)
		if r.code != tc.want || r.err != "" || !strings.Contains(r.out, "cluster") {
			t.Errorf("kubectl gpuinv %s: exit %d (want %d), stderr %q, output:\n%s", strings.Join(tc.args, " "), r.code, tc.want, r.err, r.out)
		}
	}
}
