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

package factory

import (
	"encoding/json"
	"errors"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/printer"
)

// Output formats of -o.
const (
	OutputTable = ""
	OutputWide  = "wide"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
)

func AddOutputFlags(cmd *cobra.Command, output *string, problems, failOnDegraded *bool) {
	cmd.Flags().StringVarP(output, "output", "o", "", "Output format: wide (adds family, compute capability, driver and CUDA versions, sharing, where the GPU facts came from and the NVLink clique), json or yaml (the object as stored).")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{OutputWide, OutputJSON, OutputYAML}, cobra.ShellCompDirectiveNoFileComp))
	if problems != nil {
		cmd.Flags().BoolVar(problems, "problems", false, "Show only the nodes that need attention (not Ready, unreachable, labels missing, unhealthy GPUs, MIG failures, cordoned, label warnings).")
	}
	cmd.Flags().BoolVar(failOnDegraded, "fail-on-degraded", false, "Exit with status 3 when the inventory is Degraded (a GPU node is not Ready or has unhealthy GPUs).")
}

func ValidateOutput(output string, problems bool) error {
	switch output {
	case OutputTable, OutputWide:
		return nil
	case OutputJSON, OutputYAML:
		if problems {
			return Usagef("--problems filters tables; -o %s prints the status as stored (select problem nodes with: jq '.status.nodes[] | select(.conditions or .warnings)')", output)
		}
		return nil
	}
	return Usagef("unknown output format %q: use wide, json or yaml", output)
}

func PrintOptions(env Environment, output string) printer.Options {
	return printer.Options{Wide: output == OutputWide, Color: env.Color(), Now: env.Clock()}
}

// PrintObject prints an object as kubectl -o json/yaml does (managed fields left out).
func PrintObject(w io.Writer, obj runtime.Object, output string) error {
	obj = obj.DeepCopyObject()
	SetKinds(obj)
	return (&ObjectPrinter{YAML: output == OutputYAML, OmitManagedFields: true}).Print(obj, w)
}

// ObjectPrinter prints objects as kubectl's -o json and -o yaml do (cli-runtime's
// printers, which the plugin does not link: docs/design/clients.md): JSON indented by four
// spaces, YAML with "---" before every object but the first.
type ObjectPrinter struct {
	YAML              bool
	OmitManagedFields bool
	printed           int
}

func (p *ObjectPrinter) Print(obj runtime.Object, w io.Writer) error {
	if obj.GetObjectKind().GroupVersionKind().Empty() {
		return errors.New("missing apiVersion or kind; try GetObjectKind().SetGroupVersionKind() if you know the type")
	}
	if p.OmitManagedFields {
		obj = obj.DeepCopyObject()
		if meta.IsListType(obj) {
			_ = meta.EachListItem(obj, func(item runtime.Object) error {
				omitManagedFields(item)
				return nil
			})
		} else {
			omitManagedFields(obj)
		}
	}
	if !p.YAML {
		data, err := json.MarshalIndent(obj, "", "    ")
		if err != nil {
			return err
		}
		_, err = w.Write(append(data, '\n'))
		return err
	}
	if p.printed++; p.printed > 1 {
		if _, err := io.WriteString(w, "---\n"); err != nil {
			return err
		}
	}
	data, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

func omitManagedFields(obj runtime.Object) {
	if a, err := meta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
}

// SetKinds fills in apiVersion and kind, which typed clients leave empty.
func SetKinds(obj runtime.Object) {
	switch o := obj.(type) {
	case *homelabv1.GpuInventory:
		o.SetGroupVersionKind(homelabv1.SchemeGroupVersion.WithKind("GpuInventory"))
	case *homelabv1.GpuFleet:
		o.SetGroupVersionKind(homelabv1.SchemeGroupVersion.WithKind("GpuFleet"))
	case *homelabv1.GpuInventoryList:
		o.SetGroupVersionKind(homelabv1.SchemeGroupVersion.WithKind("GpuInventoryList"))
		for i := range o.Items {
			o.Items[i].SetGroupVersionKind(homelabv1.SchemeGroupVersion.WithKind("GpuInventory"))
			o.Items[i].ManagedFields = nil
		}
	}
}

// WriteData prints v as JSON (indented, as kubectl does) or YAML.
func WriteData(w io.Writer, v any, output string) error {
	if output == OutputYAML {
		data, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "    ")
	enc.SetEscapeHTML(false) // <unknown>, <other models> as they are
	return enc.Encode(v)
}

// PrintInventory prints one inventory in the chosen format.
func PrintInventory(w io.Writer, gi *homelabv1.GpuInventory, output string, opts printer.Options) error {
	switch output {
	case OutputJSON, OutputYAML:
		return PrintObject(w, gi, output)
	}
	return printer.Report(w, gi, opts)
}

// Degraded reports whether the inventory's Degraded condition is True.
func Degraded(gi *homelabv1.GpuInventory) bool {
	return meta.IsStatusConditionPresentAndEqual(gi.Status.Conditions, homelabv1.ConditionDegraded, metav1.ConditionTrue)
}
