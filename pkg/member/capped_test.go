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

package member

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
)

const mib = 1 << 20

// inventoryJSON is a GpuInventory whose note is note.
func inventoryJSON(t *testing.T, rv, note string) []byte {
	t.Helper()
	data, err := json.Marshal(&homelabv1.GpuInventory{TypeMeta: metav1.TypeMeta{APIVersion: "homelab.youngju.dev/v1", Kind: "GpuInventory"},
		ObjectMeta: metav1.ObjectMeta{Name: "cluster", ResourceVersion: rv}, Spec: homelabv1.GpuInventorySpec{Note: note}})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// inventories is a GpuInventory client of a member at url, read through a cap of limit bytes.
func inventories(t *testing.T, url string, limit int64) interface {
	List(context.Context, metav1.ListOptions) (*homelabv1.GpuInventoryList, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
} {
	t.Helper()
	client, err := kubeclient.New(Capped(&rest.Config{Host: url}, limit), homelabv1.SchemeGroupVersion, nil)
	if err != nil {
		t.Fatal(err)
	}
	return kubeclient.GpuInventories(client)
}

func wantTooLarge(t *testing.T, err error) {
	t.Helper()
	var tooLarge *TooLargeError
	if !errors.As(err, &tooLarge) {
		t.Fatalf("error = %v, want a TooLargeError", err)
	}
	if reason, msg := Explain(err); reason != homelabv1.ReasonAnswerTooLarge || !strings.Contains(msg, "--member-max-object-bytes") {
		t.Errorf("Explain = %s, %q", reason, msg)
	}
}

// A member that answers with a 100 MiB inventory: the hub reads about the limit of it and
// hangs up; the member cannot push the rest.
func TestCappedRefusesAHundredMebibyteInventory(t *testing.T) {
	written := make(chan int64, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		n, _ := fmt.Fprint(w, `{"apiVersion":"homelab.youngju.dev/v1","kind":"GpuInventoryList","metadata":{},"items":[{"metadata":{"name":"cluster"},"spec":{"note":"`)
		total := int64(n)
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for total < 100*mib {
			n, err := w.Write(chunk)
			total += int64(n)
			if err != nil {
				break
			}
		}
		written <- total
	}))
	defer srv.Close()

	_, err := inventories(t, srv.URL, mib).List(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=cluster"})
	wantTooLarge(t, err)
	srv.CloseClientConnections()
	if n := <-written; n >= 100*mib {
		t.Errorf("the member wrote all of its %d bytes: the hub kept reading", n)
	}
}

func TestCappedReadsAnswersUnderTheLimit(t *testing.T) {
	list := fmt.Appendf(nil, `{"apiVersion":"homelab.youngju.dev/v1","kind":"GpuInventoryList","metadata":{"resourceVersion":"7"},"items":[%s]}`,
		inventoryJSON(t, "7", strings.Repeat("n", 600<<10)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(list)
	}))
	defer srv.Close()
	got, err := inventories(t, srv.URL, mib).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(got.Items) != 1 || len(got.Items[0].Spec.Note) != 600<<10 {
		t.Fatalf("List = %v, %v", got, err)
	}
}

// A watch is one JSON value per event: it stays open however much it carries in all, as
// long as no event is over the limit. Braces and quotes inside strings are text.
func TestCappedWatchCountsEachEvent(t *testing.T) {
	tricky := `}}]] "{{ \" [[ \\`
	event := func(rv string, size int) []byte {
		data, _ := json.Marshal(map[string]any{"type": "MODIFIED", "object": json.RawMessage(inventoryJSON(t, rv, tricky+strings.Repeat("n", size)))})
		return append(data, '\n')
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for i := range 6 {
			_, _ = w.Write(event(fmt.Sprint(i+1), 700<<10))
			w.(http.Flusher).Flush()
		}
		_, _ = w.Write(event("7", 2*mib))
	}))
	defer srv.Close()

	w, err := inventories(t, srv.URL, mib).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var seen []string
	for e := range w.ResultChan() {
		if e.Type == watch.Error {
			if status, ok := e.Object.(*metav1.Status); !ok || !strings.Contains(status.Message, "larger than 1048576 bytes") {
				t.Errorf("error event %#v does not say the event was too large", e.Object)
			}
			break
		}
		inv := e.Object.(*homelabv1.GpuInventory)
		if !strings.HasPrefix(inv.Spec.Note, tricky) {
			t.Errorf("event %s: note starts %q", inv.ResourceVersion, inv.Spec.Note[:20])
		}
		seen = append(seen, inv.ResourceVersion)
	}
	if strings.Join(seen, ",") != "1,2,3,4,5,6" {
		t.Errorf("events seen: %v, want the six under the limit (4.1 MiB in all through a 1 MiB cap)", seen)
	}
}

// The ways around a count of JSON values: whitespace inside one, an answer that is not
// JSON, an answer that is small compressed.
func TestCappedCannotBeDodged(t *testing.T) {
	padded := fmt.Appendf(nil, `{"apiVersion":"homelab.youngju.dev/v1","kind":"GpuInventoryList","metadata":{},%s"items":[]}`, strings.Repeat(" \n", mib))
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = fmt.Fprintf(zw, `{"apiVersion":"homelab.youngju.dev/v1","kind":"GpuInventoryList","metadata":{},"items":[%s]}`, inventoryJSON(t, "1", strings.Repeat("0", 50*mib)))
	_ = zw.Close()
	cases := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"whitespace inside a value", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(padded)
		}},
		{"not JSON", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(bytes.Repeat([]byte("}\n"), mib))
		}},
		{"gzip", func(w http.ResponseWriter, r *http.Request) {
			if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
				t.Errorf("the client did not offer gzip: the case proves nothing")
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(zipped.Bytes())
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			_, err := inventories(t, srv.URL, mib).List(context.Background(), metav1.ListOptions{})
			wantTooLarge(t, err)
		})
	}
}
