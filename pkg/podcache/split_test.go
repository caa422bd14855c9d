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
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2/ktesting"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
)

// With ByNamespace, the first list is one list per namespace. Namespace b is listed after
// changes that namespace a's list predates, so the watch starts at a's resourceVersion and
// replays them: the tracker must not see b's pods as they were before b's list (q on
// worker-2, a pod created and deleted in between). A namespace created after the namespace
// list (c) is seen through the watch.
func TestCacheListsByNamespace(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	aListed := make(chan struct{})
	var once sync.Once
	var server *prototest.Server
	var aVersion string // the resourceVersion of namespace a's list, once aListed is closed
	hooks := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == prototest.Pods.Path("b") && r.URL.Query().Get("watch") != "true" {
				select {
				case <-aListed:
				case <-time.After(30 * time.Second):
					t.Error("namespace a was never listed")
				}
				changeB(server)
			}
			next.ServeHTTP(w, r)
			if r.URL.Path == prototest.Pods.Path("a") && r.URL.Query().Get("watch") != "true" {
				once.Do(func() {
					aVersion = server.ResourceVersion()
					close(aListed)
				})
			}
		})
	}
	server = newServer(t, prototest.Options{Wrap: hooks}, gpuPod("a", "p", gpus("1")), gpuPod("b", "q", gpus("2")), pending("b", "r", "1"), realisticPod("b", "web"))
	server.Set(namespace("a"), namespace("b"))
	tracker := newFakeTracker()
	startWith(ctx, t, server, tracker, Options{ByNamespace: true})

	calls := tracker.waitFor(t, "a's and b's pods as listed, and c's from the watch",
		has(map[string]string{"a/p": "worker-17", "b/q": "worker-3", "c/s": "worker-17"}))
	if want := []string{"replace 2", "set c/s"}; !slices.Equal(calls, want) {
		t.Errorf("calls %v; want %v: the events b's list already holds must not reach the tracker", calls, want)
	}
	var paths []string
	for _, r := range podLists(server) {
		paths = append(paths, r.Path)
	}
	slices.Sort(paths)
	if want := []string{"/api/v1/namespaces/a/pods", "/api/v1/namespaces/b/pods"}; !slices.Equal(paths, want) {
		t.Errorf("pod lists %v; want %v", paths, want)
	}
	// b is listed six changes after a: the watch starts at a's list.
	var watches []string
	for _, r := range server.Requests() {
		if r.IsWatch() && strings.HasSuffix(r.Path, "/pods") {
			watches = append(watches, r.Query().Get("resourceVersion"))
		}
	}
	<-aListed
	if len(watches) == 0 || watches[0] != aVersion {
		t.Errorf("watches started at %v; want the first at %s, namespace a's list", watches, aVersion)
	}

	// Once past every namespace's list, the watch's events all reach the tracker.
	q := gpuPod("b", "q", gpus("2"))
	q.Spec.NodeName = "worker-9"
	server.Apply(watch.Modified, q)
	tracker.waitFor(t, "b/q on worker-9", has(map[string]string{"a/p": "worker-17", "b/q": "worker-9", "c/s": "worker-17"}))
}

// Where namespaces cannot be listed, ByNamespace lists all pods at once.
func TestCacheListsAtOnceWithoutNamespaces(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	forbidNamespaces := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == prototest.Namespaces.Path("") {
				prototest.WriteStatus(w, apierrors.NewForbidden(corev1.Resource("namespaces"), "", errors.New("the test forbids it")))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	server := newServer(t, prototest.Options{Wrap: forbidNamespaces}, gpuPod("a", "p", gpus("1")), gpuPod("b", "q", gpus("2")))
	server.Set(namespace("a"), namespace("b"))
	tracker := newFakeTracker()
	startWith(ctx, t, server, tracker, Options{ByNamespace: true})
	tracker.waitFor(t, "both pods", has(map[string]string{"a/p": "worker-17", "b/q": "worker-17"}))
	if lists := podLists(server); len(lists) != 1 || lists[0].Path != "/api/v1/pods" {
		t.Errorf("list requests %v; want one of /api/v1/pods", lists)
	}
}

// changeB changes namespace b's pods and adds one in namespace c, before b's list.
func changeB(server *prototest.Server) {
	q := gpuPod("b", "q", gpus("2"))
	q.Spec.NodeName = "worker-2"
	server.Apply(watch.Modified, q)
	q.Spec.NodeName = "worker-3"
	server.Apply(watch.Modified, q)
	server.Apply(watch.Deleted, pending("b", "r", "1"))
	server.Apply(watch.Added, pending("b", "brief", "1"))
	server.Apply(watch.Deleted, pending("b", "brief", "1"))
	server.Apply(watch.Added, gpuPod("c", "s", gpus("4")))
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func TestListedVersionsHolds(t *testing.T) {
	listed := listedVersions{"b": "20"}
	gpu := func(ns, rv string) *Object {
		return &Object{Compact: kubeproto.Compact{Namespace: ns, Name: "x", ResourceVersion: rv}, Pod: &allocation.Pod{Namespace: ns, Name: "x"}}
	}
	for _, tc := range []struct {
		name  string
		o     *Object
		holds bool
	}{
		{"older than the namespace's list", gpu("b", "19"), true},
		{"the list's own version", gpu("b", "20"), true},
		{"newer", gpu("b", "21"), false},
		{"newer by digits", gpu("b", "100"), false},
		{"a namespace not listed", gpu("c", "5"), false},
		{"a pod that could not be read", &Object{Compact: kubeproto.Compact{Namespace: "b", Name: "y", ResourceVersion: "7"}, err: errors.New("bad quantity")}, true},
		{"a pod without GPUs", &Object{Compact: kubeproto.Compact{ResourceVersion: "3"}}, false},
		{"a resourceVersion that cannot be compared", gpu("b", "x1"), false},
	} {
		if got := listed.holds(tc.o); got != tc.holds {
			t.Errorf("%s: holds %v, want %v", tc.name, got, tc.holds)
		}
	}
	if (listedVersions(nil)).holds(gpu("b", "1")) {
		t.Error("no list by namespace holds a pod")
	}
}
