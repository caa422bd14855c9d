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

package prototest

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// Options change how the Server answers.
type Options struct {
	// NoWatchList refuses watches with sendInitialEvents, as an API server without the
	// WatchList feature does.
	NoWatchList bool
	// JSON answers in JSON, whatever the client asks for; otherwise the server answers in
	// protobuf only, and refuses a request that does not accept it.
	JSON bool
	// Wrap, if set, wraps the server's handler: a test's way to fail, delay or alter
	// requests (Requests records them before Wrap sees them).
	Wrap func(http.Handler) http.Handler
}

// Server is a fake API server for the resources it serves. It answers GET of a resource's
// list (of all namespaces or one) in pages of the request's limit, with the offset as the
// continue token and the current resourceVersion, and watches: from the resourceVersion
// given, with the events after it; with sendInitialEvents, every object as ADDED and the
// initial-events-end bookmark first. Label selectors apply to lists and watches; field
// selectors do not. Every change takes the next resourceVersion, shared by all resources.
// Anything else is NotFound.
type Server struct {
	t       testing.TB
	opts    Options
	served  []Resource
	config  *rest.Config
	handler http.Handler
	closed  chan struct{} // closed when the test ends

	mu       sync.Mutex
	rv       int64
	objects  map[Resource]map[string]runtime.Object // by key
	history  []entry
	changed  chan struct{} // closed and replaced when history grows
	requests []Request
	seen     chan struct{} // closed and replaced at every request
}

// entry is an event of the history, or a marker that ends the watches open then.
type entry struct {
	resource Resource
	typ      watch.EventType
	rv       int64
	obj      runtime.Object
	end      bool // a marker: an ERROR event (obj a Status) or none, then the end
}

// Request is a request the server received.
type Request struct {
	Method, Path, RawQuery, Accept string
}

// Query is the request's query.
func (r Request) Query() url.Values {
	q, _ := url.ParseQuery(r.RawQuery)
	return q
}

// IsWatch tells a watch from a list.
func (r Request) IsWatch() bool { return r.Query().Get("watch") == "true" }

// String is the path and query.
func (r Request) String() string { return r.Path + "?" + r.RawQuery }

// NewServer starts a server of the resources served until the test ends.
func NewServer(t testing.TB, opts Options, served ...Resource) *Server {
	s := &Server{t: t, opts: opts, served: served, closed: make(chan struct{}),
		objects: map[Resource]map[string]runtime.Object{}, changed: make(chan struct{}), seen: make(chan struct{})}
	s.handler = http.HandlerFunc(s.serve)
	if opts.Wrap != nil {
		s.handler = opts.Wrap(s.handler)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		close(s.closed)
		srv.Close()
	})
	s.config = &rest.Config{Host: srv.URL}
	return s
}

// Config is a client configuration for the server.
func (s *Server) Config() *rest.Config { return rest.CopyConfig(s.config) }

// Set stores objs as they are created or updated, each at the next resourceVersion,
// without an event: as before any watch, or as changes that no watch sees.
func (s *Server) Set(objs ...runtime.Object) {
	for _, obj := range objs {
		s.change(watch.Modified, obj, false)
	}
}

// Apply makes the change of obj (Added, Modified or Deleted) at the next resourceVersion,
// as an API write does, and sends its event to the watches; a deletion sends the object as
// stored. It returns the resourceVersion.
func (s *Server) Apply(typ watch.EventType, obj runtime.Object) string {
	return s.change(typ, obj, true)
}

// ApplySilently is Apply without the event, as a change that the watches miss.
func (s *Server) ApplySilently(typ watch.EventType, obj runtime.Object) string {
	return s.change(typ, obj, false)
}

// Objects returns copies of the stored objects of resource in namespace ("" for all), in
// the order the server lists them.
func (s *Server) Objects(resource Resource, namespace string) []runtime.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []runtime.Object
	for _, obj := range s.matching(resource, namespace, labels.Everything()) {
		out = append(out, obj.DeepCopyObject())
	}
	return out
}

