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

package printer

import (
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// GpuFleetReport writes what `kubectl gpuinv fleet` shows of a GpuFleet kept by the fleet
// hub: its sources and totals, the models across the members counted, one row per member
// (why it cannot be read, for a member that cannot), and the conditions that are True.
func GpuFleetReport(w io.Writer, gf *homelabv1.GpuFleet, opts Options) error {
	s := &gf.Status
	var kv keyValues
	kv.add("Name", plain(gf.Name))
	kv.add("Members from", plain(fleetSources(&gf.Spec)))
	if s.FleetHash == "" {
		kv.add("Status", colored("not reported yet: is the fleet hub (gpu-fleet-hub) running on this cluster?", yellow))
		return kv.write(w, opts.Color)
	}
	members := join(" ", readyCell(s.ReachableMembers, s.TotalMembers), plain("reachable"))
	if s.StaleMembers > 0 {
		members = join(", ", members, colored(fmt.Sprintf("%d stale (out of the totals)", s.StaleMembers), red))
	}
	kv.add("Members", members)
	kv.add("GPUs", plain(fmt.Sprintf("%d/%d ready, %d free", s.ReadyGpus, s.TotalGpus, s.FreeGpus)))
	if int(s.ListedMembers) < int(s.TotalMembers) {
		kv.add("Listed", colored(fmt.Sprintf("%d of %d members (problem members first); totals count every member", s.ListedMembers, s.TotalMembers), yellow))
	}
	if err := kv.write(w, opts.Color); err != nil {
		return err
	}
	if len(s.Models) > 0 {
		if err := fleetModels(w, s.Models, opts); err != nil {
			return err
		}
	}
	if len(s.Members) > 0 {
		if err := fleetMembers(w, s.Members, opts); err != nil {
			return err
		}
		if err := fleetGangs(w, s.Members, opts); err != nil {
			return err
		}
		if err := fleetQuota(w, s.Members, opts); err != nil {
			return err
		}
	}
	return fleetConditions(w, s.Conditions, opts)
}

// fleetSources says where a fleet's members come from.
func fleetSources(spec *homelabv1.GpuFleetSpec) string {
	var out []string
	if cp := spec.ClusterProfiles; cp != nil {
		where := "every namespace"
		if cp.Namespace != "" {
			where = "namespace " + cp.Namespace
		}
		what := "ClusterProfiles in " + where
		if sel := SelectorString(cp.Selector); cp.Selector != nil && sel != "" {
			what += " matching " + sel
		}
		out = append(out, what)
	}
	if mk := spec.MultiKueue; mk != nil {
		ns := mk.Namespace
		if ns == "" {
			ns = homelabv1.DefaultKueueNamespace
		}
		out = append(out, "MultiKueueClusters (Kueue in "+ns+")")
	}
	return strings.Join(out, "; ")
}

func fleetModels(w io.Writer, models []homelabv1.FleetModel, opts Options) error {
	var t table
	t.header("MODEL", "MEMBERS", "GPUS", "READY", "FREE", "LARGEST-FIT")
	for _, m := range models {
		fit := ""
		if m.LargestFit > 0 {
			fit = fmt.Sprintf("%d (%s)", m.LargestFit, m.LargestFitMember)
		}
		t.row(plain(m.Model), plain(fmt.Sprint(m.Members)), plain(fmt.Sprint(m.Gpus)), readyCell(m.ReadyGpus, m.Gpus), freeCell(m.FreeGpus), plain(fit))
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return err
	}
	return t.write(w, opts.Color)
}

// fleetMembers is one row per listed member: its state, since when, its figures (last-known
// while it cannot be read) and its models, or why it cannot be read.
func fleetMembers(w io.Writer, rows []homelabv1.FleetMember, opts Options) error {
	var t table
	headers := []string{"MEMBER", "STATE", "SINCE", "GPUS", "READY", "FREE", "MODELS / WHY"}
	if opts.Wide {
		headers = append(headers, "CLUSTERPROFILE", "MULTIKUEUECLUSTER", "SERVER")
	}
	t.header(headers...)
	for _, r := range rows {
		since := ""
		if r.Since != nil {
			since = age(r.Since.Time, opts.Now)
		}
		figures := []cell{plain(""), plain(""), plain("")}
		if r.Gpus > 0 || r.State == homelabv1.MemberReachable {
			figures = []cell{plain(fmt.Sprint(r.Gpus)), readyCell(r.ReadyGpus, r.Gpus), freeCell(r.FreeGpus)}
		}
		row := append([]cell{plain(r.Name), memberState(r.State), plain(since)}, figures...)
		row = append(row, memberDetail(r))
		if opts.Wide {
			row = append(row, plain(r.ClusterProfile), plain(r.MultiKueueCluster), plain(r.Server))
		}
		t.row(row...)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return err
	}
	return t.write(w, opts.Color)
}

func memberState(state string) cell {
	switch state {
	case homelabv1.MemberReachable:
		return colored(state, green)
	case homelabv1.MemberUnreachable, homelabv1.MemberStale:
		return colored(state, red)
	}
	return colored(state, yellow)
}

// memberDetail is a reachable member's models and problems, or why a member is not reachable.
func memberDetail(r homelabv1.FleetMember) cell {
	if r.State != homelabv1.MemberReachable {
		if r.Reason == "" {
			return plain(r.Message)
		}
		return plain(r.Reason + ": " + r.Message)
	}
	var parts []string
	for _, m := range r.Models {
		parts = append(parts, fmt.Sprintf("%s %d", m.Model, m.Gpus))
	}
	text := strings.Join(parts, ", ")
	if len(r.Problems) > 0 {
		return join("; ", plain(text), colored(strings.Join(r.Problems, ", "), yellow))
	}
	return plain(text)
}

// fleetGangs is one row per member, model and topology level: the largest gang one domain
// takes now and how many gangs of each size fit at once.
func fleetGangs(w io.Writer, rows []homelabv1.FleetMember, opts Options) error {
	var t table
	t.header("MEMBER", "MODEL", "LEVEL", "LARGEST-GANG", "SLOTS (GPUS:GANGS)")
	n := 0
	for _, r := range rows {
		for _, g := range r.Gangs {
			largest := fmt.Sprint(g.LargestGang)
			if g.Domain != "" {
				largest += " (" + g.Domain + ")"
			}
			slots := make([]string, 0, len(g.Slots))
			for _, s := range g.Slots {
				slots = append(slots, fmt.Sprintf("%d:%d", s.Gpus, s.Gangs))
			}
			text := strings.Join(slots, " ")
			if g.Partial {
				text += " (at least: some domains not listed)"
			}
			t.row(plain(r.Name), plain(g.Model), plain(g.Level), plain(largest), plain(text))
			n++
		}
	}
	if n == 0 {
		return nil
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return err
	}
	return t.write(w, opts.Color)
}

// fleetQuota is one row per quota finding of a member: quota set beyond the Ready GPUs
// (Overcommitted) or Ready GPUs no quota reaches (Stranded).
func fleetQuota(w io.Writer, rows []homelabv1.FleetMember, opts Options) error {
	var t table
	t.header("MEMBER", "MODEL", "RESOURCE", "FINDING", "NOMINAL", "READY")
	n := 0
	for _, r := range rows {
		if r.Quota == nil {
			continue
		}
		for _, f := range r.Quota.Findings {
			t.row(plain(r.Name), plain(f.Model), plain(f.Resource), colored(f.Finding, yellow), plain(fmt.Sprint(f.Nominal)), plain(fmt.Sprint(f.Ready)))
			n++
		}
	}
	if n == 0 {
		return nil
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return err
	}
	return t.write(w, opts.Color)
}

// fleetConditions lists the conditions that are True, each with its message.
func fleetConditions(w io.Writer, conds []metav1.Condition, opts Options) error {
	var lines []string
	for _, c := range conds {
		if c.Status == metav1.ConditionTrue {
			line := fmt.Sprintf("%s: %s", c.Type, c.Message)
			if opts.Color {
				line = yellow + line + reset
			}
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		return nil
	}
	_, err := io.WriteString(w, "\n"+strings.Join(lines, "\n")+"\n")
	return err
}
