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
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/youngju-dev/gpu-inventory-operator/manifests/helmchart"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// The shipped Prometheus rules are run by Prometheus' own rule engine: promtool, built by
// `make testbin` from the module proxy (hack/testbin/prometheus), runs the unit tests of
// manifests/monitoring/tests on the rules as kustomize renders them and as the chart does.

const ruleTestsDir = "../../manifests/monitoring/tests"

// ruleGroups is a PrometheusRule's spec: what promtool reads as a rule file.
type ruleGroups struct {
	Groups []struct {
		Name  string     `json:"name"`
		Rules []promRule `json:"rules"`
	} `json:"groups"`
}

type promRule struct {
	Alert  string            `json:"alert"`
	Record string            `json:"record"`
	Expr   string            `json:"expr"`
	For    string            `json:"for"`
	Labels map[string]string `json:"labels"`
}

// ruleTestFile is what the coverage checks read of a promtool test file.
type ruleTestFile struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name        string `json:"name"`
		InputSeries []struct {
			Series string `json:"series"`
		} `json:"input_series"`
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []struct {
				ExpLabels map[string]string `json:"exp_labels"`
			} `json:"exp_alerts"`
		} `json:"alert_rule_test"`
		PromqlExprTest []struct {
			Expr       string `json:"expr"`
			ExpSamples []any  `json:"exp_samples"`
		} `json:"promql_expr_test"`
	} `json:"tests"`
}

// ruleSource is one way the project ships its rules: each PrometheusRule's spec by file name
// (NAME.rules.yaml, NAME the PrometheusRule's name, as the test files name them).
type ruleSource struct {
	name  string
	files map[string][]byte
}

// hubRules is the fleet hub's rule file: manifests/monitoring/hub ships it; the chart, which
// has no hub, does not.
const hubRules = "gpu-fleet-hub.rules.yaml"

// shippedRules returns the PrometheusRules as kustomize renders manifests/monitoring,
// manifests/monitoring/dcgm and manifests/monitoring/hub, and as the chart renders them with
// both rule options on.
func shippedRules(t *testing.T) []ruleSource {
	t.Helper()
	overlay := t.TempDir()
	manifests, err := filepath.Abs("../../manifests")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(overlay, manifests) // kustomize refuses absolute paths
	if err != nil {
		t.Fatal(err)
	}
	kustomization := fmt.Sprintf("resources: [%s, %s]\ncomponents: [%s, %s, %s]\n", rel, filepath.Join(rel, "hub"),
		filepath.Join(rel, "monitoring"), filepath.Join(rel, "monitoring", "dcgm"), filepath.Join(rel, "monitoring", "hub"))
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	kustomized, err := testenv.Kustomize(overlay)
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := helmchart.Render("../../manifests/chart", helmchart.Options{Namespace: operatorNamespace,
		Values: map[string]any{"monitoring": map[string]any{
			"prometheusRule": map[string]any{"enabled": true}, "dcgmRules": map[string]any{"enabled": true}}}})
	if err != nil {
		t.Fatal(err)
	}
	sources := []ruleSource{{"kustomize", ruleFiles(t, kustomized)}, {"chart", ruleFiles(t, rendered)}}
	if _, ok := sources[0].files[hubRules]; !ok {
		t.Fatalf("kustomize renders no %s", hubRules)
	}
	want := slices.DeleteFunc(slices.Sorted(maps.Keys(sources[0].files)), func(name string) bool { return name == hubRules })
	if got := slices.Sorted(maps.Keys(sources[1].files)); len(got) < 2 || !slices.Equal(got, want) {
		t.Fatalf("the chart renders the rule files %v, kustomize %v; want the same but the hub's, at least the operator's and the DCGM rules", got, want)
	}
	return sources
}

// ruleFiles returns the spec of each PrometheusRule among objs, as a promtool rule file.
func ruleFiles(t *testing.T, objs []*unstructured.Unstructured) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for _, obj := range objs {
		if obj.GetKind() != "PrometheusRule" {
			continue
		}
		data, err := yaml.Marshal(obj.Object["spec"])
		if err != nil {
			t.Fatal(err)
		}
		files[obj.GetName()+".rules.yaml"] = data
	}
	return files
}

// ruleTests returns the promtool test files by name.
func ruleTests(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(ruleTestsDir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no rule tests in %s: %v", ruleTestsDir, err)
	}
	tests := map[string][]byte{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		tests[filepath.Base(p)] = data
	}
	return tests
}

// promtoolPath returns the path of the promtool that `make testbin` built.
func promtoolPath(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(testenv.BinDirEnv)
	if dir == "" {
		t.Fatalf("no promtool: set %s (`make testbin` prints the directory; `make test` sets it)", testenv.BinDirEnv)
	}
	path := filepath.Join(dir, "promtool")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("promtool not found in %s=%s (run `make testbin`): %v", testenv.BinDirEnv, dir, err)
	}
	return path
}

