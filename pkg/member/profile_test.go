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

package member

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

var testCA = []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")

// hubProviders is a provider file as the secretreader plugin's README gives it, plus one
// provider of another name.
func hubProviders(policy access.ProfileSourcedCLIArgsPolicy) *access.Config {
	return access.New([]access.Provider{
		{Name: SecretReaderProvider, ProfileSourcedCLIArgsPolicy: policy, ExecConfig: &clientcmdapi.ExecConfig{
			APIVersion: "client.authentication.k8s.io/v1", Command: "/secretreader-plugin", Args: []string{"--v=1"}, ProvideClusterInfo: true}},
		{Name: "token-exchange", ExecConfig: &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: "/exchange"}},
	})
}

func extension(name string, v any) clientcmdv1.NamedExtension {
	raw, _ := json.Marshal(v)
	return clientcmdv1.NamedExtension{Name: name, Extension: runtime.RawExtension{Raw: raw}}
}

// secretReaderCluster is a member reached through the secretreader plugin, reading the
// token of Secret <hub namespace>/<clusterName>.
func secretReaderCluster(clusterName string) clientcmdv1.Cluster {
	return clientcmdv1.Cluster{Server: "https://worker-1.example.com:6443", CertificateAuthorityData: testCA,
		Extensions: []clientcmdv1.NamedExtension{extension(execExtension, map[string]string{"clusterName": clusterName})}}
}

func profile(providers ...v1alpha1.AccessProvider) *v1alpha1.ClusterProfile {
	return &v1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "worker-1"},
		Status: v1alpha1.ClusterProfileStatus{AccessProviders: providers}}
}

func wantReason(t *testing.T, err error, reason string, words ...string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v, want a *member.Error with reason %s", err, reason)
	}
	got, msg := Explain(err)
	if got != reason || e.Reason != reason {
		t.Errorf("reason = %s, want %s (%v)", got, reason, err)
	}
	for _, w := range words {
		if !strings.Contains(msg, w) {
			t.Errorf("message %q does not say %q", msg, w)
		}
	}
}

