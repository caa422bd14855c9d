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

package nodecache

import (
	"context"
	"sync"

	"k8s.io/client-go/tools/cache"
)

// EventSource is what a controller registers its node event handler with: the node
// informer itself, or Events to share one listener.
type EventSource interface {
	AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
}

// Events hands the node cache's events to several controllers through one informer
// listener: each listener costs the informer two goroutine hand-offs per event. Register it
// with the informer once every controller has added its handler.
type Events struct {
	handlers []cache.ResourceEventHandler
	once     sync.Once
	synced   chan struct{} // closed once the listener has handed on the initial list
}

// AddEventHandler adds h. Its registration has synced once the one listener has handed h
// every object of the informer's initial list, as an informer's own registration does: the
// informer's HasSynced comes sooner, while the listener may still hold thousands of them.
func (e *Events) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	e.handlers = append(e.handlers, h)
	return eventsRegistration{e}, nil
}

// registered follows reg, the one listener's registration, until it has synced or ctx ends.
func (e *Events) registered(ctx context.Context, reg cache.ResourceEventHandlerRegistration) {
	done := e.done()
	go func() {
		select {
		case <-reg.HasSyncedChecker().Done():
			close(done)
		case <-ctx.Done():
		}
	}()
}

func (e *Events) done() chan struct{} {
	e.once.Do(func() { e.synced = make(chan struct{}) })
	return e.synced
}

// eventsRegistration is a handler's registration with Events.
type eventsRegistration struct{ e *Events }

func (r eventsRegistration) HasSynced() bool                     { return cache.IsDone(r) }
func (r eventsRegistration) HasSyncedChecker() cache.DoneChecker { return r }
func (r eventsRegistration) Name() string                        { return "node events" }
func (r eventsRegistration) Done() <-chan struct{}               { return r.e.done() }

func (e *Events) OnAdd(obj any, isInInitialList bool) {
	for _, h := range e.handlers {
		h.OnAdd(obj, isInInitialList)
	}
}

func (e *Events) OnUpdate(old, cur any) {
	for _, h := range e.handlers {
		h.OnUpdate(old, cur)
	}
}

func (e *Events) OnDelete(obj any) {
	for _, h := range e.handlers {
		h.OnDelete(obj)
	}
}
