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

package allocation

import (
	"slices"
	"sync"
	"sync/atomic"
)

// Tracker keeps what pods hold on each node and the pending demand up to date as pod and
// claim events arrive, by the rules of Compute. Writers (the pod and the claim cache's event
// handlers) take a lock; Held and Pending read without one.
type Tracker struct {
	mu sync.Mutex
	// pods and claims are the pods and claims that hold or wait, by key. Pods are many:
	// their key shares the pod's strings, and podsOn lists them (a node has few).
	pods   map[podKey]*Pod
	claims map[string]*Claim
	// podsOn and claimsOn index the holding pods and allocated claims by node.
	podsOn   map[string][]*Pod
	claimsOn map[string]map[string]*Claim
	pending  demands
	// touched collects the nodes an event may have changed, until the event is done.
	touched        map[string]struct{}
	pendingTouched bool
	listeners      []func(node string)

	held        sync.Map // node -> *Held
	pendingView atomic.Pointer[[]Demand]
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker {
	t := &Tracker{
		pods:     map[podKey]*Pod{},
		claims:   map[string]*Claim{},
		podsOn:   map[string][]*Pod{},
		claimsOn: map[string]map[string]*Claim{},
		pending:  demands{},
		touched:  map[string]struct{}{},
	}
	t.pendingView.Store(&[]Demand{})
	return t
}

// OnChange registers f to be called, outside the Tracker's lock, with each node whose Held
// changed and with "" when Pending changed.
func (t *Tracker) OnChange(f func(node string)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.listeners = append(t.listeners, f)
}

// Held is what pods hold on node; nil when nothing. The caller must not modify it.
func (t *Tracker) Held(node string) *Held {
	if h, ok := t.held.Load(node); ok {
		return h.(*Held)
	}
	return nil
}

// Pending is the demand of pods and claims waiting for GPUs, sorted by model, then
// device-plugin pods before claims. The caller must not modify it.
func (t *Tracker) Pending() []Demand { return *t.pendingView.Load() }

// podKey is a pod's namespace and name.
type podKey struct{ namespace, name string }

func keyOf(p *Pod) podKey { return podKey{p.Namespace, p.Name} }

// SetPod adds or updates a pod; a finished pod, or one with no requests, is removed. The
// Tracker keeps p: the caller must not modify it afterwards (nor a Claim given to SetClaim).
func (t *Tracker) SetPod(p *Pod) {
	if p == nil {
		return
	}
	t.update(func() { t.setPod(p) })
}

// DeletePod removes the pod namespace/name.
func (t *Tracker) DeletePod(namespace, name string) {
	t.update(func() { t.removePod(podKey{namespace, name}) })
}

// Pod is the kept pod namespace/name (one that holds or waits), nil if none. The caller
// must not modify it.
func (t *Tracker) Pod(namespace, name string) *Pod {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pods[podKey{namespace, name}]
}

// Pods are the kept pods (those that hold or wait), in no order. The caller must not
// modify them.
func (t *Tracker) Pods() []*Pod {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Pod, 0, len(t.pods))
	for _, p := range t.pods {
		out = append(out, p)
	}
	return out
}

// ReplacePods makes pods the whole set of pods: those not in it are removed.
func (t *Tracker) ReplacePods(pods []*Pod) {
	t.update(func() {
		keep := make(map[podKey]struct{}, len(pods))
		for _, p := range pods {
			if p != nil {
				keep[keyOf(p)] = struct{}{}
			}
		}
		for key := range t.pods {
			if _, ok := keep[key]; !ok {
				t.removePod(key)
			}
		}
		for _, p := range pods {
			if p != nil {
				t.setPod(p)
			}
		}
	})
}

// SetClaim adds or updates a claim; one that neither holds devices nor asks for any is
// removed.
func (t *Tracker) SetClaim(c *Claim) {
	if c == nil {
		return
	}
	t.update(func() { t.setClaim(c) })
}

// DeleteClaim removes the claim with key namespace/name.
func (t *Tracker) DeleteClaim(key string) {
	t.update(func() { t.removeClaim(key) })
}

// ReplaceClaims makes claims the whole set of claims: those not in it are removed.
func (t *Tracker) ReplaceClaims(claims []*Claim) {
	t.update(func() {
		keep := make(map[string]struct{}, len(claims))
		for _, c := range claims {
			if c != nil {
				keep[c.Key()] = struct{}{}
			}
		}
		for key := range t.claims {
			if _, ok := keep[key]; !ok {
				t.removeClaim(key)
			}
		}
		for _, c := range claims {
			if c != nil {
				t.setClaim(c)
			}
		}
	})
}