func TestFromClusterProfileThroughSecretReader(t *testing.T) {
	cfg, err := FromClusterProfile(hubProviders(""), profile(v1alpha1.AccessProvider{Name: SecretReaderProvider, Cluster: secretReaderCluster("worker-1")}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://worker-1.example.com:6443" || string(cfg.CAData) != string(testCA) || cfg.Insecure {
		t.Errorf("config = host %s, CA %q, insecure %v", cfg.Host, cfg.CAData, cfg.Insecure)
	}
	exec := cfg.ExecProvider
	if exec == nil || exec.Command != "/secretreader-plugin" || exec.InteractiveMode != clientcmdapi.NeverExecInteractiveMode || !exec.ProvideClusterInfo {
		t.Fatalf("exec provider = %+v, want the hub's secretreader plugin, never interactive, given the cluster", exec)
	}
	if raw, _ := json.Marshal(exec.Config); !strings.Contains(string(raw), `"clusterName":"worker-1"`) {
		t.Errorf("the plugin is handed %s, want the profile's clusterName", raw)
	}
}

func TestFromClusterProfileTakesTheHubsFirstProviderTheProfileOffers(t *testing.T) {
	exchange := v1alpha1.AccessProvider{Name: "token-exchange", Cluster: clientcmdv1.Cluster{Server: "https://10.0.0.7", CertificateAuthorityData: testCA}}
	cp := profile(exchange)
	cp.Status.CredentialProviders = []v1alpha1.CredentialProvider{{Name: SecretReaderProvider, Cluster: secretReaderCluster("worker-1")}}
	cfg, err := FromClusterProfile(hubProviders(""), cp)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ExecProvider.Command != "/secretreader-plugin" {
		t.Errorf("command = %s: the hub's order (secretreader first) decides, and a deprecated credentialProviders entry counts", cfg.ExecProvider.Command)
	}
}

func TestFromClusterProfileRefusals(t *testing.T) {
	insecure := secretReaderCluster("worker-1")
	insecure.InsecureSkipTLSVerify = true
	caFile := secretReaderCluster("worker-1")
	caFile.CertificateAuthorityData, caFile.CertificateAuthority = nil, "/etc/ca.crt"
	plain := secretReaderCluster("worker-1")
	plain.Server = "http://worker-1.example.com:8080"
	noServer := secretReaderCluster("worker-1")
	noServer.Server = ""
	notAHost := secretReaderCluster("worker-1")
	notAHost.Server = "https://worker_1:6443"
	noSecret := secretReaderCluster("worker-1")
	noSecret.Extensions = nil
	cases := []struct {
		name      string
		providers *access.Config
		cp        *v1alpha1.ClusterProfile
		reason    string
		words     []string
	}{
		{"no access provider", hubProviders(""), profile(), homelabv1.ReasonNoUsableAccessProvider, []string{"fleet/worker-1", "lists no access provider"}},
		{"only providers the hub does not know", hubProviders(""), profile(v1alpha1.AccessProvider{Name: "oidc", Cluster: secretReaderCluster("w")}),
			homelabv1.ReasonNoUsableAccessProvider, []string{`["oidc"]`, `["secretreader" "token-exchange"]`, "--clusterprofile-provider-file"}},
		{"a hub without a provider file", nil, profile(v1alpha1.AccessProvider{Name: SecretReaderProvider, Cluster: secretReaderCluster("w")}),
			homelabv1.ReasonNoUsableAccessProvider, []string{"the hub knows none"}},
		{"insecure-skip-tls-verify", hubProviders(""), profile(v1alpha1.AccessProvider{Name: SecretReaderProvider, Cluster: insecure}),
			homelabv1.ReasonBadAccessProvider, []string{"insecure-skip-tls-verify is refused", "certificate-authority-data"}},
		{"a CA file", hubProviders(""), profile(v1alpha1.AccessProvider{Name: SecretReaderProvider, Cluster: caFile}),
			homelabv1.ReasonBadAccessProvider, []string{"names a file"}},
		{"plain http", hubProviders(""), profile(v1alpha1.AccessProvider{Name: SecretReaderProvider, Cluster: plain}),
			homelabv1.ReasonBadAccessProvider, []string{"is not https"}},
		{"no server", hubProviders(""), profile(v1alpha1.AccessProvider{Name: SecretReaderProvider, Cluster: noServer}),
			homelabv1.ReasonBadAccessProvider, []string{"no server"}},
		{"a server that names no host", hubProviders(""), profile(v1alpha1.AccessProvider{Name: SecretReaderProvider, Cluster: notAHost}),
			homelabv1.ReasonBadAccessProvider, []string{"does not name a host"}},
		{"secretreader without a clusterName", hubProviders(""), profile(v1alpha1.AccessProvider{Name: SecretReaderProvider, Cluster: noSecret}),
			homelabv1.ReasonBadAccessProvider, []string{"clusterName"}},
		{"a hub provider without execConfig", access.New([]access.Provider{{Name: SecretReaderProvider}}),
			profile(v1alpha1.AccessProvider{Name: SecretReaderProvider, Cluster: secretReaderCluster("w")}), homelabv1.ReasonBadAccessProvider, []string{"no execConfig"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromClusterProfile(tc.providers, tc.cp)
			wantReason(t, err, tc.reason, tc.words...)
		})
	}
}

// pkg/access appends a profile's extra arguments to the provider it was given: one
// profile's arguments must not reach the next member's plugin.
func TestFromClusterProfileKeepsEachProfilesArgumentsToItself(t *testing.T) {
	providers := hubProviders(access.ProfileSourcedCLIArgsPolicyAppend)
	withArgs := func(name string, args ...string) *v1alpha1.ClusterProfile {
		c := secretReaderCluster(name)
		c.Extensions = append(c.Extensions, extension("clusterprofiles.multicluster.x-k8s.io/exec/additional-args", args))
		return profile(v1alpha1.AccessProvider{Name: SecretReaderProvider, Cluster: c})
	}
	for _, tc := range []struct {
		cp   *v1alpha1.ClusterProfile
		want []string
	}{
		{withArgs("a", "--audience=a"), []string{"--v=1", "--audience=a"}},
		{withArgs("b", "--audience=b"), []string{"--v=1", "--audience=b"}},
	} {
		cfg, err := FromClusterProfile(providers, tc.cp)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cfg.ExecProvider.Args, tc.want) {
			t.Errorf("plugin args = %q, want %q", cfg.ExecProvider.Args, tc.want)
		}
	}
	if got := providers.Providers[0].ExecConfig.Args; !slices.Equal(got, []string{"--v=1"}) {
		t.Errorf("the hub's provider now has args %q", got)
	}
}
