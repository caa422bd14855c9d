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
	"sync"
	"sync/atomic"

	"k8s.io/client-go/tools/cache"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
)

// Tracker is what the cache tells of the GPU pods it sees (allocation.Tracker): the pods
// that hold or wait for GPUs, never a finished one, and each change once. The store keeps no
// pods of its own: it asks the tracker what it has.
type Tracker interface {
	// SetPod adds a pod or replaces the one with its key.
	SetPod(pod *allocation.Pod)
	// DeletePod forgets the pod namespace/name.
	DeletePod(namespace, name string)
	// ReplacePods replaces every pod with pods (after a list).
	ReplacePods(pods []*allocation.Pod)
	// Pod is the kept pod namespace/name, nil if none.
	Pod(namespace, name string) *allocation.Pod
	// Pods are the kept pods.
	Pods() []*allocation.Pod
}

var _ Tracker = (*allocation.Tracker)(nil)

// store is the reflector's store: it tells the tracker of each change to a GPU pod that is
// not finished, and keeps only the resourceVersion. Objects without a Pod (pods that name no
// GPU resource: their requests cannot change, so they never become GPU pods) are ignored on
// every call, and so are updates that change nothing allocation reads and deletions of pods
// the tracker does not have; the reflector's resourceVersion comes from the events
// themselves, not from the store. Its List and Get read the tracker.
type store struct {
	tracker Tracker
	synced  atomic.Bool
	skipped atomic.Int64 // pods that could not be read

	mu     sync.RWMutex   // orders the calls to the tracker, as the events came
	lastRV string         // of the last event or list, kept or not
	listed listedVersions // after a list by namespace: events these lists hold are ignored
}

var _ cache.Store = (*store)(nil)

func newStore(tracker Tracker) *store {
	return &store{tracker: tracker}
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
// object the store ignores, among them a pod its namespace's list already holds (after a list
// by namespace). A pod that could not be read is counted and forgotten. s.mu is held.
func (s *store) seen(obj any) (*allocation.Pod, error) {
	o, err := object(obj)
	if err != nil {
		return nil, err
	}
	s.lastRV = o.ResourceVersion
	if s.listed.holds(o) {
		return nil, nil
	}
	if o.err != nil {
		s.skipped.Add(1)
		s.forget(o.Namespace, o.Name)
	}
	return o.Pod, nil
}

// setListed sets the versions of the list by namespace that the next Replace gets; nil
// after any other list.
func (s *store) setListed(v listedVersions) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listed = v
}

// forget tells the tracker to drop a pod it has. s.mu is held.
func (s *store) forget(namespace, name string) {
	if s.tracker.Pod(namespace, name) != nil {
		s.tracker.DeletePod(namespace, name)
	}
}

// Add tells the tracker of a GPU pod that is not finished, unless it has that pod as it is;
// a finished one is dropped.
func (s *store) Add(obj any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.seen(obj)
	if err != nil || p == nil {
		return err
	}
	switch old := s.tracker.Pod(p.Namespace, p.Name); {
	case p.Finished:
		s.forget(p.Namespace, p.Name)
	case old != nil && allocation.SamePod(old, p):
		// A status update that changes nothing allocation reads: the tracker's pod stays.
	default:
		s.tracker.SetPod(p)
	}
	return nil
}

// Update is Add: the tracker holds the latest state of each pod.
func (s *store) Update(obj any) error { return s.Add(obj) }

// Delete drops a pod the tracker has; other deletions are ignored.
func (s *store) Delete(obj any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.seen(obj)
	if err != nil || p == nil {
		return err
	}
	s.forget(p.Namespace, p.Name)
	return nil
}

// Replace gives the tracker the listed GPU pods that are not finished, and nothing else.
func (s *store) Replace(list []any, resourceVersion string) error {
	pods := make([]*allocation.Pod, 0, len(list))
	for _, obj := range list {
		o, err := object(obj)
		if err != nil {
			return err
		}
		if o.err != nil {
			s.skipped.Add(1)
		}
		if p := o.Pod; p != nil && !p.Finished {
			pods = append(pods, p)
		}
	}
	s.mu.Lock()
	s.lastRV = resourceVersion
	s.tracker.ReplacePods(pods)
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

// List returns the tracker's pods, each an *allocation.Pod (read-only).
func (s *store) List() []any {
	pods := s.tracker.Pods()
	out := make([]any, len(pods))
	for i, p := range pods {
		out[i] = p
	}
	return out
}

// ListKeys returns the tracker's pods' keys (namespace/name).
func (s *store) ListKeys() []string {
	pods := s.tracker.Pods()
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Key()
	}
	return out
}

// Get returns the tracker's pod of obj's key.
func (s *store) Get(obj any) (any, bool, error) {
	o, err := object(obj)
	if err != nil || o.Pod == nil {
		return nil, false, err
	}
	return s.GetByKey(o.Pod.Key())
}

// GetByKey returns the tracker's pod of key (namespace/name).
func (s *store) GetByKey(key string) (any, bool, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, false, err
	}
	p := s.tracker.Pod(namespace, name)
	if p == nil {
		return nil, false, nil
	}
	return p, true, nil
}
