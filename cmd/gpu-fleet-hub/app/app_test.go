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

package app

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientauthenticationv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	"sigs.k8s.io/yaml"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// roles reads the ClusterRoles and Roles of a manifest file by name.
func roles(t *testing.T, path string) map[string][]rbacv1.PolicyRule {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]rbacv1.PolicyRule{}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var role rbacv1.ClusterRole // a Role has the same shape
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if role.Kind == "ClusterRole" || role.Kind == "Role" {
			out[role.Name] = role.Rules
		}
	}
	return out
}

// grants lists a role's rules as group/resource[names]: verbs.
func grants(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				s := g + "/" + res
				if len(r.ResourceNames) > 0 {
					s += "[" + strings.Join(r.ResourceNames, ",") + "]"
				}
				out = append(out, s+": "+strings.Join(r.Verbs, ","))
			}
		}
	}
	return out
}

// hubRoles are the hub's grants on the hub cluster, by where a source's grant says.
func hubRoles(t *testing.T) map[string][]string {
	t.Helper()
	return map[string][]string{
		"":         grants(roles(t, "../../../manifests/hub/cluster_role.yaml")["gpu-fleet-hub"]),
		"kueue":    grants(roles(t, "../../../manifests/hub/multikueue/role.yaml")["gpu-fleet-hub-kubeconfigs"]),
		"dispatch": grants(roles(t, "../../../manifests/hub/dispatch/cluster_role.yaml")["gpu-fleet-hub-dispatch"]),
		"hub":      grants(roles(t, "../../../manifests/hub/role.yaml")["gpu-fleet-hub"]),
		"crd":      grants(roles(t, "../../../manifests/hub/crd_installer.yaml")["gpu-fleet-hub-crd-installer"]),
		"member":   grants(roles(t, "../../../manifests/hub/member/reader.yaml")["gpu-fleet-member-reader"]),
	}
}

