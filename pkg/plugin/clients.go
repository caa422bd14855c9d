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

package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/version"
)

// CRDNotInstalled is the message for a cluster without the GpuInventory CRD.
const CRDNotInstalled = "the GpuInventory CRD is not installed; run the operator or use `kubectl gpuinv scan`"

// clients are the API clients of one run, made on first use from the config flags (or, in
// unit tests, from a given config or given fakes).
type clients struct {
	flags    *configFlags
	base     *rest.Config // instead of the flags' config
	warnings io.Writer

	made      *rest.Config // what config returns a copy of
	host      string
	gpu       gpuAPI
	core      rest.Interface
	resource  rest.Interface
	discovery discoverer
	// kube, in unit tests, is a fake clientset that typed serves instead of core and resource.
	kube kubeAPI
	// load, in unit tests, reads the cluster for why and fit instead of loadCluster.
	load func(context.Context, *clients, question) (loaded, error)

	// fleet and currentContext stand, in unit tests, for the kubeconfig's contexts (when
	// flags is nil): the clients of each, and the current one.
	fleet          map[string]*clients
	currentContext string
}

func (c *clients) config() (*rest.Config, error) {
	if c.made != nil {
		return rest.CopyConfig(c.made), nil
	}
	cfg := c.base
	if cfg == nil {
		var err error
		cfg, err = c.flags.toRESTConfig()
		if clientcmd.IsEmptyConfig(err) {
			return nil, errors.New("no kubeconfig found: pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config")
		}
		if err != nil {
			return nil, fmt.Errorf("load the kubeconfig: %w", err)
		}
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "kubectl-gpuinv/" + version.Get().Version
	// A scan pages through the node list; the client's default 5 requests/s would throttle it.
	cfg.QPS, cfg.Burst = 50, 100
	cfg.WarningHandler = rest.NewWarningWriter(c.warnings, rest.WarningWriterOptions{Deduplicate: true})
	c.host = cfg.Host
	c.made = cfg // the kubeconfig is read once per context
	return rest.CopyConfig(cfg), nil
}

// GPU returns the GpuInventory and GpuNode clients (JSON: custom resources have no
// protobuf).
func (c *clients) GPU() (gpuAPI, error) {
	if c.gpu == nil {
		cfg, err := c.config()
		if err != nil {
			return nil, err
		}
		client, err := kubeclient.New(cfg, homelabv1.SchemeGroupVersion, nil)
		if err != nil {
			return nil, err
		}
		c.gpu = restGPU{client}
	}
	return c.gpu, nil
}

// Core returns the REST client of the core API group, which reads Nodes as protobuf: a Node
// is about half the bytes, and decodes several times faster, than in JSON.
func (c *clients) Core() (rest.Interface, error) {
	if c.core == nil {
		cfg, err := c.config()
		if err != nil {
			return nil, err
		}
		client, err := kubeclient.New(kubeproto.StreamConfig(cfg), corev1.SchemeGroupVersion, nil)
		if err != nil {
			return nil, err
		}
		c.core = client
	}
	return c.core, nil
}

// Resource returns the REST client of DRA's resource.k8s.io/v1 group, which reads
// ResourceClaims as protobuf (claimcache.StreamClaims).
func (c *clients) Resource() (rest.Interface, error) {
	if c.resource == nil {
		cfg, err := c.config()
		if err != nil {
			return nil, err
		}
		client, err := kubeclient.New(kubeproto.StreamConfig(cfg), resourcev1.SchemeGroupVersion, nil)
		if err != nil {
			return nil, err
		}
		c.resource = client
	}
	return c.resource, nil
}

// namespace is the namespace of the kubeconfig's current context ("default" when it names
// none), as kubectl uses it when -n is not given.
func (c *clients) namespace() (string, error) {
	if c.flags == nil {
		return metav1.NamespaceDefault, nil
	}
	ns, _, err := c.flags.toRawKubeConfigLoader().Namespace()
	if clientcmd.IsEmptyConfig(err) {
		return "", errors.New("no kubeconfig found: pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config")
	}
	if err != nil {
		return "", fmt.Errorf("read the namespace from the kubeconfig: %w", err)
	}
	return ns, nil
}

// Discovery returns what answers which resources a group version serves.
func (c *clients) Discovery() (discoverer, error) {
	if c.discovery == nil {
		cfg, err := c.config()
		if err != nil {
			return nil, err
		}
		client, err := kubeclient.New(cfg, homelabv1.SchemeGroupVersion, nil)
		if err != nil {
			return nil, err
		}
		c.discovery = restDiscoverer{client}
	}
	return c.discovery, nil
}

// crdInstalled asks discovery whether the API server serves gpuinventories. known is false
// when discovery itself failed.
func (c *clients) crdInstalled() (installed, known bool) {
	disc, err := c.Discovery()
	if err != nil {
		return false, false
	}
	resources, err := disc.ServerResourcesForGroupVersion(homelabv1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, true
	}
	if err != nil {
		return false, false
	}
	for _, r := range resources.APIResources {
		if r.Name == "gpuinventories" {
			return true, true
		}
	}
	return false, true
}

// request is an API call, for error messages.
type request struct {
	verb     string
	resource string // plural
	group    string // "" for the core group
	name     string // for get
	// namespaced: the resource lives in namespaces; namespace "" then means all of them.
	namespaced bool
	namespace  string
}

var (
	getInventory = func(name string) request {
		return request{verb: "get", resource: "gpuinventories", group: homelabv1.GroupName, name: name}
	}
	listInventory  = request{verb: "list", resource: "gpuinventories", group: homelabv1.GroupName}
	watchInventory = request{verb: "watch", resource: "gpuinventories", group: homelabv1.GroupName}
	listNodes      = request{verb: "list", resource: "nodes"}
	listPods       = func(namespace string) request {
		return request{verb: "list", resource: "pods", namespaced: true, namespace: namespace}
	}
	listClaims = func(namespace string) request {
		return request{verb: "list", resource: "resourceclaims", group: "resource.k8s.io", namespaced: true, namespace: namespace}
	}
)

// scope is where the request applies, for error messages, and the matching flag of
// `kubectl auth can-i`.
func (r request) scope() (where, canI string) {
	switch {
	case !r.namespaced:
		return "(cluster-scoped)", ""
	case r.namespace == "":
		return "in all namespaces", " -A"
	}
	return fmt.Sprintf("in namespace %q", r.namespace), " -n " + r.namespace
}

func (r request) groupResource() string {
	if r.group == "" {
		return r.resource
	}
	return r.resource + "." + r.group
}

// explain turns an API error into a message that says what to do.
func (c *clients) explain(err error, r request) error {
	switch {
	case apierrors.IsForbidden(err):
		group := fmt.Sprintf("API group %q", r.group)
		if r.group == "" {
			group = `the core API group ("")`
		}
		where, canI := r.scope()
		role, hint := "ClusterRole", ""
		switch {
		case r.namespaced && r.namespace != "":
			role = "Role"
		case r.namespaced:
			hint = " (or ask for one namespace with -n NAMESPACE)"
		}
		return fmt.Errorf("permission denied: kubectl gpuinv needs %q on %s in %s %s; ask a cluster admin for a %s that grants it%s (`kubectl auth can-i %s %s%s` checks). The API server said: %v",
			r.verb, r.resource, group, where, role, hint, r.verb, r.groupResource(), canI, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the API server at %s did not accept your credentials (401 Unauthorized): check --kubeconfig, --context and --user, or log in again", c.hostOrUnknown())
	case apierrors.IsNotFound(err) && r.group == homelabv1.GroupName:
		installed, known := c.crdInstalled()
		if (known && !installed) || (!known && isMissingResource(err)) {
			return errors.New(CRDNotInstalled)
		}
		if r.name != "" {
			return fmt.Errorf("GpuInventory %q not found; `kubectl gpuinv list` shows the inventories that exist", r.name)
		}
	case isConnectionError(err):
		return fmt.Errorf("cannot reach the Kubernetes API server at %s: %v; check --kubeconfig, --context and --server", c.hostOrUnknown(), err)
	}
	return fmt.Errorf("%s %s: %w", r.verb, r.groupResource(), err)
}

func (c *clients) hostOrUnknown() string {
	if c.host == "" {
		return "(unknown)"
	}
	return c.host
}

// isMissingResource recognises the API server's answer for a resource it does not serve, as
// opposed to an object that does not exist.
func isMissingResource(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	s := status.Status()
	return s.Details == nil || s.Details.Name == "" || strings.Contains(s.Message, "the server could not find the requested resource")
}

func isConnectionError(err error) bool {
	var urlErr *url.Error
	var opErr *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &urlErr) && errors.As(err, &opErr))
}
