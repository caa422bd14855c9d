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

package prototest_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
)

func pod(namespace, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels}}
}

// EncodeList writes the API server's envelope: the magic, then a runtime.Unknown holding
// the list's kind and message.
func TestEncodeList(t *testing.T) {
	pods := []*corev1.Pod{pod("a", "p", nil), pod("b", "q", map[string]string{"x": "y"})}
	data := prototest.EncodeList(t, metav1.ListMeta{ResourceVersion: "42", Continue: "next"}, pods...)
	if !bytes.HasPrefix(data, []byte("k8s\x00")) {
		t.Fatalf("no protobuf magic: %q", data[:min(len(data), 8)])
	}
	var unknown runtime.Unknown
	if err := unknown.Unmarshal(data[4:]); err != nil {
		t.Fatal(err)
	}
	if unknown.APIVersion != "v1" || unknown.Kind != "PodList" {
		t.Errorf("envelope of %s %s; want v1 PodList", unknown.APIVersion, unknown.Kind)
	}
	var list corev1.PodList
	if err := list.Unmarshal(unknown.Raw); err != nil {
		t.Fatal(err)
	}
	want := corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next"}, Items: []corev1.Pod{*pods[0], *pods[1]}}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("list (-want +decoded):\n%s", diff)
	}
}

