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

package nominate

import (
	"context"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fleet"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/memberwatch"
)

// fakeRegistry answers Members from a map by MultiKueueCluster name, and records who asked.
type fakeRegistry struct {
	mu        sync.Mutex
	members   map[string]fleet.Member
	asked     []string // the consumer and the sources' names of each call
	listeners []func(string)
}

func (r *fakeRegistry) Members(_ context.Context, consumer string, sources []memberwatch.Source, inventory string) []fleet.Member {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []fleet.Member
	for _, s := range sources {
		r.asked = append(r.asked, consumer+" "+s.Name()+" "+s.KueueNamespace+" "+inventory)
		m := r.members[s.Name()]
		m.Name, m.MultiKueueCluster = s.Name(), s.Name()
		out = append(out, m)
	}
	return out
}

func (r *fakeRegistry) OnChange(f func(string)) { r.listeners = append(r.listeners, f) }

func (r *fakeRegistry) set(name string, m fleet.Member, consumer string) {
	r.mu.Lock()
	r.members[name] = m
	ls := r.listeners
	r.mu.Unlock()
	for _, f := range ls {
		f(consumer)
	}
}

type fakeClusters struct {
	names     []string
	listeners []func(string)
}

func (c *fakeClusters) List() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, n := range c.names {
		u := &unstructured.Unstructured{}
		u.SetName(n)
		out = append(out, u)
	}
	return out
}
func (c *fakeClusters) OnChange(f func(string)) { c.listeners = append(c.listeners, f) }
func (c *fakeClusters) HasSynced() bool         { return true }

func readFleetMember(rv string, free int32) fleet.Member {
	return fleet.Member{State: homelabv1.MemberReachable, Inventory: &homelabv1.GpuInventory{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster", ResourceVersion: rv}, Status: homelabv1.GpuInventoryStatus{ReadyGpus: free}}}
}

// The dispatcher's workers are the MultiKueueClusters' members as the registry reads them;
// a change of one worker is told by its name alone, and a change for another consumer (a
// GpuFleet) is not looked at.
func TestWorkersFollowTheRegistry(t *testing.T) {
	reg := &fakeRegistry{members: map[string]fleet.Member{"w1": readFleetMember("1", 8), "w2": readFleetMember("1", 4)}}
	clusters := &fakeClusters{names: []string{"w1", "w2"}}
	w := NewWorkers(reg, clusters, "kueue-system", "cluster")
	changed := make(chan string, 10)
	w.OnChange(func(name string) { changed <- name })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()

	got := map[string]bool{<-changed: true, <-changed: true}
	if !got["w1"] || !got["w2"] || !w.HasSynced() {
		t.Fatalf("first read: changes %v, synced %t; want w1 and w2, synced", got, w.HasSynced())
	}
	if m, ok := w.Member("w1"); !ok || m.State != homelabv1.MemberReachable || m.Status == nil || m.Status.ReadyGpus != 8 {
		t.Errorf("w1 = %+v, %t; want Reachable with its inventory", m, ok)
	}
	reg.mu.Lock()
	if len(reg.asked) == 0 || reg.asked[0] != WorkersName+" w1 kueue-system cluster" {
		t.Errorf("asked the registry %q; want as %s, for w1's inventory \"cluster\" with Secrets in kueue-system", reg.asked, WorkersName)
	}
	reg.mu.Unlock()

	down := fleet.Member{State: homelabv1.MemberUnreachable, Reason: "Unreachable", Message: "connection refused", Inventory: readFleetMember("1", 4).Inventory}
	reg.set("w2", down, "some-fleet") // another consumer's change: not this view's
	reg.set("w2", down, WorkersName)
	if name := <-changed; name != "w2" {
		t.Errorf("after w2 went down, changed %q; want w2", name)
	}
	if m, _ := w.Member("w2"); m.State != homelabv1.MemberUnreachable || m.Message != "connection refused" {
		t.Errorf("w2 = %+v; want Unreachable with why", m)
	}
	clusters.names = []string{"w1"}
	for _, f := range clusters.listeners {
		f("w2")
	}
	if name := <-changed; name != "w2" {
		t.Errorf("after w2's MultiKueueCluster went, changed %q; want w2", name)
	}
	if _, ok := w.Member("w2"); ok {
		t.Error("w2 is still a worker after its MultiKueueCluster was deleted")
	}
	cancel()
	<-done
	select {
	case name := <-changed:
		t.Errorf("unexpected change of %q (w1 never changed after its first read)", name)
	default:
	}
}