// Stored is Objects of T's resource, typed.
func Stored[T any, PT interface {
	*T
	runtime.Object
}](s *Server, namespace string) []PT {
	resource, err := s.resourceOf(PT(new(T)))
	if err != nil {
		s.t.Fatal(err)
	}
	var out []PT
	for _, obj := range s.Objects(resource, namespace) {
		out = append(out, obj.(PT))
	}
	return out
}

// ResourceVersion is the resourceVersion of the last change.
func (s *Server) ResourceVersion() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strconv.FormatInt(s.rv, 10)
}

// EndWatches ends every open watch once it has sent the events so far, as the API server
// does at a watch's timeout.
func (s *Server) EndWatches() { s.mark(nil) }

// Expire ends every open watch with 410 Gone once it has sent the events so far, as when a
// watch's resourceVersion is compacted.
func (s *Server) Expire() {
	gone := apierrors.NewResourceExpired("too old resource version").Status()
	s.mark(&gone)
}

func (s *Server) mark(status *metav1.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := entry{end: true, rv: s.rv}
	if status != nil {
		e.typ, e.obj = watch.Error, status
	}
	s.appendEntry(e)
}

// Requests returns the requests so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// AwaitRequests waits until the server has received n requests and returns them; it fails
// the test after 30 seconds.
func (s *Server) AwaitRequests(n int) []Request {
	s.t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		s.mu.Lock()
		requests, seen := slices.Clone(s.requests), s.seen
		s.mu.Unlock()
		if len(requests) >= n {
			return requests
		}
		select {
		case <-seen:
		case <-timeout:
			s.t.Fatalf("the server received %d requests, never %d: %v", len(requests), n, requests)
		}
	}
}

// change stores or deletes a copy of obj at the next resourceVersion, with its event if
// event is set; errors fail the test (from any goroutine).
func (s *Server) change(typ watch.EventType, obj runtime.Object, event bool) string {
	resource, err := s.resourceOf(obj)
	if err != nil {
		s.t.Error(err)
		return ""
	}
	key, err := keyOf(obj)
	if err != nil {
		s.t.Error(err)
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stored := s.objects[resource]
	if stored == nil {
		stored = map[string]runtime.Object{}
		s.objects[resource] = stored
	}
	if typ == watch.Deleted {
		if obj = stored[key]; obj == nil {
			s.t.Errorf("delete %s %s: not stored", resource.Kind, key)
			return ""
		}
		delete(stored, key)
	}
	s.rv++
	obj = obj.DeepCopyObject()
	m, _ := meta.Accessor(obj)
	m.SetResourceVersion(strconv.FormatInt(s.rv, 10))
	if typ != watch.Deleted {
		stored[key] = obj
	}
	if event {
		s.appendEntry(entry{resource: resource, typ: typ, rv: s.rv, obj: obj})
	}
	return m.GetResourceVersion()
}

// appendEntry adds e to the history and wakes the watches; the caller holds mu.
func (s *Server) appendEntry(e entry) {
	s.history = append(s.history, e)
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) resourceOf(obj runtime.Object) (Resource, error) {
	gvk, err := kindOf(obj)
	if err != nil {
		return Resource{}, err
	}
	for _, r := range s.served {
		if r.GroupVersionKind == gvk {
			return r, nil
		}
	}
	return Resource{}, apierrors.NewBadRequest("the test server does not serve " + gvk.String())
}

// keyOf is obj's namespace/name, or name.
func keyOf(obj runtime.Object) (string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", err
	}
	if m.GetNamespace() == "" {
		return m.GetName(), nil
	}
	return m.GetNamespace() + "/" + m.GetName(), nil
}

// matching returns the stored objects of resource in namespace that sel selects, by key;
// the caller holds mu.
func (s *Server) matching(resource Resource, namespace string, sel labels.Selector) []runtime.Object {
	stored := s.objects[resource]
	var out []runtime.Object
	for _, key := range slices.Sorted(maps.Keys(stored)) {
		if selects(stored[key], namespace, sel) {
			out = append(out, stored[key])
		}
	}
	return out
}

