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

//lint:file-ignore SA1019 Grafana's sidecar provisions the classic dashboard JSON (package dashboard); dashboardv2 is the new app platform's resource, which it does not load.

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
)

const root = "../.."

// The committed files are what the generator writes: a change to the code without
// `make generate` fails here, not only in `make verify`.
func TestCommittedFilesAreCurrent(t *testing.T) {
	files, err := render()
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range sortedPaths(files) {
		have, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Errorf("%v: run 'make generate'", err)
			continue
		}
		if !bytes.Equal(have, files[path]) {
			t.Errorf("%s is stale: run 'make generate'", path)
		}
	}
	if err := verifyFiles(root, files); err != nil {
		t.Errorf("--verify of current files: %v", err)
	}
	stale := map[string][]byte{jsonPath: []byte("{}\n")}
	if err := verifyFiles(root, stale); err == nil || !strings.Contains(err.Error(), "make generate") {
		t.Errorf("--verify of a stale file: %v, want an error naming make generate", err)
	}
}

// The shipped JSON is a dashboard Grafana's own schema reads strictly, with its stable uid
// and the two variables.
func TestDashboardParses(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	data := readDashboard(t)
	var board dashboard.Dashboard
	// The SDK returns its error list typed even when it is empty.
	if err := board.UnmarshalJSONStrict(data); err != nil {
		if errs, ok := err.(cog.BuildErrors); !ok || len(errs) > 0 {
			t.Fatalf("%s does not parse as a Grafana dashboard: %v", jsonPath, err)
		}
	}
	broken := bytes.Replace(data, []byte(`"h": 4,`), []byte(`"h": "4",`), 1)
	if err := new(dashboard.Dashboard).UnmarshalJSONStrict(broken); err == nil {
		t.Errorf("a panel height given as a string parses: the check above proves nothing")
	}
	if board.Uid == nil || *board.Uid != UID {
		t.Errorf("uid %v, want %q", board.Uid, UID)
	}
	var names []string
	for _, v := range board.Templating.List {
		names = append(names, string(v.Type)+" "+v.Name)
	}
	if want := []string{"datasource datasource", "query inventory"}; !slices.Equal(names, want) {
		t.Errorf("variables %q, want %q", names, want)
	}
}

// panel is what the tests read of a panel of the JSON.
type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ X, Y, W, H int } `json:"gridPos"`
	Targets []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Transformations []struct {
		ID      string `json:"id"`
		Options struct {
			RenameByName map[string]string `json:"renameByName"`
		} `json:"options"`
	} `json:"transformations"`
}

type board struct {
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

func readDashboard(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, jsonPath))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func readBoard(t *testing.T) board {
	t.Helper()
	var b board
	if err := json.Unmarshal(readDashboard(t), &b); err != nil {
		t.Fatal(err)
	}
	return b
}

func (p panel) exprs() string {
	var s []string
	for _, t := range p.Targets {
		s = append(s, t.Expr)
	}
	return strings.Join(s, "\n")
}

func (p panel) headers() []string {
	var h []string
	for _, tr := range p.Transformations {
		for _, v := range tr.Options.RenameByName {
			h = append(h, v)
		}
	}
	slices.Sort(h)
	return h
}

// The panels the issue asks for, each reading the series that answer its question.
func TestDashboardHasThePanels(t *testing.T) {
	b := readBoard(t)
	byTitle := map[string]panel{}
	for _, p := range b.Panels {
		byTitle[p.Title] = p
	}
	for _, tc := range []struct {
		title   string
		reads   []string // series (or selectors) its queries name
		headers []string // a table's columns
		legend  string   // a graph's legend shows this label
	}{
		{title: titleModels, reads: []string{"gpu_inventory_model_gpus", `ready="true"`, "gpu_inventory_allocated_gpus", "gpu_inventory_free_gpus", "gpu_inventory_pending_gpus"},
			headers: []string{"Allocated", "Free", "Model", "Pending", "Ready", "Total"}},
		{title: titleFragmentation, reads: []string{"gpu_inventory_largest_fit_gpus", "gpu_inventory_fragmentation_threshold_gpus"}, legend: "{{product}}"},
		{title: titleQuotaHardware, reads: []string{"gpu_inventory_quota_nominal", `gpu_inventory_quota_hardware{inventory="$inventory",state="ready"}`, `state="free"`}, legend: "{{model}}"},
		{title: titleCohortFindings, reads: []string{"gpu_inventory_quota_finding"}, headers: []string{"Cohort", "Finding", "Findings", "Model", "Resource"}},
		{title: "Cohorts", reads: []string{"gpu_inventory_quota_cohort_nominal", "gpu_inventory_quota_cohort_ready"}},
		{title: titleIdleHours, reads: []string{"gpu_inventory_idle_gpu_hours"}, legend: "{{namespace}}"},
		{title: "Held and idle per namespace and model", reads: []string{"gpu_inventory_held_gpu_hours", "gpu_inventory_idle_gpu_hours", "gpu_inventory_held_gpus", "gpu_inventory_idle_gpus"}},
		{title: "GPU nodes not Ready", reads: []string{`gpu_inventory_gpu_nodes{inventory="$inventory",ready="false"}`}},
		{title: "Unhealthy GPUs", reads: []string{"gpu_inventory_unhealthy_gpus"}},
		{title: "GPU labels missing", reads: []string{"gpu_inventory_labels_missing_nodes"}},
		{title: titleProblemNodes, reads: []string{"gpu_inventory_condition_nodes"}, legend: "{{condition}}"},
	} {
		p, ok := byTitle[tc.title]
		if !ok {
			t.Errorf("no panel %q", tc.title)
			continue
		}
		for _, s := range tc.reads {
			if !strings.Contains(p.exprs(), s) {
				t.Errorf("panel %q does not read %s:\n%s", tc.title, s, p.exprs())
			}
		}
		if tc.headers != nil && !slices.Equal(p.headers(), tc.headers) {
			t.Errorf("panel %q has columns %q, want %q", tc.title, p.headers(), tc.headers)
		}
		if tc.legend != "" && (len(p.Targets) == 0 || !strings.Contains(p.Targets[0].LegendFormat, tc.legend)) {
			t.Errorf("panel %q's legend does not show %s", tc.title, tc.legend)
		}
	}
}

