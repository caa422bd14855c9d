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

package podcache

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// podServer answers pod lists and watches as the API server does, in protobuf: lists in
// pages of at most limit pods with a continue token; watches as a stream of length-prefixed
// WatchEvents, starting with every pod and the initial-events-end bookmark when the
// reflector asks for a streaming list (unless noWatchList, like a server without it).
type podServer struct {
	noWatchList bool
	// namespaces are listed by /api/v1/namespaces (forbidden with forbidNamespaces);
	// beforeList and afterList, if set, are called around each pod list, with its namespace.
	namespaces            []string
	forbidNamespaces      bool
	beforeList, afterList func(namespace string)

	mu       sync.Mutex
	rv       int
	pods     map[string]*corev1.Pod // by namespace/name
	watchers []chan []byte          // frames for each open watch
	events   []event                // every event sent, for watches that start at an older resourceVersion
	lists    []request
	watches  []string // the resourceVersion each watch started at
}

// event is a watch event's frame and its resourceVersion.
type event struct {
	rv    int
	frame []byte
}

// request is a list request's path and query.
type request struct{ path, query string }

var podEncoder = scheme.Codecs.EncoderForVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), corev1.SchemeGroupVersion)

func newPodServer(pods ...*corev1.Pod) *podServer {
	s := &podServer{pods: map[string]*corev1.Pod{}}
	for _, p := range pods {
		s.set(p)
	}
	return s
}

// config starts s until the test ends and returns a config for it.
func (s *podServer) config(t *testing.T) *rest.Config {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		s.closeWatches()
		srv.Close()
	})
	return &rest.Config{Host: srv.URL}
}

// set stores p with a new resourceVersion and returns that copy (no event).
func (s *podServer) set(p *corev1.Pod) *corev1.Pod {
	p = p.DeepCopy()
	s.rv++
	p.ResourceVersion = strconv.Itoa(s.rv)
	s.pods[p.Namespace+"/"+p.Name] = p
	return p
}

// apply changes the stored pods as an API write would and sends the event to the watches.
func (s *podServer) apply(t *testing.T, typ watch.EventType, p *corev1.Pod) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if typ == watch.Deleted {
		p = s.pods[p.Namespace+"/"+p.Name]
		delete(s.pods, p.Namespace+"/"+p.Name)
		s.rv++
		p = p.DeepCopy()
		p.ResourceVersion = strconv.Itoa(s.rv)
	} else {
		p = s.set(p)
	}
	frame, err := watchFrame(typ, p)
	if err != nil {
		t.Fatal(err)
	}
	s.events = append(s.events, event{s.rv, frame})
	for _, w := range s.watchers {
		w <- frame
	}
}

// silently changes the stored pods without an event, as when a watch misses them.
func (s *podServer) silently(f func(pods map[string]*corev1.Pod)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.pods)
	s.rv++
}

// expire ends every watch with 410 Gone, as when a watch's resourceVersion is compacted.
func (s *podServer) expire(t *testing.T) {
	t.Helper()
	gone := apierrors.NewResourceExpired("too old resource version").Status()
	frame, err := watchFrame(watch.Error, &gone)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.watchers {
		w <- frame
		close(w)
	}
	s.watchers = nil
}

func (s *podServer) closeWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.watchers {
		close(w)
	}
	s.watchers = nil
}

func (s *podServer) listRequests() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.lists)
}

// watchFrame is a watch event as the API server frames it in a protobuf watch.
func watchFrame(typ watch.EventType, obj runtime.Object) ([]byte, error) {
	data, err := runtime.Encode(podEncoder, obj)
	if err != nil {
		return nil, err
	}
	return (&metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: data}}).Marshal()
}

// sorted returns the stored pods of namespace ("" for all) in key order.
func (s *podServer) sorted(namespace string) []*corev1.Pod {
	var keys []string
	for k, p := range s.pods {
		if namespace == "" || p.Namespace == namespace {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]*corev1.Pod, len(keys))
	for i, k := range keys {
		out[i] = s.pods[k]
	}
	return out
}

