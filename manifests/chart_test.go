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

package manifests_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/youngju-dev/gpu-inventory-operator/manifests/helmchart"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// The chart (manifests/chart) and the kustomize manifests are one source of truth: the
// chart's defaults, and each of its options that a kustomize component also offers, render
// the objects that kustomize renders. Only what a Helm chart cannot do the same is set aside:
// the Namespace (Helm creates the release namespace with --create-namespace) and the image
// tag (the chart's appVersion; kustomize's is what `make image` builds).
func TestChartEqualsKustomize(t *testing.T) {
	for _, tc := range []struct {
		name       string
		values     string
		components []string
	}{
		{name: "defaults"},
		{name: "installCRD=false", values: "installCRD: false", components: []string{"without-crd-install"}},
		{name: "ServiceMonitor, PrometheusRule and dashboard",
			values:     "monitoring: {serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}, dashboard: {enabled: true}}",
			components: []string{"monitoring"}},
		{name: "dashboard", values: "monitoring: {dashboard: {enabled: true}}", components: []string{"monitoring/dashboard"}},
		{name: "DCGM rules", values: "monitoring: {dcgmRules: {enabled: true}}", components: []string{"monitoring/dcgm"}},
		{name: "listPodsByNamespace", values: "listPodsByNamespace: true", components: []string{"list-pods-by-namespace"}},
		{name: "every option",
			values:     "installCRD: false\nlistPodsByNamespace: true\nmonitoring: {serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}, dcgmRules: {enabled: true}, dashboard: {enabled: true}}",
			components: []string{"without-crd-install", "list-pods-by-namespace", "monitoring", "monitoring/dcgm"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kustomized := kustomize(t, tc.components...)
			rendered := render(t, operatorNamespace, tc.values)

			// Set aside what must differ, checking that it is what the chart's README says.
			kustomized = slices.DeleteFunc(kustomized, func(obj *unstructured.Unstructured) bool {
				return obj.GetKind() == "Namespace" && obj.GetName() == operatorNamespace
			})
			wantImage := "gpu-inventory-operator:" + appVersion(t)
			if got := image(t, rendered); got != wantImage {
				t.Errorf("the chart's image is %q, want %q (the repository and the chart's appVersion)", got, wantImage)
			}
			if got := image(t, kustomized); got != "gpu-inventory-operator:dev" {
				t.Errorf("manifests/deployment.yaml's image is %q, want gpu-inventory-operator:dev (what `make image` builds)", got)
			}
			setImage(t, rendered, "gpu-inventory-operator:dev")

			want, got := byKey(t, "kustomize", kustomized), byKey(t, "chart", rendered)
			for key := range want {
				if _, ok := got[key]; !ok {
					t.Errorf("kustomize renders %s, the chart does not", key)
				}
			}
			for key, obj := range got {
				if _, ok := want[key]; !ok {
					t.Errorf("the chart renders %s, kustomize does not", key)
					continue
				}
				if diff := cmp.Diff(want[key].Object, obj.Object); diff != "" {
					t.Errorf("%s (-kustomize +chart):\n%s", key, diff)
				}
			}
		})
	}
}

// Files the chart holds as copies, since a chart cannot read outside its directory: the CRDs
// (crds/ is applied as is), the PrometheusRules and the dashboard (files/, given their
// namespace and labels by templates/). `make generate` rewrites manifests/crd; copy the
// result. It writes both dashboards itself.
func TestChartCopiesAreCurrent(t *testing.T) {
	for copied, original := range map[string]string{
		"chart/crds/homelab.youngju.dev_gpuinventories.yaml": "crd/homelab.youngju.dev_gpuinventories.yaml",
		"chart/crds/homelab.youngju.dev_gpunodes.yaml":       "crd/homelab.youngju.dev_gpunodes.yaml",
		"chart/crds/homelab.youngju.dev_gpufleets.yaml":      "crd/homelab.youngju.dev_gpufleets.yaml",
		"chart/files/prometheusrule.yaml":                    "monitoring/prometheusrule.yaml",
		"chart/files/dcgm-prometheusrule.yaml":               "monitoring/dcgm/prometheusrule.yaml",
		"chart/files/gpu-inventory.json":                     "monitoring/dashboard/gpu-inventory.json",
	} {
		a, err := os.ReadFile(copied)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(original)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("manifests/%s differs from manifests/%s: cp manifests/%s manifests/%s", copied, original, original, copied)
		}
	}
	// Nothing else: a CRD added to manifests/crd must be added to the chart too.
	for _, dir := range []string{"crd", "chart/crds"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 3 {
			t.Errorf("manifests/%s holds %d files, want the 3 CRDs", dir, len(entries))
		}
	}
}

