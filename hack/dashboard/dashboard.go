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
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// UID is the dashboard's stable uid: links and Grafana's sidecar find it under this name.
const UID = "gpu-inventory-operator"

// Units of the panels: GPUs are counted, GPU-hours summed.
const (
	unitGPUs     = "none"
	unitGPUHours = "suffix: GPU-h"
	unitSeconds  = "s"
	unitPercent  = "percent"
)

// datasource is the Prometheus the dashboard's $datasource variable names.
var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// Dashboard builds the dashboard of one GpuInventory (the $inventory variable). Inventories
// may cover the same nodes, so figures are never summed across them. Both replicas are
// scraped and only the leader exports inventory series: queries take the max over instances,
// as the alerts do.
func Dashboard() (dashboard.Dashboard, error) {
	b := dashboard.NewDashboardBuilder("GPU inventory").
		Uid(UID).
		Description("The GPU fleet of one GpuInventory: GPUs per model, fragmentation, quota against hardware, GPUs held but idle and problem nodes (gpu-inventory-operator; docs/metrics.md).").
		Tags([]string{"gpu", "gpu-inventory-operator", "kubernetes"}).
		Refresh("1m").
		Time("now-24h", "now").
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Readonly().
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").
			Label("Prometheus").
			Type("prometheus")).
		WithVariable(dashboard.NewQueryVariableBuilder("inventory").
			Label("GpuInventory").
			Description("One GpuInventory: inventories may cover the same nodes, so they are shown one at a time.").
			Datasource(datasource).
			Query(dashboard.StringOrMap{String: cog.ToPtr("label_values(gpu_inventory_gpus, inventory)")}).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Sort(dashboard.VariableSortAlphabeticalAsc))
	overview(b)
	models(b)
	fragmentation(b)
	quota(b)
	heldIdle(b)
	problemNodes(b)
	board, err := b.Build()
	if err != nil {
		return board, err
	}
	for i := range board.Panels { // stable ids, in the order of the page
		if p := board.Panels[i].Panel; p != nil {
			p.Id = cog.ToPtr(uint32(i + 1))
		}
		if r := board.Panels[i].RowPanel; r != nil {
			r.Id = uint32(i + 1)
		}
	}
	return board, nil
}

// sel is a selector of a series of the chosen inventory: sel("gpu_inventory_gpus", `ready="true"`).
func sel(metric string, matchers ...string) string {
	s := metric + `{inventory="$inventory"`
	for _, m := range matchers {
		s += "," + m
	}
	return s + "}"
}

// query is a range query shown with legend (Grafana's {{label}} template).
func query(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Datasource(datasource).Expr(expr).LegendFormat(legend).Range()
}

// instant is a query of the latest values, as a table.
func instant(ref, expr string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Datasource(datasource).Expr(expr).RefId(ref).Instant().Format(prometheus.PromQueryFormatTable)
}

// thresholds colours a value: green below the first step, then each step's colour.
func thresholds(steps ...dashboard.Threshold) *dashboard.ThresholdsConfigBuilder {
	return colours("green", steps...)
}

// colours colours a value: base below the first step, then each step's colour.
func colours(base string, steps ...dashboard.Threshold) *dashboard.ThresholdsConfigBuilder {
	all := append([]dashboard.Threshold{{Color: base}}, steps...)
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(all)
}

func step(value float64, color string) dashboard.Threshold {
	return dashboard.Threshold{Value: cog.ToPtr(value), Color: color}
}

// single is a stat panel of one number.
func single(title, description, unit, expr string, th *dashboard.ThresholdsConfigBuilder) *stat.PanelBuilder {
	if th == nil {
		th = colours("text")
	}
	noValue := "-" // no series: an age or a ratio is unknown, a count of GPUs or nodes is none
	if unit == unitGPUs {
		noValue = "0"
	}
	return stat.NewPanelBuilder().
		Title(title).Description(description).Datasource(datasource).
		Unit(unit).Decimals(0).Height(4).Span(4).
		GraphMode(common.BigValueGraphModeArea).ColorMode(common.BigValueColorModeValue).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		Thresholds(th).NoValue(noValue).
		WithTarget(query(expr, title).RefId("A"))
}

// graph is a time series panel whose legend, a table on the right, names each series.
func graph(title, description, unit string, targets ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().
		Title(title).Description(description).Datasource(datasource).
		Unit(unit).Min(0).Height(8).Span(12).
		FillOpacity(10).LineWidth(1).ShowPoints(common.VisibilityModeNever).
		Legend(common.NewVizLegendOptionsBuilder().
			ShowLegend(true).
			DisplayMode(common.LegendDisplayModeTable).
			Placement(common.LegendPlacementRight).
			Calcs([]string{"lastNotNull", "max"}).
			SortBy("Last *").SortDesc(true)).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending))
	for i, t := range targets {
		p.WithTarget(t.RefId(string(rune('A' + i))))
	}
	if unit == unitGPUs || unit == unitGPUHours {
		p.Decimals(0)
	}
	return p
}

// dashed draws the series of the given legend as a dashed line, for limits drawn beside figures.
func dashed(p *timeseries.PanelBuilder, legendRegexp string) *timeseries.PanelBuilder {
	return p.OverrideByRegexp(legendRegexp, []dashboard.DynamicConfigValue{
		{Id: "custom.lineStyle", Value: map[string]any{"fill": "dash", "dash": []int{10, 10}}},
		{Id: "custom.fillOpacity", Value: 0},
	})
}

// column is one instant query of a table, and the header its values get.
type column struct{ header, expr string }

// headers are the tables' names of the label columns.
var headers = map[string]string{
	"product": "Model", "model": "Model", "resource": "Resource", "cohort": "Cohort",
	"finding": "Finding", "namespace": "Namespace", "node": "Node",
}

// grid is a table of instant queries joined on the labels they share (labels, shown first).
func grid(title, description string, labels []string, columns ...column) *table.PanelBuilder {
	p := table.NewPanelBuilder().
		Title(title).Description(description).Datasource(datasource).
		Unit(unitGPUs).Decimals(0).Height(8).Span(12).
		Footer(common.NewTableFooterOptionsBuilder().Show(false).Reducer([]string{"sum"}))
	rename := map[string]string{}
	order := map[string]int{}
	for n, label := range labels {
		rename[label] = headers[label]
		order[label] = n
	}
	for n, c := range columns {
		ref := string(rune('A' + n))
		p.WithTarget(instant(ref, c.expr))
		value := "Value #" + ref
		if len(columns) == 1 {
			value = "Value"
		}
		rename[value] = c.header
		order[value] = len(labels) + n
	}
	p.WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}})
	p.WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
		"excludeByName": map[string]bool{"Time": true},
		"renameByName":  rename,
		"indexByName":   order,
	}})
	return p
}
