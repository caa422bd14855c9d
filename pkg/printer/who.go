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
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Who is what `who` says, and what it prints with -o json.

type Who struct {
	// Namespace is the namespace listed; empty for all.
	Namespace string `json:"namespace"`
	// Pods counts the pods holding GPUs; Nodes the nodes they hold GPUs on.
	Pods  int32 `json:"pods"`
	Nodes int32 `json:"nodes"`
	// MilliGpus is what they hold in thousandths of a GPU (a GPU shared through a claim
	// counted once); Gpus the same in GPU-equivalents.
	MilliGpus int64   `json:"milliGpus"`
	Gpus      float64 `json:"gpus"`
	// WaitingPods and WaitingGpus are what pods (and claims) waiting to be scheduled ask for.
	WaitingPods int32 `json:"waitingPods"`
	WaitingGpus int32 `json:"waitingGpus"`
	// QueuedPods and QueuedGpus are what gated pods ask for: the scheduler does not try them yet.
	QueuedPods int32 `json:"queuedPods,omitempty"`
	QueuedGpus int32 `json:"queuedGpus,omitempty"`
	// Holders, or with --by-namespace Namespaces.
	Holders    []WhoHolder        `json:"holders,omitempty"`
	Namespaces []NamespaceHolding `json:"namespaces,omitempty"`
}

// holder is what one pod holds on one node.
type WhoHolder struct {
	Namespace string `json:"namespace"`
	// Pod is empty for an allocated claim reserved for no pod.
	Pod  string `json:"pod"`
	Node string `json:"node"`
	// Model is the node's base model; UnknownModel without its GpuNode record.
	Model     string  `json:"model"`
	MilliGpus int64   `json:"milliGpus"`
	Gpus      float64 `json:"gpus"`
	// Resources are the device-plugin resources held; Devices and Claims the DRA devices
	// and the claims they come from.
	Resources map[string]int64 `json:"resources,omitempty"`
	Devices   []string         `json:"devices,omitempty"`
	Claims    []string         `json:"claims,omitempty"`
	// Shared: a claim of these devices is reserved for other pods too.
	Shared bool         `json:"shared,omitempty"`
	Since  *metav1.Time `json:"since,omitempty"`
}

// NamespaceHolding is what one namespace's pods hold.
type NamespaceHolding struct {
	Namespace string  `json:"namespace"`
	Pods      int32   `json:"pods"`
	MilliGpus int64   `json:"milliGpus"`
	Gpus      float64 `json:"gpus"`
}

// WhoReport prints who's answer for people: the holders (wide: with what each holds) or the
// namespaces, then a summary line.
func WhoReport(w io.Writer, a *Who, wide bool, now time.Time) error {
	var b strings.Builder
	where := fmt.Sprintf("in namespace %q", a.Namespace)
	if a.Namespace == "" {
		where = "in any namespace"
	}
	if a.Pods == 0 && a.MilliGpus == 0 {
		fmt.Fprintf(&b, "No pod holds GPUs %s.\n", where)
	} else {
		tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
		shared := false
		if a.Namespaces != nil {
			fmt.Fprintln(tw, "NAMESPACE\tPODS\tGPUS")
			for _, n := range a.Namespaces {
				fmt.Fprintf(tw, "%s\t%d\t%s\n", n.Namespace, n.Pods, MilliGPUs(n.MilliGpus))
			}
		} else {
			header := "NAMESPACE\tPOD\tNODE\tMODEL\tGPUS\tSINCE"
			if wide {
				header += "\tHOLDS"
			}
			fmt.Fprintln(tw, header)
			for _, h := range a.Holders {
				pod := h.Pod
				if pod == "" {
					pod = "claim/" + strings.Join(h.Claims, ",claim/")
				}
				gpus := MilliGPUs(h.MilliGpus)
				if h.Shared {
					gpus += "*"
					shared = true
				}
				since := "-"
				if h.Since != nil {
					since = age(h.Since.Time, now)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s", h.Namespace, pod, h.Node, h.Model, gpus, since)
				if wide {
					fmt.Fprintf(tw, "\t%s", h.Holds())
				}
				fmt.Fprintln(tw)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if shared {
			b.WriteString("* held through a claim shared with other pods: the same GPUs, counted once in the total\n")
		}
		b.WriteString("\n")
		namespaces := ""
		if a.Namespace == "" {
			namespaces = fmt.Sprintf(" in %s", count64(int64(len(a.nsNames())), "namespace", "namespaces"))
		}
		fmt.Fprintf(&b, "%s%s hold %s GPUs on %s.\n", count64(int64(a.Pods), "pod", "pods"), namespaces,
			MilliGPUs(a.MilliGpus), count64(int64(a.Nodes), "node", "nodes"))
	}
	if a.WaitingPods > 0 {
		fmt.Fprintf(&b, "Waiting to be scheduled %s: %s asking for %s (`kubectl gpuinv free` shows where they could run).\n",
			where, count64(int64(a.WaitingPods), "pod", "pods"), count64(int64(a.WaitingGpus), "GPU", "GPUs"))
	}
	if a.QueuedPods > 0 {
		fmt.Fprintf(&b, "Queued behind scheduling gates %s: %s asking for %s (the scheduler does not try them yet).\n",
			where, count64(int64(a.QueuedPods), "pod", "pods"), count64(int64(a.QueuedGpus), "GPU", "GPUs"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// nsNames are the namespaces holding GPUs.
func (a *Who) nsNames() []string {
	var names []string
	if a.Namespaces != nil {
		for _, n := range a.Namespaces {
			names = append(names, n.Namespace)
		}
		return names
	}
	for _, h := range a.Holders {
		if !slices.Contains(names, h.Namespace) {
			names = append(names, h.Namespace)
		}
	}
	return names
}

// Holds is what a holder holds, for -o wide: resources with their counts, then each claim's
// devices.
func (h *WhoHolder) Holds() string {
	var parts []string
	names := make([]string, 0, len(h.Resources))
	for name := range h.Resources {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s=%d", name, h.Resources[name]))
	}
	if len(h.Devices) > 0 {
		claims := "claim "
		if len(h.Claims) > 1 {
			claims = "claims "
		}
		parts = append(parts, claims+strings.Join(h.Claims, ",")+": "+strings.Join(h.Devices, ","))
	}
	return strings.Join(parts, "; ")
}