// helm lint --strict passes for the defaults and for every option, on the newest Kubernetes
// the tests run and on the oldest the chart accepts.
func TestChartLint(t *testing.T) {
	for _, values := range []string{
		"",
		"installCRD: false\nlistPodsByNamespace: true\nmonitoring: {serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}, dcgmRules: {enabled: true}, dashboard: {enabled: true}, labels: {release: prometheus}}",
		"replicas: 1\nleaderElection: {enabled: false}\nserviceAccount: {create: false, name: existing}",
		"image: {repository: registry.example.com/gpu-inventory-operator, tag: v0.1.0, pullSecrets: [regcred]}\n" +
			"extraArgs: [--max-status-nodes=200]\npodAnnotations: {a: b}\nnodeSelector: {kubernetes.io/os: linux}\n" +
			"tolerations: [{key: dedicated, operator: Exists}]\naffinity: {nodeAffinity: {}}",
	} {
		for _, kubeVersion := range []string{helmchart.KubeVersion, "v1.22.0"} {
			messages, err := helmchart.Lint("chart", "monitoring", parseValues(t, values), kubeVersion)
			if err != nil {
				t.Errorf("values %q, Kubernetes %s: %v", values, kubeVersion, err)
			}
			// Helm recommends an icon, which the project does not have.
			if want := []string{"[INFO] Chart.yaml: icon is recommended"}; !slices.Equal(messages, want) {
				t.Errorf("values %q, Kubernetes %s: helm lint says %q, want only %q", values, kubeVersion, messages, want)
			}
		}
	}
}

