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
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// contextList is the --context flag: kubeconfig contexts, repeated or comma-separated. The
// first one is also the single context of the config flags, so that one --context works as
// kubectl's.
type contextList struct {
	names  []string
	single *string // the config flags' Context
}

func (l *contextList) Set(value string) error {
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

func (l *contextList) String() string { return strings.Join(l.names, ",") }
func (l *contextList) Type() string   { return "strings" }

// kubeconfigContexts returns the names of the merged kubeconfig's contexts, sorted, and its
// current context.
func (c *clients) kubeconfigContexts() (names []string, current string, err error) {
	if c.flags == nil {
		for name := range c.fleet {
			names = append(names, name)
		}
		slices.Sort(names)
		return names, c.currentContext, nil
	}
	raw, err := c.flags.toRawKubeConfigLoader().RawConfig()
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

// completeContexts completes --context with the kubeconfig's contexts.
func (c *clients) completeContexts(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	names, _, err := c.kubeconfigContexts()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// forContext returns the clients of a kubeconfig context: the config flags of this run (the
// kubeconfig, --user, --request-timeout, ...) with that context.
func (c *clients) forContext(name string, warnings io.Writer) *clients {
	if c.flags == nil {
		return c.fleet[name]
	}
	return &clients{flags: c.flags.withContext(name), warnings: warnings}
}

// requestTimeout is --request-timeout as the context's config has it (0: not set).
func (c *clients) requestTimeout() time.Duration {
	cfg, err := c.config()
	if err != nil {
		return 0
	}
	return cfg.Timeout
}

// problem says in one line, in plain words, why the inventory name could not be read.
// expired says that the cluster's time ran out (after timeout).
func (c *clients) problem(err error, name string, expired bool, timeout time.Duration) string {
	if c.host == "" && (c.flags != nil || c.base != nil) {
		_, _ = c.config() // for the host's address; unit tests give clients made without it
	}
	var opErr *net.OpError
	var netErr net.Error
	switch {
	case expired:
		return fmt.Sprintf("no answer from the API server at %s within %s", c.hostOrUnknown(), timeout)
	case errors.As(err, &netErr) && netErr.Timeout():
		// --request-timeout (the HTTP client's), or a connection that timed out.
		if t := c.requestTimeout(); t > 0 && (timeout == 0 || t < timeout) {
			timeout = t
		}
		if timeout == 0 {
			return fmt.Sprintf("no answer from the API server at %s (%v)", c.hostOrUnknown(), err)
		}
		return fmt.Sprintf("no answer from the API server at %s within %s", c.hostOrUnknown(), timeout)
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("permission denied: the user may not get gpuinventories.%s (403 Forbidden)", homelabv1.GroupName)
	case apierrors.IsUnauthorized(err):
		return fmt.Sprintf("the API server at %s did not accept the credentials (401 Unauthorized)", c.hostOrUnknown())
	case apierrors.IsNotFound(err):
		if installed, known := c.crdInstalled(); (known && !installed) || (!known && isMissingResource(err)) {
			return "the GpuInventory CRD is not installed"
		}
		return fmt.Sprintf("GpuInventory %q not found", name)
	case isConnectionError(err) && errors.As(err, &opErr):
		return fmt.Sprintf("cannot reach the API server at %s (%v)", c.hostOrUnknown(), opErr)
	case isConnectionError(err):
		return fmt.Sprintf("cannot reach the API server at %s (%v)", c.hostOrUnknown(), err)
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) { // the URL says no more than the host
		err = fmt.Errorf("the request to the API server at %s failed: %w", c.hostOrUnknown(), urlErr.Err)
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// syncWriter serialises the writes of several goroutines (the clusters' warnings).
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// member is one context of a fleet: its clients and what reading its inventory gave.
type member struct {
	context string
	clients *clients
	gi      *homelabv1.GpuInventory
	problem string // why gi could not be read
}

// fetchAll reads the inventory name in every member at once, each within its timeout.
func fetchAll(ctx context.Context, members []*member, name string, timeout func(*clients) time.Duration) {
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() { m.gi, m.problem = fetch(ctx, m.clients, name, timeout(m.clients)) })
	}
	wg.Wait()
}

// fetch reads one cluster's inventory. A cluster that does not answer within timeout is left
// behind (its request ends when the process does, or when the server answers).
func fetch(ctx context.Context, c *clients, name string, timeout time.Duration) (*homelabv1.GpuInventory, string) {
	gpu, err := c.GPU()
	if err != nil {
		return nil, strings.Join(strings.Fields(err.Error()), " ")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type answer struct {
		gi  *homelabv1.GpuInventory
		err error
	}
	done := make(chan answer, 1)
	go func() {
		gi, err := gpu.GpuInventories().Get(ctx, name, metav1.GetOptions{})
		done <- answer{gi, err}
	}()
	select {
	case a := <-done:
		if a.err != nil {
			return nil, c.problem(a.err, name, ctx.Err() != nil, timeout)
		}
		return a.gi, ""
	case <-ctx.Done():
		return nil, c.problem(ctx.Err(), name, true, timeout)
	}
}
