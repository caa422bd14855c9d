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
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/youngju-dev/gpu-inventory-operator/manifests/helmchart"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/crd"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// The Helm chart, rendered with Helm's library and applied as `helm install` creates its
// objects, runs the operator binary (with its Deployment's args) with nothing but the rights
// the chart gives its ServiceAccount: with the CRD self-install the operator creates the CRDs
// itself, without it the operator uses the chart's CRDs and holds no CRD rights (and, with
// listPodsByNamespace, lists the namespaces to list pods by). Either way it takes the Lease,
// writes the inventory's status, the GpuNode records, the ConfigMap and an Event, and no
// request of it is refused.
func TestHelmChartRunsTheOperatorWithItsOwnRBAC(t *testing.T) {
	for _, tc := range []struct {
		name       string
		values     string
		installCRD bool
		// skipCRDs applies the chart as `helm install --skip-crds` does, so that only the
		// operator can create the CRDs.
		skipCRDs bool
	}{
		{name: "CRD self-install", installCRD: true, skipCRDs: true},
		{name: "installCRD=false", values: "installCRD: false\nlistPodsByNamespace: true\n" +
			"monitoring: {serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}, dcgmRules: {enabled: true}}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			values := map[string]any{}
			if err := yaml.Unmarshal([]byte(tc.values), &values); err != nil {
				t.Fatal(err)
			}

			c := startCluster(t) // the release namespace, as --create-namespace makes it
			c.loadHomeLab(t)
			ctx := context.Background()
			objs, err := helmchart.Render("../../manifests/chart", helmchart.Options{Namespace: operatorNamespace, Values: values, SkipCRDs: tc.skipCRDs})
			if err != nil {
				t.Fatal(err)
			}
			names := keysOf(objs)
			if got := slices.Contains(names, "ClusterRole/gpu-inventory-operator-crd-installer"); got != tc.installCRD {
				t.Errorf("installCRD=%t, yet the chart renders the crd-installer ClusterRole: %t (%v)", tc.installCRD, got, names)
			}
			// The chart's ServiceMonitor and PrometheusRules need the Prometheus Operator's CRDs.
			if _, err := testenv.ApplyManifests(ctx, c.env.Config, "integration-test", "testdata/prometheus-operator-crds"); err != nil {
				t.Fatalf("install the Prometheus Operator CRDs: %v", err)
			}
			// As `helm install` does: Helm 4 applies server-side, as field manager "helm".
			if _, err := testenv.ApplyObjects(ctx, c.env.Config, "helm", objs); err != nil {
				t.Fatalf("apply the chart: %v", err)
			}

			op := startChartOperator(t, c, objs)
			c.waitLeader(t, 30*time.Second, func(h string) bool { return h != "" })
			c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})
			c.waitRecord(t, "nuc1", func(spec homelabv1.GpuNodeSpec) error {
				if spec.GpuCount != 1 {
					return fmt.Errorf("gpuCount %d, want 1", spec.GpuCount)
				}
				return nil
			})
			eventually(t, 20*time.Second, "ConfigMap gpu-node-status holds the four GPU nodes", func() error {
				cm, err := c.kube.CoreV1().ConfigMaps(operatorNamespace).Get(ctx, homelabv1.NodeStatusConfigMapName, metav1.GetOptions{})
				if err == nil && len(cm.Data) != 4 {
					return fmt.Errorf("%d keys", len(cm.Data))
				}
				return err
			})

			// A node that becomes Ready: the status follows and an Event is recorded.
			c.setReady(t, "nuc1", corev1.ConditionTrue)
			c.waitTotals(t, "cluster", totals{Nodes: 4, ReadyNodes: 1, Gpus: 1, ReadyGpus: 1})
			c.waitEvent(t, "cluster", inventory.EventNodeReady)

			// Who installed the CRDs: the operator with the self-install, else the chart.
			apiext := apiextensionsclient.NewForConfigOrDie(c.env.Config)
			for _, name := range crd.Names {
				got, err := apiext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatalf("CRD %s: %v", name, err)
				}
				var managers []string
				for _, m := range got.ManagedFields {
					managers = append(managers, m.Manager)
				}
				if byOperator := slices.Contains(managers, homelabv1.FieldManager); byOperator != tc.installCRD {
					t.Errorf("CRD %s is managed by %v; by the operator: %t, want %t", name, managers, byOperator, tc.installCRD)
				}
			}

			if err := op.stop(); err != nil {
				t.Errorf("operator stopped with %v, want exit status 0 after SIGTERM", err)
			}
			for _, line := range op.output.Lines() {
				if strings.Contains(strings.ToLower(line), "forbidden") {
					t.Errorf("operator log: %s", line)
				}
			}
			if n := forbiddenAnswers(t, c); n != 0 {
				t.Errorf("kube-apiserver answered %d requests with 403 Forbidden", n)
			}
		})
	}
}

