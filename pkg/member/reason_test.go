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
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
)

// readInventory reads the member's inventory as the hub does, with config.
func readInventory(t *testing.T, config *rest.Config, timeout time.Duration) error {
	t.Helper()
	client, err := kubeclient.New(Capped(config, 0), homelabv1.SchemeGroupVersion, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err = kubeclient.GpuInventories(client).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=cluster"})
	return err
}

// status answers every request with an API error.
func status(err *apierrors.StatusError) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		st := err.Status()
		st.Kind, st.APIVersion = "Status", "v1"
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(st.Code))
		_ = json.NewEncoder(w).Encode(&st)
	}
}

// selfSignedCA is a CA certificate no test server's certificate is signed by.
func selfSignedCA(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// Each way a member read fails, through client-go as the hub reads: the reason its row shows.
func TestExplainReadFailures(t *testing.T) {
	gr := schema.GroupResource{Group: homelabv1.GroupName, Resource: "gpuinventories"}
	otherCA := selfSignedCA(t)
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedURL := "http://" + closed.Addr().String()
	_ = closed.Close()
	hang := make(chan struct{})
	defer close(hang)

	cases := []struct {
		name    string
		handler http.Handler
		tls     bool
		config  func(url string) *rest.Config
		reason  string
		words   []string
	}{
		{"401", status(apierrors.NewUnauthorized("token expired")), false, nil, homelabv1.ReasonUnauthorized, []string{"refused the hub's credentials"}},
		{"403", status(apierrors.NewForbidden(gr, "", nil)), false, nil, homelabv1.ReasonForbidden, []string{"grant get, list and watch on gpuinventories"}},
		{"404: no operator", status(apierrors.NewNotFound(gr, "")), false, nil, homelabv1.ReasonInventoryNotFound, []string{"is the gpu-inventory-operator installed"}},
		{"a certificate from another CA", http.NotFoundHandler(), true,
			func(url string) *rest.Config {
				return &rest.Config{Host: url, TLSClientConfig: rest.TLSClientConfig{CAData: otherCA}}
			},
			ReasonTLSUnverified, []string{"certificate-authority-data"}},
		{"a credential plugin that fails", http.NotFoundHandler(), false,
			func(url string) *rest.Config {
				return &rest.Config{Host: url, ExecProvider: &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1",
					Command: "/nonexistent/secretreader-plugin", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
			}, ReasonCredentialsFailed, []string{"/nonexistent/secretreader-plugin"}},
		{"no answer in time", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-hang:
			}
		}), false, nil, ReasonAnswerTooSlow, []string{"did not answer in time"}},
		{"nobody listening", nil, false, func(string) *rest.Config { return &rest.Config{Host: closedURL} },
			homelabv1.ReasonConnectionFailed, []string{"connection refused"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := ""
			if tc.handler != nil {
				srv := httptest.NewUnstartedServer(tc.handler)
				if tc.tls {
					srv.StartTLS()
				} else {
					srv.Start()
				}
				defer srv.Close()
				url = srv.URL
			}
			config := &rest.Config{Host: url}
			if tc.config != nil {
				config = tc.config(url)
			}
			timeout := 5 * time.Second
			if tc.reason == ReasonAnswerTooSlow {
				timeout = 200 * time.Millisecond
			}
			reason, msg := Explain(readInventory(t, config, timeout))
			if reason != tc.reason {
				t.Errorf("reason = %s (%s), want %s", reason, msg, tc.reason)
			}
			for _, w := range tc.words {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not say %q", msg, w)
				}
			}
		})
	}
}

func TestExplainBoundsTheMessage(t *testing.T) {
	long := fail(homelabv1.ReasonMalformedKubeconfig, nil, "%s", strings.Repeat("é", 2000))
	reason, msg := Explain(long)
	if reason != homelabv1.ReasonMalformedKubeconfig || len(msg) > MaxMessage || !utf8.ValidString(msg) || !strings.HasSuffix(msg, "…") {
		t.Errorf("Explain = %s, %d bytes, valid UTF-8 %v", reason, len(msg), utf8.ValidString(msg))
	}
	if reason, msg := Explain(nil); reason != "" || msg != "" {
		t.Errorf("Explain(nil) = %q, %q", reason, msg)
	}
}

// A watch's parameters change at every try: the row's message must not, or a member that
// keeps failing the same way would cost a GpuFleet write at every retry.
func TestExplainLeavesOutTheQuery(t *testing.T) {
	watchErr := func(rv, timeout string) error {
		return fmt.Errorf(`Get "https://w1.example.com:6443/apis/homelab.youngju.dev/v1/gpuinventories?allowWatchBookmarks=true&fieldSelector=metadata.name%%3Dcluster&resourceVersion=%s&timeoutSeconds=%s&watch=true": dial tcp 10.0.0.1:6443: connect: connection refused`, rv, timeout)
	}
	_, first := Explain(watchErr("12", "431"))
	_, second := Explain(watchErr("97", "502"))
	if first != second {
		t.Errorf("two tries of one failure explained differently:\n%s\n%s", first, second)
	}
	if want := `Get "https://w1.example.com:6443/apis/homelab.youngju.dev/v1/gpuinventories": dial tcp`; !strings.Contains(first, want) {
		t.Errorf("message %q does not name the URL without its query", first)
	}
}

// A watch turns the cap's error into an error event: a Status whose message is the error's.
func TestExplainFindsTheCapInAWatchsErrorEvent(t *testing.T) {
	capped := &TooLargeError{Limit: 1 << 20, URL: "https://w1.example.com/apis/homelab.youngju.dev/v1/gpuinventories?watch=true"}
	event := apierrors.FromObject(&metav1.Status{Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonInternalError,
		Message: "unable to decode an event from the watch stream: " + capped.Error()})
	if reason, msg := Explain(event); reason != homelabv1.ReasonAnswerTooLarge || !strings.Contains(msg, "--member-max-object-bytes") {
		t.Errorf("Explain = %s, %q", reason, msg)
	}
}
