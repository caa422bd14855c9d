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
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// kubeconfig is a worker's kubeconfig as MultiKueue's setup script writes it, with the
// cluster's extra lines and the user's credentials (a token when empty).
func kubeconfig(cluster, user string) []byte {
	if user == "" {
		user = "    token: s3cr3t"
	}
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: worker-1
  cluster:
    server: https://worker-1.example.com:6443
    certificate-authority-data: %s
%s
users:
- name: multikueue-sa
  user:
%s
contexts:
- name: worker-1
  context: {cluster: worker-1, user: multikueue-sa}
current-context: worker-1
`, base64.StdEncoding.EncodeToString(testCA), cluster, user)
}

func TestFromKubeconfig(t *testing.T) {
	cfg, err := FromKubeconfig("Secret kueue-system/worker-1", kubeconfig("", ""))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://worker-1.example.com:6443" || cfg.BearerToken != "s3cr3t" || string(cfg.CAData) != string(testCA) || cfg.Insecure {
		t.Errorf("config = host %s, token %q, CA %q, insecure %v", cfg.Host, cfg.BearerToken, cfg.CAData, cfg.Insecure)
	}
}

func TestFromKubeconfigRefusesWhatMultiKueueRefuses(t *testing.T) {
	cases := []struct {
		name   string
		data   []byte
		reason string
		words  []string
	}{
		{"not YAML", []byte("{{{"), homelabv1.ReasonMalformedKubeconfig, []string{"Secret kueue-system/w", "does not hold a kubeconfig"}},
		{"no current context", []byte("apiVersion: v1\nkind: Config\n"), homelabv1.ReasonMalformedKubeconfig, []string{"Secret kueue-system/w"}},
		{"insecure-skip-tls-verify", kubeconfig("    insecure-skip-tls-verify: true", ""), homelabv1.ReasonInsecureKubeconfig,
			[]string{`cluster "worker-1" skips TLS verification`, "certificate-authority-data"}},
		{"a CA file", kubeconfig("    certificate-authority: /etc/ca.crt", ""), homelabv1.ReasonInsecureKubeconfig, []string{"certificate-authority file"}},
		{"a token file", kubeconfig("", "    tokenFile: /var/run/token"), homelabv1.ReasonInsecureKubeconfig, []string{"tokenFile"}},
		{"basic auth", kubeconfig("", "    username: admin\n    password: hunter2"), homelabv1.ReasonInsecureKubeconfig, []string{"basic auth"}},
		{"an exec plugin", kubeconfig("", "    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/creds, interactiveMode: Never}"), homelabv1.ReasonInsecureKubeconfig, []string{"exec credential plugin"}},
		{"no server", []byte(strings.Replace(string(kubeconfig("", "")), "server: https://worker-1.example.com:6443", "server: ''", 1)),
			homelabv1.ReasonMalformedKubeconfig, []string{"has no server"}},
		{"plain http", []byte(strings.Replace(string(kubeconfig("", "")), "https://", "http://", 1)), homelabv1.ReasonInsecureKubeconfig, []string{"is not https"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromKubeconfig("Secret kueue-system/w", tc.data)
			wantReason(t, err, tc.reason, tc.words...)
		})
	}
}

func mkc(spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
		"metadata": map[string]any{"name": "worker-1"}, "spec": spec}}
}

func TestMultiKueueClusterOf(t *testing.T) {
	cases := []struct {
		name string
		u    *unstructured.Unstructured
		want MultiKueueCluster
	}{
		{"v1beta2 kubeconfig Secret", mkc(map[string]any{"clusterSource": map[string]any{"kubeConfig": map[string]any{"location": "worker-1-secret", "locationType": "Secret"}}}),
			MultiKueueCluster{Name: "worker-1", Location: "worker-1-secret", LocationType: "Secret"}},
		{"v1beta2 ClusterProfile", mkc(map[string]any{"clusterSource": map[string]any{"clusterProfileRef": map[string]any{"name": "worker-1-profile"}}}),
			MultiKueueCluster{Name: "worker-1", ClusterProfile: "worker-1-profile"}},
		{"v1beta1 kubeconfig", mkc(map[string]any{"kubeConfig": map[string]any{"location": "/etc/kc", "locationType": "Path"}}),
			MultiKueueCluster{Name: "worker-1", Location: "/etc/kc", LocationType: "Path"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MultiKueueClusterOf(tc.u)
			if err != nil || got != tc.want {
				t.Errorf("MultiKueueClusterOf = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	if _, err := MultiKueueClusterOf(mkc(map[string]any{"clusterSource": "a string"})); err == nil || !strings.Contains(err.Error(), "MultiKueueCluster worker-1") {
		t.Errorf("a spec of the wrong shape: error %v, want one naming the MultiKueueCluster", err)
	}
}

// hub is the hub's objects a Reader reads: Secrets and ClusterProfiles by namespace/name.
type hub struct {
	secrets   map[string]*corev1.Secret
	profiles  map[string]*v1alpha1.ClusterProfile
	forbidden bool
	asked     []string
}

func (h *hub) reader() Reader {
	return Reader{Providers: hubProviders(""),
		Secret: func(_ context.Context, ns, name string) (*corev1.Secret, error) {
			h.asked = append(h.asked, "secret "+ns+"/"+name)
			if h.forbidden {
				return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, name, fmt.Errorf("no RBAC"))
			}
			if s, ok := h.secrets[ns+"/"+name]; ok {
				return s, nil
			}
			return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
		},
		ClusterProfile: func(_ context.Context, ns, name string) (*v1alpha1.ClusterProfile, error) {
			h.asked = append(h.asked, "clusterprofile "+ns+"/"+name)
			if p, ok := h.profiles[ns+"/"+name]; ok {
				return p, nil
			}
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: "multicluster.x-k8s.io", Resource: "clusterprofiles"}, name)
		}}
}

func secret(ns, name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

func TestForMultiKueueCluster(t *testing.T) {
	h := &hub{
		secrets: map[string]*corev1.Secret{
			"kueue-system/worker-1": secret("kueue-system", "worker-1", map[string][]byte{KubeconfigKey: kubeconfig("", "")}),
			"kueue-system/empty":    secret("kueue-system", "empty", map[string][]byte{"config": kubeconfig("", "")}),
		},
		profiles: map[string]*v1alpha1.ClusterProfile{
			"kueue-system/worker-2": profile(v1alpha1.AccessProvider{Name: SecretReaderProvider, Cluster: secretReaderCluster("worker-2")}),
		},
	}
	cfg, err := h.reader().ForMultiKueueCluster(context.Background(), "kueue-system", MultiKueueCluster{Name: "w1", Location: "worker-1"})
	if err != nil || cfg.BearerToken != "s3cr3t" {
		t.Fatalf("kubeconfig Secret: %v, %v", cfg, err)
	}
	cfg, err = h.reader().ForMultiKueueCluster(context.Background(), "kueue-system", MultiKueueCluster{Name: "w2", ClusterProfile: "worker-2"})
	if err != nil || cfg.ExecProvider == nil {
		t.Fatalf("ClusterProfile: %v, %v", cfg, err)
	}
	if want := "secret kueue-system/worker-1,clusterprofile kueue-system/worker-2"; strings.Join(h.asked, ",") != want {
		t.Errorf("read %v, want %s: what a MultiKueueCluster names is in Kueue's namespace", h.asked, want)
	}

	cases := []struct {
		name   string
		mkc    MultiKueueCluster
		reason string
		words  []string
	}{
		{"a missing Secret", MultiKueueCluster{Name: "w3", Location: "gone"}, homelabv1.ReasonKubeconfigSecretMissing, []string{"Secret kueue-system/gone", "MultiKueueCluster w3", "does not exist"}},
		{"a Secret without the key", MultiKueueCluster{Name: "w4", Location: "empty"}, homelabv1.ReasonKubeconfigSecretMissing, []string{`has no key "kubeconfig"`}},
		{"a kubeconfig on Kueue's disk", MultiKueueCluster{Name: "w5", Location: "/etc/kc", LocationType: "Path"}, homelabv1.ReasonKubeconfigNotReadable, []string{"locationType Path", "keep it in a Secret"}},
		{"a missing ClusterProfile", MultiKueueCluster{Name: "w6", ClusterProfile: "gone"}, homelabv1.ReasonClusterProfileNotFound, []string{"ClusterProfile kueue-system/gone", "not found"}},
		{"nothing named", MultiKueueCluster{Name: "w7"}, homelabv1.ReasonMalformedKubeconfig, []string{"names neither"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.reader().ForMultiKueueCluster(context.Background(), "kueue-system", tc.mkc)
			wantReason(t, err, tc.reason, tc.words...)
		})
	}
	t.Run("a Secret the hub may not read", func(t *testing.T) {
		forbidden := &hub{forbidden: true}
		_, err := forbidden.reader().ForMultiKueueCluster(context.Background(), "kueue-system", MultiKueueCluster{Name: "w1", Location: "worker-1"})
		wantReason(t, err, homelabv1.ReasonKubeconfigNotReadable, "may not get Secret kueue-system/worker-1", "grant")
	})
}

func TestEndpoint(t *testing.T) {
	for _, tc := range []struct{ host, want string }{
		{"https://Worker-1.Example.com", "https://worker-1.example.com:443"},
		{"https://worker-1.example.com:443/", "https://worker-1.example.com:443"},
		{"worker-1.example.com:6443", "https://worker-1.example.com:6443"},
		{"https://[fd00::1]:6443/prefix/", "https://[fd00::1]:6443/prefix"},
	} {
		if got := Endpoint(&rest.Config{Host: tc.host}); got != tc.want {
			t.Errorf("Endpoint(%s) = %s, want %s", tc.host, got, tc.want)
		}
	}
}
