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

package statuswriter

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
)

// request is what the fake API server saw.
type request struct {
	method, path, query, contentType, accept string
	body                                     map[string]any
}

// server answers every request with status code and answer, and records it.
func server(t *testing.T, code int, answer string) (*REST, *[]request) {
	t.Helper()
	var seen []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		req := request{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery,
			contentType: r.Header.Get("Content-Type"), accept: r.Header.Get("Accept")}
		_ = json.Unmarshal(data, &req.body)
		seen = append(seen, req)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	client, err := kubeclient.New(&rest.Config{Host: srv.URL}, homelabv1.SchemeGroupVersion, nil)
	if err != nil {
		t.Fatal(err)
	}
	return New(client), &seen
}

func status() homelabv1.GpuInventoryStatus {
	return homelabv1.GpuInventoryStatus{ObservedGeneration: 2, TotalGpus: 8, InventoryHash: "h",
		Nodes: []homelabv1.GpuNodeEntry{{Name: "dgx-1", Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8}}, ListedNodes: 1}
}

func TestApplyStatusIsAServerSideApplyOfTheStatus(t *testing.T) {
	w, seen := server(t, http.StatusOK, `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"cluster","resourceVersion":"42"}}`)
	rv, err := w.ApplyStatus(context.Background(), "cluster", status())
	if err != nil || rv != "42" {
		t.Fatalf("ApplyStatus = %q, %v; want 42, nil", rv, err)
	}
	if len(*seen) != 1 {
		t.Fatalf("%d requests, want 1", len(*seen))
	}
	req := (*seen)[0]
	if req.method != http.MethodPatch || req.path != "/apis/homelab.youngju.dev/v1/gpuinventories/cluster/status" ||
		req.contentType != "application/apply-patch+yaml" || req.accept != MetadataOnly {
		t.Errorf("request %s %s (%s, Accept %s); want a PATCH apply of the status subresource asking for metadata only",
			req.method, req.path, req.contentType, req.accept)
	}
	for _, p := range []string{"fieldManager=" + homelabv1.FieldManager, "force=true", "fieldValidation=Ignore"} {
		if !strings.Contains(req.query, p) {
			t.Errorf("query %q lacks %s", req.query, p)
		}
	}
	if strings.Contains(req.query, "dryRun") {
		t.Errorf("query %q asks for a dry run", req.query)
	}
	// The first version's HTTP 400: an apply body needs apiVersion and kind.
	if req.body["apiVersion"] != "homelab.youngju.dev/v1" || req.body["kind"] != "GpuInventory" {
		t.Errorf("body apiVersion/kind = %v/%v", req.body["apiVersion"], req.body["kind"])
	}
	var got homelabv1.GpuInventoryStatus
	data, _ := json.Marshal(req.body["status"])
	if err := json.Unmarshal(data, &got); err != nil || !equality.Semantic.DeepEqual(got, status()) {
		t.Errorf("body status = %s (%v); want %+v", data, err, status())
	}
	if _, has := req.body["spec"]; has {
		t.Error("the status apply also sends a spec")
	}
}

func TestApplyStatusReadsTheResourceVersionOfAnyAnswer(t *testing.T) {
	for _, tc := range []struct{ name, answer, want string }{
		{"metadata only", `{"kind":"PartialObjectMetadata","metadata":{"resourceVersion":"7"}}`, "7"},
		{"whole object, status first", `{"status":{"nodes":[{"name":"x"}]},"metadata":{"resourceVersion":"8"}}`, "8"},
		{"no metadata", `{"status":{}}`, ""},
		{"not an object", `[1]`, ""},
		{"truncated", `{"kind":"K","metadata":{"resourceVers`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, _ := server(t, http.StatusOK, tc.answer)
			rv, err := w.ApplyStatus(context.Background(), "cluster", status())
			if err != nil || rv != tc.want {
				t.Errorf("ApplyStatus = %q, %v; want %q and no error (the write succeeded)", rv, err, tc.want)
			}
		})
	}
}

func TestDryRunApplyIsNotPersisted(t *testing.T) {
	w, seen := server(t, http.StatusOK, `{"metadata":{"resourceVersion":"42"}}`)
	if _, err := w.DryRun().ApplyStatus(context.Background(), "cluster", status()); err != nil {
		t.Fatal(err)
	}
	if q := (*seen)[0].query; !strings.Contains(q, "dryRun=All") {
		t.Errorf("query %q lacks dryRun=All", q)
	}
}

func TestRefusedApplySaysWhy(t *testing.T) {
	for _, tc := range []struct{ name, message, want string }{
		{"older CRD", `.status.nodes[0].workloadConfig: field not declared in schema`, "older than this operator"},
		{"other", `admission webhook said no`, "admission webhook said no"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer, _ := json.Marshal(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonInternalError, Message: tc.message})
			w, _ := server(t, http.StatusInternalServerError, string(answer))
			_, err := w.ApplyStatus(context.Background(), "cluster", status())
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("err = %v; want one that says %q and keeps the server's reason", err, tc.want)
			}
		})
	}
}
