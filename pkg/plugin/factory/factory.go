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
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/version"
)

// CRDNotInstalled is the message for a cluster without the GpuInventory CRD.
const CRDNotInstalled = "the GpuInventory CRD is not installed; run the operator or use `kubectl gpuinv scan`"

// Factory makes the API clients of one run from kubectl's config flags, each on first use:
// every command reaches the API server through it (or, in unit tests, through a given config
// or given fakes).
type Factory struct {
	// Flags are the config flags the clients are made from; Base, when set, is the config
	// instead of theirs.
	Flags    *ConfigFlags
	Base     *rest.Config
	Warnings io.Writer

	// FakeGPU, FakeKube and FakeDiscovery, in unit tests, serve instead of the REST clients:
	// fake clientsets (FakeKube instead of Core, Resource and the protobuf streams).
	FakeGPU       GPUAPI
	FakeKube      KubeAPI
	FakeDiscovery Discoverer
	// FakeDynamic, in unit tests, serves the objects read without a type of their own
	// (PodGroups, Kueue's queues, flavors, Topologies and Workloads).
	FakeDynamic dynamic.Interface

	// Contexts and CurrentContext stand, in unit tests, for the kubeconfig's contexts (when
	// Flags is nil): the factory of each, and the current one.
	Contexts       map[string]*Factory
	CurrentContext string

	made      *rest.Config // what Config returns a copy of
	host      string
	gpu       GPUAPI
	core      rest.Interface
	resource  rest.Interface
	discovery Discoverer
	dynamic   dynamic.Interface
}

// FromFlags is the factory of the config flags; warnings receives the API server's warnings.
func FromFlags(flags *ConfigFlags, warnings io.Writer) *Factory {
	return &Factory{Flags: flags, Warnings: warnings}
}

// MadeGPU reports whether the GpuInventory client was made (GPU succeeded).
func (c *Factory) MadeGPU() bool { return c.gpu != nil || c.FakeGPU != nil }

// Streams reports whether the clients reach an API server, whose lists may be read as
// protobuf streams; false for the unit tests' fake clientsets (read their typed lists).
func (c *Factory) Streams() bool { return c.FakeKube == nil }

