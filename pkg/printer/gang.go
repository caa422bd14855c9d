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

// Package printer renders a GpuInventory's status for people: what `kubectl gpuinv` and
// `make demo` print.
package printer

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Who answers for a gang.
const (
	AsScheduler = "kube-scheduler"
	AsKueue     = "kueue"
)

// GangFit is what `fit` says of a file of gangs, and what it prints with -o json.
type GangFit struct {
	// Fits: every gang fits now, each all or nothing, with no pod evicted.
	Fits bool `json:"fits"`
	// FitsByPreemption: every gang fits once the scheduler's gang preemption evicts pods of
	// lower priority (PreemptedBy lists them per gang).
	FitsByPreemption bool `json:"fitsByPreemption,omitempty"`
	// Replicas counts the pods of every gang; Placed those placed.
	Replicas int64        `json:"replicas"`
	Placed   int64        `json:"placed"`
	Gangs    []GangAnswer `json:"gangs"`
	// Pods are every gang's pods and where they go ("" for a pod not placed).
	Pods []FitPod `json:"pods"`
}

// GangAnswer is what fit and why say of one gang.
type GangAnswer struct {
	// Gang is KIND/NAME; Part the child Job of a JobSet, the group of a LeaderWorkerSet.
	Gang      string `json:"gang"`
	Part      string `json:"part,omitempty"`
	Namespace string `json:"namespace"`
	// As is whose answer it is: kube-scheduler (a PodGroup's placement) or kueue (Topology
	// Aware Scheduling's assignment).
	As       string        `json:"as"`
	Pods     int           `json:"pods"`
	MinCount int           `json:"minCount"`
	Topology *GangTopology `json:"topology,omitempty"`
	Kueue    *GangKueue    `json:"kueue,omitempty"`
	Fits     bool          `json:"fits"`
	Placed   int           `json:"placed"`
	// Domain is the domain of Topology.Key the gang goes to (Kueue's, comma-separated, when
	// it spreads a gang); Nodes its nodes.
	Domain string   `json:"domain,omitempty"`
	Nodes  []string `json:"nodes,omitempty"`
	// Message is the component's own words for a gang not placed: the PodGroup's
	// PodGroupInitiallyScheduled condition, or Kueue's QuotaReserved condition.
	Message string `json:"message,omitempty"`
	// Domains are, per domain of the key (all nodes as one without), how many of the gang's
	// pods it takes now and what holds the rest; those that take the most first.
	Domains    []GangDomain    `json:"domains"`
	Preemption *GangPreemption `json:"preemption,omitempty"`
}

type GangTopology struct {
	Key string `json:"key,omitempty"`
	// Mode is required, preferred (Kueue) or unconstrained (Kueue).
	Mode      string `json:"mode"`
	SliceKey  string `json:"sliceKey,omitempty"`
	SliceSize int    `json:"sliceSize,omitempty"`
	// Exclusive: JobSet's or LeaderWorkerSet's exclusive placement, each gang of the set in a
	// domain of its own.
	Exclusive bool `json:"exclusive,omitempty"`
}

// GangKueue is where Kueue admits the gang.
type GangKueue struct {
	Queue        string   `json:"queue"`
	ClusterQueue string   `json:"clusterQueue"`
	Flavor       string   `json:"flavor"`
	Topology     string   `json:"topology"`
	Levels       []string `json:"levels"`
	// Mode is Kueue's flavor assignment mode: Fit, Preempt (it fits only once TAS workloads
	// are preempted) or NoFit.
	Mode string `json:"mode"`
}

// GangDomain is one domain and the gang.
type GangDomain struct {
	Value string `json:"value"`
	Nodes int    `json:"nodes"`
	// Pods is how many of the gang's pods it takes now.
	Pods int `json:"pods"`
	// Held is what holds the rest: the scheduler's FailedScheduling text for the first pod
	// that does not fit, or Kueue's count of excluded nodes.
	Held string `json:"held,omitempty"`
	// Status is, for kube-scheduler, the placement's status: what "first placement status"
	// says when the scheduler reports this domain (it reports one at random).
	Status string `json:"status,omitempty"`
	// Holders are the pods holding GPUs on the domain's nodes (why).
	Holders []GPUHolder `json:"holders,omitempty"`
}