// update applies one event under the lock, publishes the nodes' Held and the Pending it
// changed, and tells the listeners after unlocking.
func (t *Tracker) update(apply func()) {
	t.mu.Lock()
	apply()
	var changed []string
	for node := range t.touched {
		delete(t.touched, node)
		var old *Held
		if v, ok := t.held.Load(node); ok {
			old = v.(*Held)
		}
		h := t.build(node)
		if heldEqual(old, h) {
			continue
		}
		if h == nil {
			t.held.Delete(node)
		} else {
			t.held.Store(node, h)
		}
		changed = append(changed, node)
	}
	if t.pendingTouched {
		t.pendingTouched = false
		if list := t.pending.list(); !slices.Equal(list, *t.pendingView.Load()) {
			t.pendingView.Store(&list)
			changed = append(changed, "")
		}
	}
	listeners := t.listeners
	t.mu.Unlock()
	for _, node := range changed {
		for _, f := range listeners {
			f(node)
		}
	}
}

// SamePod reports whether two states of a pod say the same to allocation (every field;
// Requests by content).
func SamePod(a, b *Pod) bool {
	return a.Namespace == b.Namespace && a.Name == b.Name && a.UID == b.UID && a.Node == b.Node &&
		a.Model == b.Model && a.Created == b.Created && a.Finished == b.Finished && a.Deleting == b.Deleting && a.Gated == b.Gated &&
		slices.Equal(a.Requests, b.Requests)
}

// build is what the node's pods and claims hold now.
func (t *Tracker) build(node string) *Held {
	pods := t.podsOn[node]
	var claims []*Claim
	for _, c := range t.claimsOn[node] {
		claims = append(claims, c)
	}
	return buildHeld(node, pods, claims)
}

func (t *Tracker) setPod(p *Pod) {
	key := keyOf(p)
	if old := t.pods[key]; old != nil && SamePod(old, p) {
		return // a status update that changes nothing allocation reads
	}
	t.removePod(key)
	if !p.holds() && !p.waits() {
		return
	}
	t.pods[key] = p
	if p.holds() {
		t.podsOn[p.Node] = append(t.podsOn[p.Node], p)
		t.touched[p.Node] = struct{}{}
	}
	for _, c := range podDemands(p) {
		t.pending.add(c)
		t.pendingTouched = true
	}
}

func (t *Tracker) removePod(key podKey) {
	p := t.pods[key]
	if p == nil {
		return
	}
	delete(t.pods, key)
	if p.holds() {
		on := t.podsOn[p.Node]
		if i := slices.Index(on, p); i >= 0 {
			last := len(on) - 1
			on[i], on[last] = on[last], nil
			on = on[:last]
		}
		if len(on) == 0 {
			delete(t.podsOn, p.Node)
		} else {
			t.podsOn[p.Node] = on
		}
		t.touched[p.Node] = struct{}{}
	}
	for _, c := range podDemands(p) {
		t.pending.remove(c)
		t.pendingTouched = true
	}
}

func (t *Tracker) setClaim(c *Claim) {
	key := c.Key()
	t.removeClaim(key)
	nodes := c.nodes()
	contributions := claimDemands(c)
	if len(nodes) == 0 && len(contributions) == 0 {
		return
	}
	t.claims[key] = c
	for _, node := range nodes {
		on := t.claimsOn[node]
		if on == nil {
			on = map[string]*Claim{}
			t.claimsOn[node] = on
		}
		on[key] = c
		t.touched[node] = struct{}{}
	}
	for _, d := range contributions {
		t.pending.add(d)
		t.pendingTouched = true
	}
}

func (t *Tracker) removeClaim(key string) {
	c := t.claims[key]
	if c == nil {
		return
	}
	delete(t.claims, key)
	for _, node := range c.nodes() {
		if on := t.claimsOn[node]; on != nil {
			delete(on, key)
			if len(on) == 0 {
				delete(t.claimsOn, node)
			}
		}
		t.touched[node] = struct{}{}
	}
	for _, d := range claimDemands(c) {
		t.pending.remove(d)
		t.pendingTouched = true
	}
}