// chartOperator is the operator binary run as the chart's Deployment runs it.
type chartOperator struct {
	cmd    *exec.Cmd
	output *testenv.Buffer
	exited chan error
}

// startChartOperator runs the operator binary with the args and POD_NAMESPACE of the
// chart's Deployment, as its ServiceAccount (a token from the TokenRequest API, as the
// kubelet mounts one), on loopback ports; it is killed when the test ends.
func startChartOperator(t *testing.T, c *cluster, objs []*unstructured.Unstructured) *chartOperator {
	t.Helper()
	var deployment *unstructured.Unstructured
	for _, obj := range objs {
		if obj.GetKind() == "Deployment" {
			deployment = obj
		}
	}
	if deployment == nil {
		t.Fatalf("the chart renders no Deployment: %v", keysOf(objs))
	}
	spec, _, _ := unstructured.NestedMap(deployment.Object, "spec", "template", "spec")
	serviceAccount, _ := spec["serviceAccountName"].(string)
	containers, _ := spec["containers"].([]any)
	if serviceAccount == "" || len(containers) != 1 {
		t.Fatalf("Deployment pod spec: serviceAccountName %q, %d containers", serviceAccount, len(containers))
	}
	args, _, err := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	if err != nil {
		t.Fatal(err)
	}

	saConfig, err := c.env.ServiceAccountConfig(context.Background(), deployment.GetNamespace(), serviceAccount)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := c.env.WriteKubeconfig(kubeconfig, saConfig); err != nil {
		t.Fatal(err)
	}
	// Later flags win: the pod's ports would collide with other tests on this machine.
	args = append(args, "--kubeconfig="+kubeconfig, "--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0")
	cmd := exec.Command(operatorBinary, args...)
	cmd.Env = append(os.Environ(), "POD_NAMESPACE="+deployment.GetNamespace())
	op := &chartOperator{cmd: cmd, output: &testenv.Buffer{}, exited: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = op.output, op.output
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { op.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		err := <-op.exited
		op.exited <- err
		if t.Failed() {
			t.Logf("operator output:\n%s", op.output.String())
		}
	})
	return op
}

// stop sends SIGTERM, as the kubelet does, and returns how the process ended.
func (o *chartOperator) stop() error {
	if err := o.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-o.exited:
		o.exited <- err
		return err
	case <-time.After(20 * time.Second):
		return errors.New("still running 20s after SIGTERM")
	}
}

// forbiddenAnswers is the number of requests kube-apiserver has answered with 403, from its
// own apiserver_request_total. The tests' admin is never refused, so every one of them is
// another client's.
func forbiddenAnswers(t *testing.T, c *cluster) int {
	t.Helper()
	body, err := c.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("kube-apiserver /metrics: %v", err)
	}
	total := 0
	seen := false
	scanner := bufio.NewScanner(strings.NewReader(string(body)))
	scanner.Buffer(nil, 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		seen = true
		if !strings.Contains(line, `code="403"`) {
			continue
		}
		n, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("kube-apiserver /metrics: %q: %v", line, err)
		}
		total += int(n)
	}
	if !seen {
		t.Fatal("kube-apiserver /metrics has no apiserver_request_total")
	}
	return total
}

func keysOf(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, obj := range objs {
		out = append(out, obj.GetKind()+"/"+obj.GetName())
	}
	return out
}
