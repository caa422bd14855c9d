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
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pod states of `why`.
const (
	WhyPending  = "Pending"  // waiting for the scheduler
	WhyGated    = "Gated"    // has scheduling gates: the scheduler does not try it
	WhyBound    = "Bound"    // on a node
	WhyFinished = "Finished" // Succeeded or Failed: holds nothing
)

// Why is what `why` says, and what it prints with -o json.
type Why struct {
	Namespace string          `json:"namespace"`
	Pod       string          `json:"pod"`
	State     string          `json:"state"`
	Phase     corev1.PodPhase `json:"phase"`
	// Node is where the pod is bound.
	Node        string `json:"node,omitempty"`
	Terminating bool   `json:"terminating,omitempty"`
	// Gates are the pod's scheduling gates.
	Gates []string `json:"gates,omitempty"`
	// Resources are the GPU resources the pod requests (on a node: holds) from device plugins.
	Resources map[string]int64 `json:"resources,omitempty"`
	Claims    []PodClaim       `json:"claims,omitempty"`
	// FitsOn are the nodes a pending pod fits on now.
	FitsOn []string `json:"fitsOn,omitempty"`
	// Unresolvable is why the scheduler cannot try any node (a missing claim or class, a
	// selector that does not compile).
	Unresolvable string `json:"unresolvable,omitempty"`
	// The diagnosis of a pending pod that fits nowhere.
	*Diagnosis `json:",omitempty"`
	// Preemption is what the scheduler's preemption makes of a pending pod that fits nowhere.
	Preemption *Preemption `json:"preemption,omitempty"`
	// Scheduler is the scheduler's latest FailedScheduling event for the pod.
	Scheduler *SchedulerEvent `json:"scheduler,omitempty"`
	// Of a pod that waits with its gang: the gang (PodGroup or Kueue Workload NS/NAME), its
	// condition's message (PodGroupInitiallyScheduled, or Kueue's QuotaReserved) and the
	// gang's answer, per domain.
	Group          string      `json:"group,omitempty"`
	GroupCondition string      `json:"groupCondition,omitempty"`
	Gang           *GangAnswer `json:"gang,omitempty"`
}

// PodClaim is one of a pod's ResourceClaims.
type PodClaim struct {
	// Name is the claim's; for a claim not yet made from its template, the template's.
	Name string `json:"name"`
	// Template: the claim is still to be made from this template.
	Template  string            `json:"template,omitempty"`
	Missing   bool              `json:"missing,omitempty"` // named but does not exist
	Allocated bool              `json:"allocated"`
	Devices   []AllocatedDevice `json:"devices,omitempty"`
}

type SchedulerEvent struct {
	Message string      `json:"message"`
	Time    metav1.Time `json:"time"`
	Count   int32       `json:"count,omitempty"`
}

