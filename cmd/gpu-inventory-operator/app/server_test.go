package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned/fake"
)

func TestEnsureDefaultInventory(t *testing.T) {
	existing := &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}, Spec: homelabv1.GpuInventorySpec{Note: "mine"}}
	cases := []struct {
		name     string
		inv      string
		objects  []runtime.Object
		reactErr error
		wantErr  string
		wantNote string
	}{
		{name: "created when missing", inv: "cluster", wantNote: "Created by gpu-inventory-operator: every GPU node in the cluster."},
		{name: "an existing one is left alone", inv: "cluster", objects: []runtime.Object{existing}, wantNote: "mine"},
		{name: "empty name creates none", inv: ""},
		{name: "CRD missing", inv: "cluster", reactErr: apierrors.NewNotFound(homelabv1.Resource("gpuinventories"), ""), wantErr: "the GpuInventory CRD is not installed"},
		{name: "forbidden", inv: "cluster", reactErr: apierrors.NewForbidden(homelabv1.Resource("gpuinventories"), "cluster", nil), wantErr: "may not create gpuinventories.homelab.youngju.dev"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.objects...)
			if tc.reactErr != nil {
				client.PrependReactor("create", "gpuinventories", func(core.Action) (bool, runtime.Object, error) { return true, nil, tc.reactErr })
			}
			opts := NewOptions()
			opts.DefaultInventory = tc.inv
			o := &Operator{opts: opts, client: client}
			err := o.ensureDefaultInventory(context.Background())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			list, _ := client.HomelabV1().GpuInventories().List(context.Background(), metav1.ListOptions{})
			if tc.inv == "" {
				if len(list.Items) != 0 {
					t.Errorf("want no inventory, got %d", len(list.Items))
				}
				return
			}
			if len(list.Items) != 1 || list.Items[0].Spec.Note != tc.wantNote {
				t.Errorf("inventories = %+v, want one with note %q", list.Items, tc.wantNote)
			}
		})
	}
}

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
