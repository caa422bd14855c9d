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

import "k8s.io/client-go/tools/cache"

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
}

// AddEventHandler adds h; it returns no registration (Events is registered as a whole).
func (e *Events) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	e.handlers = append(e.handlers, h)
	return nil, nil
}

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