// WhyReport prints why's answer for people.
func WhyReport(w io.Writer, a *Why, now time.Time) error {
	var b strings.Builder
	pod := a.Namespace + "/" + a.Pod
	switch {
	case a.State == WhyFinished:
		fmt.Fprintf(&b, "Pod %s has finished (%s)%s: it holds no GPUs.\n", pod, a.Phase, onNode(a.Node))
	case a.Gang != nil:
		if err := a.writeGang(&b, pod, now); err != nil {
			return err
		}
	case a.State == WhyGated:
		fmt.Fprintf(&b, "Pod %s is gated: it waits in the scheduler's queue, which does not try it until its scheduling gates are removed: %s.\n", pod, strings.Join(a.Gates, ", "))
	case a.State == WhyBound:
		if err := a.writeBound(&b, pod); err != nil {
			return err
		}
	default:
		if err := a.writePending(&b, pod, now); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func onNode(node string) string {
	if node == "" {
		return ""
	}
	return " on node " + node
}

// writeBound says where a bound pod's GPUs are.
func (a *Why) writeBound(b *strings.Builder, pod string) error {
	terminating := ""
	if a.Terminating {
		terminating = ", terminating (it holds its GPUs until it is gone)"
	}
	fmt.Fprintf(b, "Pod %s is %s on node %s%s.\n", pod, a.Phase, a.Node, terminating)
	if len(a.Resources) == 0 && len(a.Claims) == 0 {
		b.WriteString("It requests no GPU resources and has no ResourceClaims.\n")
		return nil
	}
	if len(a.Resources) > 0 {
		fmt.Fprintf(b, "Device-plugin GPUs: %s\n", GPUHolder{Resources: a.Resources}.Holds())
	}
	if len(a.Claims) == 0 {
		return nil
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(b, 0, 8, 2, ' ', 0)
	// NOTE is last, and left out when empty: no padding after the devices.
	fmt.Fprintln(tw, "CLAIM\tREQUEST\tDRIVER\tPOOL/DEVICE\tNOTE")
	for _, c := range a.Claims {
		switch {
		case c.Missing:
			fmt.Fprintf(tw, "%s\t-\t-\t-\tdoes not exist\n", c.Name)
		case c.Template != "":
			fmt.Fprintf(tw, "%s\t-\t-\t-\tnot made yet from template %s\n", c.Name, c.Template)
		case !c.Allocated:
			fmt.Fprintf(tw, "%s\t-\t-\t-\tnot allocated\n", c.Name)
		}
		for _, d := range c.Devices {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s/%s", c.Name, d.Request, d.Driver, d.Pool, d.Device)
			if d.AdminAccess {
				fmt.Fprint(tw, "\tadmin access (monitors the device, holds nothing)")
			}
			fmt.Fprintln(tw)
		}
	}
	return tw.Flush()
}

// writePending says why a pending pod fits nowhere, or where it fits now.
func (a *Why) writePending(b *strings.Builder, pod string, now time.Time) error {
	fmt.Fprintf(b, "Pod %s is pending.\n", pod)
	if asks := a.asks(); asks != "" {
		fmt.Fprintf(b, "Asks for:   %s\n", asks)
	}
	switch {
	case a.Unresolvable != "":
		fmt.Fprintf(b, "Now:        the scheduler cannot try any node: %s\n", a.Unresolvable)
	case len(a.FitsOn) > 0:
		fmt.Fprintf(b, "Now:        it fits on %s: %s (the scheduler retries it when the cluster changes)\n",
			count64(int64(len(a.FitsOn)), "node", "nodes"), shortList(a.FitsOn, namesShown))
	default:
		fmt.Fprintf(b, "Now:        %s\n", a.schedulerMessage())
	}
	if a.Scheduler != nil {
		fmt.Fprintf(b, "Scheduler:  %s (FailedScheduling, %s ago)\n", a.Scheduler.Message, age(a.Scheduler.Time.Time, now))
	} else {
		b.WriteString("Scheduler:  no FailedScheduling event for the pod (events expire, after an hour by default)\n")
	}
	if a.Diagnosis == nil {
		return nil
	}
	if a.Preemption != nil {
		if err := a.Preemption.write(b); err != nil {
			return err
		}
	}
	b.WriteString("\n")
	return a.Diagnosis.write(b)
}

// schedulerMessage is the FailedScheduling event the scheduler gives the pod now: the
// filters' summary, then preemption's.
func (a *Why) schedulerMessage() string {
	if a.Preemption == nil {
		return a.Message
	}
	return a.Message + " " + a.Preemption.Message
}

// asks is what the pod asks for: its GPU resources and claims.
func (a *Why) asks() string {
	var parts []string
	if len(a.Resources) > 0 {
		parts = append(parts, GPUHolder{Resources: a.Resources}.Holds())
	}
	for _, c := range a.Claims {
		switch {
		case c.Template != "":
			parts = append(parts, "a claim from template "+c.Template)
		case c.Missing:
			parts = append(parts, "claim "+c.Name+" (does not exist)")
		case c.Allocated:
			var devices []string
			for _, d := range c.Devices {
				devices = append(devices, d.Pool+"/"+d.Device)
			}
			parts = append(parts, fmt.Sprintf("claim %s (allocated: %s)", c.Name, strings.Join(slices.Compact(devices), ",")))
		default:
			parts = append(parts, "claim "+c.Name)
		}
	}
	return strings.Join(parts, "; ")
}

// NearestShown is how many of the nearest nodes why and fit show, with their holders.
const NearestShown = 3

// namesShown is how many node names a reason's row names.
const namesShown = 5

// Diagnosis is why a pod fits on no node, in the scheduler's words.
type Diagnosis struct {
	// Message is the summary of the scheduler's FailedScheduling event (without its
	// preemption part): "0/N nodes are available: ...".
	Message string `json:"message"`
	// Reasons are the scheduler's reasons with the nodes that gave each, in Message's order.
	Reasons []ReasonCount `json:"reasons"`
	// Nodes are every node with its reasons, by name.
	Nodes []NodeReasons `json:"nodes"`
	// Nearest are the nodes where only resources or claims fail and the pod would fit with
	// nothing held, fewest GPU units missing first (at most NearestShown), with the pods
	// holding GPUs there.
	Nearest []NearNode `json:"nearest"`
	// NearNodes counts such nodes, shown or not.
	NearNodes int `json:"nearNodes"`
}

type ReasonCount struct {
	Reason string   `json:"reason"`
	Count  int      `json:"count"`
	Nodes  []string `json:"nodes"`
}

type NodeReasons struct {
	Node    string   `json:"node"`
	Reasons []string `json:"reasons"`
}

// NearNode is a node where the pod fails only for want of room.
type NearNode struct {
	Node    string   `json:"node"`
	Reasons []string `json:"reasons"`
	// Missing sums what the pod lacks there, in GPU units (devices, MIG devices, replicas).
	Missing int64 `json:"missing"`
	// Room is what the pod could get there now, per GPU resource or claim request.
	Room    []Room      `json:"room,omitempty"`
	Holders []GPUHolder `json:"holders"`
}

// Room is what a pod could get of one thing it asks for on one node.
type Room struct {
	// What is a resource name, or "claim NAME request REQUEST".
	What      string `json:"what"`
	Free      int64  `json:"free"` // at most Requested
	Requested int64  `json:"requested"`
}

// GPUHolder is a pod holding GPUs on a node.
type GPUHolder struct {
	Namespace string           `json:"namespace"`
	Pod       string           `json:"pod"`
	Resources map[string]int64 `json:"resources,omitempty"`
	// Devices are the DRA devices it holds, as POOL/DEVICE.
	Devices []string `json:"devices,omitempty"`
	// Terminating: the pod is being deleted; its GPUs are free once it is gone.
	Terminating bool `json:"terminating,omitempty"`
}

// AllocatedDevice is one device of a claim's allocation.
type AllocatedDevice struct {
	Request string `json:"request"`
	Driver  string `json:"driver"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
	// AdminAccess: the claim monitors the device without holding it.
	AdminAccess bool `json:"adminAccess,omitempty"`
}

// write prints the diagnosis for people: the reasons with their nodes, the nearest nodes and
// who holds GPUs there.
func (d *Diagnosis) write(b *strings.Builder) error {
	tw := tabwriter.NewWriter(b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NODES\tREASON\tWHICH")
	for _, r := range d.Reasons {
		fmt.Fprintf(tw, "%d\t%s\t%s\n", r.Count, r.Reason, shortList(r.Nodes, namesShown))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(d.Nearest) == 0 {
		b.WriteString("\nNo node would fit it even with all its GPUs free: each fails on something else.\n")
		return nil
	}
	fmt.Fprintf(b, "\nNearest nodes (they lack only room that pods hold; fewest GPU units missing first, %d of %d):\n", len(d.Nearest), d.NearNodes)
	tw = tabwriter.NewWriter(b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tMISSING\tROOM")
	for _, n := range d.Nearest {
		var parts []string
		for _, r := range n.Room {
			parts = append(parts, fmt.Sprintf("%s: %d free of %d", r.What, r.Free, r.Requested))
		}
		if len(parts) == 0 {
			parts = n.Reasons
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", n.Node, n.Missing, strings.Join(parts, "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return d.writeHolders(b)
}

// writeHolders prints what would make room: the pods holding GPUs on the nearest nodes.
func (d *Diagnosis) writeHolders(b *strings.Builder) error {
	b.WriteString("\nWhat would make room: the pods holding GPUs there (a terminating pod's are free once it is gone):\n")
	tw := tabwriter.NewWriter(b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPOD\tSTATE\tHOLDS")
	for _, n := range d.Nearest {
		if len(n.Holders) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\n", n.Node)
		}
		for _, h := range n.Holders {
			state := "-"
			if h.Terminating {
				state = "terminating"
			}
			fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\n", n.Node, h.Namespace, h.Pod, state, h.Holds())
		}
	}
	return tw.Flush()
}

func (h GPUHolder) Holds() string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(h.Resources)) {
		parts = append(parts, fmt.Sprintf("%s=%d", name, h.Resources[name]))
	}
	if len(h.Devices) > 0 {
		parts = append(parts, "devices "+compactDevices(h.Devices))
	}
	return strings.Join(parts, "; ")
}

// compactDevices joins POOL/DEVICE names, naming each pool once for its run of devices:
// node-1/gpu-0,gpu-1,node-2/gpu-0.
func compactDevices(devices []string) string {
	var b strings.Builder
	pool := ""
	for i, d := range devices {
		if i > 0 {
			b.WriteString(",")
		}
		p, name, _ := strings.Cut(d, "/")
		if i == 0 || p != pool {
			b.WriteString(p + "/")
			pool = p
		}
		b.WriteString(name)
	}
	return b.String()
}

// shortList is the first n names, and how many more.
func shortList(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// Preemption is what the scheduler's preemption makes of a pending pod.
type Preemption struct {
	// Message is the preemption part of the FailedScheduling event, "preemption: ...".
	Message string `json:"message"`
	// Nominated is the node the scheduler already preempted pods on for this pod.
	Nominated string `json:"nominated,omitempty"`
	// Candidates are nodes where evicting pods of lower priority makes room, the one the
	// scheduler would pick first (at most NearestShown).
	Candidates []PreemptionCandidate `json:"candidates,omitempty"`
	// CandidateNodes counts them, shown or not.
	CandidateNodes int `json:"candidateNodes,omitempty"`
}

type PreemptionCandidate struct {
	Node    string   `json:"node"`
	Victims []Victim `json:"victims"`
}

type Victim struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Priority  int32  `json:"priority"`
	// Holds is what it holds there of GPUs, as the holders list says it.
	Holds string `json:"holds,omitempty"`
}

// write prints what preemption would do, when it would do anything.
func (a *Preemption) write(b *strings.Builder) error {
	if a.Nominated != "" {
		fmt.Fprintf(b, "Nominated:  node %s: the scheduler preempted pods there for this pod and places it there once they are gone\n", a.Nominated)
	}
	if len(a.Candidates) == 0 {
		return nil
	}
	best := a.Candidates[0]
	fmt.Fprintf(b, "\nPreemption: evicting pods of lower priority makes room on %s; the scheduler picks %s, evicting %s:\n",
		count64(int64(a.CandidateNodes), "node", "nodes"), best.Node, count64(int64(len(best.Victims)), "pod", "pods"))
	tw := tabwriter.NewWriter(b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tVICTIM\tPRIORITY\tHOLDS")
	for _, c := range a.Candidates {
		for _, vp := range c.Victims {
			holds := vp.Holds
			if holds == "" {
				holds = "-"
			}
			fmt.Fprintf(tw, "%s\t%s/%s\t%d\t%s\n", c.Node, vp.Namespace, vp.Pod, vp.Priority, holds)
		}
	}
	return tw.Flush()
}