// GangPreemption is the scheduler's gang preemption for a gang that fits no domain.
type GangPreemption struct {
	Message string   `json:"message"`
	Domain  string   `json:"domain,omitempty"`
	Victims []Victim `json:"victims,omitempty"`
}

// GangFitReport prints fit's answer for a file of gangs.
func GangFitReport(w io.Writer, a *GangFit) error {
	var b strings.Builder
	for i := range a.Gangs {
		if err := a.Gangs[i].write(&b, a.Pods); err != nil {
			return err
		}
		b.WriteString("\n")
	}
	switch n := len(a.Gangs); {
	case a.Fits && n == 1:
		fmt.Fprintf(&b, "The gang fits now (%d pods).\n", a.Placed)
	case a.Fits:
		fmt.Fprintf(&b, "All %s fit now (%d pods).\n", count(n, "gang", "gangs"), a.Placed)
	case a.FitsByPreemption:
		fmt.Fprintf(&b, "All %s fit (%d pods) once the scheduler's gang preemption evicts pods of lower priority.\n", count(n, "gang", "gangs"), a.Placed)
	default:
		fits := 0
		for _, g := range a.Gangs {
			if g.Fits {
				fits++
			}
		}
		fmt.Fprintf(&b, "%d of %s fit now: a gang starts all together or not at all.\n", fits, count(n, "gang", "gangs"))
	}
	b.WriteString("Nothing was created.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// write prints one gang: what it asks, the answer, its pods, and the domains.
func (g *GangAnswer) write(b *strings.Builder, pods []FitPod) error {
	fmt.Fprintf(b, "%s %s/%s%s: %s, %s.\n", kindOf(g.Gang), g.Namespace, nameOf(g.Gang), g.partSuffix(), g.asks(), g.as())
	switch {
	case g.Fits:
		fmt.Fprintf(b, "Fits now%s, on %s.\n", g.where(), strings.Join(g.Nodes, ", "))
	default:
		fmt.Fprintf(b, "Does not fit now (%d of %d pods could be placed in one domain).\n", g.bestDomain(), g.Pods)
		if g.Message != "" {
			who := "kube-scheduler"
			if g.Kueue != nil {
				who = "Kueue"
			}
			fmt.Fprintf(b, "%s says: %s\n", who, g.Message)
		}
	}
	if g.Preemption != nil {
		g.Preemption.write(b)
	}
	if g.Fits {
		b.WriteString("\n")
		if err := writeGangPods(b, g, pods); err != nil {
			return err
		}
	}
	return g.writeDomains(b)
}

func (g *GangAnswer) partSuffix() string {
	if g.Part == "" {
		return ""
	}
	return " (" + g.Part + ")"
}

// asks says what the gang asks for.
func (g *GangAnswer) asks() string {
	s := fmt.Sprintf("%d pods", g.Pods)
	if g.MinCount < g.Pods {
		s += fmt.Sprintf(", placed when %d can be", g.MinCount)
	} else {
		s += ", all or nothing"
	}
	t := g.Topology
	switch {
	case t == nil || t.Key == "" && t.Mode != "unconstrained":
		s += ", anywhere"
	case t.Mode == "unconstrained":
		s += ", unconstrained"
	case t.Mode == "preferred":
		s += ", preferably in one " + t.Key + " domain"
	case t.Exclusive:
		s += ", in one " + t.Key + " domain of its own"
	default:
		s += ", in one " + t.Key + " domain"
	}
	if t != nil && t.SliceKey != "" {
		s += fmt.Sprintf(", every %d in one %s domain", t.SliceSize, t.SliceKey)
	}
	return s
}

// as says whose answer it is.
func (g *GangAnswer) as() string {
	if g.Kueue != nil {
		k := g.Kueue
		return fmt.Sprintf("as Kueue's Topology Aware Scheduling assigns it (LocalQueue %s, ClusterQueue %s, flavor %s, Topology %s: %s)",
			k.Queue, k.ClusterQueue, k.Flavor, k.Topology, strings.Join(k.Levels, " > "))
	}
	return "as kube-scheduler places a PodGroup"
}

func (g *GangAnswer) where() string {
	if g.Domain == "" || g.Topology == nil || g.Topology.Key == "" {
		return ""
	}
	return " in " + g.Topology.Key + "=" + g.Domain
}

// bestDomain is the most pods one domain takes.
func (g *GangAnswer) bestDomain() int {
	n := 0
	for _, d := range g.Domains {
		n = max(n, d.Pods)
	}
	return min(n, g.Pods)
}

func (p *GangPreemption) write(b *strings.Builder) {
	if len(p.Victims) == 0 {
		return
	}
	fmt.Fprintf(b, "The scheduler's gang preemption would evict %s of lower priority to place it%s:\n", count(len(p.Victims), "pod", "pods"), inDomain(p.Domain))
	for _, v := range p.Victims {
		fmt.Fprintf(b, "  %s/%s (priority %d)\n", v.Namespace, v.Pod, v.Priority)
	}
}

func inDomain(d string) string {
	if d == "" {
		return ""
	}
	return " in " + d
}

// writeGangPods lists the gang's pods and their nodes.
func writeGangPods(b *strings.Builder, g *GangAnswer, pods []FitPod) error {
	tw := tabwriter.NewWriter(b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tNODE\tDOMAIN\tGETS")
	for _, p := range pods {
		if p.Object != g.Gang || p.Namespace != g.Namespace || p.Part != g.Part {
			continue
		}
		node, domain := orDash(p.Node), orDash(p.Domain)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Pod, node, domain, p.gets())
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeDomains lists, per domain, how many of the gang's pods it takes and what holds the
// rest; the holders of GPUs there when known.
func (g *GangAnswer) writeDomains(b *strings.Builder) error {
	if len(g.Domains) == 0 {
		return nil
	}
	key := "all nodes"
	if g.Topology != nil && g.Topology.Key != "" {
		key = g.Topology.Key
	}
	fmt.Fprintf(b, "\nPer %s domain, the pods it takes now (of %d), those that take the most first:\n", key, g.Pods)
	tw := tabwriter.NewWriter(b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "DOMAIN\tNODES\tTAKES\tWHAT HOLDS THE REST")
	for _, d := range g.Domains {
		held := d.Held
		if held == "" {
			held = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", orDash(d.Value), d.Nodes, d.Pods, held)
		for _, h := range d.Holders {
			fmt.Fprintf(tw, "\t\t\t%s\n", h.describe())
		}
	}
	return tw.Flush()
}

// describe says what a holder holds, terminating ones marked.
func (h GPUHolder) describe() string {
	s := fmt.Sprintf("%s/%s holds %s", h.Namespace, h.Pod, h.Holds())
	if h.Terminating {
		s += " (terminating)"
	}
	return s
}

func kindOf(obj string) string {
	k, _, _ := strings.Cut(obj, "/")
	return k
}

func nameOf(obj string) string {
	_, n, _ := strings.Cut(obj, "/")
	return n
}

// writeGang says why a pod of a gang waits: the component's own words, the pod's
// FailedScheduling event, then the gang per domain with the pods holding GPUs in the
// nearest domains.
func (a *Why) writeGang(b *strings.Builder, pod string, now time.Time) error {
	g := a.Gang
	state := "pending"
	if a.State == WhyGated {
		state = "gated (" + strings.Join(a.Gates, ", ") + ")"
	}
	fmt.Fprintf(b, "Pod %s is %s: it starts with its gang, %s: %s, %s.\n", pod, state, a.Group, g.asks(), g.as())
	if a.GroupCondition != "" {
		cond := "PodGroupInitiallyScheduled"
		if g.Kueue != nil {
			cond = "QuotaReserved"
		}
		fmt.Fprintf(b, "%s: %s\n", cond, a.GroupCondition)
	}
	if a.Scheduler != nil {
		fmt.Fprintf(b, "Scheduler:  %s (FailedScheduling, %s ago)\n", a.Scheduler.Message, age(a.Scheduler.Time.Time, now))
	}
	switch {
	case g.Fits:
		fmt.Fprintf(b, "Now:        the gang fits%s, on %s (it is placed when the %s tries it again).\n", g.where(), strings.Join(g.Nodes, ", "), g.As)
	default:
		fmt.Fprintf(b, "Now:        the gang does not fit: at most %d of its %d pods fit in one domain (it needs %d).\n", g.bestDomain(), g.Pods, g.MinCount)
		if g.Message != "" {
			fmt.Fprintf(b, "            %s\n", g.Message)
		}
	}
	if g.Preemption != nil {
		g.Preemption.write(b)
	}
	return g.writeDomains(b)
}