// The chart's README has a row for every value of values.yaml, and no row for a value that
// does not exist. A map whose keys are the user's (labels, a security context) has one row.
func TestChartReadmeListsEveryValue(t *testing.T) {
	readme, err := os.ReadFile("chart/README.md")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("chart/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, line := range strings.Split(string(readme), "\n") {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			name, _, _ = strings.Cut(name, "`")
			rows[name] = true
		}
	}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			path := prefix + k
			if rows[path] {
				delete(rows, path)
				continue
			}
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(path+".", sub)
				continue
			}
			t.Errorf("values.yaml has %s, the README's values table does not", path)
		}
	}
	walk("", values)
	for row := range rows {
		t.Errorf("the README's values table has %s, values.yaml does not", row)
	}
}

// Helm is linked into tests only: no binary of the module imports it (through
// manifests/helmchart or otherwise).
func TestBinariesLinkNoHelm(t *testing.T) {
	const module = "github.com/youngju-dev/gpu-inventory-operator/"
	out, err := exec.Command("go", "list", "-deps", module+"cmd/...", module+"hack/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "helm.sh/") || dep == module+"manifests/helmchart" {
			t.Errorf("a binary depends on %s", dep)
		}
	}
	if !strings.Contains(string(out), module+"cmd/gpu-inventory-operator\n") {
		t.Errorf("go list named no cmd/gpu-inventory-operator: the test reads the wrong output:\n%s", out)
	}
}

const operatorNamespace = "gpu-inventory-system"

// kustomize renders manifests/ with the given components of it, as an overlay of one's own
// does (README "Install in a cluster").
func kustomize(t *testing.T, components ...string) []*unstructured.Unstructured {
	t.Helper()
	dir := "."
	if len(components) > 0 {
		dir = t.TempDir()
		abs, err := filepath.Abs(".")
		if err != nil {
			t.Fatal(err)
		}
		base, err := filepath.Rel(dir, abs) // kustomize refuses absolute paths
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, c := range components {
			paths = append(paths, filepath.Join(base, c))
		}
		kustomization := fmt.Sprintf("resources: [%s]\ncomponents: [%s]\n", base, strings.Join(paths, ", "))
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := testenv.Kustomize(dir)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// render renders the chart into namespace with values given as YAML.
func render(t *testing.T, namespace, values string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := helmchart.Render("chart", helmchart.Options{Namespace: namespace, Values: parseValues(t, values)})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// parseValues reads values as `helm install --values` does.
func parseValues(t *testing.T, values string) map[string]any {
	t.Helper()
	v := map[string]any{}
	if err := yaml.Unmarshal([]byte(values), &v); err != nil {
		t.Fatalf("values %q: %v", values, err)
	}
	return v
}

func appVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("chart/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &chart); err != nil {
		t.Fatal(err)
	}
	return chart.AppVersion
}

// byKey indexes objects by kind, namespace and name, failing on a duplicate.
func byKey(t *testing.T, source string, objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	t.Helper()
	m := map[string]*unstructured.Unstructured{}
	for _, obj := range objs {
		key := obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
		if _, ok := m[key]; ok {
			t.Errorf("%s renders %s twice", source, key)
		}
		m[key] = obj
	}
	return m
}

// find returns the object of kind and name, failing when there is none.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, obj := range objs {
		if obj.GetKind() == kind && obj.GetName() == name {
			return obj
		}
	}
	t.Fatalf("no %s %s among %s", kind, name, keys(objs))
	return nil
}

func keys(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, obj := range objs {
		out = append(out, obj.GetKind()+"/"+obj.GetName())
	}
	return out
}

// container returns the Deployment's operator container.
func container(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	containers, _, err := unstructured.NestedSlice(find(t, objs, "Deployment", "gpu-inventory-operator").Object, "spec", "template", "spec", "containers")
	if err != nil || len(containers) != 1 {
		t.Fatalf("Deployment containers: %v, %v", containers, err)
	}
	return containers[0].(map[string]any)
}

func image(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	s, _ := container(t, objs)["image"].(string)
	return s
}

func setImage(t *testing.T, objs []*unstructured.Unstructured, image string) {
	t.Helper()
	deployment := find(t, objs, "Deployment", "gpu-inventory-operator")
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	containers[0].(map[string]any)["image"] = image
	if err := unstructured.SetNestedSlice(deployment.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
}

// What the values change beyond kustomize's options.
func TestChartValues(t *testing.T) {
	t.Run("one replica without leader election", func(t *testing.T) {
		objs := render(t, operatorNamespace, "replicas: 1\nleaderElection: {enabled: false}")
		if args := args(t, objs); slices.Contains(args, "--leader-elect") {
			t.Errorf("args %q hold --leader-elect", args)
		}
		if slices.Contains(keys(objs), "PodDisruptionBudget/gpu-inventory-operator") {
			t.Errorf("a PodDisruptionBudget with one replica would block every drain")
		}
		role, _ := yaml.Marshal(find(t, objs, "Role", "gpu-inventory-operator").Object["rules"])
		if strings.Contains(string(role), "leases") {
			t.Errorf("without leader election the Role still grants Leases:\n%s", role)
		}
	})
	t.Run("one replica with leader election", func(t *testing.T) {
		objs := render(t, operatorNamespace, "replicas: 1")
		if args := args(t, objs); !slices.Contains(args, "--leader-elect") {
			t.Errorf("args %q lack --leader-elect", args)
		}
		if slices.Contains(keys(objs), "PodDisruptionBudget/gpu-inventory-operator") {
			t.Errorf("a PodDisruptionBudget with one replica would block every drain")
		}
	})
	t.Run("image, args, resources and the pod's placement", func(t *testing.T) {
		// Maps are merged with the defaults, as Helm merges all values; null removes a key.
		objs := render(t, operatorNamespace, `
image: {repository: registry.example.com/gpu-inventory-operator, tag: v0.2.0, pullPolicy: Always, pullSecrets: [regcred]}
installCRD: false
extraArgs: [--max-status-nodes=200, -v=2]
resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {memory: 1Gi}}
podAnnotations: {example.com/team: gpus}
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]
affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [system]}]}]}}}
podSecurityContext: {runAsUser: null, runAsGroup: null}
securityContext: {privileged: false}
`)
		c := container(t, objs)
		if c["image"] != "registry.example.com/gpu-inventory-operator:v0.2.0" || c["imagePullPolicy"] != "Always" {
			t.Errorf("image %v, pull policy %v", c["image"], c["imagePullPolicy"])
		}
		wantArgs := []string{"--leader-elect", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081", "--install-crd=false", "--max-status-nodes=200", "-v=2"}
		if got := args(t, objs); !slices.Equal(got, wantArgs) {
			t.Errorf("args %q, want %q", got, wantArgs)
		}
		pod, _, _ := unstructured.NestedMap(find(t, objs, "Deployment", "gpu-inventory-operator").Object, "spec", "template")
		want := parseValues(t, `
metadata:
  labels: {app.kubernetes.io/name: gpu-inventory-operator}
  annotations: {example.com/team: gpus}
spec:
  imagePullSecrets: [{name: regcred}]
  nodeSelector: {kubernetes.io/os: linux}
  tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]
  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [system]}]}]}}}
  securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