// client is a protobuf client of server.
func client(t *testing.T, server *prototest.Server) kubernetes.Interface {
	t.Helper()
	cfg := server.Config()
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func names(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

// Lists come in pages of the limit, in key order, with the offset as the continue token,
// of one namespace or all, with the label selector applied.
func TestServerLists(t *testing.T) {
	server := prototest.NewServer(t, prototest.Options{}, prototest.Pods)
	for i := range 5 {
		server.Set(pod([]string{"b", "a"}[i%2], fmt.Sprint("p", i), map[string]string{"even": fmt.Sprint(i%2 == 0)}))
	}
	pods := client(t, server).CoreV1()
	ctx := context.Background()
	first, err := pods.Pods("").List(ctx, metav1.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a/p1", "a/p3"}, names(first.Items)); diff != "" || first.Continue != "2" || first.ResourceVersion != "5" {
		t.Errorf("first page: continue %q, resourceVersion %q, pods (-want +got):\n%s", first.Continue, first.ResourceVersion, diff)
	}
	second, err := pods.Pods("").List(ctx, metav1.ListOptions{Limit: 2, Continue: first.Continue})
	if err != nil || !cmp.Equal([]string{"b/p0", "b/p2"}, names(second.Items)) || second.Continue != "4" {
		t.Errorf("second page: %v, %v, continue %q", names(second.Items), err, second.Continue)
	}
	inB, err := pods.Pods("b").List(ctx, metav1.ListOptions{LabelSelector: "even=true"})
	if err != nil || !cmp.Equal([]string{"b/p0", "b/p2", "b/p4"}, names(inB.Items)) || inB.Continue != "" {
		t.Errorf("namespace b, even: %v, %v, continue %q", names(inB.Items), err, inB.Continue)
	}
	if _, err := client(t, server).CoreV1().Nodes().List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a resource not served: %v; want NotFound", err)
	}
	requests := server.Requests()
	if len(requests) != 4 || requests[1].String() != "/api/v1/pods?continue=2&limit=2" || requests[0].IsWatch() {
		t.Errorf("requests %v", requests)
	}
}

// next is the watch's next event; it fails the test after 10 seconds.
func next(t *testing.T, w watch.Interface) (watch.Event, bool) {
	t.Helper()
	select {
	case e, ok := <-w.ResultChan():
		return e, ok
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
		return watch.Event{}, false
	}
}

// A watch from a resourceVersion sends the events after it and those applied while it is
// open, of its namespace only; Expire ends it with 410 Gone, EndWatches without an error.
func TestServerWatches(t *testing.T) {
	server := prototest.NewServer(t, prototest.Options{}, prototest.Pods)
	server.Set(pod("a", "p", nil))
	from := server.ResourceVersion()
	server.Apply(watch.Modified, pod("a", "p", map[string]string{"v": "2"}))
	server.Apply(watch.Added, pod("b", "other", nil))
	pods := client(t, server).CoreV1().Pods("a")
	w, err := pods.Watch(context.Background(), metav1.ListOptions{ResourceVersion: from})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if e, _ := next(t, w); e.Type != watch.Modified || e.Object.(*corev1.Pod).Labels["v"] != "2" {
		t.Errorf("first event %s %+v; want the modification after %s", e.Type, e.Object, from)
	}
	rv := server.Apply(watch.Deleted, pod("a", "p", nil))
	if e, _ := next(t, w); e.Type != watch.Deleted || e.Object.(*corev1.Pod).ResourceVersion != rv || e.Object.(*corev1.Pod).Labels["v"] != "2" {
		t.Errorf("event %s %+v; want the deletion of the stored pod at %s", e.Type, e.Object, rv)
	}
	server.Expire()
	if e, _ := next(t, w); e.Type != watch.Error || !apierrors.IsResourceExpired(apierrors.FromObject(e.Object)) {
		t.Errorf("event %s %+v; want 410 Gone", e.Type, e.Object)
	}
	if _, ok := next(t, w); ok {
		t.Error("the watch goes on after 410 Gone")
	}

	again, err := pods.Watch(context.Background(), metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Stop()
	server.Apply(watch.Added, pod("a", "q", nil))
	server.EndWatches()
	if e, _ := next(t, again); e.Type != watch.Added || e.Object.(*corev1.Pod).Name != "q" {
		t.Errorf("event %s %+v; want q added", e.Type, e.Object)
	}
	if e, ok := next(t, again); ok {
		t.Errorf("after EndWatches: %s %+v; want the end", e.Type, e.Object)
	}
}

// A streaming list sends every object, then the initial-events-end bookmark; without
// WatchList the server refuses it.
func TestServerStreamingList(t *testing.T) {
	opts := metav1.ListOptions{SendInitialEvents: new(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true}
	server := prototest.NewServer(t, prototest.Options{}, prototest.Pods)
	server.Set(pod("a", "p", nil), pod("a", "q", nil))
	w, err := client(t, server).CoreV1().Pods("").Watch(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, name := range []string{"p", "q"} {
		if e, _ := next(t, w); e.Type != watch.Added || e.Object.(*corev1.Pod).Name != name {
			t.Errorf("event %s %+v; want %s added", e.Type, e.Object, name)
		}
	}
	e, _ := next(t, w)
	if p, _ := e.Object.(*corev1.Pod); e.Type != watch.Bookmark || p.ResourceVersion != "2" || p.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
		t.Errorf("event %s %+v; want the initial-events-end bookmark at 2", e.Type, e.Object)
	}

	older := prototest.NewServer(t, prototest.Options{NoWatchList: true}, prototest.Pods)
	if _, err := client(t, older).CoreV1().Pods("").Watch(context.Background(), opts); !apierrors.IsBadRequest(err) {
		t.Errorf("a streaming list without WatchList: %v; want BadRequest", err)
	}
}

// In protobuf, a request that does not accept protobuf is refused; with JSON, the server
// answers in JSON.
func TestServerContentTypes(t *testing.T) {
	jsonClient := func(server *prototest.Server) kubernetes.Interface {
		cfg := server.Config()
		cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	proto := prototest.NewServer(t, prototest.Options{}, prototest.Pods)
	if _, err := jsonClient(proto).CoreV1().Pods("").List(context.Background(), metav1.ListOptions{}); !apierrors.IsBadRequest(err) {
		t.Errorf("a JSON list of the protobuf server: %v; want BadRequest", err)
	}
	js := prototest.NewServer(t, prototest.Options{JSON: true}, prototest.Pods)
	js.Set(pod("a", "p", nil))
	list, err := jsonClient(js).CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil || !cmp.Equal([]string{"a/p"}, names(list.Items)) {
		t.Errorf("a JSON list: %v, %v", names(list.Items), err)
	}
}

// Wrap sees each request after Requests recorded it, and may answer it.
func TestServerWrap(t *testing.T) {
	forbid := func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			prototest.WriteStatus(w, apierrors.NewForbidden(corev1.Resource("pods"), "", nil))
		})
	}
	server := prototest.NewServer(t, prototest.Options{Wrap: forbid}, prototest.Pods)
	if _, err := client(t, server).CoreV1().Pods("").List(context.Background(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list: %v; want Forbidden", err)
	}
	if n := len(server.AwaitRequests(1)); n != 1 {
		t.Errorf("%d requests recorded; want 1", n)
	}
}
