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
)

// Fit is what `fit` says, and what it prints with -o json.
type Fit struct {
	// Fits: every replica fits now, at once, with no pod evicted.
	Fits bool `json:"fits"`
	// FitsByPreemption: every replica fits once the scheduler's preemption evicts Preempted
	// pods of lower priority.
	FitsByPreemption bool  `json:"fitsByPreemption,omitempty"`
	Preempted        int64 `json:"preempted,omitempty"`
	// Replicas counts the replicas of every object; Placed those that fit.
	Replicas int64      `json:"replicas"`
	Placed   int64      `json:"placed"`
	Objects  []FitCount `json:"objects"`
	Pods     []FitPod   `json:"pods"`
	// FirstMiss is the first replica that does not fit, and why.
	FirstMiss *FitMiss `json:"firstMiss,omitempty"`
}

// FitCount is one object's replicas: those placed, and those not tried because an earlier
// replica of the object (the same pod) did not fit.
type FitCount struct {
	Object    string `json:"object"` // KIND/NAME
	Namespace string `json:"namespace"`
	Replicas  int64  `json:"replicas"`
	Placed    int64  `json:"placed"`
	NotTried  int64  `json:"notTried,omitempty"`
}

// FitPod is one replica tried: where it goes, and what it gets there.
type FitPod struct {
	Object    string `json:"object"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	// Node is "" for a replica that does not fit.
	Node      string           `json:"node"`
	Resources map[string]int64 `json:"resources,omitempty"`
	Claims    []PodClaim       `json:"claims,omitempty"`
	// Preempts are the pods the scheduler evicts to make room for this replica.
	Preempts []Victim `json:"preempts,omitempty"`
	// Of a gang's pod: the gang's part (GangAnswer.Part), the domain it goes to, the
	// FailedScheduling text of a pod that stays pending, and the node gang preemption
	// nominates for it.
	Part      string `json:"part,omitempty"`
	Domain    string `json:"domain,omitempty"`
	Message   string `json:"message,omitempty"`
	Nominated string `json:"nominated,omitempty"`
}

type FitMiss struct {
	Object    string `json:"object"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	*Diagnosis
	// Preemption is what the scheduler's preemption makes of it.
	Preemption *Preemption `json:"preemption,omitempty"`
}

// schedulerMessage is the FailedScheduling event the replica would get.
func (m *FitMiss) schedulerMessage() string {
	if m.Preemption == nil {
		return m.Message
	}
	return m.Message + " " + m.Preemption.Message
}

// FitReport prints fit's answer for people.
func FitReport(w io.Writer, a *Fit) error {
	var b strings.Builder
	if len(a.Pods) == 0 {
		b.WriteString("No replicas to place: every object asks for 0.\n")
	}
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	if len(a.Pods) > 0 {
		fmt.Fprintln(tw, "OBJECT\tNAMESPACE\tPOD\tNODE\tGETS")
	}
	for _, p := range a.Pods {
		node, gets := p.Node, p.gets()
		if node == "" {
			node, gets = "-", "does not fit"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Object, p.Namespace, p.Pod, node, gets)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, o := range a.Objects {
		if o.NotTried > 0 {
			fmt.Fprintf(&b, "%s: %s not tried: the same pod as the one that does not fit.\n", o.Object, count64(o.NotTried, "more replica", "more replicas"))
		}
	}
	b.WriteString("\n")
	if err := a.writePreempted(&b); err != nil {
		return err
	}
	switch {
	case a.Fits:
		fmt.Fprintf(&b, "All replicas fit now (%d of %d).\n", a.Placed, a.Replicas)
	case a.FitsByPreemption:
		fmt.Fprintf(&b, "All replicas fit (%d of %d) once the scheduler evicts %s of lower priority.\n", a.Placed, a.Replicas, count64(a.Preempted, "pod", "pods"))
	default:
		m := a.FirstMiss
		fmt.Fprintf(&b, "%d of %s fit now. Pod %s/%s (%s) does not:\n%s\n\n", a.Placed, count64(a.Replicas, "replica", "replicas"), m.Namespace, m.Pod, m.Object, m.schedulerMessage())
		if err := m.Diagnosis.write(&b); err != nil {
			return err
		}
		b.WriteString("\n")
	}
	b.WriteString("Nothing was created. Each replica went to the fitting node with the fewest free GPUs left; the scheduler's scoring may choose other nodes.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writePreempted lists the pods the scheduler evicts for the replicas, if any.
func (a *Fit) writePreempted(b *strings.Builder) error {
	if a.Preempted == 0 {
		return nil
	}
	fmt.Fprintf(b, "The scheduler's preemption evicts %s of lower priority for them:\n", count64(a.Preempted, "pod", "pods"))
	tw := tabwriter.NewWriter(b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "FOR\tNODE\tVICTIM\tPRIORITY\tHOLDS")
	for _, p := range a.Pods {
		for _, vp := range p.Preempts {
			holds := vp.Holds
			if holds == "" {
				holds = "-"
			}
			fmt.Fprintf(tw, "%s/%s\t%s\t%s/%s\t%d\t%s\n", p.Namespace, p.Pod, p.Node, vp.Namespace, vp.Pod, vp.Priority, holds)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("\n")
	return nil
}

// gets is what a placed replica gets: device-plugin GPUs and its claims' devices.
func (p *FitPod) gets() string {
	var parts []string
	if len(p.Resources) > 0 {
		parts = append(parts, GPUHolder{Resources: p.Resources}.Holds())
	}
	for _, c := range p.Claims {
		var devices, admin []string
		for _, d := range c.Devices {
			if d.AdminAccess {
				admin = append(admin, d.Pool+"/"+d.Device)
			} else {
				devices = append(devices, d.Pool+"/"+d.Device)
			}
		}
		part := fmt.Sprintf("claim %s: %s", c.Name, compactDevices(devices))
		if len(admin) > 0 {
			part += " admin access to " + compactDevices(admin)
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return "no GPUs"
	}
	return strings.Join(parts, "; ")
}
