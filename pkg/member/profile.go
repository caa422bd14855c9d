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
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

const (
	// SecretReaderProvider is the access provider of cluster-inventory-api's secretreader
	// credential plugin: it reads a token from the Secret <its namespace>/<clusterName>.
	SecretReaderProvider = "secretreader"
	// execExtension is the cluster extension whose content pkg/access hands the credential
	// plugin (ExecCredential.spec.cluster.config).
	execExtension = "client.authentication.k8s.io/exec"
)

// FromClusterProfile builds the rest.Config of the cluster a ClusterProfile names, through
// the first of the hub's access providers that the profile offers (pkg/access's rule),
// after refusing what MultiKueue would refuse: no server, a server that is not https or
// not a host name, insecure-skip-tls-verify.
func FromClusterProfile(providers *access.Config, cp *v1alpha1.ClusterProfile) (*rest.Config, error) {
	name := cp.Namespace + "/" + cp.Name
	offered := offeredProviders(cp)
	if len(offered) == 0 {
		return nil, fail(homelabv1.ReasonNoUsableAccessProvider, nil,
			"ClusterProfile %s lists no access provider (status.accessProviders is empty)", name)
	}
	var known []string
	var chosen *access.Provider
	if providers != nil {
		for i := range providers.Providers {
			p := &providers.Providers[i]
			known = append(known, p.Name)
			if _, ok := offered[p.Name]; ok && chosen == nil {
				chosen = p
			}
		}
	}
	if chosen == nil {
		return nil, fail(homelabv1.ReasonNoUsableAccessProvider, nil,
			"ClusterProfile %s offers access providers %s, the hub knows %s: add one of the offered to the hub's --clusterprofile-provider-file",
			name, list(sortedKeys(offered)), list(known))
	}
	if chosen.ExecConfig == nil {
		return nil, fail(homelabv1.ReasonBadAccessProvider, nil,
			"the hub's access provider %q has no execConfig (--clusterprofile-provider-file)", chosen.Name)
	}
	if err := checkProvider(chosen.Name, offered[chosen.Name]); err != nil {
		return nil, fail(homelabv1.ReasonBadAccessProvider, nil, "ClusterProfile %s, access provider %q: %s", name, chosen.Name, err)
	}
	// pkg/access appends a profile's extra arguments and variables to the provider's own
	// ExecConfig, shared by every call: give it a copy each time.
	cfg, err := own(providers).BuildConfigFromCP(cp)
	if err != nil {
		return nil, fail(homelabv1.ReasonBadAccessProvider, err, "ClusterProfile %s, access provider %q", name, chosen.Name)
	}
	return cfg, nil
}

// offeredProviders are the profile's access providers by name: status.accessProviders, and
// the deprecated status.credentialProviders where no access provider has the name.
func offeredProviders(cp *v1alpha1.ClusterProfile) map[string]*v1alpha1.AccessProvider {
	out := map[string]*v1alpha1.AccessProvider{}
	for i := range cp.Status.CredentialProviders {
		out[cp.Status.CredentialProviders[i].Name] = &cp.Status.CredentialProviders[i]
	}
	for i := range cp.Status.AccessProviders {
		out[cp.Status.AccessProviders[i].Name] = &cp.Status.AccessProviders[i]
	}
	return out
}

// checkProvider refuses a provider's cluster the hub should not connect to, and a
// secretreader provider that names no Secret.
func checkProvider(name string, p *v1alpha1.AccessProvider) error {
	c := &p.Cluster
	if err := checkServer(c.Server); err != nil {
		return err
	}
	if c.InsecureSkipTLSVerify {
		return fmt.Errorf("insecure-skip-tls-verify is refused, as MultiKueue refuses it: give certificate-authority-data")
	}
	if c.CertificateAuthority != "" && len(c.CertificateAuthorityData) == 0 {
		return fmt.Errorf("certificate-authority names a file, which is not read: give certificate-authority-data")
	}
	if name == SecretReaderProvider && clusterName(c) == "" {
		return fmt.Errorf("the secretreader plugin needs the cluster extension %q with a clusterName (the Secret it reads)", execExtension)
	}
	return nil
}

// clusterName is the clusterName of the cluster's exec extension, "" when absent.
func clusterName(c *clientcmdv1.Cluster) string {
	for _, e := range c.Extensions {
		if e.Name != execExtension {
			continue
		}
		var v struct {
			ClusterName string `json:"clusterName"`
		}
		if json.Unmarshal(e.Extension.Raw, &v) == nil {
			return v.ClusterName
		}
	}
	return ""
}

// checkServer accepts an https URL whose host is an IP address or a DNS name, as MultiKueue
// accepts a worker's server.
func checkServer(server string) error {
	if server == "" {
		return fmt.Errorf("no server is given")
	}
	u, err := url.Parse(server)
	if err != nil {
		return fmt.Errorf("server %q is not a URL: %v", server, err)
	}
	if u.Scheme != "https" {
		return fmt.Errorf("server %q is not https: the hub's credentials would cross the network in the clear", server)
	}
	host := u.Hostname()
	if net.ParseIP(host) == nil && len(validation.IsDNS1123Subdomain(strings.ToLower(host))) > 0 {
		return fmt.Errorf("server %q does not name a host", server)
	}
	return nil
}

// own is a copy of providers whose ExecConfigs are copies.
func own(providers *access.Config) *access.Config {
	out := &access.Config{Providers: slices.Clone(providers.Providers)}
	for i := range out.Providers {
		out.Providers[i].ExecConfig = out.Providers[i].ExecConfig.DeepCopy()
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// list quotes names for a message: ["a", "b"], or "none".
func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return fmt.Sprintf("%q", names)
}
