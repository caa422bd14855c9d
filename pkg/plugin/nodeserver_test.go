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
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// nodeServer answers the node list as the API server does: protobuf pages of at most limit
// nodes with a continue token, the label selector applied. It answers pod and ResourceClaim
// lists (all namespaces or one) the same way.
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

// listRequest is what a list request asked for.
type listRequest struct {
	path     string
	limit    int64
	selector string
}

// start serves s until the test ends and returns its config.
func (s *nodeServer) start(t *testing.T) *rest.Config {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

// core starts s and returns the plugin's client of it.
func (s *nodeServer) core(t *testing.T) rest.Interface {
	t.Helper()
	core, err := (&clients{base: s.start(t), warnings: io.Discard}).Core()
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

func (s *nodeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.fail != nil {
		writeStatus(w, s.fail)
		return
	}
	if r.Method != http.MethodGet {
		writeStatus(w, apierrors.NewMethodNotSupported(corev1.Resource("nodes"), r.Method))
		return
	}
	namespace, resource, served := listPath(r.URL.Path)
	if !served || resource == "resourceclaims" && s.noClaims || resource == "namespaces" && !s.namespaces {
		// What the API server answers for a resource it does not serve.
		writeStatus(w, apierrors.NewGenericServerResponse(http.StatusNotFound, "list", schema.GroupResource{Resource: r.URL.Path}, "", "", 0, false))
		return
	}
	if !strings.HasPrefix(r.Header.Get("Accept"), "application/vnd.kubernetes.protobuf") {
		writeStatus(w, apierrors.NewBadRequest("the test server answers lists in protobuf only, asked for "+r.Header.Get("Accept")))
		return
	}
	q := r.URL.Query()
	req := listRequest{path: r.URL.Path, selector: q.Get("labelSelector")}
	if l := q.Get("limit"); l != "" {
		var err error
		if req.limit, err = strconv.ParseInt(l, 10, 64); err != nil {
			writeStatus(w, apierrors.NewBadRequest("limit: "+err.Error()))
			return
		}
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()

	var items []runtime.Object
	var list func(items []runtime.Object, meta metav1.ListMeta) runtime.Object
	gv := corev1.SchemeGroupVersion
	switch resource {
	case "nodes":
		sel, err := labels.Parse(req.selector)
		if err != nil {
			writeStatus(w, apierrors.NewBadRequest("labelSelector: "+err.Error()))
			return
		}
		for _, n := range s.nodes {
			if sel.Matches(labels.Set(n.Labels)) {
				items = append(items, n)
			}
		}
		list = func(items []runtime.Object, meta metav1.ListMeta) runtime.Object {
			l := &corev1.NodeList{ListMeta: meta}
			for _, o := range items {
				l.Items = append(l.Items, *o.(*corev1.Node))
			}
			return l
		}
	case "pods":
		if s.failPods != nil {
			writeStatus(w, s.failPods)
			return
		}
		for _, p := range s.pods {
			if namespace == "" || p.Namespace == namespace {
				items = append(items, p)
			}
		}
		list = func(items []runtime.Object, meta metav1.ListMeta) runtime.Object {
			l := &corev1.PodList{ListMeta: meta}
			for _, o := range items {
				l.Items = append(l.Items, *o.(*corev1.Pod))
			}
			return l
		}
	case "namespaces":
		seen := map[string]bool{}
		for _, p := range s.pods {
			if !seen[p.Namespace] {
				seen[p.Namespace] = true
				items = append(items, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}})
			}
		}
		list = func(items []runtime.Object, meta metav1.ListMeta) runtime.Object {
			l := &corev1.NamespaceList{ListMeta: meta}
			for _, o := range items {
				l.Items = append(l.Items, *o.(*corev1.Namespace))
			}
			return l
		}
	case "resourceclaims":
		if s.failClaims != nil {
			writeStatus(w, s.failClaims)
			return
		}
		for _, c := range s.claims {
			if namespace == "" || c.Namespace == namespace {
				items = append(items, c)
			}
		}
		gv = resourcev1.SchemeGroupVersion
		list = func(items []runtime.Object, meta metav1.ListMeta) runtime.Object {
			l := &resourcev1.ResourceClaimList{ListMeta: meta}
			for _, o := range items {
				l.Items = append(l.Items, *o.(*resourcev1.ResourceClaim))
			}
			return l
		}
	}
	start := 0
	if c := q.Get("continue"); c != "" {
		var err error
		if start, err = strconv.Atoi(c); err != nil || start > len(items) {
			writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("continue %q", c)))
			return
		}
	}
	end := len(items)
	if req.limit > 0 {
		end = min(end, start+int(req.limit))
	}
	meta := metav1.ListMeta{ResourceVersion: "42"}
	if end < len(items) {
		meta.Continue = strconv.Itoa(end)
	}
	encoder := scheme.Codecs.EncoderForVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), gv)
	body, err := runtime.Encode(encoder, list(items[start:end], meta))
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
	_, _ = w.Write(body)
}

// listPath splits a list request's path: /api/v1/RESOURCE, /api/v1/namespaces/NS/RESOURCE,
// /api/v1/namespaces, and the same under /apis/resource.k8s.io/v1 for resourceclaims.
func listPath(path string) (namespace, resource string, ok bool) {
	rest, core := strings.CutPrefix(path, "/api/v1/")
	if !core {
		if rest, ok = strings.CutPrefix(path, "/apis/resource.k8s.io/v1/"); !ok {
			return "", "", false
		}
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 1:
		resource = parts[0]
	case len(parts) == 3 && parts[0] == "namespaces":
		namespace, resource = parts[1], parts[2]
	default:
		return "", "", false
	}
	switch {
	case core && (resource == "nodes" || resource == "namespaces") && namespace == "", core && resource == "pods", !core && resource == "resourceclaims":
		return namespace, resource, true
	}
	return "", "", false
}

// writeStatus answers with err's Status, as the API server does for a failed request.
func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	status := err.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(status.Code))
	_ = json.NewEncoder(w).Encode(status)
}
