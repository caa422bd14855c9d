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
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	cases := map[string]func(*Options){
		"--workers must be at least 1":      func(o *Options) { o.Workers = 0 },
		"--resync-period must be positive":  func(o *Options) { o.ResyncPeriod = 0 },
		"lease duration":                    func(o *Options) { o.LeaderElect = true; o.RenewDeadline = o.LeaseDuration },
		"--leader-election-id must not be":  func(o *Options) { o.LeaderElect = true; o.LeaderElectionID = "" },
		"--kube-api-qps and --kube-api-bur": func(o *Options) { o.QPS = 0 },
	}
	if err := NewOptions().Validate(); err != nil {
		t.Fatalf("defaults are invalid: %v", err)
	}
	for want, mutate := range cases {
		opts := NewOptions()
		mutate(opts)
		if err := opts.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want an error containing %q", err, want)
		}
	}
}

func TestNamespaceResolution(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: gpu-ops}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, flag, env, want string
	}{
		{"flag wins", "from-flag", "from-env", "from-flag"},
		{"then POD_NAMESPACE", "", "from-env", "from-env"},
		{"then the context's namespace", "", "", "gpu-ops"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("POD_NAMESPACE", tc.env)
			opts := NewOptions()
			opts.Kubeconfig, opts.Namespace = kubeconfig, tc.flag
			cfg, ns, err := opts.ClientConfig()
			if err != nil {
				t.Fatal(err)
			}
			if ns != tc.want || cfg.Host != "https://127.0.0.1:6443" {
				t.Errorf("namespace %q host %q, want %q and the kubeconfig's server", ns, cfg.Host, tc.want)
			}
		})
	}
	t.Run("missing kubeconfig says what to do", func(t *testing.T) {
		opts := NewOptions()
		opts.Kubeconfig = filepath.Join(dir, "absent")
		if _, _, err := opts.ClientConfig(); err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
			t.Errorf("error = %v, want one naming --kubeconfig", err)
		}
	})
}