`)
		got := map[string]any{"metadata": pod["metadata"], "spec": map[string]any{}}
		spec := pod["spec"].(map[string]any)
		for _, field := range []string{"imagePullSecrets", "nodeSelector", "tolerations", "affinity", "securityContext"} {
			got["spec"].(map[string]any)[field] = spec[field]
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("pod template (-want +got):\n%s", diff)
		}
		wantContainer := parseValues(t, `
resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {memory: 1Gi}}
securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}, privileged: false}
`)
		if diff := cmp.Diff(wantContainer, map[string]any{"resources": c["resources"], "securityContext": c["securityContext"]}); diff != "" {
			t.Errorf("container (-want +got):\n%s", diff)
		}
	})
	t.Run("held but idle from Prometheus", func(t *testing.T) {
		if args := args(t, render(t, operatorNamespace, "")); slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--prometheus-url") }) {
			t.Errorf("args %q ask Prometheus by default", args)
		}
		objs := render(t, operatorNamespace, "usage: {prometheusURL: http://prometheus-operated.monitoring:9090, idleAfter: 2h}")
		want := []string{"--prometheus-url=http://prometheus-operated.monitoring:9090", "--idle-window=24h", "--idle-after=2h"}
		if got := args(t, objs); !slices.Equal(got[len(got)-3:], want) {
			t.Errorf("args %q, want them to end with %q", got, want)
		}
	})
	t.Run("another namespace and an existing ServiceAccount", func(t *testing.T) {
		objs := render(t, "gpu", "serviceAccount: {create: false, name: gpu-operator}\nmonitoring: {serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}, dcgmRules: {enabled: true}}")
		for _, obj := range objs {
			switch obj.GetKind() {
			case "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding":
				if obj.GetNamespace() != "" {
					t.Errorf("%s %s in namespace %q", obj.GetKind(), obj.GetName(), obj.GetNamespace())
				}
			case "ServiceAccount":
				t.Errorf("ServiceAccount %s rendered with serviceAccount.create=false", obj.GetName())
			default:
				if obj.GetNamespace() != "gpu" {
					t.Errorf("%s %s in namespace %q, want the release's", obj.GetKind(), obj.GetName(), obj.GetNamespace())
				}
			}
			if subjects, ok := obj.Object["subjects"]; ok {
				want := []any{map[string]any{"kind": "ServiceAccount", "name": "gpu-operator", "namespace": "gpu"}}
				if diff := cmp.Diff(want, subjects); diff != "" {
					t.Errorf("%s %s subjects (-want +got):\n%s", obj.GetKind(), obj.GetName(), diff)
				}
			}
		}
		deployment := find(t, objs, "Deployment", "gpu-inventory-operator")
		if sa, _, _ := unstructured.NestedString(deployment.Object, "spec", "template", "spec", "serviceAccountName"); sa != "gpu-operator" {
			t.Errorf("serviceAccountName %q", sa)
		}
		sm := find(t, objs, "ServiceMonitor", "gpu-inventory-operator")
		if ns, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames"); !slices.Equal(ns, []string{"gpu"}) {
			t.Errorf("ServiceMonitor selects namespaces %q", ns)
		}
	})
	t.Run("ServiceAccount annotations", func(t *testing.T) {
		objs := render(t, operatorNamespace, "serviceAccount: {annotations: {example.com/role: gpu-inventory}}")
		sa := find(t, objs, "ServiceAccount", "gpu-inventory-operator")
		if got := sa.GetAnnotations(); !cmp.Equal(got, map[string]string{"example.com/role": "gpu-inventory"}) {
			t.Errorf("ServiceAccount annotations %v", got)
		}
	})
	t.Run("the dashboard for a sidecar with another label", func(t *testing.T) {
		objs := render(t, "grafana", `monitoring: {dashboard: {enabled: true, labels: {grafana_dashboard: null, dashboards: grafana}}}`)
		cm := find(t, objs, "ConfigMap", "gpu-inventory-operator-dashboard")
		if got, want := cm.GetLabels(), map[string]string{"app.kubernetes.io/name": "gpu-inventory-operator", "dashboards": "grafana"}; !cmp.Equal(got, want) || cm.GetNamespace() != "grafana" {
			t.Errorf("dashboard ConfigMap in %q with labels %v, want in grafana with %v", cm.GetNamespace(), got, want)
		}
		data, _, _ := unstructured.NestedString(cm.Object, "data", "gpu-inventory.json")
		var board struct{ UID string }
		if err := json.Unmarshal([]byte(data), &board); err != nil || board.UID != "gpu-inventory-operator" {
			t.Errorf("the ConfigMap's gpu-inventory.json: uid %q, %v; want the dashboard", board.UID, err)
		}
	})
	t.Run("monitoring labels and interval", func(t *testing.T) {
		objs := render(t, operatorNamespace, "monitoring: {serviceMonitor: {enabled: true, interval: 1m}, prometheusRule: {enabled: true}, dcgmRules: {enabled: true}, dashboard: {enabled: true}, labels: {release: prometheus}}")
		want := map[string]string{"app.kubernetes.io/name": "gpu-inventory-operator", "release": "prometheus"}
		for _, key := range []string{"ServiceMonitor/gpu-inventory-operator", "PrometheusRule/gpu-inventory-operator", "PrometheusRule/gpu-inventory-operator-dcgm"} {
			kind, name, _ := strings.Cut(key, "/")
			if got := find(t, objs, kind, name).GetLabels(); !cmp.Equal(got, want) {
				t.Errorf("%s labels %v, want %v", key, got, want)
			}
		}
		if got := find(t, objs, "ConfigMap", "gpu-inventory-operator-dashboard").GetLabels(); !cmp.Equal(got, map[string]string{"app.kubernetes.io/name": "gpu-inventory-operator", "grafana_dashboard": "1"}) {
			t.Errorf("the dashboard's labels %v, want only the sidecar's beside the name: monitoring.labels are Prometheus'", got)
		}
		endpoints, _, _ := unstructured.NestedSlice(find(t, objs, "ServiceMonitor", "gpu-inventory-operator").Object, "spec", "endpoints")
		if len(endpoints) != 1 || endpoints[0].(map[string]any)["interval"] != "1m" {
			t.Errorf("ServiceMonitor endpoints %v, want one scraped every 1m", endpoints)
		}
	})
}

// Values that cannot work fail the render and say why.
func TestChartRefusesBadValues(t *testing.T) {
	for _, tc := range []struct{ values, want string }{
		{"replicas: 3\nleaderElection: {enabled: false}", "replicas=3 needs leaderElection.enabled=true"},
		{"replicas: two", "/replicas"},
		{"replicas: -1", "/replicas"},
		{"replica: 3", "replica"},
		{"image: {pullPolicy: Sometimes}", "/image/pullPolicy"},
		{"image: {tag: 1}", "/image/tag"},
		{"extraArgs: --v=2", "/extraArgs"},
		{"installCRD: \"no\"", "/installCRD"},
		{"serviceAccount: {name: Operator_SA}", "/serviceAccount/name"},
		{"resources: {limits: {memory: lots}}", "/resources/limits/memory"},
		{"resources: {limit: {memory: 1Gi}}", "limit"},
		{"monitoring: {serviceMonitor: {interval: 30 seconds}}", "/monitoring/serviceMonitor/interval"},
		{"monitoring: {prometheusRules: {enabled: true}}", "prometheusRules"},
		{"monitoring: {dashboard: {enabled: \"yes\"}}", "/monitoring/dashboard/enabled"},
		{"usage: {prometheusURL: prometheus:9090}", "/usage/prometheusURL"},
		{"usage: {idleAfter: 4 hours}", "/usage/idleAfter"},
		{"monitoring: {dashboard: {labels: {grafana_dashboard: 1}}}", "/monitoring/dashboard/labels/grafana_dashboard"},
	} {
		_, err := helmchart.Render("chart", helmchart.Options{Namespace: operatorNamespace, Values: parseValues(t, tc.values)})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %q: render error %v, want one naming %q", tc.values, err, tc.want)
		}
	}
	// The chart's kubeVersion: the oldest Kubernetes with every API the operator uses.
	if _, err := helmchart.Render("chart", helmchart.Options{Namespace: operatorNamespace, KubeVersion: "v1.21.14"}); err == nil || !strings.Contains(err.Error(), "kubeVersion") {
		t.Errorf("render for Kubernetes 1.21: %v, want the chart's kubeVersion refusing it", err)
	}
	if _, err := helmchart.Render("chart", helmchart.Options{Namespace: operatorNamespace, KubeVersion: "v1.22.0-gke.100"}); err != nil {
		t.Errorf("render for Kubernetes 1.22: %v", err)
	}
}

func args(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	args, _, err := unstructured.NestedStringSlice(container(t, objs), "args")
	if err != nil {
		t.Fatal(err)
	}
	return args
}
