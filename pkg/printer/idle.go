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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// IdleReport prints the idle holders, the summary, and why the figures may be old.
func IdleReport(w io.Writer, name string, u *homelabv1.GpuUsage, unknown *metav1.Condition, now time.Time) error {
	var b strings.Builder
	if len(u.IdleHolders) == 0 {
		fmt.Fprintf(&b, "No pod in GpuInventory %s has held GPUs idle for ten minutes or more.\n", name)
	} else {
		tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "NAMESPACE\tPOD\tNODE\tMODEL\tGPUS\tIDLE SINCE")
		for _, h := range u.IdleHolders {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s (%s)\n", h.Namespace, h.Pod, h.Node, h.Model, h.Gpus,
				h.IdleSince.UTC().Format("2006-01-02T15:04:05Z"), age(h.IdleSince.Time, now))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "%s held, %d of them by pods idle for longer than %s (utilisation below the operator's --idle-below, from %s).\n",
		count64(int64(u.HeldGpus), "GPU", "GPUs"), u.IdleGpus, u.IdleAfter, u.Metric)
	if len(u.Namespaces) > 0 {
		top := u.Namespaces[0]
		fmt.Fprintf(&b, "Over the last %s, namespace %s held %d GPU-hours of %s, %d of them idle (status.usage.namespaces lists %s).\n",
			u.Window, top.Namespace, top.HeldGpuHours, top.Model, top.IdleGpuHours, count64(int64(len(u.Namespaces)), "row", "rows"))
	}
	if unknown != nil && unknown.Status == metav1.ConditionTrue {
		fmt.Fprintf(&b, "Usage unknown (%s): %s\n", unknown.Reason, unknown.Message)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
