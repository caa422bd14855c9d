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
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// ContextList is the --context flag: kubeconfig contexts, repeated or comma-separated. The
// first one is also the single context of the config flags, so that one --context works as
// kubectl's.
type ContextList struct {
	names  []string
	single *string // the config flags' Context
}

func (l *ContextList) Set(value string) error {
	names, err := csv.NewReader(strings.NewReader(value)).Read()
	if err == io.EOF {
		return nil // --context="": the current context, as kubectl takes it
	}
	if err != nil {
		return err
	}
	for _, name := range names {
		if name = strings.TrimSpace(name); name != "" && !slices.Contains(l.names, name) {
			l.names = append(l.names, name)
		}
	}
	if len(l.names) > 0 {
		*l.single = l.names[0]
	}
	return nil
}

func (l *ContextList) String() string { return strings.Join(l.names, ",") }
func (l *ContextList) Type() string   { return "strings" }

// KubeconfigContexts returns the names of the merged kubeconfig's contexts, sorted, and its
// current context.
func (c *Factory) KubeconfigContexts() (names []string, current string, err error) {
	if c.Flags == nil {
		for name := range c.Contexts {
			names = append(names, name)
		}
		slices.Sort(names)
		return names, c.CurrentContext, nil
	}
	raw, err := c.Flags.toRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, "", fmt.Errorf("load the kubeconfig: %w", err)
	}
	for name := range raw.Contexts {
		names = append(names, name)
	}
	if len(names) == 0 {
		return nil, "", errors.New("no kubeconfig context found: pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config")
	}
	slices.Sort(names)
	return names, raw.CurrentContext, nil
}

// CompleteContexts completes --context with the kubeconfig's contexts.
func (c *Factory) CompleteContexts(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	names, _, err := c.KubeconfigContexts()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// ForContext returns the factory of a kubeconfig context: the config flags of this run (the
// kubeconfig, --user, --request-timeout, ...) with that context.
func (c *Factory) ForContext(name string, warnings io.Writer) *Factory {
	if c.Flags == nil {
		return c.Contexts[name]
	}
	return &Factory{Flags: c.Flags.withContext(name), Warnings: warnings}
}

// RequestTimeout is --request-timeout as the context's config has it (0: not set).
func (c *Factory) RequestTimeout() time.Duration {
	cfg, err := c.Config()
	if err != nil {
		return 0
	}
	return cfg.Timeout
}

// Problem says in one line, in plain words, why the inventory name could not be read.
// expired says that the cluster's time ran out (after timeout).
func (c *Factory) Problem(err error, name string, expired bool, timeout time.Duration) string {
	if c.host == "" && (c.Flags != nil || c.Base != nil) {
		_, _ = c.Config() // for the host's address; unit tests give factories made without it
	}
	var opErr *net.OpError
	var netErr net.Error
	switch {
	case expired:
		return fmt.Sprintf("no answer from the API server at %s within %s", c.HostOrUnknown(), timeout)
	case errors.As(err, &netErr) && netErr.Timeout():
		// --request-timeout (the HTTP client's), or a connection that timed out.
		if t := c.RequestTimeout(); t > 0 && (timeout == 0 || t < timeout) {
			timeout = t
		}
		if timeout == 0 {
			return fmt.Sprintf("no answer from the API server at %s (%v)", c.HostOrUnknown(), err)
		}
		return fmt.Sprintf("no answer from the API server at %s within %s", c.HostOrUnknown(), timeout)
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("permission denied: the user may not get gpuinventories.%s (403 Forbidden)", homelabv1.GroupName)
	case apierrors.IsUnauthorized(err):
		return fmt.Sprintf("the API server at %s did not accept the credentials (401 Unauthorized)", c.HostOrUnknown())
	case apierrors.IsNotFound(err):
		if installed, known := c.CRDInstalled(); (known && !installed) || (!known && IsMissingResource(err)) {
			return "the GpuInventory CRD is not installed"
		}
		return fmt.Sprintf("GpuInventory %q not found", name)
	case isConnectionError(err) && errors.As(err, &opErr):
		return fmt.Sprintf("cannot reach the API server at %s (%v)", c.HostOrUnknown(), opErr)
	case isConnectionError(err):
		return fmt.Sprintf("cannot reach the API server at %s (%v)", c.HostOrUnknown(), err)
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) { // the URL says no more than the host
		err = fmt.Errorf("the request to the API server at %s failed: %w", c.HostOrUnknown(), urlErr.Err)
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// NewContextList is the --context flag of flags: its first context is the flags' own.
func NewContextList(flags *ConfigFlags) *ContextList { return &ContextList{single: flags.context} }

// Names are the contexts given, in order, without repeats.
func (l *ContextList) Names() []string { return l.names }