// Every panel reads the chosen Prometheus and the chosen inventory, has a unit and its own
// id, and the panels tile the 24-column grid without overlapping.
func TestPanelsAreReadable(t *testing.T) {
	b := readBoard(t)
	ids := map[int]bool{}
	taken := map[[2]int]string{}
	for _, p := range b.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.X+p.GridPos.W > 24 || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("panel %q: grid position %+v", p.Title, p.GridPos)
		}
		for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
			for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
				if other, ok := taken[[2]int{x, y}]; ok {
					t.Errorf("panels %q and %q overlap at %d,%d", other, p.Title, x, y)
				}
				taken[[2]int{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q reads datasource %q, not the $datasource variable", p.Title, p.Datasource.UID)
		}
		if p.FieldConfig.Defaults.Unit == "" {
			t.Errorf("panel %q has no unit", p.Title)
		}
		for _, target := range p.Targets {
			if strings.Contains(target.Expr, "gpu_inventory_") && !strings.Contains(target.Expr, `inventory="$inventory"`) &&
				!strings.Contains(target.Expr, "gpu_inventory_leader") {
				t.Errorf("panel %q: %s does not select the chosen inventory", p.Title, target.Expr)
			}
		}
	}
}

// The DCGM exporter's series the dashboard may read, with their labels (its exposition).
var dcgmSeries = map[string][]string{
	"DCGM_FI_DEV_GPU_UTIL":          dcgmLabels,
	"DCGM_FI_PROF_GR_ENGINE_ACTIVE": dcgmLabels,
}

var dcgmLabels = []string{"gpu", "UUID", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION",
	"namespace", "pod", "container", "GPU_I_PROFILE", "GPU_I_ID"}

var (
	descName   = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)
	descLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}\}$`)
)

// exportedSeries returns the operator's series with their labels, as its registry describes them.
func exportedSeries(t *testing.T) map[string][]string {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() {
		metrics.New().Registry.Describe(ch)
		close(ch)
	}()
	series := map[string][]string{}
	for d := range ch {
		name, labels := descName.FindStringSubmatch(d.String()), descLabels.FindStringSubmatch(d.String())
		if name == nil || labels == nil {
			t.Fatalf("cannot read %s", d)
		}
		series[name[1]] = strings.Split(strings.NewReplacer("c(", "", ")", "").Replace(labels[1]), ",")
	}
	if len(series["gpu_inventory_gpus"]) == 0 {
		t.Fatalf("the registry describes no gpu_inventory_gpus: %v", series)
	}
	return series
}

var labelValues = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)

// Every query of the dashboard, and the inventory variable's, names only series the operator
// exports or DCGM exporter's, and only labels those series carry: a renamed metric or label
// cannot leave a panel that shows nothing.
func TestQueriesNameOnlyExportedSeries(t *testing.T) {
	known := exportedSeries(t)
	for name, labels := range dcgmSeries {
		known[name] = labels
	}
	check := func(where, expr string, extraLabel string) {
		sels, err := selectors(expr)
		if err != nil {
			t.Errorf("%s: cannot read %s: %v", where, expr, err)
			return
		}
		if len(sels) == 0 {
			t.Errorf("%s: %s reads no series", where, expr)
		}
		for _, s := range sels {
			labels, ok := known[s.metric]
			if !ok {
				t.Errorf("%s: %s is not a series of the operator's metrics.New() nor of DCGM exporter", where, s.metric)
				continue
			}
			for _, l := range append(s.labels, extraLabel) {
				if l != "" && !slices.Contains(labels, l) {
					t.Errorf("%s: %s has no label %s (it has %q)", where, s.metric, l, labels)
				}
			}
		}
	}
	b := readBoard(t)
	queries := 0
	for _, p := range b.Panels {
		for _, target := range p.Targets {
			check("panel "+p.Title, target.Expr, "")
			queries++
		}
	}
	if queries < 30 {
		t.Errorf("read %d queries of the dashboard, want its 30 and more", queries)
	}
	for _, v := range b.Templating.List {
		if v.Type != "query" { // the datasource variable's query is a plugin type
			continue
		}
		q, _ := v.Query.(string)
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			t.Errorf("variable %s: query %q, want label_values(series, label)", v.Name, q)
			continue
		}
		check("variable "+v.Name, m[1], m[2])
	}
}