// selects tells whether a watch or list in namespace with sel includes obj.
func selects(obj runtime.Object, namespace string, sel labels.Selector) bool {
	m, err := meta.Accessor(obj)
	return err == nil && (namespace == "" || m.GetNamespace() == namespace) && sel.Matches(labels.Set(m.GetLabels()))
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Accept: r.Header.Get("Accept")})
	close(s.seen)
	s.seen = make(chan struct{})
	s.mu.Unlock()
	s.handler.ServeHTTP(w, r)
}

// serve answers a list or a watch.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	resource, namespace, ok := s.route(r.URL.Path)
	if !ok {
		WriteStatus(w, apierrors.NewGenericServerResponse(http.StatusNotFound, "get", schema.GroupResource{}, "", "", 0, false))
		return
	}
	if r.Method != http.MethodGet {
		WriteStatus(w, apierrors.NewMethodNotSupported(resource.GroupVersion().WithResource(resource.Name).GroupResource(), r.Method))
		return
	}
	if accept := r.Header.Get("Accept"); !s.opts.JSON && !strings.Contains(accept, protobufType) {
		WriteStatus(w, apierrors.NewBadRequest("the test server answers in protobuf only, asked for "+accept))
		return
	}
	q := r.URL.Query()
	sel, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		WriteStatus(w, apierrors.NewBadRequest("labelSelector: "+err.Error()))
		return
	}
	if q.Get("watch") == "true" {
		s.watch(w, r, resource, namespace, sel)
		return
	}
	s.list(w, resource, namespace, sel, q)
}

const protobufType = "application/vnd.kubernetes.protobuf"

// route finds the resource and namespace of a list's path.
func (s *Server) route(path string) (Resource, string, bool) {
	for _, r := range s.served {
		if path == r.Path("") {
			return r, "", true
		}
		inNamespace, ok := strings.CutPrefix(path, strings.TrimSuffix(r.Path(""), r.Name)+"namespaces/")
		namespace, ok2 := strings.CutSuffix(inNamespace, "/"+r.Name)
		if r.Namespaced && ok && ok2 && namespace != "" && !strings.Contains(namespace, "/") {
			return r, namespace, true
		}
	}
	return Resource{}, "", false
}

// list answers a page of the list.
func (s *Server) list(w http.ResponseWriter, resource Resource, namespace string, sel labels.Selector, q url.Values) {
	limit, err := strconv.Atoi(q.Get("limit"))
	if q.Get("limit") != "" && err != nil {
		WriteStatus(w, apierrors.NewBadRequest("limit: "+err.Error()))
		return
	}
	s.mu.Lock()
	items := s.matching(resource, namespace, sel)
	listMeta := metav1.ListMeta{ResourceVersion: strconv.FormatInt(s.rv, 10)}
	s.mu.Unlock()
	start := 0
	if c := q.Get("continue"); c != "" {
		if start, err = strconv.Atoi(c); err != nil || start < 0 || start > len(items) {
			WriteStatus(w, apierrors.NewBadRequest("continue "+c))
			return
		}
	}
	end := len(items)
	if limit > 0 && start+limit < end {
		end = start + limit
		listMeta.Continue = strconv.Itoa(end)
	}
	data, err := encodeList(resource.GroupVersionKind, listMeta, items[start:end], s.opts.JSON)
	if err != nil {
		WriteStatus(w, apierrors.NewInternalError(err))
		return
	}
	w.Header().Set("Content-Type", s.contentType())
	_, _ = w.Write(data)
}

func (s *Server) contentType() string {
	if s.opts.JSON {
		return "application/json"
	}
	return protobufType
}

// WriteStatus answers with err's Status, as the API server answers a failed request.
func WriteStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	status := err.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(status.Code))
	_ = json.NewEncoder(w).Encode(status)
}
