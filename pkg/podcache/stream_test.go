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

package podcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
)

// coreClient is the core group's REST client of server, asking for protobuf as `kubectl
// gpuinv` does.
func coreClient(t *testing.T, server *prototest.Server) rest.Interface {
	t.Helper()
	cfg := server.Config()
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	client, err := corev1client.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client.RESTClient()
}

// fleetPods is n pods in three namespaces, every fourth one asking for GPUs, some of those
// pending and some finished.
func fleetPods(n int) []*corev1.Pod {
	var pods []*corev1.Pod
	for i := range n {
		namespace := []string{"ml", "web", "batch"}[i%3]
		name := fmt.Sprintf("pod-%04d", i)
		var p *corev1.Pod
		switch {
		case i%4 != 0:
			p = realisticPod(namespace, name)
		case i%12 == 4:
			p = pending(namespace, name, "2")
		default:
			p = gpuPod(namespace, name, gpus("1"))
			if i%20 == 0 {
				p.Status.Phase = corev1.PodSucceeded
			}
		}
		pods = append(pods, p)
	}
	return pods
}

// StreamPods reads every page of the pod list, PageSize pods a page, and hands over exactly
// what FromPod keeps of each GPU pod (finished ones too), in the list's order; with a
// namespace it lists that namespace only.
func TestStreamPodsReadsEveryPage(t *testing.T) {
	for _, namespace := range []string{"", "ml"} {
		t.Run("namespace "+namespace, func(t *testing.T) {
			server := newServer(t, prototest.Options{}, fleetPods(2*PageSize+234)...)
			client := coreClient(t, server)
			stored := prototest.Stored[corev1.Pod](server, namespace)
			var want, got []*allocation.Pod
			for _, p := range stored {
				if a := allocation.FromPod(p); a != nil {
					want = append(want, a)
				}
			}
			err := StreamPods(context.Background(), client, namespace, func(p *allocation.Pod) error {
				got = append(got, p)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("streamed pods differ from FromPod (-FromPod +StreamPods):\n%s", diff)
			}
			pods := len(stored)
			requests := podLists(server)
			if wantPages := (pods + PageSize - 1) / PageSize; len(requests) != wantPages || (namespace == "" && wantPages < 3) {
				t.Fatalf("%d list requests for %d pods; want %d pages", len(requests), pods, wantPages)
			}
			for i, r := range requests {
				q := r.Query()
				wantPath := "/api/v1/pods"
				if namespace != "" {
					wantPath = "/api/v1/namespaces/" + namespace + "/pods"
				}
				wantContinue := ""
				if i > 0 {
					wantContinue = fmt.Sprint(i * PageSize)
				}
				if r.Path != wantPath || q.Get("limit") != fmt.Sprint(PageSize) || q.Get("continue") != wantContinue {
					t.Errorf("request %d: %s; want %s with limit %d and continue %q", i, r, wantPath, PageSize, wantContinue)
				}
			}
		})
	}
}

// An error from fn stops the listing: no further page is asked for.
func TestStreamPodsStopsOnTheCallersError(t *testing.T) {
	server := newServer(t, prototest.Options{}, fleetPods(2*PageSize+234)...)
	stop := errors.New("enough")
	seen := 0
	err := StreamPods(context.Background(), coreClient(t, server), "", func(*allocation.Pod) error {
		seen++
		return stop
	})
	if !errors.Is(err, stop) || seen != 1 {
		t.Errorf("StreamPods = %v after %d pods; want the caller's error after one", err, seen)
	}
	if n := len(podLists(server)); n != 1 {
		t.Errorf("%d list requests; want 1", n)
	}
}

// protobufPodList encodes pods as the API server answers a protobuf list request.
func protobufPodList(t testing.TB, pods []*corev1.Pod, cont string) []byte {
	t.Helper()
	return prototest.EncodeList(t, metav1.ListMeta{ResourceVersion: "42", Continue: cont}, pods...)
}

// A Pod's message may be as large as MaxPodBytes: a size claimed beyond it is refused before
// anything is read (kubeproto's tests cover the other malformed lists).
func TestPodStreamRefusesPodsBeyondMaxPodBytes(t *testing.T) {
	claimed := func(size uint64) []byte {
		item := protowire.AppendVarint(protowire.AppendTag(nil, kubeproto.ListItems, protowire.BytesType), size)
		b := protowire.AppendTag([]byte("k8s\x00"), 2, protowire.BytesType) // runtime.Unknown's raw
		return protowire.AppendBytes(b, item)
	}
	ignore := func([]byte) error { return nil }
	if _, err := podList.Read(bytes.NewReader(claimed(MaxPodBytes+1)), ignore); !errors.Is(err, kubeproto.ErrTooLarge) {
		t.Errorf("a pod of MaxPodBytes+1: %v; want kubeproto.ErrTooLarge", err)
	}
	if _, err := podList.Read(bytes.NewReader(claimed(MaxPodBytes)), ignore); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a pod of MaxPodBytes with nothing behind: %v; want io.ErrUnexpectedEOF", err)
	}
}

// Whatever bytes arrive, the list reader and the pod client's decoder return a result or an
// error; they never panic.
func FuzzPodLists(f *testing.F) {
	f.Add(protobufPodList(f, fleetPods(6), "next"))
	f.Add([]byte("k8s\x00\x12\xff\xff\xff\xff\xff\xff\xff\xff\x7f"))
	for _, tc := range podTable()[:4] {
		f.Add(prototest.Encode(f, tc.pod))
	}
	proto := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	decoder := podCodec.Serializer(scheme.Codecs.WithoutConversion()).DecoderToVersion(proto, corev1.SchemeGroupVersion)
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = podList.Read(bytes.NewReader(data), func(raw []byte) error {
			_, err := DecodePod(raw)
			return err
		})
		if !mayParseForever.Match(data) { // other kinds pass to the generated decoders
			_, _ = runtime.Decode(decoder, data)
		}
	})
}

// BenchmarkDecodePodStream reads a page of 500 pods, a quarter of them GPU pods, as StreamPods
// reads each page.
func BenchmarkDecodePodStream(b *testing.B) {
	data := protobufPodList(b, fleetPods(500), "next")
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := podList.Read(bytes.NewReader(data), func(raw []byte) error { _, err := DecodePod(raw); return err }); err != nil {
			b.Fatal(err)
		}
	}
}
