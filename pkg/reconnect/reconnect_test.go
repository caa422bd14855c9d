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

package reconnect

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serveOn answers "ok" on listener l until the test ends.
func serveOn(t *testing.T, l net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
}

func TestAReadWaitsForTheServerToComeBack(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // the server is away
	client := &http.Client{Transport: Transport(http.DefaultTransport, Policy{Short: 50 * time.Millisecond, Patience: time.Minute, Long: time.Second})}

	back := make(chan time.Time, 1)
	go func() {
		time.Sleep(300 * time.Millisecond) // the outage
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("listen again on %s: %v", addr, err)
			return
		}
		back <- time.Now()
		serveOn(t, l)
	}()
	resp, err := client.Get("http://" + addr + "/api/v1/nodes?watch=true")
	if err != nil {
		t.Fatalf("GET during an outage: %v; want it to wait for the server", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	returned := <-back
	if string(body) != "ok" {
		t.Errorf("body %q", body)
	}
	if late := time.Since(returned); late > time.Second {
		t.Errorf("the read came %s after the server was back; want within the short retry period", late)
	}
}

func TestWritesAndCancelledReadsAreNotRetried(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	client := &http.Client{Transport: Transport(http.DefaultTransport, DefaultPolicy)}
	if _, err := client.Post("http://"+addr+"/apis", "application/json", strings.NewReader("{}")); err == nil {
		t.Error("a POST to an absent server succeeded")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api", nil)
	start := time.Now()
	if _, err := client.Do(req); err == nil {
		t.Error("a GET to an absent server succeeded")
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Errorf("a cancelled GET returned after %s", waited)
	}
}
