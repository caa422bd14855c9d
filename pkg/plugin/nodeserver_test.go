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

// nodeServer answers the node list as the API server does (prototest.Server): protobuf
// pages of at most limit nodes with a continue token, the label selector applied. It answers
// pod and ResourceClaim lists (all namespaces or one) the same way.
type nodeServer struct {
	nodes  []*corev1.Node
	pods   []*corev1.Pod
	claims []*resourcev1.ResourceClaim
	fail   *apierrors.StatusError // when set, the answer to every request
	// failPods and failClaims answer the pod and claim lists; noClaims: resource.k8s.io/v1
	// is not served.
	failPods, failClaims *apierrors.StatusError
	noClaims             bool
	// namespaces: the namespace list is served (those of the pods), else it is not found.
	namespaces bool

	mu       sync.Mutex
	requests []listRequest
}

// listRequest is what a list request of a served resource asked for.
type listRequest struct {
	path     string
	limit    int64
	selector string
}

// start serves s until the test ends and returns its config.
func (s *nodeServer) start(t *testing.T) *rest.Config {
	t.Helper()
	served := []prototest.Resource{prototest.Nodes, prototest.Pods}
	if !s.noClaims {
		served = append(served, prototest.ResourceClaims)
	}
	if s.namespaces {
		served = append(served, prototest.Namespaces)
	}
	server := prototest.NewServer(t, prototest.Options{Wrap: func(next http.Handler) http.Handler { return s.intercept(served, next) }}, served...)
	for _, n := range s.nodes {
		server.Set(n)
	}
	for _, p := range s.pods {
		server.Set(p)
	}
	if !s.noClaims {
		for _, c := range s.claims {
			server.Set(c)
		}
	}
	var namespaces []string
	for _, p := range s.pods {
		if s.namespaces && !slices.Contains(namespaces, p.Namespace) {
			namespaces = append(namespaces, p.Namespace)
			server.Set(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}})
		}
	}
	return server.Config()
}

// intercept records the lists of the resources served and answers with the failures set.
func (s *nodeServer) intercept(served []prototest.Resource, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.fail != nil {
			prototest.WriteStatus(w, s.fail)
			return
		}
		resource := path.Base(r.URL.Path)
		isServed := slices.ContainsFunc(served, func(res prototest.Resource) bool { return res.Name == resource })
		if !isServed || !strings.HasPrefix(r.Header.Get("Accept"), "application/vnd.kubernetes.protobuf") {
			next.ServeHTTP(w, r)
			return
		}
		q := r.URL.Query()
		req := listRequest{path: r.URL.Path, selector: q.Get("labelSelector")}
		req.limit, _ = strconv.ParseInt(q.Get("limit"), 10, 64) // the server refuses a bad one
		s.mu.Lock()
		s.requests = append(s.requests, req)
		s.mu.Unlock()
		switch {
		case resource == "pods" && s.failPods != nil:
			prototest.WriteStatus(w, s.failPods)
		case resource == "resourceclaims" && s.failClaims != nil:
			prototest.WriteStatus(w, s.failClaims)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// core starts s and returns the plugin's client of it.
func (s *nodeServer) core(t *testing.T) rest.Interface {
	t.Helper()
	core, err := (&factory.Factory{Base: s.start(t), Warnings: io.Discard}).Core()
	if err != nil {
		t.Fatal(err)
	}
	return core
}

func (s *nodeServer) listRequests() []listRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]listRequest(nil), s.requests...)
}
