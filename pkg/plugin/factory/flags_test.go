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
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// The plugin's connection flags are kubectl's: the same names, shorthands, help and
// defaults as cli-runtime's ConfigFlags (without --namespace and --cache-dir; --context is
// ContextList's).
func TestConfigFlagsAreKubectls(t *testing.T) {
	want := pflag.NewFlagSet("cli-runtime", pflag.ContinueOnError)
	ref := genericclioptions.NewConfigFlags(true)
	ref.Namespace, ref.CacheDir, ref.Context = nil, nil, nil
	ref.AddFlags(want)
	got := pflag.NewFlagSet("plugin", pflag.ContinueOnError)
	NewConfigFlags().AddFlags(got)

	describe := func(fs *pflag.FlagSet) map[string][4]string {
		m := map[string][4]string{}
		fs.VisitAll(func(f *pflag.Flag) { m[f.Name] = [4]string{f.Shorthand, f.Usage, f.DefValue, f.Value.Type()} })
		return m
	}
	if w, g := describe(want), describe(got); !reflect.DeepEqual(w, g) {
		t.Errorf("flags differ from cli-runtime's:\nwant %v\ngot  %v", w, g)
	}
}

// The same flags give the same REST config as cli-runtime's ConfigFlags.
func TestConfigFlagsLoadAsKubectl(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	data := `apiVersion: v1
kind: Config
clusters:
- {name: a, cluster: {server: "https://a.example:6443", insecure-skip-tls-verify: true}}
- {name: b, cluster: {server: "https://b.example:6443"}}
users:
- {name: u, user: {token: from-file, as: someone, as-groups: [g0]}}
- {name: v, user: {token: v-token}}
contexts:
- {name: ca, context: {cluster: a, user: u, namespace: ns-a}}
- {name: cb, context: {cluster: b, user: v}}
current-context: ca
`
	if err := os.WriteFile(kubeconfig, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		nil,
		{"--context", "cb"},
		{"--server", "https://c.example", "--token", "t", "--request-timeout", "7s"},
		{"--cluster", "b", "--user", "v", "--tls-server-name", "n", "--disable-compression", "--proxy-url", "http://proxy:3128"},
		{"--as", "me", "--as-group", "g1", "--as-group", "g2", "--as-uid", "42", "--as-user-extra", "k=v1", "--as-user-extra", "k=v2", "--as-user-extra", "bad"},
		{"--insecure-skip-tls-verify", "--client-certificate", "/c.pem", "--client-key", "/k.pem", "--certificate-authority", "/ca.pem"},
	} {
		ref := genericclioptions.NewConfigFlags(true)
		refSet := pflag.NewFlagSet("ref", pflag.ContinueOnError)
		ref.AddFlags(refSet)
		ours := NewConfigFlags()
		set := pflag.NewFlagSet("ours", pflag.ContinueOnError)
		ours.AddFlags(set)
		set.StringVar(ours.context, "context", "", "")
		args = append([]string{"--kubeconfig", kubeconfig}, args...)
		if err := refSet.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := set.Parse(args); err != nil {
			t.Fatal(err)
		}
		want, werr := ref.ToRESTConfig()
		got, gerr := ours.toRESTConfig()
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%v: error %v, want %v", args, gerr, werr)
		}
		if werr != nil {
			continue
		}
		want.WarningHandler, got.WarningHandler = nil, nil
		if (want.Proxy == nil) != (got.Proxy == nil) {
			t.Errorf("%v: proxy set %t, want %t", args, got.Proxy != nil, want.Proxy != nil)
		}
		want.Proxy, got.Proxy = nil, nil // functions: equal only when nil
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%v: config\n%+v\nwant\n%+v", args, got, want)
		}
		wns, _, _ := ref.ToRawKubeConfigLoader().Namespace()
		gns, _, _ := ours.toRawKubeConfigLoader().Namespace()
		if wns != gns {
			t.Errorf("%v: namespace %q, want %q", args, gns, wns)
		}
	}
}

// -o json and -o yaml print what kubectl's printers print.
func TestObjectPrinterIsKubectls(t *testing.T) {
	gi := &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: "cluster", ResourceVersion: "7",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "gpu-inventory-operator"}}}}
	gi.Status.TotalGpus = 8
	gi.SetGroupVersionKind(homelabv1.SchemeGroupVersion.WithKind("GpuInventory"))
	list := &metav1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"},
		Items: []runtime.RawExtension{{Object: gi.DeepCopy()}, {Object: gi.DeepCopy()}}}
	for _, tc := range []struct {
		name  string
		yaml  bool
		omit  bool
		ref   func() printers.ResourcePrinter
		times int
	}{
		{"json", false, false, func() printers.ResourcePrinter { return &printers.JSONPrinter{} }, 2},
		{"yaml", true, false, func() printers.ResourcePrinter { return &printers.YAMLPrinter{} }, 3},
		{"json without managed fields", false, true, func() printers.ResourcePrinter {
			return &printers.OmitManagedFieldsPrinter{Delegate: &printers.JSONPrinter{}}
		}, 2},
		{"yaml without managed fields", true, true, func() printers.ResourcePrinter {
			return &printers.OmitManagedFieldsPrinter{Delegate: &printers.YAMLPrinter{}}
		}, 3},
	} {
		for _, obj := range []runtime.Object{gi, list} {
			var want, got bytes.Buffer
			ref := tc.ref()
			p := &ObjectPrinter{YAML: tc.yaml, OmitManagedFields: tc.omit}
			for range tc.times {
				if err := ref.PrintObj(obj, &want); err != nil {
					t.Fatal(err)
				}
				if err := p.Print(obj, &got); err != nil {
					t.Fatal(err)
				}
			}
			if got.String() != want.String() {
				t.Errorf("%s of %T:\n%s\nwant\n%s", tc.name, obj, got.String(), want.String())
			}
		}
	}
	if err := (&ObjectPrinter{}).Print(&homelabv1.GpuInventory{}, &bytes.Buffer{}); err == nil {
		t.Error("an object without apiVersion and kind was printed; kubectl's printers refuse it")
	}
}