// Config is a copy of the REST config of the clients: the kubeconfig's with the flags
// applied, read once.
func (c *Factory) Config() (*rest.Config, error) {
	if c.made != nil {
		return rest.CopyConfig(c.made), nil
	}
	cfg := c.Base
	if cfg == nil {
		var err error
		cfg, err = c.Flags.toRESTConfig()
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
	cfg.WarningHandler = rest.NewWarningWriter(c.Warnings, rest.WarningWriterOptions{Deduplicate: true})
	c.host = cfg.Host
	c.made = cfg // the kubeconfig is read once per context
	return rest.CopyConfig(cfg), nil
}

// GPU returns the GpuInventory and GpuNode clients (JSON: custom resources have no
// protobuf).
func (c *Factory) GPU() (GPUAPI, error) {
	if c.FakeGPU != nil {
		return c.FakeGPU, nil
	}
	if c.gpu == nil {
		cfg, err := c.Config()
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
func (c *Factory) Core() (rest.Interface, error) {
	if c.core == nil {
		cfg, err := c.Config()
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
func (c *Factory) Resource() (rest.Interface, error) {
	if c.resource == nil {
		cfg, err := c.Config()
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

// Namespace is the namespace of the kubeconfig's current context ("default" when it names
// none), as kubectl uses it when -n is not given.
func (c *Factory) Namespace() (string, error) {
	if c.Flags == nil {
		return metav1.NamespaceDefault, nil
	}
	ns, _, err := c.Flags.toRawKubeConfigLoader().Namespace()
	if clientcmd.IsEmptyConfig(err) {
		return "", errors.New("no kubeconfig found: pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config")
	}
	if err != nil {
		return "", fmt.Errorf("read the namespace from the kubeconfig: %w", err)
	}
	return ns, nil
}

// Discovery returns what answers which resources a group version serves.
func (c *Factory) Discovery() (Discoverer, error) {
	if c.FakeDiscovery != nil {
		return c.FakeDiscovery, nil
	}
	if c.discovery == nil {
		cfg, err := c.Config()
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

// CRDInstalled asks discovery whether the API server serves gpuinventories. known is false
// when discovery itself failed.
func (c *Factory) CRDInstalled() (installed, known bool) {
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

// Dynamic returns the client of the objects the plugin reads as unstructured: those of
// API groups it has no typed client of (PodGroups and Workloads, Kueue's objects).
func (c *Factory) Dynamic() (dynamic.Interface, error) {
	switch {
	case c.FakeDynamic != nil:
		return c.FakeDynamic, nil
	case c.FakeKube != nil:
		return nil, ErrNoDynamic
	}
	if c.dynamic == nil {
		cfg, err := c.Config()
		if err != nil {
			return nil, err
		}
		if c.dynamic, err = dynamic.NewForConfig(cfg); err != nil {
			return nil, err
		}
	}
	return c.dynamic, nil
}

// ErrNoDynamic: the unit tests' fake clientsets serve no unstructured objects.
var ErrNoDynamic = errors.New("no dynamic client beside the fake clientset")

// Request is an API call, for error messages.
type Request struct {
	Verb     string
	Resource string // plural
	Group    string // "" for the core group
	Name     string // for get
	// Namespaced: the resource lives in namespaces; Namespace "" then means all of them.
	Namespaced bool
	Namespace  string
}

var (
	GetInventory = func(name string) Request {
		return Request{Verb: "get", Resource: "gpuinventories", Group: homelabv1.GroupName, Name: name}
	}
	ListInventory  = Request{Verb: "list", Resource: "gpuinventories", Group: homelabv1.GroupName}
	WatchInventory = Request{Verb: "watch", Resource: "gpuinventories", Group: homelabv1.GroupName}
	ListGpuNodes   = Request{Verb: "list", Resource: "gpunodes", Group: homelabv1.GroupName}
	ListNodes      = Request{Verb: "list", Resource: "nodes"}
	ListPods       = func(namespace string) Request {
		return Request{Verb: "list", Resource: "pods", Namespaced: true, Namespace: namespace}
	}
	ListClaims = func(namespace string) Request {
		return Request{Verb: "list", Resource: "resourceclaims", Group: "resource.k8s.io", Namespaced: true, Namespace: namespace}
	}
)

// scope is where the request applies, for error messages, and the matching flag of
// `kubectl auth can-i`.
func (r Request) scope() (where, canI string) {
	switch {
	case !r.Namespaced:
		return "(cluster-scoped)", ""
	case r.Namespace == "":
		return "in all namespaces", " -A"
	}
	return fmt.Sprintf("in namespace %q", r.Namespace), " -n " + r.Namespace
}

func (r Request) groupResource() string {
	if r.Group == "" {
		return r.Resource
	}
	return r.Resource + "." + r.Group
}

// Explain turns an API error into a message that says what to do.
func (c *Factory) Explain(err error, r Request) error {
	switch {
	case apierrors.IsForbidden(err):
		group := fmt.Sprintf("API group %q", r.Group)
		if r.Group == "" {
			group = `the core API group ("")`
		}
		where, canI := r.scope()
		role, hint := "ClusterRole", ""
		switch {
		case r.Namespaced && r.Namespace != "":
			role = "Role"
		case r.Namespaced:
			hint = " (or ask for one namespace with -n NAMESPACE)"
		}
		return fmt.Errorf("permission denied: kubectl gpuinv needs %q on %s in %s %s; ask a cluster admin for a %s that grants it%s (`kubectl auth can-i %s %s%s` checks). The API server said: %v",
			r.Verb, r.Resource, group, where, role, hint, r.Verb, r.groupResource(), canI, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the API server at %s did not accept your credentials (401 Unauthorized): check --kubeconfig, --context and --user, or log in again", c.HostOrUnknown())
	case apierrors.IsNotFound(err) && r.Group == homelabv1.GroupName:
		installed, known := c.CRDInstalled()
		if (known && !installed) || (!known && IsMissingResource(err)) {
			return errors.New(CRDNotInstalled)
		}
		if r.Name != "" {
			return fmt.Errorf("GpuInventory %q not found; `kubectl gpuinv list` shows the inventories that exist", r.Name)
		}
	case isConnectionError(err):
		return fmt.Errorf("cannot reach the Kubernetes API server at %s: %v; check --kubeconfig, --context and --server", c.HostOrUnknown(), err)
	}
	return fmt.Errorf("%s %s: %w", r.Verb, r.groupResource(), err)
}

func (c *Factory) HostOrUnknown() string {
	if c.host == "" {
		return "(unknown)"
	}
	return c.host
}

// IsMissingResource recognises the API server's answer for a resource it does not serve, as
// opposed to an object that does not exist.
func IsMissingResource(err error) bool {
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

// ExplainList explains an API error of a list, found inside err; other errors (a malformed
// stream, fn's) are returned as they are.
func (c *Factory) ExplainList(err error, r Request) error {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if statusErr, ok := status.(error); ok {
			return c.Explain(statusErr, r)
		}
	}
	if isConnectionError(err) {
		return c.Explain(err, r)
	}
	return err
}

// Typed returns the typed clients of the built-in groups, over the plugin's protobuf REST
// clients (or the test's fake clientset).
func (c *Factory) Typed() (KubeAPI, error) {
	if c.FakeKube != nil {
		return c.FakeKube, nil
	}
	core, err := c.Core()
	if err != nil {
		return nil, err
	}
	resource, err := c.Resource()
	if err != nil {
		return nil, err
	}
	scheduling, err := c.Scheduling()
	if err != nil {
		return nil, err
	}
	return restAPI{core: core, resource: resource, scheduling: scheduling}, nil
}

// Scheduling returns the REST client of scheduling.k8s.io/v1 (PriorityClasses).
func (c *Factory) Scheduling() (rest.Interface, error) {
	cfg, err := c.Config()
	if err != nil {
		return nil, err
	}
	return kubeclient.New(cfg, schedulingv1.SchemeGroupVersion, nil)
}

// ReadConfig is the config of the Node and pod reads. Unless --disable-compression was
// given (compressionSet), they are read uncompressed: on a link faster than about 1 Gbit/s
// the API server's gzip of the Nodes (a WatchList's too) takes longer than sending them
// as they are (docs/design/why-fit.md).
func (c *Factory) ReadConfig(compressionSet bool) (*rest.Config, error) {
	cfg, err := c.Config()
	if err != nil {
		return nil, err
	}
	if !compressionSet {
		cfg.DisableCompression = true
	}
	if cfg.DisableCompression {
		// Said in the request too: over plain HTTP (kubectl proxy) client-go uses Go's
		// default transport, which asks for gzip whatever the config says.
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return identityEncoding{rt} })
	}
	return cfg, nil
}

// identityEncoding asks the API server not to compress its answers.

type identityEncoding struct{ rt http.RoundTripper }

func (t identityEncoding) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Accept-Encoding", "identity")
	return t.rt.RoundTrip(req)
}

// ListChunk is the page size of the lists, kubectl's.
const ListChunk = 500

// ListAll lists in pages of ListChunk, handing each page to page, which returns its continue
// token.
func ListAll[L any](ctx context.Context, list func(context.Context, metav1.ListOptions) (L, error), opts metav1.ListOptions, page func(L) string) error {
	opts.Limit = ListChunk
	for {
		l, err := list(ctx, opts)
		if err != nil {
			return err
		}
		if opts.Continue = page(l); opts.Continue == "" {
			return nil
		}
	}
}

// DisableCompressionFlag is kubectl's flag that turns the API server's gzip off, or on.

const DisableCompressionFlag = "disable-compression"
