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

package claimcache

import (
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// apiServer is a fake API server for resource.k8s.io/v1 ResourceClaims: lists with limit
// and continue, watches from a resource version and streaming lists (sendInitialEvents with
// the initial-events-end bookmark), in protobuf or JSON, as kube-apiserver sends them.
type apiServer struct {
	t   *testing.T
	srv *httptest.Server
	// json: answer in JSON; noWatchList: refuse streaming lists (an older API server).
	json, noWatchList bool

	mu       sync.Mutex
	rv       int64
	claims   map[string]*resourcev1.ResourceClaim
	history  []event
	changed  chan struct{} // closed and replaced on every change
	endAfter int64         // watches end once they have sent the event of this resource version
	requests []url         // every request, in order
	seen     chan struct{} // closed and replaced on every request
}

type event struct {
	typ watch.EventType
	rv  int64
	obj runtime.Object
}

// url is a request's path and query.
type url struct {
	path  string
	query map[string]string
}

func newAPIServer(t *testing.T, json, noWatchList bool, claims ...*resourcev1.ResourceClaim) *apiServer {
	s := &apiServer{t: t, json: json, noWatchList: noWatchList, claims: map[string]*resourcev1.ResourceClaim{},
		changed: make(chan struct{}), seen: make(chan struct{})}
	for _, c := range claims {
		s.write(watch.Added, c)
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *apiServer) config() *rest.Config { return &rest.Config{Host: s.srv.URL} }

func key(c *resourcev1.ResourceClaim) string { return c.Namespace + "/" + c.Name }

// write stores a change of c (Added, Modified or Deleted) at the next resource version and
// returns that version.
func (s *apiServer) write(typ watch.EventType, c *resourcev1.ResourceClaim) string {
	return s.writeEnding(typ, c, false)
}

// writeEnding is write; with end, every open watch ends once it has sent this change.
func (s *apiServer) writeEnding(typ watch.EventType, c *resourcev1.ResourceClaim, end bool) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	c = c.DeepCopy()
	c.ResourceVersion = strconv.FormatInt(s.rv, 10)
	if typ == watch.Deleted {
		delete(s.claims, key(c))
	} else {
		s.claims[key(c)] = c
	}
	s.history = append(s.history, event{typ, s.rv, c})
	if end {
		s.endAfter = s.rv
	}
	close(s.changed)
	s.changed = make(chan struct{})
	return c.ResourceVersion
}

// requestsSeen returns the requests so far and a channel closed at the next one.
func (s *apiServer) requestsSeen() ([]url, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests), s.seen
}

func (s *apiServer) encoder() runtime.Encoder {
	var serializer runtime.Serializer = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	if s.json {
		serializer = jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, jsonserializer.SerializerOptions{})
	}
	return scheme.Codecs.EncoderForVersion(serializer, resourcev1.SchemeGroupVersion)
}

func (s *apiServer) encode(obj runtime.Object) []byte {
	data, err := runtime.Encode(s.encoder(), obj)
	if err != nil {
		s.t.Error(err)
	}
	return data
}

func (s *apiServer) contentType() string {
	if s.json {
		return "application/json"
	}
	return "application/vnd.kubernetes.protobuf"
}

func (s *apiServer) serve(w http.ResponseWriter, r *http.Request) {
	query := map[string]string{}
	for k, v := range r.URL.Query() {
		query[k] = v[0]
	}
	s.mu.Lock()
	s.requests = append(s.requests, url{r.URL.Path, query})
	close(s.seen)
	s.seen = make(chan struct{})
	s.mu.Unlock()

	namespace := ""
	path := strings.TrimPrefix(r.URL.Path, "/apis/resource.k8s.io/v1/")
	if rest, ok := strings.CutPrefix(path, "namespaces/"); ok {
		namespace, path, _ = strings.Cut(rest, "/")
	}
	if path != "resourceclaims" || r.Method != http.MethodGet {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
		return
	}
	if query["watch"] == "true" {
		s.watch(w, r, namespace, query)
		return
	}
	s.list(w, namespace, query)
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: message})
}

