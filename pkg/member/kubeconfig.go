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
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// KubeconfigKey is the key of a MultiKueueCluster's Secret that holds the kubeconfig.
const KubeconfigKey = "kubeconfig"

// FromKubeconfig builds a member's rest.Config from a kubeconfig (its current context),
// refusing what MultiKueue refuses in a worker's kubeconfig: any cluster with
// insecure-skip-tls-verify or a certificate-authority file, a server that is not a host
// name, credentials read from files, basic auth, exec plugins and auth providers; and, more
// than MultiKueue, a server that is not https. source names where the kubeconfig came from,
// for the messages.
func FromKubeconfig(source string, data []byte) (*rest.Config, error) {
	config, err := clientcmd.Load(data)
	if err != nil {
		return nil, fail(homelabv1.ReasonMalformedKubeconfig, err, "%s does not hold a kubeconfig", source)
	}
	for name, auth := range config.AuthInfos {
		if auth.TokenFile != "" {
			return nil, fail(homelabv1.ReasonInsecureKubeconfig, nil, "%s: user %q reads its token from a file (tokenFile), which MultiKueue refuses", source, name)
		}
	}
	for name, cluster := range config.Clusters {
		switch {
		case cluster.InsecureSkipTLSVerify:
			return nil, fail(homelabv1.ReasonInsecureKubeconfig, nil, "%s: cluster %q skips TLS verification (insecure-skip-tls-verify), which MultiKueue refuses: give certificate-authority-data", source, name)
		case cluster.CertificateAuthority != "":
			return nil, fail(homelabv1.ReasonInsecureKubeconfig, nil, "%s: cluster %q names a certificate-authority file, which MultiKueue refuses: give certificate-authority-data", source, name)
		case cluster.Server == "":
			return nil, fail(homelabv1.ReasonMalformedKubeconfig, nil, "%s: cluster %q has no server", source, name)
		}
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*config, nil).ClientConfig()
	if err != nil {
		return nil, fail(homelabv1.ReasonMalformedKubeconfig, err, "%s", source)
	}
	if err := checkCredentials(cfg); err != nil {
		return nil, fail(homelabv1.ReasonInsecureKubeconfig, nil, "%s: %s, which MultiKueue refuses", source, err)
	}
	return cfg, nil
}

// checkCredentials refuses the credentials and servers MultiKueue refuses in a kubeconfig.
func checkCredentials(cfg *rest.Config) error {
	switch {
	case cfg.BearerTokenFile != "":
		return fmt.Errorf("the token is read from a file (bearerTokenFile)")
	case cfg.Username != "" || cfg.Password != "":
		return fmt.Errorf("it uses basic auth")
	case cfg.ExecProvider != nil:
		return fmt.Errorf("it runs an exec credential plugin")
	case cfg.AuthProvider != nil:
		return fmt.Errorf("it uses an auth provider")
	}
	return checkServer(cfg.Host)
}

// MultiKueueCluster is what the hub reads of a kueue.x-k8s.io MultiKueueCluster: where its
// kubeconfig is (spec.clusterSource.kubeConfig; v1beta1's spec.kubeConfig), or the
// ClusterProfile it names (spec.clusterSource.clusterProfileRef).
type MultiKueueCluster struct {
	Name string
	// Location and LocationType are the kubeconfig's: a Secret's name (LocationType
	// "Secret" or empty) or a path on Kueue's disk ("Path").
	Location     string
	LocationType string
	// ClusterProfile is the ClusterProfile's name, in Kueue's namespace.
	ClusterProfile string
}

type kubeConfigRef struct {
	Location     string `json:"location"`
	LocationType string `json:"locationType,omitempty"`
}

type multiKueueClusterJSON struct {
	Spec struct {
		ClusterSource struct {
			KubeConfig        *kubeConfigRef `json:"kubeConfig,omitempty"`
			ClusterProfileRef *struct {
				Name string `json:"name"`
			} `json:"clusterProfileRef,omitempty"`
		} `json:"clusterSource"`
		KubeConfig *kubeConfigRef `json:"kubeConfig,omitempty"`
	} `json:"spec"`
}

