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

package testenv

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// A fake member's ways of answering.
const (
	MemberAnswers      = ""             // lists and watches its inventory
	MemberUnauthorized = "unauthorized" // 401 to every request
	MemberForbidden    = "forbidden"    // 403 to every request
	MemberSlow         = "slow"         // never answers (until the client gives up)
	MemberHuge         = "huge"         // answers a list with a 100 MiB inventory
)

// Kubeconfig is a kubeconfig of server, trusting ca, with a bearer token: how the fleet hub
// reaches a member through a kubeconfig (a MultiKueueCluster's Secret).
func Kubeconfig(server string, ca []byte, token string) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["member"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	kc.AuthInfos["hub"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["member"] = &clientcmdapi.Context{Cluster: "member", AuthInfo: "hub"}
	kc.CurrentContext = "member"
	return clientcmd.Write(*kc)
}

// FleetRow is member name's row in a GpuFleet's status, or nil.
func FleetRow(st *homelabv1.GpuFleetStatus, name string) *homelabv1.FleetMember {
	for i := range st.Members {
		if st.Members[i].Name == name {
			return &st.Members[i]
		}
	}
	return nil
}

// FakeMember is an HTTPS server that answers as a member cluster's API server does for its
// GpuInventories (a list by name, a watch), with bearer-token authentication, and in the
// other ways a member can answer (SetMode), or not at all (Stop, then Start on the same
// address): the fleet hub's tests' double of a member.
type FakeMember struct {
	// Token is the bearer token it accepts; "" accepts any request.
	Token string

	uid  types.UID
	addr string

	srvMu sync.Mutex
	srv   *httptest.Server

	mu       sync.Mutex
	inv      *homelabv1.GpuInventory
	rv       int
	mode     string
	stopped  bool // between Stop and Start: requests are turned away at once
	watches  map[chan []byte]bool
	requests int
}

// StartFakeMember serves inv (nil: none) over TLS on loopback until Close.
func StartFakeMember(inv *homelabv1.GpuInventory, token string) *FakeMember {
	m := &FakeMember{Token: token, watches: map[chan []byte]bool{}, uid: uuid.NewUUID()}
	m.srv = httptest.NewTLSServer(http.HandlerFunc(m.serve))
	m.addr = m.srv.Listener.Addr().String()
	m.SetInventory(inv)
	return m
}

// URL is the server's https URL.
func (m *FakeMember) URL() string { return "https://" + m.addr }

// CA is the PEM of the certificate the server's is signed by (its own; every start serves
// the same).
func (m *FakeMember) CA() []byte {
	m.srvMu.Lock()
	defer m.srvMu.Unlock()
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: m.srv.Certificate().Raw})
}

// Stop closes the server: connections are refused until Start.
func (m *FakeMember) Stop() {
	m.mu.Lock()
	m.stopped = true // a request that comes before the listener closes ends at once
	m.endWatches()
	m.mu.Unlock()
	m.srvMu.Lock()
	defer m.srvMu.Unlock()
	if m.srv != nil {
		m.srv.CloseClientConnections()
		m.srv.Close()
	}
}

// Start serves again on the same address after Stop.
func (m *FakeMember) Start() error {
	l, err := net.Listen("tcp", m.addr)
	if err != nil {
		return fmt.Errorf("listen on %s again: %w", m.addr, err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(m.serve))
	srv.Listener = l
	m.mu.Lock()
	m.stopped = false
	m.mu.Unlock()
	srv.StartTLS()
	m.srvMu.Lock()
	m.srv = srv
	m.srvMu.Unlock()
	return nil
}

// Close stops the server for good.
func (m *FakeMember) Close() { m.Stop() }

// Requests counts the requests it received.
func (m *FakeMember) Requests() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests
}