// current returns the claims of namespace ("" for all) sorted by key, and the resource
// version; the caller holds mu.
func (s *apiServer) current(namespace string) []*resourcev1.ResourceClaim {
	var out []*resourcev1.ResourceClaim
	for _, c := range s.claims {
		if namespace == "" || c.Namespace == namespace {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *resourcev1.ResourceClaim) int { return strings.Compare(key(a), key(b)) })
	return out
}

func (s *apiServer) list(w http.ResponseWriter, namespace string, query map[string]string) {
	s.mu.Lock()
	claims := s.current(namespace)
	list := &resourcev1.ResourceClaimList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatInt(s.rv, 10)}}
	s.mu.Unlock()
	offset, _ := strconv.Atoi(query["continue"])
	limit, _ := strconv.Atoi(query["limit"])
	claims = claims[min(offset, len(claims)):]
	if limit > 0 && len(claims) > limit {
		claims = claims[:limit]
		list.Continue = strconv.Itoa(offset + limit)
	}
	for _, c := range claims {
		list.Items = append(list.Items, *c)
	}
	w.Header().Set("Content-Type", s.contentType())
	_, _ = w.Write(s.encode(list))
}

func (s *apiServer) watch(w http.ResponseWriter, r *http.Request, namespace string, query map[string]string) {
	initial := query["sendInitialEvents"] == "true"
	if initial && s.noWatchList {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "sendInitialEvents is not supported")
		return
	}
	from, _ := strconv.ParseInt(query["resourceVersion"], 10, 64)
	var pending []event
	if initial {
		s.mu.Lock()
		for _, c := range s.current(namespace) {
			pending = append(pending, event{watch.Added, 0, c})
		}
		from = s.rv
		pending = append(pending, event{watch.Bookmark, 0, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{
			ResourceVersion: strconv.FormatInt(s.rv, 10),
			Annotations:     map[string]string{metav1.InitialEventsAnnotationKey: "true"},
		}}})
		s.mu.Unlock()
	}
	if s.json {
		w.Header().Set("Content-Type", "application/json")
	} else {
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
	}
	w.WriteHeader(http.StatusOK)
	for {
		s.mu.Lock()
		endAfter := s.endAfter
		s.mu.Unlock()
		for _, e := range pending {
			s.writeEvent(w, e)
			if e.rv != 0 && e.rv == endAfter {
				w.(http.Flusher).Flush()
				return
			}
		}
		w.(http.Flusher).Flush()
		s.mu.Lock()
		pending = nil
		for _, e := range s.history {
			if e.rv > from && (namespace == "" || e.obj.(*resourcev1.ResourceClaim).Namespace == namespace) {
				pending = append(pending, e)
			}
		}
		if n := len(s.history); n > 0 {
			from = max(from, s.history[n-1].rv)
		}
		changed := s.changed
		s.mu.Unlock()
		if len(pending) == 0 {
			select {
			case <-changed:
			case <-r.Context().Done():
				return
			}
		}
	}
}

// writeEvent writes one watch event: a length-prefixed protobuf WatchEvent, or a line of JSON.
func (s *apiServer) writeEvent(w http.ResponseWriter, e event) {
	ev := metav1.WatchEvent{Type: string(e.typ), Object: runtime.RawExtension{Raw: s.encode(e.obj)}}
	if s.json {
		data, err := json.Marshal(ev)
		if err != nil {
			s.t.Error(err)
		}
		_, _ = w.Write(append(data, '\n'))
		return
	}
	data, err := ev.Marshal()
	if err != nil {
		s.t.Error(err)
	}
	_, _ = w.Write(binary.BigEndian.AppendUint32(nil, uint32(len(data))))
	_, _ = w.Write(data)
}
