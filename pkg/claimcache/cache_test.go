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
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
)

func TestServed(t *testing.T) {
	slices := metav1.APIResource{Name: "resourceslices", Kind: "ResourceSlice"}
	claims := metav1.APIResource{Name: "resourceclaims", Kind: "ResourceClaim"}
	for _, tc := range []struct {
		name      string
		resources []*metav1.APIResourceList
		want      bool
	}{
		{"served", []*metav1.APIResourceList{{GroupVersion: "resource.k8s.io/v1", APIResources: []metav1.APIResource{slices, claims}}}, true},
		{"no resource.k8s.io", []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "pods"}}}}, false},
		{"only v1beta2", []*metav1.APIResourceList{{GroupVersion: "resource.k8s.io/v1beta2", APIResources: []metav1.APIResource{claims}}}, false},
		{"v1 without resourceclaims", []*metav1.APIResourceList{{GroupVersion: "resource.k8s.io/v1", APIResources: []metav1.APIResource{slices}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Served(context.Background(), prototest.DiscoveryClient(t, false, tc.resources...))
			if err != nil || got != tc.want {
				t.Errorf("Served = %v, %v; want %v, nil", got, err, tc.want)
			}
		})
	}
	t.Run("discovery fails", func(t *testing.T) {
		if got, err := Served(context.Background(), prototest.DiscoveryClient(t, true)); err == nil || got {
			t.Errorf("Served = %v, %v; want false and the error", got, err)
		}
	})
}

// newServer is a fake API server of ResourceClaims holding claims.
func newServer(t *testing.T, opts prototest.Options, claims ...*resourcev1.ResourceClaim) *prototest.Server {
	t.Helper()
	server := prototest.NewServer(t, opts, prototest.ResourceClaims)
	for _, c := range claims {
		server.Set(c)
	}
	return server
}

// fixture is a running Cache on a fake API server, with every Tracker change.
type fixture struct {
	server  *prototest.Server
	tracker *allocation.Tracker
	cache   *Cache
	changes chan string
}

func start(t *testing.T, server *prototest.Server) *fixture {
	t.Helper()
	f := &fixture{server: server, tracker: allocation.NewTracker(), changes: make(chan string, 1000)}
	f.tracker.OnChange(func(node string) { f.changes <- node })
	var err error
	if f.cache, err = New(server.Config(), f.tracker); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() { f.cache.Run(ctx); close(done) }()
	syncCtx, cancelSync := context.WithTimeout(ctx, 30*time.Second)
	defer cancelSync()
	if !cache.WaitForCacheSync(syncCtx.Done(), f.cache.HasSynced) {
		t.Fatal("claim cache never synced")
	}
	return f
}

// waitFor waits until cond holds, checking it after each Tracker change.
func (f *fixture) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-f.changes:
		case <-timeout:
			t.Fatalf("never: %s", what)
		}
	}
}

// held is what pods of one namespace hold of a node's devices.
func held(namespace string, pods int32, devices ...string) *allocation.Held {
	return &allocation.Held{Pods: pods, Namespaces: []allocation.NamespaceHeld{{Namespace: namespace, Pods: pods, Devices: devices}}}
}

func (f *fixture) wantHeld(t *testing.T, node string, want *allocation.Held) {
	t.Helper()
	f.waitFor(t, node+" holds "+cmp.Diff(want, f.tracker.Held(node)), func() bool { return cmp.Equal(want, f.tracker.Held(node)) })
}

func (f *fixture) keys() []string {
	var keys []string
	for k := range f.cache.store.keys {
		keys = append(keys, k)
	}
	return keys
}

