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

// Package plugintest is the plugin's tests' API server: node, pod and ResourceClaim lists as
// protobuf pages (prototest.Server), with the failures a test sets and a record of the lists
// asked for. Only tests import it.
package plugintest

import (
	"io"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
)

// NodeServer answers the node list as the API server does (prototest.Server): protobuf
// pages of at most limit nodes with a continue token, the label selector applied. It answers
// pod and ResourceClaim lists (all namespaces or one) the same way.
type NodeServer struct {
	Nodes  []*corev1.Node
	Pods   []*corev1.Pod
	Claims []*resourcev1.ResourceClaim
	Fail   *apierrors.StatusError // when set, the answer to every request
	// FailPods and FailClaims answer the pod and claim lists; NoClaims: resource.k8s.io/v1
	// is not served.
	FailPods, FailClaims *apierrors.StatusError
	NoClaims             bool
	// Namespaces: the namespace list is served (those of the pods), else it is not found.
	Namespaces bool

	mu       sync.Mutex
	requests []ListRequest
}

// ListRequest is what a list request of a served resource asked for.
type ListRequest struct {
	Path     string
	Limit    int64
	Selector string
	// Fields is the field selector.
	Fields string
}

// Start serves s until the test ends and returns its config.
func (s *NodeServer) Start(t testing.TB) *rest.Config {
	t.Helper()
	served := []prototest.Resource{prototest.Nodes, prototest.Pods}
	if !s.NoClaims {
		served = append(served, prototest.ResourceClaims)
	}
	if s.Namespaces {
		served = append(served, prototest.Namespaces)
	}
	server := prototest.NewServer(t, prototest.Options{Wrap: func(next http.Handler) http.Handler { return s.intercept(served, next) }}, served...)
	for _, n := range s.Nodes {
		server.Set(n)
	}
	for _, p := range s.Pods {
		server.Set(p)
	}
	if !s.NoClaims {
		for _, c := range s.Claims {
			server.Set(c)
		}
	}
	var namespaces []string
	for _, p := range s.Pods {
		if s.Namespaces && !slices.Contains(namespaces, p.Namespace) {
			namespaces = append(namespaces, p.Namespace)
			server.Set(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}})
		}
	}
	return server.Config()
}

// intercept records the lists of the resources served and answers with the failures set.
func (s *NodeServer) intercept(served []prototest.Resource, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.Fail != nil {
			prototest.WriteStatus(w, s.Fail)
			return
		}
		resource := path.Base(r.URL.Path)
		isServed := slices.ContainsFunc(served, func(res prototest.Resource) bool { return res.Name == resource })
		if !isServed || !strings.HasPrefix(r.Header.Get("Accept"), "application/vnd.kubernetes.protobuf") {
			next.ServeHTTP(w, r)
			return
		}
		q := r.URL.Query()
		req := ListRequest{Path: r.URL.Path, Selector: q.Get("labelSelector"), Fields: q.Get("fieldSelector")}
		req.Limit, _ = strconv.ParseInt(q.Get("limit"), 10, 64) // the server refuses a bad one
		s.mu.Lock()
		s.requests = append(s.requests, req)
		s.mu.Unlock()
		switch {
		case resource == "pods" && s.FailPods != nil:
			prototest.WriteStatus(w, s.FailPods)
		case resource == "resourceclaims" && s.FailClaims != nil:
			prototest.WriteStatus(w, s.FailClaims)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// Core starts s and returns the plugin's client of it.
func (s *NodeServer) Core(t *testing.T) rest.Interface {
	t.Helper()
	core, err := (&factory.Factory{Base: s.Start(t), Warnings: io.Discard}).Core()
	if err != nil {
		t.Fatal(err)
	}
	return core
}

func (s *NodeServer) ListRequests() []ListRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ListRequest(nil), s.requests...)
}

// ResetRequests forgets the lists asked for so far.
func (s *NodeServer) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}
