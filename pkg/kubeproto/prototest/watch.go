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

package prototest

import (
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
)

// watch streams the events of resource in namespace that sel selects, until a marker ends
// the watch, the client goes or the test ends.
func (s *Server) watch(w http.ResponseWriter, r *http.Request, resource Resource, namespace string, sel labels.Selector) {
	q := r.URL.Query()
	initial := q.Get("sendInitialEvents") == "true"
	if initial && s.opts.NoWatchList {
		WriteStatus(w, apierrors.NewBadRequest("sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"))
		return
	}
	from, _ := strconv.ParseInt(q.Get("resourceVersion"), 10, 64)
	s.mu.Lock()
	pending, cursor := s.firstEvents(resource, namespace, sel, initial, from)
	s.mu.Unlock()
	if s.opts.JSON {
		w.Header().Set("Content-Type", "application/json")
	} else {
		w.Header().Set("Content-Type", protobufType+";stream=watch")
	}
	w.WriteHeader(http.StatusOK)
	flush := w.(http.Flusher).Flush
	for {
		for _, e := range pending {
			if e.obj != nil && !s.writeEvent(w, e) {
				return
			}
			if e.end {
				flush()
				return
			}
		}
		flush()
		s.mu.Lock()
		pending = nil
		for ; cursor < len(s.history); cursor++ {
			if e := s.history[cursor]; e.end || e.resource == resource && selects(e.obj, namespace, sel) {
				pending = append(pending, e)
			}
		}
		changed := s.changed
		s.mu.Unlock()
		if len(pending) == 0 {
			select {
			case <-changed:
			case <-r.Context().Done():
				return
			case <-s.closed:
				return
			}
		}
	}
}

// firstEvents are what a watch sends first, and the history's length it goes on from: the
// initial events and their bookmark, or the events after resourceVersion from. The caller
// holds mu.
func (s *Server) firstEvents(resource Resource, namespace string, sel labels.Selector, initial bool, from int64) ([]entry, int) {
	var first []entry
	if initial {
		for _, obj := range s.matching(resource, namespace, sel) {
			first = append(first, entry{resource: resource, typ: watch.Added, obj: obj})
		}
		bookmark, err := scheme.Scheme.New(resource.GroupVersionKind)
		if err != nil {
			s.t.Error(err)
			return nil, len(s.history)
		}
		m, _ := meta.Accessor(bookmark)
		m.SetResourceVersion(strconv.FormatInt(s.rv, 10))
		m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		return append(first, entry{resource: resource, typ: watch.Bookmark, obj: bookmark}), len(s.history)
	}
	if from > 0 {
		for _, e := range s.history {
			if !e.end && e.rv > from && e.resource == resource && selects(e.obj, namespace, sel) {
				first = append(first, e)
			}
		}
	}
	return first, len(s.history)
}

// writeEvent writes one watch event: a length-prefixed protobuf WatchEvent, or a line of
// JSON. It returns false once the client is gone.
func (s *Server) writeEvent(w http.ResponseWriter, e entry) bool {
	frame, err := eventFrame(e.typ, e.obj, s.opts.JSON)
	if err != nil {
		s.t.Error(err)
		return false
	}
	_, err = w.Write(frame)
	return err == nil
}

// eventFrame is obj's event as the API server frames it in a watch.
func eventFrame(typ watch.EventType, obj runtime.Object, asJSON bool) ([]byte, error) {
	data, err := encode(obj, asJSON)
	if err != nil {
		return nil, err
	}
	ev := metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: data}}
	if asJSON {
		line, err := json.Marshal(ev)
		return append(line, '\n'), err
	}
	msg, err := ev.Marshal()
	if err != nil {
		return nil, err
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...), nil
}