// The cache hands the Tracker each GPU claim as it is allocated, deallocated and deleted,
// keeps nothing of other claims, and resumes a watch at the last event it saw, kept or not:
// with a streaming list in protobuf (the default), with a paged list (an API server without
// streaming lists) and with an API server that answers in JSON.
func TestCacheFollowsClaims(t *testing.T) {
	for _, tc := range []struct {
		name              string
		json, noWatchList bool
	}{
		{"streaming list", false, false},
		{"paged list", false, true},
		{"JSON", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gpu := func(pool, device string) [3]string { return [3]string{allocation.DRADriver, pool, device} }
			oneGPU := exact("gpu", "gpu.nvidia.com", resourcev1.DeviceAllocationModeExactCount, 1)
			nicRequest := exact("nic", "nic.example.com", resourcev1.DeviceAllocationModeExactCount, 1)
			training := allocated(requesting(claim("ml", "a"), oneGPU), [][3]string{gpu("node-a", "gpu-0")}, "p-0", "p-1")
			nic := allocated(requesting(claim("net", "nic"), nicRequest), [][3]string{{"nic.example.com", "node-a", "eth0"}}, "n-0")
			waiting := requesting(claim("ml", "w"), exact("gpu", "gpu.nvidia.com", resourcev1.DeviceAllocationModeExactCount, 2, productExpr))
			server := newServer(t, prototest.Options{JSON: tc.json, NoWatchList: tc.noWatchList}, training, nic, waiting)
			f := start(t, server)

			requests := server.Requests()
			listed := false
			for _, r := range requests {
				listed = listed || !r.IsWatch()
			}
			if listed != tc.noWatchList {
				t.Errorf("listed = %v with noWatchList = %v; requests %v", listed, tc.noWatchList, requests)
			}
			f.wantHeld(t, "node-a", held("ml", 2, "gpu-0"))
			wantPending := []allocation.Demand{{Model: h100, DRA: true, Pods: 1, Milli: 2000, Since: 1800000000}}
			if diff := cmp.Diff(wantPending, f.tracker.Pending()); diff != "" {
				t.Errorf("pending (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"ml/a", "ml/w"}, f.keys(), cmpSorted); diff != "" {
				t.Errorf("kept claims (-want +got):\n%s", diff)
			}

			// The scheduler allocates the waiting claim.
			running := allocated(waiting.DeepCopy(), [][3]string{gpu("node-b", "gpu-2"), gpu("node-b", "gpu-1")}, "w-0")
			server.Apply(watch.Modified, running)
			f.wantHeld(t, "node-b", held("ml", 1, "gpu-1", "gpu-2"))
			f.waitFor(t, "no pending demand", func() bool { return len(f.tracker.Pending()) == 0 })

			// The first claim's pods finish and the claim is deallocated; then the second is deleted.
			deallocated := training.DeepCopy()
			deallocated.Status = resourcev1.ResourceClaimStatus{}
			server.Apply(watch.Modified, deallocated)
			f.wantHeld(t, "node-a", nil)
			server.Apply(watch.Deleted, running)
			f.wantHeld(t, "node-b", nil)

			// Other drivers' claims come and go; none is kept or reaches the Tracker.
			nic2 := requesting(claim("net", "nic-2"), nicRequest)
			server.Apply(watch.Added, nic2)
			server.Apply(watch.Modified, allocated(nic2.DeepCopy(), [][3]string{{"nic.example.com", "node-s", "eth1"}}, "n-1"))
			server.Apply(watch.Deleted, nic2)
			server.Apply(watch.Modified, nic)
			server.Apply(watch.Added, allocated(requesting(claim("ml", "sentinel"), oneGPU), [][3]string{gpu("node-s", "gpu-0")}, "s-0"))
			f.wantHeld(t, "node-s", held("ml", 1, "gpu-0"))
			if diff := cmp.Diff([]string{"ml/a", "ml/sentinel"}, f.keys(), cmpSorted); diff != "" {
				t.Errorf("kept claims (-want +got):\n%s", diff)
			}

			// The watch ends after an ignored event: the next one starts at that event's
			// version, without listing again.
			requests = server.Requests()
			rv := server.Apply(watch.Deleted, nic)
			server.EndWatches()
			after := server.AwaitRequests(len(requests) + 1)
			if again := after[len(requests)].Query(); again.Get("watch") != "true" || again.Get("resourceVersion") != rv || again.Has("sendInitialEvents") {
				t.Errorf("after the watch ended at %s, the cache asked for %v; want a watch from %s", rv, again, rv)
			}
			server.Apply(watch.Added, allocated(requesting(claim("ml", "late"), oneGPU), [][3]string{gpu("node-c", "gpu-3")}, "l-0"))
			f.wantHeld(t, "node-c", held("ml", 1, "gpu-3"))
		})
	}
}

var cmpSorted = cmpopts.SortSlices(func(a, b string) bool { return a < b })