// SetInventory replaces the inventory (nil: deletes it), telling every open watch.
func (m *FakeMember) SetInventory(inv *homelabv1.GpuInventory) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rv++
	typ := "MODIFIED"
	switch {
	case inv == nil && m.inv == nil:
		return
	case inv == nil:
		typ, inv = "DELETED", m.inv.DeepCopy()
		m.inv = nil
	case m.inv == nil:
		typ = "ADDED"
	}
	inv = inv.DeepCopy()
	inv.APIVersion, inv.Kind = homelabv1.SchemeGroupVersion.String(), "GpuInventory"
	inv.ResourceVersion = strconv.Itoa(m.rv)
	if inv.UID == "" {
		inv.UID = m.uid // one cluster's inventory: the same UID as long as it exists
	}
	if typ != "DELETED" {
		m.inv = inv
	}
	event, _ := json.Marshal(map[string]any{"type": typ, "object": inv})
	for ch := range m.watches {
		select {
		case ch <- event:
		default: // a watcher that does not read is dropped
			close(ch)
			delete(m.watches, ch)
		}
	}
}

// SetMode changes how it answers from now on; open watches end.
func (m *FakeMember) SetMode(mode string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mode = mode
	m.endWatches()
}

// endWatches ends every watch being served; m.mu is held.
func (m *FakeMember) endWatches() {
	for ch := range m.watches {
		close(ch)
		delete(m.watches, ch)
	}
}

func (m *FakeMember) serve(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.requests++
	mode, stopped := m.mode, m.stopped
	m.mu.Unlock()
	if stopped {
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	gr := schema.GroupResource{Group: homelabv1.GroupName, Resource: "gpuinventories"}
	switch {
	case mode == MemberSlow:
		<-r.Context().Done()
		return
	case mode == MemberUnauthorized || (m.Token != "" && r.Header.Get("Authorization") != "Bearer "+m.Token):
		writeStatus(w, apierrors.NewUnauthorized("Unauthorized"))
		return
	case mode == MemberForbidden:
		writeStatus(w, apierrors.NewForbidden(gr, "", fmt.Errorf("the fake member forbids it")))
		return
	case r.URL.Path != "/apis/homelab.youngju.dev/v1/gpuinventories":
		writeStatus(w, apierrors.NewNotFound(gr, ""))
		return
	case mode == MemberHuge:
		m.serveHuge(w)
		return
	case r.URL.Query().Get("watch") == "true":
		m.serveWatch(w, r)
		return
	}
	m.mu.Lock()
	list := map[string]any{"apiVersion": homelabv1.SchemeGroupVersion.String(), "kind": "GpuInventoryList",
		"metadata": map[string]any{"resourceVersion": strconv.Itoa(m.rv)}, "items": []any{}}
	if m.inv != nil && selects(r, m.inv.Name) {
		list["items"] = []any{m.inv}
	}
	data, _ := json.Marshal(list)
	m.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

// selects reports whether the request's field selector selects name.
func selects(r *http.Request, name string) bool {
	sel := r.URL.Query().Get("fieldSelector")
	return sel == "" || sel == "metadata.name="+name
}

// serveWatch streams the inventory's changes; a watch from an older resourceVersion first
// gets the inventory as it is now.
func (m *FakeMember) serveWatch(w http.ResponseWriter, r *http.Request) {
	ch := make(chan []byte, 16)
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return
	}
	m.watches[ch] = true
	if from, err := strconv.Atoi(r.URL.Query().Get("resourceVersion")); err == nil && from < m.rv && m.inv != nil {
		event, _ := json.Marshal(map[string]any{"type": "MODIFIED", "object": m.inv})
		ch <- event
	}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		if m.watches[ch] {
			delete(m.watches, ch)
		}
		m.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	flusher.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case event, ok := <-ch:
			if !ok {
				return
			}
			_, _ = w.Write(append(event, '\n'))
			flusher.Flush()
		}
	}
}

// serveHuge answers with a list holding one inventory of 100 MiB, as long as the client reads.
func (m *FakeMember) serveHuge(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprint(w, `{"apiVersion":"homelab.youngju.dev/v1","kind":"GpuInventoryList","metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"cluster"},"spec":{"note":"`)
	chunk := []byte(strings.Repeat("x", 64<<10))
	for range 1600 {
		if _, err := w.Write(chunk); err != nil {
			return
		}
	}
	_, _ = fmt.Fprint(w, `"}}]}`)
}

func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(&st)
}