// Every shipped rule file passes `promtool check rules`, and every test of
// manifests/monitoring/tests passes `promtool test rules`, with the rules of each source.
func TestPrometheusRules(t *testing.T) {
	bin := promtoolPath(t)
	tests := ruleTests(t)
	for _, source := range shippedRules(t) {
		t.Run(source.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range source.files {
				writeRuleTestFile(t, filepath.Join(dir, name), data)
			}
			for name, data := range tests {
				if _, clash := source.files[name]; clash {
					t.Fatalf("the test file %s has the name of a rule file", name)
				}
				writeRuleTestFile(t, filepath.Join(dir, name), data)
			}
			runPromtool(t, bin, dir, append([]string{"check", "rules"}, slices.Sorted(maps.Keys(source.files))...))
			runPromtool(t, bin, dir, append([]string{"test", "rules"}, testsOf(t, tests, source.files)...))
		})
	}
}

// testsOf are the names of the test files whose rule files a source ships.
func testsOf(t *testing.T, tests map[string][]byte, files map[string][]byte) []string {
	t.Helper()
	var out []string
	for _, name := range slices.Sorted(maps.Keys(tests)) {
		var f ruleTestFile
		if err := yaml.Unmarshal(tests[name], &f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.ContainsFunc(f.RuleFiles, func(r string) bool { _, ok := files[r]; return !ok }) {
			out = append(out, name)
		}
	}
	return out
}

func writeRuleTestFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func runPromtool(t *testing.T, bin, dir string, args []string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// shippedRuleSet returns every alert and recording rule of the kustomize rules (the chart's
// are the same files: TestPrometheusRules runs both), by name.
func shippedRuleSet(t *testing.T) (alerts, records map[string]promRule) {
	t.Helper()
	alerts, records = map[string]promRule{}, map[string]promRule{}
	for name, data := range shippedRules(t)[0].files {
		var groups ruleGroups
		if err := yaml.Unmarshal(data, &groups); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				if r.Alert != "" {
					alerts[r.Alert] = r
				} else {
					records[r.Record] = r
				}
			}
		}
	}
	return alerts, records
}

// ruleCoverage is what the test files check of each rule.
type ruleCoverage struct {
	fires, silent map[string]bool            // alerts with a test where they fire, where they do not
	labels        map[string]map[string]bool // the labels of each alert's expected alerts
	values        map[string]bool            // recorded series with a test of their value
}

