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

package kubeclient

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

var resourceGV = schema.GroupVersion{Group: "resource.k8s.io", Version: "v1"}

// server answers each path with a status and a JSON body, and records the requests.
type server struct {
	mu       sync.Mutex
	answers  map[string]func(w http.ResponseWriter, r *http.Request)
	requests []string
	bodies   []string
}

func newServer(t *testing.T) (*server, *rest.Config) {
	s := &server{answers: map[string]func(http.ResponseWriter, *http.Request){}}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.requests = append(s.requests, r.Method+" "+r.URL.Path+" "+r.UserAgent())
		s.bodies = append(s.bodies, string(body))
		answer := s.answers[r.Method+" "+r.URL.Path]
		s.mu.Unlock()
		if answer == nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
			return
		}
		answer(w, r)
	}))
	t.Cleanup(ts.Close)
	return s, &rest.Config{Host: ts.URL}
}

func jsonAnswer(code int, v any) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
}

func TestServes(t *testing.T) {
	s, cfg := newServer(t)
	c, err := New(cfg, homelabv1.SchemeGroupVersion, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if ok, err := Serves(ctx, c, resourceGV, "resourceslices"); ok || err != nil {
		t.Errorf("group version not served: got %t, %v; want false, no error", ok, err)
	}
	s.answers["GET /apis/resource.k8s.io/v1"] = jsonAnswer(200, metav1.APIResourceList{GroupVersion: "resource.k8s.io/v1",
		APIResources: []metav1.APIResource{{Name: "resourceslices"}, {Name: "resourceclaims/status"}}})
	if ok, err := Serves(ctx, c, resourceGV, "resourceslices"); !ok || err != nil {
		t.Errorf("resourceslices listed: got %t, %v; want true", ok, err)
	}
	if ok, err := Serves(ctx, c, resourceGV, "resourceclaims"); ok || err != nil {
		t.Errorf("only a subresource of resourceclaims listed: got %t, %v; want false", ok, err)
	}
	s.answers["GET /api/v1"] = jsonAnswer(200, metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "nodes"}}})
	if ok, err := Serves(ctx, c, corev1.SchemeGroupVersion, "nodes"); !ok || err != nil {
		t.Errorf("core nodes: got %t, %v; want true", ok, err)
	}
	s.answers["GET /apis/resource.k8s.io/v1"] = jsonAnswer(500, metav1.Status{Status: "Failure", Code: 500, Message: "etcd is away"})
	if _, err := Serves(ctx, c, resourceGV, "resourceslices"); err == nil || !strings.Contains(err.Error(), "discover resource.k8s.io/v1") {
		t.Errorf("server error: got %v; want an error naming the group version", err)
	}
	s.answers["GET /apis/resource.k8s.io/v1"] = func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{not json")) }
	if _, err := Serves(ctx, c, resourceGV, "resourceslices"); err == nil {
		t.Error("a body that is not a resource list: got no error")
	}
}

func TestTypedClientRoundTrip(t *testing.T) {
	s, cfg := newServer(t)
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-status", Namespace: "ops", ResourceVersion: "7"}, Data: map[string]string{"a": "b"}}
	s.answers["GET /api/v1/namespaces/ops/configmaps/gpu-node-status"] = jsonAnswer(200, cm)
	s.answers["PUT /api/v1/namespaces/ops/configmaps/gpu-node-status"] = jsonAnswer(200, cm)
	c, err := New(cfg, corev1.SchemeGroupVersion, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ConfigMaps(c, "ops").Get(context.Background(), "gpu-node-status", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["a"] != "b" || got.ResourceVersion != "7" {
		t.Errorf("Get: got %+v", got)
	}
	if _, err := ConfigMaps(c, "ops").Update(context.Background(), got, metav1.UpdateOptions{FieldManager: "m"}); err != nil {
		t.Fatal(err)
	}
	_, err = ConfigMaps(c, "ops").Get(context.Background(), "missing", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("missing ConfigMap: got %v; want NotFound", err)
	}
	for _, r := range s.requests {
		if !strings.Contains(r, "kubernetes") && !strings.Contains(r, ".test") {
			t.Errorf("request %q has no default User-Agent", r)
		}
	}
}

func TestEventSinkWritesInTheEventsNamespace(t *testing.T) {
	s, cfg := newServer(t)
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e1", Namespace: "gpu"}, Reason: "NodeNotReady"}
	s.answers["POST /api/v1/namespaces/gpu/events"] = jsonAnswer(201, ev)
	s.answers["PATCH /api/v1/namespaces/gpu/events/e1"] = jsonAnswer(200, ev)
	c, err := New(cfg, corev1.SchemeGroupVersion, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink := EventSink{Client: c}
	if _, err := sink.Create(ev); err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Patch(ev, []byte(`{"count":2}`)); err != nil {
		t.Fatal(err)
	}
	if len(s.requests) != 2 || !strings.HasPrefix(s.requests[0], "POST /api/v1/namespaces/gpu/events") ||
		!strings.HasPrefix(s.requests[1], "PATCH /api/v1/namespaces/gpu/events/e1") {
		t.Errorf("requests: %q", s.requests)
	}
	if !strings.Contains(s.bodies[0], "NodeNotReady") || s.bodies[1] != `{"count":2}` {
		t.Errorf("bodies: %q", s.bodies)
	}
}

// fakeNodes records the options of each list and watch.
type fakeNodes struct {
	opts        []string
	unsupported bool
}

func (f *fakeNodes) List(_ context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	f.opts = append(f.opts, "list "+opts.FieldSelector)
	return &corev1.NodeList{}, nil
}

func (f *fakeNodes) Watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	f.opts = append(f.opts, "watch "+opts.FieldSelector)
	return watch.NewFake(), nil
}

func (f *fakeNodes) IsWatchListSemanticsUnSupported() bool { return f.unsupported }

func TestListWatchTweaksListsAndWatches(t *testing.T) {
	c := &fakeNodes{}
	lw := ListWatch[*corev1.NodeList](c, func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=a" })
	if _, err := cache.ToListerWatcherWithContext(lw).ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cache.ToListerWatcherWithContext(lw).WatchWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"list metadata.name=a", "watch metadata.name=a"}; !slices.Equal(c.opts, want) {
		t.Errorf("requests %q, want %q", c.opts, want)
	}
	if !watchlist.DoesClientNotSupportWatchListSemantics(ListWatch[*corev1.NodeList](&fakeNodes{unsupported: true}, nil)) {
		t.Error("a client without watch-lists: its list-watch claims them")
	}
	if watchlist.DoesClientNotSupportWatchListSemantics(ListWatch[*corev1.NodeList](c, nil)) {
		t.Error("a client with watch-lists: its list-watch disclaims them")
	}
}
