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

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// inventoriesPath is where a member's API server serves GpuInventories.
const inventoriesPath = "/apis/" + homelabv1.GroupName + "/v1/gpuinventories"

// defaultWatchTimeout ends a watch that asks for no timeoutSeconds, as the API server's
// --min-request-timeout does.
const defaultWatchTimeout = 30 * time.Minute

// memberDouble answers as a member cluster's API server does for its one GpuInventory: a
// list, a get, and a watch from a resourceVersion (the object as it is now when the watch
// starts behind it, then every change), with bookmarks every bookmark when the watch allows
// them, ended after its timeoutSeconds. Requests need the bearer token.
type memberDouble struct {
	token    string
	bookmark time.Duration

	mu      sync.Mutex
	inv     *homelabv1.GpuInventory
	raw     []byte // inv as JSON
	rv      int64
	changed chan struct{}       // closed at the next change
	sent    map[int64]time.Time // when a watch first sent each resourceVersion
	told    chan struct{}       // closed at the next entry of sent
}

func newMemberDouble(inv *homelabv1.GpuInventory, token string, bookmark time.Duration) *memberDouble {
	m := &memberDouble{token: token, bookmark: bookmark, changed: make(chan struct{}), sent: map[int64]time.Time{}, told: make(chan struct{})}
	m.set(func(gi *homelabv1.GpuInventory) { *gi = *inv.DeepCopy() })
	return m
}

// set changes the inventory with f, gives it the next resourceVersion and tells the watches;
// it returns that resourceVersion.
func (m *memberDouble) set(f func(*homelabv1.GpuInventory)) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	inv := &homelabv1.GpuInventory{}
	if m.inv != nil {
		inv = m.inv.DeepCopy()
	}
	f(inv)
	m.rv++
	inv.APIVersion, inv.Kind = homelabv1.SchemeGroupVersion.String(), "GpuInventory"
	inv.ResourceVersion = strconv.FormatInt(m.rv, 10)
	m.inv = inv
	m.raw, _ = json.Marshal(inv)
	close(m.changed)
	m.changed = make(chan struct{})
	return m.rv
}

// current is the inventory's JSON and resourceVersion, and a channel closed at the next change.
func (m *memberDouble) current() ([]byte, int64, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.raw, m.rv, m.changed
}

// markSent records that a watch sent resourceVersion rv at t (the first one counts).
func (m *memberDouble) markSent(rv int64, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.sent[rv]; ok {
		return
	}
	m.sent[rv] = t
	close(m.told)
	m.told = make(chan struct{})
}

// sentAt waits until a watch has sent resourceVersion rv, at most until ctx ends, and
// returns when it did.
func (m *memberDouble) sentAt(ctx context.Context, rv int64) (time.Time, error) {
	for {
		m.mu.Lock()
		t, ok := m.sent[rv]
		told := m.told
		m.mu.Unlock()
		if ok {
			return t, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("no watch was sent resourceVersion %d: %w", rv, ctx.Err())
		case <-told:
		}
	}
}

func (m *memberDouble) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	gr := schema.GroupResource{Group: homelabv1.GroupName, Resource: "gpuinventories"}
	if m.token != "" && r.Header.Get("Authorization") != "Bearer "+m.token {
		writeAPIStatus(w, apierrors.NewUnauthorized("Unauthorized"))
		return
	}
	q := r.URL.Query()
	selected, err := selectsInventory(q.Get("fieldSelector"), homelabv1.DefaultInventoryName)
	if err != nil {
		writeAPIStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	switch {
	case r.Method != http.MethodGet:
		writeAPIStatus(w, apierrors.NewMethodNotSupported(gr, r.Method))
	case r.URL.Path == inventoriesPath+"/"+homelabv1.DefaultInventoryName:
		raw, _, _ := m.current()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(raw)
	case r.URL.Path != inventoriesPath:
		writeAPIStatus(w, apierrors.NewNotFound(gr, ""))
	case q.Get("watch") == "true" || q.Get("watch") == "1":
		m.serveWatch(w, r, selected)
	default:
		raw, rv, _ := m.current()
		items := "[]"
		if selected {
			items = "[" + string(raw) + "]"
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"kind":"GpuInventoryList","apiVersion":%q,"metadata":{"resourceVersion":"%d"},"items":%s}`,
			homelabv1.SchemeGroupVersion.String(), rv, items)
	}
}

// selectsInventory reports whether a field selector selects the inventory of that name.
func selectsInventory(selector, name string) (bool, error) {
	sel, err := fields.ParseSelector(selector)
	if err != nil {
		return false, fmt.Errorf("fieldSelector %q: %w", selector, err)
	}
	return sel.Matches(fields.Set{"metadata.name": name}), nil
}

// serveWatch streams the inventory's changes after the resourceVersion asked (none or "0":
// the inventory as it is now, ADDED, first).
func (m *memberDouble) serveWatch(w http.ResponseWriter, r *http.Request, selected bool) {
	q := r.URL.Query()
	from := int64(-1)
	if v := q.Get("resourceVersion"); v != "" && v != "0" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeAPIStatus(w, apierrors.NewBadRequest(fmt.Sprintf("resourceVersion %q is not a number", v)))
			return
		}
		from = n
	}
	timeout := defaultWatchTimeout
	if s, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && s > 0 {
		timeout = time.Duration(s) * time.Second
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	var ticks <-chan time.Time
	if q.Get("allowWatchBookmarks") == "true" && m.bookmark > 0 {
		tick := time.NewTicker(m.bookmark)
		defer tick.Stop()
		ticks = tick.C
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	s := watchStream{w: w, flush: w.(http.Flusher).Flush}
	raw, rv, changed := m.current()
	switch {
	case selected && from < 0:
		s.event("ADDED", raw)
	case selected && from < rv:
		s.event("MODIFIED", raw) // every change since: the one object as it is now
		m.markSent(rv, time.Now())
	}
	last := max(from, rv)
	s.flush()
	for {
		select {
		case <-ctx.Done():
			if r.Context().Err() == nil && ticks != nil {
				s.bookmark(last) // the API server's last bookmark before a watch times out
			}
			return
		case <-ticks:
			s.bookmark(last)
		case <-changed:
			raw, rv, changed = m.current()
			if rv > last && selected {
				s.event("MODIFIED", raw)
				m.markSent(rv, time.Now())
			}
			last = max(last, rv)
		}
	}
}

// watchStream writes watch events as the API server's JSON stream does, one a line.
type watchStream struct {
	w     http.ResponseWriter
	flush func()
}

func (s watchStream) event(typ string, object []byte) {
	_, _ = fmt.Fprintf(s.w, `{"type":%q,"object":%s}`+"\n", typ, object)
	s.flush()
}

func (s watchStream) bookmark(rv int64) {
	s.event("BOOKMARK", fmt.Appendf(nil, `{"kind":"GpuInventory","apiVersion":%q,"metadata":{"resourceVersion":"%d"}}`,
		homelabv1.SchemeGroupVersion.String(), rv))
}

func writeAPIStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(&st)
}
