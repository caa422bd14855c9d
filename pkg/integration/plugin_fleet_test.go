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
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// startSharedCluster starts another cluster on base's etcd, under etcd key prefix, with the
// operator's namespace; it stops with the test.
func startSharedCluster(t *testing.T, base *cluster, prefix string) *cluster {
	t.Helper()
	ctx := testContext(t)
	env, err := base.env.StartSharingEtcd(ctx, prefix, testenv.Options{})
	if err != nil {
		t.Fatalf("start a kube-apiserver on etcd prefix %s: %v", prefix, err)
	}
	t.Cleanup(env.Stop)
	c := &cluster{env: env, kube: kubernetes.NewForConfigOrDie(env.Config), gpu: versioned.NewForConfigOrDie(env.Config)}
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return c
}

// writeFleetKubeconfig writes a kubeconfig with one context per entry of servers (its
// server's config), the current one first.
func writeFleetKubeconfig(t *testing.T, current string, servers map[string]*rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	for name, cfg := range servers {
		kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, InsecureSkipTLSVerify: true}
		kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	kc.CurrentContext = current
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// closedPort is a loopback port that nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// Two real clusters with the operator, one without the CRD, one that forbids the read and one
// that nothing answers for: the fleet report has the CLUSTER rows and the summary of the two
// read, a line on stderr for each of the others, and exit status 5. --watch follows a cluster
// whose API server stops and starts again.
func TestPluginFleetAcrossContexts(t *testing.T) {
	home := startCluster(t)
	home.loadHomeLab(t) // 4 GPU nodes, all NotReady: Degraded
	edge := startSharedCluster(t, home, "/fleet-edge")
	nocrd := startSharedCluster(t, home, "/fleet-nocrd")
	ctx := context.Background()
	healthy := fixtures.HealthyNodes()
	for _, n := range healthy {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	}
	if err := testenv.CreateNodes(ctx, edge.kube, healthy); err != nil {
		t.Fatal(err)
	}
	startOperator(t, home.env.Config, testOptions())
	startOperator(t, edge.env.Config, testOptions())
	home.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})
	edge.waitTotals(t, "cluster", totals{Nodes: 3, ReadyNodes: 3, Gpus: 23, ReadyGpus: 23})
	// The clusters share etcd but nothing else.
	if nodes, err := nocrd.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil || len(nodes.Items) != 0 {
		t.Fatalf("the cluster on its own etcd prefix lists %d nodes (%v), want none", len(nodes.Items), err)
	}

	if _, err := home.kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nobody, err := home.env.ServiceAccountConfig(ctx, "default", "nobody")
	if err != nil {
		t.Fatal(err)
	}
	down := closedPort(t)
	kubeconfig := writeFleetKubeconfig(t, "home", map[string]*rest.Config{
		"home":   home.env.Config,
		"edge":   edge.env.Config,
		"nocrd":  nocrd.env.Config,
		"denied": nobody,
		"down":   {Host: "https://127.0.0.1:" + strconv.Itoa(down), BearerToken: "x"},
	})

	r := runPlugin(ctx, kubeconfig, "--all-contexts")
	if r.code != plugin.ExitPartial {
		t.Errorf("--all-contexts: exit %d, want %d (partial)", r.code, plugin.ExitPartial)
	}
	wantErr := `error: context "denied": permission denied: the user may not get gpuinventories.homelab.youngju.dev (403 Forbidden)
error: context "down": cannot reach the API server at https://127.0.0.1:` + strconv.Itoa(down) + ` (dial tcp 127.0.0.1:` + strconv.Itoa(down) + `: connect: connection refused)
error: context "nocrd": the GpuInventory CRD is not installed
`
	if r.err != wantErr {
		t.Errorf("--all-contexts: stderr\n%s\nwant a line per cluster not read:\n%s", r.err, wantErr)
	}
	for _, want := range []string{
		"Clusters:        2 of 5 read\n",
		"GPU nodes:       3/7 ready\n",
		"GPUs:            23/24 ready, 0 unhealthy\n",
		"Degraded:        1 of 2 clusters (home)\n",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("--all-contexts: no %q in the summary:\n%s", want, r.out)
		}
	}
	for _, row := range []struct {
		first string   // the row's first cell
		want  []string // its next cells
	}{
		{"edge", []string{"3/3", "23/23"}},                                            // the clusters' totals
		{"home", []string{"0/4", "0/1"}},                                              //
		{"NVIDIA-H100-80GB-HBM3", []string{"1", "1/1", "8/8"}},                        // models: clusters, ready nodes and GPUs
		{"NVIDIA-GeForce-RTX-4070-Laptop-GPU", []string{"1", "SHARED", "0/1", "0/1"}}, //
		{"edge     dgx-h100-1", []string{"true", "NVIDIA-H100-80GB-HBM3", "8"}},       // node rows with their CLUSTER
		{"home     nuc1", []string{"false", "NVIDIA-GeForce-RTX-4070-Laptop-GPU-SHARED", "1"}},
	} {
		fields := strings.Fields(strings.TrimPrefix(tableRow(r.out, row.first), row.first))
		if len(fields) < len(row.want) || strings.Join(fields[:len(row.want)], " ") != strings.Join(row.want, " ") {
			t.Errorf("--all-contexts: row %q is %q, want it to go on with %q:\n%s", row.first, tableRow(r.out, row.first), row.want, r.out)
		}
	}
	if rows := strings.Count(r.out, "\nedge     ") + strings.Count(r.out, "\nhome     "); rows != 2+7 {
		t.Errorf("--all-contexts: %d rows of edge and home, want 2 cluster rows and 7 node rows:\n%s", rows, r.out)
	}

	// Only the clusters that answer: exit 0, or 3 when asked to fail on Degraded.
	if r := runPlugin(ctx, kubeconfig, "--context", "home,edge"); r.code != plugin.ExitOK || r.err != "" {
		t.Errorf("--context home,edge: exit %d, stderr %q", r.code, r.err)
	}
	if r := runPlugin(ctx, kubeconfig, "--context", "home", "--context", "edge", "--fail-on-degraded"); r.code != plugin.ExitDegraded {
		t.Errorf("--fail-on-degraded with home Degraded: exit %d, want %d", r.code, plugin.ExitDegraded)
	}
	// Every cluster failing is an error, as for one cluster.
	if r := runPlugin(ctx, kubeconfig, "--context", "down,nocrd"); r.code != plugin.ExitError || r.out != "" || strings.Count(r.err, "\n") != 2 {
		t.Errorf("--context down,nocrd: exit %d, stdout %q, stderr %q; want exit 1 and two lines", r.code, r.out, r.err)
	}
	// One context is the single report, as before.
	if r := runPlugin(ctx, kubeconfig, "--context", "edge"); r.code != plugin.ExitOK || !strings.HasPrefix(r.out, "Name:            cluster\n") || strings.Contains(r.out, "CLUSTER") {
		t.Errorf("--context edge: exit %d, stderr %q, output:\n%s", r.code, r.err, r.out)
	}

	// -o json: a v1 List of the inventories read, each annotated with its context.
	j := runPlugin(ctx, kubeconfig, "--all-contexts", "-o", "json")
	var list struct {
		APIVersion, Kind string
		Items            []homelabv1.GpuInventory
	}
	if err := json.Unmarshal([]byte(j.out), &list); err != nil || j.code != plugin.ExitPartial {
		t.Fatalf("-o json: exit %d, %v:\n%s", j.code, err, j.out)
	}
	if list.APIVersion != "v1" || list.Kind != "List" || len(list.Items) != 2 {
		t.Fatalf("-o json: %s %s with %d items, want a v1 List of 2", list.APIVersion, list.Kind, len(list.Items))
	}
	for i, want := range []struct {
		context string
		c       *cluster
	}{{"edge", edge}, {"home", home}} {
		gi := list.Items[i]
		stored := want.c.inventory(t, "cluster")
		if gi.Annotations[plugin.ContextAnnotation] != want.context || gi.Kind != "GpuInventory" || gi.Status.InventoryHash != stored.Status.InventoryHash {
			t.Errorf("item %d: %s annotated %q, hash %s; want the GpuInventory of %s (hash %s)", i, gi.Kind, gi.Annotations[plugin.ContextAnnotation],
				gi.Status.InventoryHash, want.context, stored.Status.InventoryHash)
		}
	}

	// --watch: a change in one cluster, the other's API server stopping and starting again.
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	out, errOut := &testenv.Buffer{}, &testenv.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- plugin.Run(watchCtx, []string{"--kubeconfig", kubeconfig, "--context", "home,edge", "--watch"}, plugin.Environment{
			Out: out, ErrOut: errOut, Getenv: func(string) string { return "" }})
	}()
	waitOutput := func(timeout time.Duration, want string) {
		t.Helper()
		eventually(t, timeout, fmt.Sprintf("--watch prints %q", want), func() error {
			if !strings.Contains(out.String(), want) {
				return fmt.Errorf("output:\n%s\nstderr: %s", out.String(), errOut.String())
			}
			return nil
		})
	}
	waitOutput(20*time.Second, "[edge] cluster: 3 GPU nodes, 3 ready")
	home.setReady(t, "nuc1", corev1.ConditionTrue)
	waitOutput(20*time.Second, "[home] cluster: 4 GPU nodes, 1 ready; 1 GPU, 1 ready")
	if err := edge.env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	waitOutput(30*time.Second, "[edge] cannot reach the API server at "+edge.env.Config.Host)
	if err := edge.env.StartAPIServer(testContext(t)); err != nil {
		t.Fatal(err)
	}
	// client-go's reflector retries with a backoff that grows to 30 s (and jitter).
	waitOutput(90*time.Second, "[edge] reconnected")
	cancel()
	select {
	case code := <-done:
		if code != plugin.ExitOK {
			t.Errorf("--watch exited %d when stopped with both clusters read; stderr %q", code, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("--watch did not return within 10s of cancellation")
	}
	if errOut.String() != "" {
		t.Errorf("--watch stderr %q, want nothing: the changes are its output", errOut.String())
	}
}

// tableRow returns the line of out that starts with first.
func tableRow(out, first string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, first) {
			return line
		}
	}
	return ""
}
