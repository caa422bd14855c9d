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

package claimcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
)

// manyClaims are n claims over four namespaces: allocated GPU claims, other drivers' claims
// and GPU claims waiting, in turn.
func manyClaims(n int) []*resourcev1.ResourceClaim {
	var out []*resourcev1.ResourceClaim
	for i := range n {
		c := claim(fmt.Sprintf("team-%d", i%4), fmt.Sprintf("claim-%04d", i))
		switch i % 3 {
		case 0:
			out = append(out, allocated(requesting(c, exact("gpu", "gpu.nvidia.com", "", 1)),
				[][3]string{{allocation.DRADriver, fmt.Sprintf("node-%d", i%50), "gpu-0"}}, fmt.Sprintf("pod-%d", i)))
		case 1:
			out = append(out, allocated(requesting(c, exact("nic", "nic.example.com", "", 1)),
				[][3]string{{"nic.example.com", "node-0", "eth0"}}, fmt.Sprintf("pod-%d", i)))
		default:
			out = append(out, requesting(c, exact("gpu", "gpu.nvidia.com", "", 2, productExpr)))
		}
	}
	return out
}

func streamClient(t *testing.T, server *prototest.Server) *kubernetes.Clientset {
	t.Helper()
	client, err := kubernetes.NewForConfig(server.Config())
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// StreamClaims reads the claims in pages of StreamPageSize and hands over exactly what
// FromClaim keeps of each, for all namespaces or one.
func TestStreamClaimsOverPages(t *testing.T) {
	for _, namespace := range []string{"", "team-1"} {
		t.Run("namespace "+namespace, func(t *testing.T) {
			server := newServer(t, prototest.Options{}, manyClaims(2*StreamPageSize+203)...)
			client := streamClient(t, server)
			var got []*allocation.Claim
			err := StreamClaims(context.Background(), client.ResourceV1().RESTClient(), namespace, func(c *allocation.Claim) error {
				got = append(got, c)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			stored := prototest.Stored[resourcev1.ResourceClaim](server, namespace)
			var want []*allocation.Claim
			for _, c := range stored {
				if kept := allocation.FromClaim(c); kept != nil {
					want = append(want, kept)
				}
			}
			if len(want) < 100 {
				t.Fatalf("only %d claims kept: the fixture is wrong", len(want))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("streamed claims (-FromClaim +StreamClaims):\n%s", diff)
			}
			pages := server.Requests()
			wantPages := (len(stored) + StreamPageSize - 1) / StreamPageSize
			if len(pages) != wantPages {
				t.Fatalf("%d requests for %d claims; want %d pages", len(pages), len(stored), wantPages)
			}
			for i, p := range pages {
				wantContinue := ""
				if i > 0 {
					wantContinue = fmt.Sprint(i * StreamPageSize)
				}
				wantPath := "/apis/resource.k8s.io/v1/resourceclaims"
				if namespace != "" {
					wantPath = "/apis/resource.k8s.io/v1/namespaces/" + namespace + "/resourceclaims"
				}
				if q := p.Query(); p.Path != wantPath || q.Get("limit") != fmt.Sprint(StreamPageSize) || q.Get("continue") != wantContinue {
					t.Errorf("page %d: %s; want %s with limit %d and continue %q", i, p, wantPath, StreamPageSize, wantContinue)
				}
			}
		})
	}
}

// An error of fn ends the stream and is returned as it is; the API server's errors are
// returned so that the caller can tell a server without the API.
func TestStreamClaimsErrors(t *testing.T) {
	server := newServer(t, prototest.Options{}, manyClaims(30)...)
	client := streamClient(t, server)
	stop := errors.New("enough")
	calls := 0
	err := StreamClaims(context.Background(), client.ResourceV1().RESTClient(), "", func(*allocation.Claim) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	if err != stop || calls != 3 {
		t.Errorf("StreamClaims = %v after %d calls; want the function's error after 3", err, calls)
	}

	nothing := newServer(t, prototest.Options{})
	core := streamClient(t, nothing).CoreV1().RESTClient() // a path the fake server does not serve
	err = StreamClaims(context.Background(), core, "", func(*allocation.Claim) error { return nil })
	if !apierrors.IsNotFound(err) {
		t.Errorf("StreamClaims on a server without the API = %v; want NotFound", err)
	}
}

func protobufClaimList(t testing.TB, claims []*resourcev1.ResourceClaim, cont string) []byte {
	t.Helper()
	return prototest.EncodeList(t, metav1.ListMeta{ResourceVersion: "42", Continue: cont}, claims...)
}

// A claim's message may be as large as MaxClaimBytes: a size claimed beyond it is refused
// before anything is read (kubeproto's tests cover the other malformed lists).
func TestClaimStreamRefusesClaimsBeyondMaxClaimBytes(t *testing.T) {
	claimed := func(size uint64) []byte {
		item := protowire.AppendVarint(protowire.AppendTag(nil, kubeproto.ListItems, protowire.BytesType), size)
		b := protowire.AppendTag(slices.Clone(kubeproto.ProtobufMagic), 2, protowire.BytesType) // runtime.Unknown's raw
		return protowire.AppendBytes(b, item)
	}
	ignore := func([]byte) error { return nil }
	if _, err := claimList.Read(bytes.NewReader(claimed(MaxClaimBytes+1)), ignore); !errors.Is(err, kubeproto.ErrTooLarge) {
		t.Errorf("a claim of MaxClaimBytes+1: %v; want kubeproto.ErrTooLarge", err)
	}
	if _, err := claimList.Read(bytes.NewReader(claimed(MaxClaimBytes)), ignore); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a claim of MaxClaimBytes with nothing behind: %v; want io.ErrUnexpectedEOF", err)
	}
}

func FuzzDecodeClaimStream(f *testing.F) {
	f.Add(protobufClaimList(f, manyClaims(4), "next"))
	f.Add([]byte("k8s\x00\x12\xff\xff\xff\xff\xff\xff\xff\xff\x7f"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = claimList.Read(bytes.NewReader(data), func(raw []byte) error {
			_, err := DecodeClaim(raw)
			return err
		})
	})
}

// BenchmarkDecodeClaimStream reads a page of 500 claims, as StreamClaims reads each page.
func BenchmarkDecodeClaimStream(b *testing.B) {
	data := protobufClaimList(b, manyClaims(500), "next")
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := claimList.Read(bytes.NewReader(data), func(raw []byte) error { _, err := DecodeClaim(raw); return err }); err != nil {
			b.Fatal(err)
		}
	}
}
