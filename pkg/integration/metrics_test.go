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
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// waitReadyz waits until op's /readyz answers code with a body that contains text.
func waitReadyz(t *testing.T, op *runningOperator, timeout time.Duration, code int, text string) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("/readyz %d %q", code, text), func() error {
		got, body, err := get("http://" + op.HealthAddress() + "/readyz")
		if err != nil || got != code || !strings.Contains(body, text) {
			return fmt.Errorf("%d %q %v", got, body, err)
		}
		return nil
	})
}

// The /metrics endpoint of a running operator, on the home lab: names, types and values.
func TestMetricsAndHealthEndpoints(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	// A pod holding a share of nuc1's GPU and one waiting for any GPU, so that the allocation
	// series the alerts read exist.
	c.createPod(t, gpuPod("ml", "notebook", "nuc1", "nvidia.com/gpu", 1))
	c.createPod(t, gpuPod("ml", "waiting", "", "nvidia.com/gpu", 1))
	// A ResourceQuota promising more GPUs than are Ready, so that the quota series exist.
	gpuQuota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "gpus"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("4")}}}
	if _, err := c.kube.CoreV1().ResourceQuotas("ml").Create(context.Background(), gpuQuota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	op := startOperator(t, c.env.Config, testOptions())
	c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})

	eventually(t, 20*time.Second, "/readyz answers ok", func() error {
		addr := op.HealthAddress()
		if addr == "" {
			return fmt.Errorf("health server not started")
		}
		code, body, err := get("http://" + addr + "/readyz")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("%d %q %v", code, body, err)
		}
		return nil
	})
	if code, body, err := get("http://" + op.HealthAddress() + "/healthz"); err != nil || code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz = %d %q %v, want 200 ok", code, body, err)
	}

	var text string
	eventually(t, 20*time.Second, "metrics reflect the home lab", func() error {
		code, body, err := get("http://" + op.MetricsAddress() + "/metrics")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("%d %v", code, err)
		}
		text = body
		if !strings.Contains(text, `gpu_inventory_status_writes_total{inventory="cluster",outcome="written"}`) {
			return fmt.Errorf("no status write counted yet")
		}
		if !strings.Contains(text, `gpu_inventory_pending_gpus{`) {
			return fmt.Errorf("no pending GPUs exported yet")
		}
		if !strings.Contains(text, `finding="Overcommitted"`) {
			return fmt.Errorf("no quota finding exported yet")
		}
		return nil
	})
	for _, want := range []string{
		"# TYPE gpu_inventory_gpu_nodes gauge",
		`gpu_inventory_gpu_nodes{inventory="cluster",ready="false"} 4`,
		`gpu_inventory_gpu_nodes{inventory="cluster",ready="true"} 0`,
		`gpu_inventory_gpus{inventory="cluster",ready="false"} 1`,
		`gpu_inventory_model_gpus{inventory="cluster",product="NVIDIA-GeForce-RTX-4070-Laptop-GPU",ready="false"} 1`,
		`gpu_inventory_unhealthy_gpus{inventory="cluster"} 0`,
		`gpu_inventory_labels_missing_nodes{inventory="cluster"} 0`,
		"# TYPE gpu_inventory_allocated_gpus gauge",
		`gpu_inventory_allocated_gpus{inventory="cluster",product="NVIDIA-GeForce-RTX-4070-Laptop-GPU"} 1`,
		`gpu_inventory_free_gpus{inventory="cluster",product="NVIDIA-GeForce-RTX-4070-Laptop-GPU"} 0`, // nuc1 is NotReady
		`gpu_inventory_pending_gpus{inventory="cluster",product=""} 1`,
		`gpu_inventory_pending_oldest_timestamp_seconds{inventory="cluster",product=""} `,
		`gpu_inventory_namespace_gpus{inventory="cluster",namespace="ml"} 1`,
		`gpu_inventory_quota_stranded_nodes{inventory="cluster"} 0`,
		`gpu_inventory_quota_unknown{inventory="cluster"} 0`,
		"# TYPE gpu_inventory_leader gauge",
		"gpu_inventory_leader 1",
		"# TYPE gpu_inventory_syncs_total counter",
		`gpu_inventory_syncs_total{controller="gpuinventory",result="success"}`,
		"# TYPE gpu_inventory_sync_duration_seconds histogram",
		"# TYPE gpu_inventory_last_successful_sync_timestamp_seconds gauge",
		`gpu_inventory_last_successful_sync_timestamp_seconds{inventory="cluster"}`,
		"# TYPE workqueue_adds_total counter",
		`workqueue_adds_total{name="gpuinventory"}`,
		`workqueue_depth{name="gpu-node-status"}`,
		"# TYPE gpu_inventory_rest_client_request_duration_seconds histogram",
		`gpu_inventory_rest_client_requests_total{code="200",host=`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(text, "gpu_inventory_node_not_ready{") {
		t.Error("per-node series are exported without --metrics-per-node")
	}
	// The usage group's series need Prometheus (TestHeldButIdle checks those alerts), the
	// topology group's nodes with topology labels (TestTopologyInTheInventory).
	checkAlertRules(t, text, func(group string) bool { return group != usageRuleGroup && group != topologyRuleGroup })
	checkAlertsDocumented(t)
}

