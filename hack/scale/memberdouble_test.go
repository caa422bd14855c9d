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
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventorycache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
)

// The member's inventory is the operator's for a 5,000-node cluster: every GPU node counted,
// the list at the operator's bound, topology and quota filled, and small enough for the hub.
func TestMemberInventoryIsTheOperators(t *testing.T) {
	gi, err := memberInventory(5000, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s := gi.Status
	if s.TotalGpuNodes != 2500 || s.ListedNodes == 0 || s.ListedNodes > 500 || int(s.ListedNodes) != len(s.Nodes) {
		t.Errorf("totalGpuNodes %d, listedNodes %d (%d listed), want 2500 and at most 500 listed", s.TotalGpuNodes, s.ListedNodes, len(s.Nodes))
	}
	wholeFree := false
	for _, m := range s.Models {
		wholeFree = wholeFree || (len(m.FreeNodes) > 0 && m.FreeGpus == m.Gpus)
	}
	if s.Allocation == nil || !wholeFree {
		t.Errorf("allocation %v, models %v: want a model's nodes by free GPUs, every GPU free, as the dispatcher reads them", s.Allocation, s.Models)
	}
	if s.Topology == nil || len(s.Topology.Topologies) == 0 || s.Quota == nil || s.Quota.ClusterQueues != 40 {
		t.Errorf("topology %v, quota %v: want both filled, 40 ClusterQueues", s.Topology, s.Quota)
	}
	raw, _ := json.Marshal(gi)
	if len(raw) > 1<<20 {
		t.Errorf("the inventory is %d bytes of JSON, more than a member sends", len(raw))
	}
}

// startDouble serves a double of a small inventory with token "t" and 50 ms bookmarks.
func startDouble(t *testing.T) (*memberDouble, *httptest.Server) {
	t.Helper()
	gi := &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: homelabv1.DefaultInventoryName, UID: "u1"},
		Status: homelabv1.GpuInventoryStatus{TotalGpuNodes: 4, ReadyGpuNodes: 4}}
	d := newMemberDouble(gi, "t", 50*time.Millisecond)
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	return d, srv
}

// ask asks the double for path with query and the token.
func ask(t *testing.T, srv *httptest.Server, query, token string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+inventoriesPath+"?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type streamed struct {
	Type   string
	Object struct {
		Metadata struct{ ResourceVersion string }
		Status   struct{ ReadyGpuNodes int32 }
	}
}

func nextEvent(t *testing.T, lines *bufio.Scanner) streamed {
	t.Helper()
	if !lines.Scan() {
		t.Fatalf("the watch ended: %v", lines.Err())
	}
	var e streamed
	if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
		t.Fatalf("event %s: %v", lines.Text(), err)
	}
	return e
}

// A watch gets what changed after the resourceVersion it asks from, bookmarks when it allows
// them, and a last bookmark at its timeout; the double tells when it sent a change.
func TestMemberDoubleWatch(t *testing.T) {
	d, srv := startDouble(t)
	if resp := ask(t, srv, "", "wrong"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong token: %s, want 401", resp.Status)
	}
	body, _ := io.ReadAll(ask(t, srv, "fieldSelector=metadata.name%3Dcluster", "t").Body)
	if !strings.Contains(string(body), `"resourceVersion":"1"},"items":[{`) {
		t.Errorf("list: %s, want the inventory at resourceVersion 1", body)
	}
	body, _ = io.ReadAll(ask(t, srv, "fieldSelector=metadata.name%3Dother", "t").Body)
	if !strings.Contains(string(body), `"items":[]`) {
		t.Errorf("list of another name: %s, want no item", body)
	}

	d.set(func(gi *homelabv1.GpuInventory) { gi.Status.ReadyGpuNodes = 3 }) // resourceVersion 2
	lines := bufio.NewScanner(ask(t, srv, "watch=true&resourceVersion=1&allowWatchBookmarks=true&timeoutSeconds=1", "t").Body)
	lines.Buffer(nil, 1<<20)
	if e := nextEvent(t, lines); e.Type != "MODIFIED" || e.Object.Status.ReadyGpuNodes != 3 {
		t.Errorf("a watch from resourceVersion 1 began with %+v, want the change to 3", e)
	}
	rv := d.set(func(gi *homelabv1.GpuInventory) { gi.Status.ReadyGpuNodes = 2 })
	e := nextEvent(t, lines)
	for e.Type == "BOOKMARK" {
		e = nextEvent(t, lines)
	}
	if e.Type != "MODIFIED" || e.Object.Status.ReadyGpuNodes != 2 || e.Object.Metadata.ResourceVersion != "3" {
		t.Errorf("after a change: %+v, want MODIFIED to 2 at resourceVersion 3", e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := d.sentAt(ctx, rv); err != nil {
		t.Error(err)
	}
	var last streamed
	for lines.Scan() { // the timeout ends the stream
		_ = json.Unmarshal(lines.Bytes(), &last)
	}
	if last.Type != "BOOKMARK" || last.Object.Metadata.ResourceVersion != "3" {
		t.Errorf("the watch ended with %+v, want a bookmark at resourceVersion 3", last)
	}
}

// The hub's own client (JSON, status.nodes skipped) lists the double and follows its changes.
func TestMemberDoubleServesTheHubsClient(t *testing.T) {
	d, srv := startDouble(t)
	rc, err := inventorycache.NewInformerClient(&rest.Config{Host: srv.URL, BearerToken: "t"})
	if err != nil {
		t.Fatal(err)
	}
	client := kubeclient.GpuInventories(rc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", homelabv1.DefaultInventoryName).String()}
	list, err := client.List(ctx, opts)
	if err != nil || len(list.Items) != 1 || list.Items[0].UID != "u1" {
		t.Fatalf("list: %v, %v", list, err)
	}
	opts.ResourceVersion, opts.AllowWatchBookmarks = list.ResourceVersion, true
	w, err := client.Watch(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	d.set(func(gi *homelabv1.GpuInventory) { gi.Status.ReadyGpuNodes = 1 })
	for e := range w.ResultChan() {
		if e.Type == watch.Modified {
			if gi := e.Object.(*homelabv1.GpuInventory); gi.Status.ReadyGpuNodes != 1 {
				t.Errorf("readyGpuNodes %d, want 1", gi.Status.ReadyGpuNodes)
			}
			return
		}
		if e.Type != watch.Bookmark {
			t.Fatalf("event %s %v", e.Type, e.Object)
		}
	}
	t.Fatal("the watch ended without the change")
}

// A command sets a member's readyGpuNodes and answers when a watch was sent it.
func TestMemberDoublesCommand(t *testing.T) {
	d, srv := startDouble(t)
	if got := command([]*memberDouble{d}, "set 1 3"); !strings.HasPrefix(got, "error:") {
		t.Errorf("a member out of range: %q, want an error", got)
	}
	resp := ask(t, srv, "watch=true&resourceVersion=1", "t")
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(nil, 1<<20)
	before := time.Now()
	rv, at, err := parseSet(command([]*memberDouble{d}, "set 0 3"))
	if err != nil || rv != 2 || at.Before(before) {
		t.Errorf("answer: resourceVersion %d at %s (%v), want 2 after %s", rv, at, err, before)
	}
	if e := nextEvent(t, lines); e.Object.Status.ReadyGpuNodes != 3 {
		t.Errorf("the watch got %+v, want readyGpuNodes 3", e)
	}
}
