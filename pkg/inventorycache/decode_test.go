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

package inventorycache

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
)

// servedInventory is a GpuInventory as the API server sends it: apiVersion and kind set, a
// full status with its node list.
func servedInventory(t testing.TB) *homelabv1.GpuInventory {
	t.Helper()
	at := time.Date(2026, 7, 10, 15, 50, 0, 0, time.UTC)
	content, _ := inventory.Compute(fixtures.HomeLab(), nil, at)
	cond := inventory.DegradedCondition(content, 3)
	cond.LastTransitionTime = metav1.NewTime(at)
	observed := metav1.NewTime(at)
	status := content.Status(content.Nodes, []metav1.Condition{cond}, 3, observed)
	status.ListedNodes = int32(len(status.Nodes))
	status.Topology = &homelabv1.GpuTopology{Topologies: []homelabv1.TopologyTree{{Name: "labels",
		Levels: []homelabv1.TopologyLevel{{Key: "topology.kubernetes.io/rack", Domains: 1}}, GangSizes: []int32{8},
		Domains: []homelabv1.TopologyDomain{{Level: "topology.kubernetes.io/rack", Name: "r1", Nodes: 4,
			Models: []homelabv1.TopologyModel{{Model: "NVIDIA-GeForce-RTX-4070-Laptop-GPU", Nodes: 1, Gpus: 1, GangSlots: []int32{0}}}}}}}}
	gi := &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: "cluster", Generation: 3}, Status: status}
	gi.TypeMeta = metav1.TypeMeta{APIVersion: homelabv1.SchemeGroupVersion.String(), Kind: "GpuInventory"}
	gi.ResourceVersion = "42"
	gi.Spec.Note = "every GPU node"
	gi.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a100"}}
	if len(gi.Status.Nodes) == 0 || len(gi.Status.Conditions) == 0 || gi.Status.Topology == nil {
		t.Fatal("fixture status has no nodes, conditions or topology")
	}
	return gi
}

// withoutNodesDecoded is what the informer client must produce from servedInventory: the same
// object without status.nodes and status.topology (and without TypeMeta, like the generated
// client's decoder).
func withoutNodesDecoded(gi *homelabv1.GpuInventory) *homelabv1.GpuInventory {
	gi = gi.DeepCopy()
	gi.TypeMeta = metav1.TypeMeta{}
	gi.Status.Nodes, gi.Status.Topology = nil, nil
	return gi
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// The informer client reads lists, single objects and watch events without status.nodes and
// status.topology, everything else intact, and still decodes what is not a GpuInventory (a watch error).
func TestInformerClientLeavesOutTheNodeList(t *testing.T) {
	served := servedInventory(t)
	list := homelabv1.GpuInventoryList{
		TypeMeta: metav1.TypeMeta{APIVersion: homelabv1.SchemeGroupVersion.String(), Kind: "GpuInventoryList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "43"},
		Items:    []homelabv1.GpuInventory{*served, *served},
	}
	list.Items[1].Name = "other"
	gone := metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
		Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old resource version"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Query().Get("watch") == "true":
			fmt.Fprintf(w, `{"type":"MODIFIED","object":%s}`+"\n", mustJSON(t, served))
			fmt.Fprintf(w, `{"type":"ERROR","object":%s}`+"\n", mustJSON(t, gone))
		case strings.HasSuffix(r.URL.Path, "/gpuinventories"):
			fmt.Fprint(w, mustJSON(t, list))
		case strings.HasSuffix(r.URL.Path, "/gpuinventories/cluster"):
			fmt.Fprint(w, mustJSON(t, served))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	client, err := NewInformerClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := withoutNodesDecoded(served)

	gotList, err := kubeclient.GpuInventories(client).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(gotList.Items) != 2 || gotList.ResourceVersion != "43" {
		t.Fatalf("list: %d items at %q, want 2 at 43", len(gotList.Items), gotList.ResourceVersion)
	}
	if diff := cmp.Diff(want, &gotList.Items[0]); diff != "" {
		t.Errorf("list item (-want +got):\n%s", diff)
	}
	if gotList.Items[1].Name != "other" {
		t.Errorf("second item is %q, want other", gotList.Items[1].Name)
	}

	got, err := kubeclient.GpuInventories(client).Get(ctx, "cluster", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("get (-want +got):\n%s", diff)
	}
	if !NodesOmitted(got) {
		t.Error("NodesOmitted = false for an object decoded without its list")
	}

	w, err := kubeclient.GpuInventories(client).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	ev := <-w.ResultChan()
	if diff := cmp.Diff(want, ev.Object); ev.Type != watch.Modified || diff != "" {
		t.Errorf("watch event %s (-want +got):\n%s", ev.Type, diff)
	}
	ev = <-w.ResultChan()
	if status, ok := ev.Object.(*metav1.Status); ev.Type != watch.Error || !ok || status.Code != http.StatusGone {
		t.Errorf("watch error event = %s %#v, want the 410 Status", ev.Type, ev.Object)
	}
}

// A malformed object is an error from the client, as without the shadow decoder.
func TestInformerClientReportsMalformedObjects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"apiVersion":"homelab.youngju.dev/v1","kind":"GpuInventory","metadata":{"name":"cluster"},"status":{"totalGpus":"many","nodes":[]}}`)
	}))
	defer srv.Close()
	client, err := NewInformerClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = kubeclient.GpuInventories(client).Get(context.Background(), "cluster", metav1.GetOptions{})
	if err == nil || !strings.Contains(err.Error(), "totalGpus") {
		t.Errorf("get of a malformed object: err = %v, want one naming totalGpus", err)
	}
}

// GpuNode records read through the same client are decoded whole.
func TestInformerClientDecodesRecordsAsUsual(t *testing.T) {
	record := homelabv1.GpuNode{TypeMeta: metav1.TypeMeta{APIVersion: homelabv1.SchemeGroupVersion.String(), Kind: "GpuNode"},
		ObjectMeta: metav1.ObjectMeta{Name: "dgx-1", ResourceVersion: "5"},
		Spec: homelabv1.GpuNodeSpec{Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8,
			Devices: []homelabv1.GpuDevice{{Name: "gpu-0", UUID: "GPU-1", MemoryMiB: 81559}}}}
	list := homelabv1.GpuNodeList{TypeMeta: metav1.TypeMeta{APIVersion: homelabv1.SchemeGroupVersion.String(), Kind: "GpuNodeList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "6"}, Items: []homelabv1.GpuNode{record}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/homelab.youngju.dev/v1/gpunodes" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, mustJSON(t, list))
	}))
	defer srv.Close()
	client, err := NewInformerClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	got, err := kubeclient.GpuNodes(client).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != 1 || got.ResourceVersion != "6" {
		t.Fatalf("list: %d items at %q, want 1 at 6", len(got.Items), got.ResourceVersion)
	}
	if diff := cmp.Diff(record.Spec, got.Items[0].Spec); diff != "" {
		t.Errorf("record (-served +decoded):\n%s", diff)
	}
}