// usageRuleGroup holds the alerts on held-but-idle GPUs, whose series exist only with
// --prometheus-url.
const usageRuleGroup = "gpu-inventory.usage"

// topologyRuleGroup holds the alert on topology fragmentation, whose series exist only where
// GPU nodes carry topology labels.
const topologyRuleGroup = "gpu-inventory.topology"

// checkAlertRules fails when an alert of the rule groups include accepts, in
// manifests/monitoring, names a metric, or a label of it, that the running operator does not
// export: such a rule would silently never fire.
func checkAlertRules(t *testing.T, exposition string, include func(group string) bool) {
	t.Helper()
	objs, err := testenv.ReadManifests("../../manifests/monitoring/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	groups, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "groups")
	metric := regexp.MustCompile(`\b((?:gpu_inventory|workqueue)_[a-z_]+)(\{[^}]*\})?`)
	label := regexp.MustCompile(`([a-z_]+)\s*=~?\s*"`)
	checked := 0
	for _, g := range groups {
		if name, _ := g.(map[string]any)["name"].(string); !include(name) {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			rule := r.(map[string]any)
			checked++
			expr, _ := rule["expr"].(string)
			matches := metric.FindAllStringSubmatch(expr, -1)
			if len(matches) == 0 {
				t.Errorf("alert %v names no operator metric: %s", rule["alert"], expr)
			}
			for _, m := range matches {
				if !strings.Contains(exposition, "# TYPE "+m[1]+" ") {
					t.Errorf("alert %v uses %s, which /metrics does not export", rule["alert"], m[1])
					continue
				}
				for _, l := range label.FindAllStringSubmatch(m[2], -1) {
					if !regexp.MustCompile(`(?m)^` + m[1] + `\{[^}]*\b` + l[1] + `="`).MatchString(exposition) {
						t.Errorf("alert %v selects %s by label %q, which its series do not carry", rule["alert"], m[1], l[1])
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Error("no alert checked: a rule group was renamed?")
	}
}

// checkAlertsDocumented fails when the alerts of manifests/monitoring and monitoring/hub and
// docs/metrics.md's table differ.
func checkAlertsDocumented(t *testing.T) {
	t.Helper()
	var groups []any
	for _, file := range []string{"../../manifests/monitoring/prometheusrule.yaml", "../../manifests/monitoring/hub/prometheusrule.yaml"} {
		objs, err := testenv.ReadManifests(file)
		if err != nil {
			t.Fatal(err)
		}
		g, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "groups")
		groups = append(groups, g...)
	}
	var alerts []string
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			if name, _ := r.(map[string]any)["alert"].(string); name != "" {
				alerts = append(alerts, name)
			}
		}
	}
	docs, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(Gpu[A-Za-z]+)` \\|").FindAllStringSubmatch(string(docs), -1) {
		documented = append(documented, m[1])
	}
	slices.Sort(alerts)
	slices.Sort(documented)
	if len(documented) < 6 || !slices.Equal(alerts, documented) {
		t.Errorf("manifests/monitoring (the operator's and the hub's) has the alerts %v, docs/metrics.md documents %v; want the same set", alerts, documented)
	}
}

// /readyz stays 503 while the operator cannot sync (here: its ClusterRole lacks nodes, as in
// a half-applied RBAC), /healthz stays 200 so the kubelet does not restart it, and both are
// 200 once the rule is back and the first sync is done.
func TestReadyzWaitsForTheFirstSync(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	ctx := context.Background()
	if _, err := testenv.ApplyManifests(ctx, c.env.Config, "integration-test", "../../manifests/namespace.yaml", "../../manifests/rbac"); err != nil {
		t.Fatal(err)
	}
	role, err := c.kube.RbacV1().ClusterRoles().Get(ctx, "gpu-inventory-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	full := role.DeepCopy()
	role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "nodes") })
	if len(role.Rules) == len(full.Rules) {
		t.Fatal("the ClusterRole has no nodes rule to take away")
	}
	if _, err := c.kube.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	saConfig, err := c.env.ServiceAccountConfig(ctx, operatorNamespace, "gpu-inventory-operator")
	if err != nil {
		t.Fatal(err)
	}
	op := startOperator(t, saConfig, testOptions())

	waitReadyz(t, op, 20*time.Second, http.StatusServiceUnavailable, "caches not synced")
	if code, body, err := get("http://" + op.HealthAddress() + "/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("/healthz while not synced = %d %q %v, want 200 (alive; a restart would not help)", code, body, err)
	}

	role, err = c.kube.RbacV1().ClusterRoles().Get(ctx, "gpu-inventory-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	role.Rules = full.Rules
	if _, err := c.kube.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})
	waitReadyz(t, op, 20*time.Second, http.StatusOK, "ok")
}

// Readiness covers every controller: without rights on ConfigMaps (a Role not applied) the
// gpu-node-status controller cannot sync, and the pod must not look Ready.
func TestReadyzNeedsTheConfigMapController(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	ctx := context.Background()
	if _, err := testenv.ApplyManifests(ctx, c.env.Config, "integration-test", "../../manifests/namespace.yaml", "../../manifests/rbac"); err != nil {
		t.Fatal(err)
	}
	role, err := c.kube.RbacV1().Roles(operatorNamespace).Get(ctx, "gpu-inventory-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	full := role.DeepCopy()
	role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "configmaps") })
	if len(role.Rules) == len(full.Rules) {
		t.Fatal("the Role has no configmaps rule to take away")
	}
	if _, err := c.kube.RbacV1().Roles(operatorNamespace).Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	saConfig, err := c.env.ServiceAccountConfig(ctx, operatorNamespace, "gpu-inventory-operator")
	if err != nil {
		t.Fatal(err)
	}
	op := startOperator(t, saConfig, testOptions())
	c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1}) // the inventory itself is fine
	waitReadyz(t, op, 20*time.Second, http.StatusServiceUnavailable, "gpu-node-status")
	role, err = c.kube.RbacV1().Roles(operatorNamespace).Get(ctx, "gpu-inventory-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	role.Rules = full.Rules
	if _, err := c.kube.RbacV1().Roles(operatorNamespace).Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReadyz(t, op, 30*time.Second, http.StatusOK, "ok")
}

// One inventory whose status can never be written (here the API server's answer to its
// writes is replaced by a refusal) shows in its own metrics; it does not keep the operator
// NotReady and block rollouts.
func TestOneUnwritableInventoryDoesNotBlockReadiness(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)
	ctx := context.Background()
	cfg := rest.CopyConfig(c.env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/gpuinventories/bad/status") {
				body := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the status of bad is refused","reason":"Invalid","code":422}`
				return &http.Response{StatusCode: http.StatusUnprocessableEntity, Header: http.Header{"Content-Type": {"application/json"}},
					Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
			}
			return rt.RoundTrip(req)
		})
	}
	op := startOperator(t, cfg, testOptions())
	c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})
	if _, err := c.gpu.HomelabV1().GpuInventories().Create(ctx, &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: "bad"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the refused writes counted", func() error {
		if errs := counted(op.Metrics().Syncs, map[string]string{"controller": "gpuinventory", "result": "error"}); errs < 2 {
			return fmt.Errorf("%d failed syncs", errs)
		}
		return nil
	})
	if code, body, err := get("http://" + op.HealthAddress() + "/readyz"); err != nil || code != http.StatusOK {
		t.Errorf("/readyz = %d %q %v; want ok while only inventory bad fails", code, body, err)
	}
}
