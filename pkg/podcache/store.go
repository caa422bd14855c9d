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
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/tools/cache"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
)

// Tracker is what the cache tells of the GPU pods it sees (allocation.Tracker): the pods
// that hold or wait for GPUs, never a finished one, and each change once.
type Tracker interface {
	// SetPod adds a pod or replaces the one with its key.
	SetPod(pod *allocation.Pod)
	// DeletePod forgets the pod with key (namespace/name).
	DeletePod(key string)
	// ReplacePods replaces every pod with pods (after a list).
	ReplacePods(pods []*allocation.Pod)
}

var _ Tracker = (*allocation.Tracker)(nil)

// podKey is a pod's namespace and name, sharing the strings of the kept pod.
type podKey struct{ namespace, name string }

func keyOf(p *allocation.Pod) podKey { return podKey{p.Namespace, p.Name} }

// store is the reflector's store: it keeps the GPU pods that are not finished, by key, and
// tells the tracker of each change. Objects without a Pod (pods that name no GPU resource:
// their requests cannot change, so they never become GPU pods) are ignored on every call,
// and so are deletions of pods it does not keep; the reflector's resourceVersion comes from
// the events themselves, not from the store.
type store struct {
	tracker Tracker
	synced  atomic.Bool
	skipped atomic.Int64 // pods that could not be read

	mu     sync.RWMutex
	pods   map[podKey]*allocation.Pod
	lastRV string // of the last event or list, kept or not
}

var _ cache.Store = (*store)(nil)

func newStore(tracker Tracker) *store {
	return &store{tracker: tracker, pods: map[podKey]*allocation.Pod{}}
}

// object returns an event's Object.
func object(obj any) (*Object, error) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	o, ok := obj.(*Object)
	if !ok {
		return nil, fmt.Errorf("the pod cache stores *podcache.Object, not %T", obj)
	}
	return o, nil
}

// seen records the resourceVersion of an event's object and returns its pod: nil for an
// object the store ignores. A pod that could not be read is counted and forgotten.
func (s *store) seen(obj any) (*allocation.Pod, error) {
	o, err := object(obj)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastRV = o.ResourceVersion()
	if o.err != nil {
		s.skipped.Add(1)
		s.forget(podKey{o.namespace, o.name})
	}
	return o.Pod, nil
}

// forget drops a kept pod and tells the tracker. s.mu is held.
func (s *store) forget(key podKey) {
	if p, kept := s.pods[key]; kept {
		delete(s.pods, key)
		s.tracker.DeletePod(p.Key())
	}
}

// Add keeps a GPU pod that is not finished and tells the tracker; a finished one is dropped.
func (s *store) Add(obj any) error {
	p, err := s.seen(obj)
	if err != nil || p == nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := keyOf(p)
	old, kept := s.pods[key]
	switch {
	case p.Finished:
		s.forget(key)
	case kept && sameAllocation(old, p):
		// A status update that changes nothing allocation reads: the tracker's pod stays.
	default:
		s.pods[key] = p
		s.tracker.SetPod(p)
	}
	return nil
}

// Update is Add: the store holds the latest state of each kept pod.
func (s *store) Update(obj any) error { return s.Add(obj) }

// Delete drops a kept pod and tells the tracker; other deletions are ignored.
func (s *store) Delete(obj any) error {
	p, err := s.seen(obj)
	if err != nil || p == nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget(keyOf(p))
	return nil
}

// Replace keeps the listed GPU pods that are not finished, and nothing else.
func (s *store) Replace(list []any, resourceVersion string) error {
	pods := make(map[podKey]*allocation.Pod)
	for _, obj := range list {
		o, err := object(obj)
		if err != nil {
			return err
		}
		if o.err != nil {
			s.skipped.Add(1)
		}
		if p := o.Pod; p != nil && !p.Finished {
			pods[keyOf(p)] = p
		}
	}
	all := make([]*allocation.Pod, 0, len(pods))
	for _, p := range pods {
		all = append(all, p)
	}
	s.mu.Lock()
	s.pods, s.lastRV = pods, resourceVersion
	s.tracker.ReplacePods(all)
	s.mu.Unlock()
	s.synced.Store(true)
	return nil
}

// Resync does nothing: the tracker has every change already.
func (s *store) Resync() error { return nil }

// LastStoreSyncResourceVersion returns the resourceVersion of the last event or list.
func (s *store) LastStoreSyncResourceVersion() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.lastRV
}

// Bookmark records a bookmark's resourceVersion.
func (s *store) Bookmark(resourceVersion string) {
	s.mu.Lock()
	s.lastRV = resourceVersion
	s.mu.Unlock()
}

// List returns the kept pods, each an *allocation.Pod (read-only, shared with the tracker).
func (s *store) List() []any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]any, 0, len(s.pods))
	for _, p := range s.pods {
		out = append(out, p)
	}
	return out
}

// ListKeys returns the kept pods' keys (namespace/name).
func (s *store) ListKeys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.pods))
	for _, p := range s.pods {
		out = append(out, p.Key())
	}
	return out
}

// Get returns the kept pod of obj's key.
func (s *store) Get(obj any) (any, bool, error) {
	o, err := object(obj)
	if err != nil || o.Pod == nil {
		return nil, false, err
	}
	return s.GetByKey(o.Pod.Key())
}

// GetByKey returns the kept pod of key (namespace/name).
func (s *store) GetByKey(key string) (any, bool, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.pods[podKey{namespace, name}]
	if !ok {
		return nil, false, nil
	}
	return p, true, nil
}

// sameAllocation reports whether two states of a pod say the same to allocation: everything
// but the resourceVersion.
func sameAllocation(a, b *allocation.Pod) bool {
	x, y := *a, *b
	x.ResourceVersion, y.ResourceVersion = "", ""
	x.Requests, y.Requests = nil, nil
	return reflect.DeepEqual(x, y) && slices.Equal(a.Requests, b.Requests)
}
