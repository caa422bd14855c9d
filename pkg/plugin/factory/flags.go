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
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ConfigFlags are kubectl's connection flags (--kubeconfig, --context, --server, --user,
// --as, --request-timeout, ...), with kubectl's names and help, as cli-runtime's
// genericclioptions.ConfigFlags defines them: that package links kustomize, the discovery
// client and every built-in API group (docs/design/clients.md). --namespace is each
// subcommand's own, and --context is ContextList; the plugin keeps no discovery cache, so
// there is no --cache-dir.
type ConfigFlags struct {
	kubeConfig           string
	context              *string // set by ContextList
	clusterName          string
	authInfoName         string
	apiServer            string
	tlsServerName        string
	insecure             bool
	certFile             string
	keyFile              string
	caFile               string
	bearerToken          string
	impersonate          string
	impersonateUID       string
	impersonateGroup     []string
	impersonateUserExtra []string
	timeout              string
	disableCompression   bool
	proxyURL             string

	loader clientcmd.ClientConfig // made on first use
}

func NewConfigFlags() *ConfigFlags {
	return &ConfigFlags{context: new(string), timeout: "0", impersonateGroup: []string{}, impersonateUserExtra: []string{}}
}

// AddFlags registers the flags on fs (context apart).
func (f *ConfigFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.kubeConfig, "kubeconfig", f.kubeConfig, "Path to the kubeconfig file to use for CLI requests.")
	fs.StringVar(&f.certFile, "client-certificate", f.certFile, "Path to a client certificate file for TLS")
	fs.StringVar(&f.keyFile, "client-key", f.keyFile, "Path to a client key file for TLS")
	fs.StringVar(&f.bearerToken, "token", f.bearerToken, "Bearer token for authentication to the API server")
	fs.StringVar(&f.impersonate, "as", f.impersonate, "Username to impersonate for the operation. User could be a regular user or a service account in a namespace.")
	fs.StringVar(&f.impersonateUID, "as-uid", f.impersonateUID, "UID to impersonate for the operation.")
	fs.StringArrayVar(&f.impersonateGroup, "as-group", f.impersonateGroup, "Group to impersonate for the operation, this flag can be repeated to specify multiple groups.")
	fs.StringArrayVar(&f.impersonateUserExtra, "as-user-extra", f.impersonateUserExtra, "User extras to impersonate for the operation, this flag can be repeated to specify multiple values for the same key.")
	fs.StringVar(&f.clusterName, "cluster", f.clusterName, "The name of the kubeconfig cluster to use")
	fs.StringVar(&f.authInfoName, "user", f.authInfoName, "The name of the kubeconfig user to use")
	fs.StringVarP(&f.apiServer, "server", "s", f.apiServer, "The address and port of the Kubernetes API server")
	fs.StringVar(&f.tlsServerName, "tls-server-name", f.tlsServerName, "Server name to use for server certificate validation. If it is not provided, the hostname used to contact the server is used")
	fs.BoolVar(&f.insecure, "insecure-skip-tls-verify", f.insecure, "If true, the server's certificate will not be checked for validity. This will make your HTTPS connections insecure")
	fs.StringVar(&f.caFile, "certificate-authority", f.caFile, "Path to a cert file for the certificate authority")
	fs.StringVar(&f.timeout, "request-timeout", f.timeout, "The length of time to wait before giving up on a single server request. Non-zero values should contain a corresponding time unit (e.g. 1s, 2m, 3h). A value of zero means don't timeout requests.")
	fs.BoolVar(&f.disableCompression, "disable-compression", f.disableCompression, "If true, opt-out of response compression for all requests to the server")
	fs.StringVar(&f.proxyURL, "proxy-url", f.proxyURL, "Proxy URL to use for requests to the API server")
}

// withContext is a copy of the flags' values with another context.
func (f *ConfigFlags) withContext(name string) *ConfigFlags {
	c := *f
	c.context, c.loader = &name, nil
	return &c
}

// toRESTConfig is the config of the kubeconfig with the flags applied.
func (f *ConfigFlags) toRESTConfig() (*rest.Config, error) {
	return f.toRawKubeConfigLoader().ClientConfig()
}

// toRawKubeConfigLoader is the kubeconfig loaded as kubectl loads it, with the flags as
// overrides.
func (f *ConfigFlags) toRawKubeConfigLoader() clientcmd.ClientConfig {
	if f.loader != nil {
		return f.loader
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.DefaultClientConfig = &clientcmd.DefaultClientConfig
	rules.ExplicitPath = f.kubeConfig

	o := &clientcmd.ConfigOverrides{ClusterDefaults: clientcmd.ClusterDefaults}
	o.AuthInfo.ClientCertificate, o.AuthInfo.ClientKey = f.certFile, f.keyFile
	o.AuthInfo.Token = f.bearerToken
	o.AuthInfo.Impersonate, o.AuthInfo.ImpersonateUID = f.impersonate, f.impersonateUID
	o.AuthInfo.ImpersonateGroups = f.impersonateGroup
	if len(f.impersonateUserExtra) > 0 {
		extra := map[string][]string{}
		for _, kv := range f.impersonateUserExtra {
			if k, v, ok := strings.Cut(kv, "="); ok {
				extra[k] = append(extra[k], v)
			}
		}
		o.AuthInfo.ImpersonateUserExtra = extra
	}
	o.ClusterInfo.Server, o.ClusterInfo.TLSServerName = f.apiServer, f.tlsServerName
	o.ClusterInfo.CertificateAuthority = f.caFile
	o.ClusterInfo.InsecureSkipTLSVerify = f.insecure
	o.ClusterInfo.DisableCompression = f.disableCompression
	o.ClusterInfo.ProxyURL = f.proxyURL
	if f.context != nil {
		o.CurrentContext = *f.context
	}
	o.Context.Cluster, o.Context.AuthInfo = f.clusterName, f.authInfoName
	o.Timeout = f.timeout
	f.loader = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, o)
	return f.loader
}