func (s *podServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	namespace := ""
	switch {
	case r.URL.Path == "/api/v1/namespaces":
		s.listNamespaces(w)
		return
	case r.URL.Path == "/api/v1/pods":
	case strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/") && strings.HasSuffix(r.URL.Path, "/pods"):
		namespace = strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/"), "/pods")
	default:
		writeStatus(w, apierrors.NewNotFound(corev1.Resource("pods"), r.URL.Path))
		return
	}
	if !strings.HasPrefix(r.Header.Get("Accept"), "application/vnd.kubernetes.protobuf") {
		writeStatus(w, apierrors.NewBadRequest("the test server answers in protobuf only, asked for "+r.Header.Get("Accept")))
		return
	}
	q := r.URL.Query()
	if q.Get("watch") == "true" {
		s.watch(w, r)
		return
	}
	if s.beforeList != nil {
		s.beforeList(namespace)
	}
	s.list(w, namespace, q.Get("limit"), q.Get("continue"), request{r.URL.Path, r.URL.RawQuery})
	if s.afterList != nil {
		s.afterList(namespace)
	}
}

func (s *podServer) listNamespaces(w http.ResponseWriter) {
	if s.forbidNamespaces {
		writeStatus(w, apierrors.NewForbidden(corev1.Resource("namespaces"), "", errors.New("the test forbids it")))
		return
	}
	s.mu.Lock()
	list := &corev1.NamespaceList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(s.rv)}}
	s.mu.Unlock()
	for _, ns := range s.namespaces {
		list.Items = append(list.Items, corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	writeProtobuf(w, list)
}

func (s *podServer) watchRequests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.watches)
}

func (s *podServer) list(w http.ResponseWriter, namespace, limit, cont string, req request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists = append(s.lists, req)
	pods := s.sorted(namespace)
	start, end := 0, len(pods)
	if cont != "" {
		var err error
		if start, err = strconv.Atoi(cont); err != nil || start > len(pods) {
			writeStatus(w, apierrors.NewBadRequest("continue "+cont))
			return
		}
	}
	if n, err := strconv.Atoi(limit); err == nil && n > 0 {
		end = min(end, start+n)
	}
	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(s.rv)}}
	if end < len(pods) {
		list.Continue = strconv.Itoa(end)
	}
	for _, p := range pods[start:end] {
		list.Items = append(list.Items, *p)
	}
	writeProtobuf(w, list)
}

func (s *podServer) watch(w http.ResponseWriter, r *http.Request) {
	initial := r.URL.Query().Get("sendInitialEvents") == "true"
	if initial && s.noWatchList {
		writeStatus(w, apierrors.NewBadRequest("sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"))
		return
	}
	w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
	w.WriteHeader(http.StatusOK)
	write := func(frame []byte) bool {
		if err := binary.Write(w, binary.BigEndian, uint32(len(frame))); err != nil {
			return false
		}
		if _, err := w.Write(frame); err != nil {
			return false
		}
		w.(http.Flusher).Flush()
		return true
	}
	s.mu.Lock()
	s.watches = append(s.watches, r.URL.Query().Get("resourceVersion"))
	frames := make(chan []byte, len(s.pods)+len(s.events)+100)
	if from, err := strconv.Atoi(r.URL.Query().Get("resourceVersion")); err == nil && !initial {
		for _, e := range s.events {
			if e.rv > from {
				frames <- e.frame
			}
		}
	}
	if initial {
		for _, p := range s.sorted("") {
			frames <- mustFrame(watch.Added, p)
		}
		bookmark := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.Itoa(s.rv),
			Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
		frames <- mustFrame(watch.Bookmark, bookmark)
	}
	s.watchers = append(s.watchers, frames)
	s.mu.Unlock()
	for {
		select {
		case frame, ok := <-frames:
			if !ok || !write(frame) {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

// mustFrame is watchFrame for the server's own goroutines, where encoding a pod cannot fail.
func mustFrame(typ watch.EventType, obj runtime.Object) []byte {
	frame, err := watchFrame(typ, obj)
	if err != nil {
		panic(err)
	}
	return frame
}

// writeProtobuf answers with obj in protobuf.
func writeProtobuf(w http.ResponseWriter, obj runtime.Object) {
	data, err := runtime.Encode(podEncoder, obj)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
	_, _ = w.Write(data)
}

// writeStatus answers with err's Status, as the API server does for a failed request.
func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	status := err.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(status.Code))
	_ = json.NewEncoder(w).Encode(status)
}