func readRuleCoverage(t *testing.T) ruleCoverage {
	t.Helper()
	c := ruleCoverage{fires: map[string]bool{}, silent: map[string]bool{}, labels: map[string]map[string]bool{}, values: map[string]bool{}}
	leadingName := regexp.MustCompile(`^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)`)
	for name, data := range ruleTests(t) {
		var f ruleTestFile
		if err := yaml.Unmarshal(data, &f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, test := range f.Tests {
			for _, a := range test.AlertRuleTest {
				if len(a.ExpAlerts) == 0 {
					c.silent[a.Alertname] = true
				}
				for _, exp := range a.ExpAlerts {
					c.fires[a.Alertname] = true
					if c.labels[a.Alertname] == nil {
						c.labels[a.Alertname] = map[string]bool{}
					}
					for l := range exp.ExpLabels {
						c.labels[a.Alertname][l] = true
					}
				}
			}
			for _, e := range test.PromqlExprTest {
				if m := leadingName.FindStringSubmatch(e.Expr); m != nil && len(e.ExpSamples) > 0 {
					c.values[m[1]] = true
				}
			}
		}
	}
	return c
}

// Every alert has a test where it fires and one where it stays silent, and every recording
// rule a test of the series it records, so that no rule ships untested; no test names an
// alert that does not exist (it would pass, testing nothing).
func TestPrometheusRulesAllTested(t *testing.T) {
	alerts, records := shippedRuleSet(t)
	c := readRuleCoverage(t)
	for _, name := range slices.Sorted(maps.Keys(alerts)) {
		if !c.fires[name] {
			t.Errorf("alert %s has no test in manifests/monitoring/tests where it fires (an alert_rule_test with exp_alerts)", name)
		}
		if !c.silent[name] {
			t.Errorf("alert %s has no test in manifests/monitoring/tests where it stays silent (exp_alerts: [] on a near miss)", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(records)) {
		if !c.values[name] {
			t.Errorf("recording rule %s has no test in manifests/monitoring/tests of what it records (a promql_expr_test of %s with exp_samples)", name, name)
		}
	}
	for name := range c.fires {
		if _, ok := alerts[name]; !ok {
			t.Errorf("manifests/monitoring/tests tests alert %s, which no shipped rule file has", name)
		}
	}
	for name := range c.silent {
		if _, ok := alerts[name]; !ok {
			t.Errorf("manifests/monitoring/tests tests alert %s, which no shipped rule file has", name)
		}
	}
	for name := range c.values {
		if _, ok := records[name]; !ok && strings.Contains(name, ":") { // level:metric:operations
			t.Errorf("manifests/monitoring/tests tests the recorded series %s, which no shipped rule file records", name)
		}
	}
}

// docsRow is an alert's row of the table in docs/metrics.md.
type docsRow struct {
	labels                []string
	forDuration, severity string
}

// documentedAlerts reads the alert table of docs/metrics.md (| alert | labels | fires when |
// for | severity |) and the names of the recorded series the DCGM section lists.
func documentedAlerts(t *testing.T) (alerts map[string]docsRow, records []string) {
	t.Helper()
	data, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	const header = "| alert | labels | fires when | for | severity |\n|---|---|---|---|---|\n"
	start := strings.Index(text, header)
	if start < 0 {
		t.Fatalf("docs/metrics.md has no alert table headed %q", header)
	}
	table, _, _ := strings.Cut(text[start+len(header):], "\n\n")
	backticked := regexp.MustCompile("`([^`]+)`")
	alerts = map[string]docsRow{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 5 {
			t.Fatalf("docs/metrics.md: the alert table's row %q has %d cells, want 5", line, len(cells))
		}
		row := docsRow{forDuration: cells[3], severity: cells[4]}
		// A label's note in parentheses may name other things in backticks.
		for _, m := range backticked.FindAllStringSubmatch(regexp.MustCompile(`\([^)]*\)`).ReplaceAllString(cells[1], ""), -1) {
			row.labels = append(row.labels, m[1])
		}
		alerts[strings.Trim(cells[0], "`")] = row
	}
	_, dcgm, ok := strings.Cut(text, "## GPUs held but idle")
	if !ok {
		t.Fatal("docs/metrics.md has no section \"GPUs held but idle\"")
	}
	dcgm, _, _ = strings.Cut(dcgm, "\n## ")
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+:[a-z_:]+)` \\|").FindAllStringSubmatch(dcgm, -1) {
		records = append(records, m[1])
	}
	return alerts, records
}

// docs/metrics.md documents every alert with the labels its tests expect, its `for` and its
// severity, and every recorded series; nothing more.
func TestPrometheusRulesDocumented(t *testing.T) {
	alerts, records := shippedRuleSet(t)
	c := readRuleCoverage(t)
	documented, documentedRecords := documentedAlerts(t)
	for _, name := range slices.Sorted(maps.Keys(alerts)) {
		r, row := alerts[name], documented[name]
		if _, ok := documented[name]; !ok {
			t.Errorf("docs/metrics.md's alert table has no row for %s", name)
			continue
		}
		if row.forDuration != r.For || row.severity != r.Labels["severity"] {
			t.Errorf("docs/metrics.md: %s has for %q and severity %q, the rule %q and %q", name, row.forDuration, row.severity, r.For, r.Labels["severity"])
		}
		var tested []string
		for l := range c.labels[name] {
			if l != "severity" {
				tested = append(tested, l)
			}
		}
		if diff := cmp.Diff(slices.Sorted(slices.Values(row.labels)), slices.Sorted(slices.Values(tested))); diff != "" {
			t.Errorf("docs/metrics.md: the labels of %s (-documented +expected by its tests):\n%s", name, diff)
		}
	}
	for name := range documented {
		if _, ok := alerts[name]; !ok {
			t.Errorf("docs/metrics.md documents the alert %s, which no shipped rule file has", name)
		}
	}
	if got, want := slices.Sorted(slices.Values(documentedRecords)), slices.Sorted(maps.Keys(records)); !slices.Equal(got, want) {
		t.Errorf("docs/metrics.md lists the recorded series %v, the rules record %v", got, want)
	}
}

// dcgmLabels are the labels of DCGM exporter's series: its own, those of its Kubernetes pod
// mapping, and MIG's.
var dcgmLabels = []string{"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION",
	"namespace", "pod", "container", "GPU_I_PROFILE", "GPU_I_ID"}

// The input series of the tests are series the rules read (or `up`), with labels the rules
// name or the exporter's: a misspelt name or label would leave a near miss silent for the
// wrong reason.
func TestPrometheusRuleTestsUseRealSeries(t *testing.T) {
	alerts, records := shippedRuleSet(t)
	identifier := regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	named := map[string]bool{"up": true, "job": true, "instance": true}
	for _, r := range slices.Concat(slices.Collect(maps.Values(alerts)), slices.Collect(maps.Values(records))) {
		for _, id := range identifier.FindAllString(r.Expr, -1) {
			named[id] = true
		}
	}
	series := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\}$`)
	label := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	for name, data := range ruleTests(t) {
		var f ruleTestFile
		if err := yaml.Unmarshal(data, &f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, test := range f.Tests {
			for _, in := range test.InputSeries {
				m := series.FindStringSubmatch(in.Series)
				if m == nil || !named[m[1]] {
					t.Errorf("%s, %q: input series %s is none the rules read", name, test.Name, in.Series)
					continue
				}
				for _, l := range label.FindAllStringSubmatch(m[2], -1) {
					if !named[l[1]] && !(strings.HasPrefix(m[1], "DCGM_") && slices.Contains(dcgmLabels, l[1])) {
						t.Errorf("%s, %q: input series %s has the label %s, which neither the rules nor the exporter name", name, test.Name, in.Series, l[1])
					}
				}
			}
		}
	}
}