// MultiKueueClusterOf reads a MultiKueueCluster of kueue.x-k8s.io/v1beta2 or v1beta1.
func MultiKueueClusterOf(u *unstructured.Unstructured) (MultiKueueCluster, error) {
	var v multiKueueClusterJSON
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &v); err != nil {
		return MultiKueueCluster{}, fail(homelabv1.ReasonMalformedKubeconfig, err, "MultiKueueCluster %s: its spec cannot be read", u.GetName())
	}
	out := MultiKueueCluster{Name: u.GetName()}
	ref := v.Spec.ClusterSource.KubeConfig
	if ref == nil {
		ref = v.Spec.KubeConfig
	}
	if ref != nil {
		out.Location, out.LocationType = ref.Location, ref.LocationType
	}
	if p := v.Spec.ClusterSource.ClusterProfileRef; p != nil {
		out.ClusterProfile = p.Name
	}
	return out, nil
}

// Reader reads on the hub what a member's access names.
type Reader struct {
	// Providers are the hub's access providers (--clusterprofile-provider-file); nil: none.
	Providers *access.Config
	// Secret and ClusterProfile get one object of the hub by namespace and name.
	Secret         func(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	ClusterProfile func(ctx context.Context, namespace, name string) (*v1alpha1.ClusterProfile, error)
}

// ForClusterProfile builds the rest.Config of the cluster a ClusterProfile names.
func (r Reader) ForClusterProfile(cp *v1alpha1.ClusterProfile) (*rest.Config, error) {
	return FromClusterProfile(r.Providers, cp)
}

// ForMultiKueueCluster builds the rest.Config of the worker a MultiKueueCluster names, from
// what it names in Kueue's namespace on the hub, as MultiKueue itself would.
func (r Reader) ForMultiKueueCluster(ctx context.Context, kueueNamespace string, mkc MultiKueueCluster) (*rest.Config, error) {
	if mkc.ClusterProfile != "" {
		cp, err := r.ClusterProfile(ctx, kueueNamespace, mkc.ClusterProfile)
		if err != nil {
			return nil, fail(homelabv1.ReasonClusterProfileNotFound, err, "MultiKueueCluster %s names ClusterProfile %s/%s", mkc.Name, kueueNamespace, mkc.ClusterProfile)
		}
		return FromClusterProfile(r.Providers, cp)
	}
	switch {
	case mkc.Location == "":
		return nil, fail(homelabv1.ReasonMalformedKubeconfig, nil, "MultiKueueCluster %s names neither a kubeconfig nor a ClusterProfile", mkc.Name)
	case mkc.LocationType != "" && !strings.EqualFold(mkc.LocationType, "Secret"):
		return nil, fail(homelabv1.ReasonKubeconfigNotReadable, nil,
			"MultiKueueCluster %s keeps its kubeconfig in a file on Kueue's disk (locationType %s), which the hub cannot read: keep it in a Secret", mkc.Name, mkc.LocationType)
	}
	secret, err := r.Secret(ctx, kueueNamespace, mkc.Location)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fail(homelabv1.ReasonKubeconfigSecretMissing, nil, "Secret %s/%s, named by MultiKueueCluster %s, does not exist", kueueNamespace, mkc.Location, mkc.Name)
	case apierrors.IsForbidden(err):
		return nil, fail(homelabv1.ReasonKubeconfigNotReadable, err,
			"the hub may not get Secret %s/%s, named by MultiKueueCluster %s: grant it get on that Secret (docs/design/hub.md#rbac)", kueueNamespace, mkc.Location, mkc.Name)
	case err != nil:
		return nil, fail(homelabv1.ReasonKubeconfigNotReadable, err, "Secret %s/%s, named by MultiKueueCluster %s", kueueNamespace, mkc.Location, mkc.Name)
	}
	data, ok := secret.Data[KubeconfigKey]
	if !ok {
		return nil, fail(homelabv1.ReasonKubeconfigSecretMissing, nil, "Secret %s/%s, named by MultiKueueCluster %s, has no key %q", kueueNamespace, mkc.Location, mkc.Name, KubeconfigKey)
	}
	return FromKubeconfig(fmt.Sprintf("Secret %s/%s (MultiKueueCluster %s)", kueueNamespace, mkc.Location, mkc.Name), data)
}