// Every source's reads are granted where its row says, and every read of the hub's
// ClusterRole is a source's: a source added without its RBAC, or RBAC left behind by a
// source removed, fails here. Besides the sources the hub writes GpuFleets' status, records
// Events, holds its Lease, installs its CRD and (its secretreader plugin) gets token Secrets;
// nothing else is granted.
func TestSourcesReadWhatTheRBACGrants(t *testing.T) {
	got := hubRoles(t)
	want := map[string][]string{"": {"homelab.youngju.dev/gpufleets/status: patch", "/events: create,patch"},
		"kueue": nil,
		// The dispatcher's nominations (server-side apply of the Workloads' status).
		"dispatch": {"kueue.x-k8s.io/workloads/status: patch"},
		"hub":      {"/secrets: get", "coordination.k8s.io/leases[gpu-fleet-hub]: get,update", "coordination.k8s.io/leases: create"},
		"crd": {"apiextensions.k8s.io/customresourcedefinitions: create",
			"apiextensions.k8s.io/customresourcedefinitions[" + homelabv1.GpuFleetCRDName + "]: get,update"},
		// On a member: the one inventory a fleet reads by default, as memberwatch reads it.
		"member": {"homelab.youngju.dev/gpuinventories[" + homelabv1.DefaultInventoryName + "]: get,list,watch"},
	}
	for _, row := range sources {
		for _, a := range row.reads {
			verbs := a.verbs
			if verbs == nil {
				verbs = []string{"get", "list", "watch"}
			}
			for _, res := range a.resources {
				want[a.where] = append(want[a.where], a.group+"/"+res+": "+strings.Join(verbs, ","))
			}
		}
	}
	for where, w := range want {
		slices.Sort(w)
		g := slices.Clone(got[where])
		slices.Sort(g)
		if !slices.Equal(g, w) {
			t.Errorf("manifests/hub grants (%q):\n%s\nwant exactly:\n%s", where, strings.Join(g, "\n"), strings.Join(w, "\n"))
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	dir := t.TempDir()
	good, bad := dir+"/providers.json", dir+"/bad.json"
	if err := os.WriteFile(good, []byte(`{"providers":[{"name":"secretreader","execConfig":{"apiVersion":"client.authentication.k8s.io/v1","command":"/gpu-fleet-hub","args":["secretreader"],"provideClusterInfo":true}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"providers": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		set   func(*Options)
		words string
	}{
		{"defaults", func(*Options) {}, ""},
		{"a provider file", func(o *Options) { o.ClusterProfileProviderFile = good }, ""},
		{"a provider file that is not JSON", func(o *Options) { o.ClusterProfileProviderFile = bad }, "--clusterprofile-provider-file " + bad},
		{"no provider file there", func(o *Options) { o.ClusterProfileProviderFile = dir + "/none.json" }, "no such file"},
		{"a tiny cap", func(o *Options) { o.MemberMaxObjectBytes = 1024 }, "--member-max-object-bytes must be at least 65536"},
		{"no workers", func(o *Options) { o.Workers = 0 }, "--workers"},
		{"a lease shorter than its renewal", func(o *Options) { o.LeaderElect, o.LeaseDuration = true, o.RenewDeadline }, "lease duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			tc.set(o)
			err := o.Validate()
			if tc.words == "" && err != nil || tc.words != "" && (err == nil || !strings.Contains(err.Error(), tc.words)) {
				t.Errorf("Validate = %v, want %q", err, tc.words)
			}
		})
	}
}

// The secretreader plugin answers as cluster-inventory-api's: the token of the Secret the
// cluster's clusterName names, in the namespace it runs for; each failure says what is wrong.
func TestSecretReaderGetToken(t *testing.T) {
	secrets := map[string]*corev1.Secret{
		"fleet/w1":    {Data: map[string][]byte{"token": []byte("t1")}},
		"fleet/empty": {Data: map[string][]byte{"kubeconfig": []byte("x")}},
	}
	r := secretReader{namespace: "fleet", secret: func(_ context.Context, ns, name string) (*corev1.Secret, error) {
		if s, ok := secrets[ns+"/"+name]; ok {
			return s, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
	}}
	cred := func(config string) clientauthenticationv1.ExecCredential {
		in := clientauthenticationv1.ExecCredential{Spec: clientauthenticationv1.ExecCredentialSpec{
			Cluster: &clientauthenticationv1.Cluster{Server: "https://w1.example.com"}}}
		if config != "" {
			in.Spec.Cluster.Config = runtime.RawExtension{Raw: []byte(config)}
		}
		return in
	}
	if st, err := r.GetToken(context.Background(), cred(`{"clusterName":"w1"}`)); err != nil || st.Token != "t1" {
		t.Fatalf("GetToken = %+v, %v", st, err)
	}
	for config, words := range map[string]string{
		"":                         "missing ExecCredential.Spec.Cluster.Config",
		`{"other":1}`:              "missing clusterName",
		`{"clusterName":"absent"}`: "get secret fleet/absent",
		`{"clusterName":"empty"}`:  `secret fleet/empty has no key "token"`,
		`[1`:                       "invalid ExecCredential.Spec.Cluster.Config",
	} {
		if _, err := r.GetToken(context.Background(), cred(config)); err == nil || !strings.Contains(err.Error(), words) {
			t.Errorf("config %q: error %v, want %q", config, err, words)
		}
	}
}

// The hub's flags keep their names and defaults; --pprof-bind-address is off by default.
func TestFlagsKeepTheirNamesAndDefaults(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	for _, set := range NewOptions().Flags().FlagSets {
		fs.AddFlagSet(set)
	}
	for name, def := range map[string]string{
		"kubeconfig": "", "namespace": "", "install-crd": "true", "min-sync-interval": "1s", "workers": "2",
		"kube-api-qps": "20", "kube-api-burst": "40", "pprof-bind-address": "",
		"clusterprofile-provider-file": "", "member-max-object-bytes": "4194304",
		"dispatch": "false", "dispatch-inventory": "cluster", "kueue-namespace": "kueue-system",
		"nominations": "1", "nomination-hold": "30s", "nomination-timeout": "5m0s",
		"leader-elect": "false", "leader-election-id": "gpu-fleet-hub", "leader-election-lease-duration": "15s",
		"leader-election-renew-deadline": "10s", "leader-election-retry-period": "2s",
		"metrics-bind-address": ":8080", "health-probe-bind-address": ":8081", "logging-format": "text", "v": "0",
	} {
		if flag := fs.Lookup(name); flag == nil {
			t.Errorf("--%s is gone", name)
		} else if flag.DefValue != def {
			t.Errorf("--%s defaults to %q, want %q", name, flag.DefValue, def)
		}
	}
}
