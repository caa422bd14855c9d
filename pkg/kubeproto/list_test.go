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

package kubeproto

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
)

// configMaps are n ConfigMaps with data of size bytes each, in namespaces a, b and c.
func configMaps(n, size int) []corev1.ConfigMap {
	var out []corev1.ConfigMap
	for i := range n {
		out = append(out, corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: string(rune('a' + i%3)), Name: fmt.Sprintf("cm-%04d", i), ResourceVersion: fmt.Sprint(100 + i)},
			Data:       map[string]string{"payload": strings.Repeat("x", size)},
		})
	}
	return out
}

// protobufList encodes items as the API server answers a protobuf list request.
func protobufList(t testing.TB, items []corev1.ConfigMap, cont string) []byte {
	t.Helper()
	ptrs := make([]*corev1.ConfigMap, len(items))
	for i := range items {
		ptrs[i] = &items[i]
	}
	return prototest.EncodeList(t, metav1.ListMeta{ResourceVersion: "42", Continue: cont}, ptrs...)
}

var testList = List{Resource: "configmaps", MaxItemBytes: 1 << 20}

// readAll reads a list with testList and returns the items decoded.
func readAll(data []byte) (metav1.ListMeta, []corev1.ConfigMap, error) {
	var items []corev1.ConfigMap
	meta, err := testList.Read(bytes.NewReader(data), func(raw []byte) error {
		var cm corev1.ConfigMap
		if err := cm.Unmarshal(raw); err != nil {
			return err
		}
		items = append(items, cm)
		return nil
	})
	return meta, items, err
}

// Read hands over each item's message in the list's order and returns the list's metadata.
func TestReadHandsOverEachItem(t *testing.T) {
	want := configMaps(50, 3000)
	meta, got, err := readAll(protobufList(t, want, "next-page"))
	if err != nil {
		t.Fatal(err)
	}
	if meta.Continue != "next-page" || meta.ResourceVersion != "42" {
		t.Errorf("list metadata %+v; want continue next-page and resourceVersion 42", meta)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("items (-encoded +read):\n%s", diff)
	}
	if !bytes.HasPrefix(protobufList(t, nil, ""), ProtobufMagic) {
		t.Errorf("the encoder does not write the API server's protobuf envelope")
	}
}

// A list many times larger than one item is read holding about one item at a time.
func TestReadHoldsOneItemAtATime(t *testing.T) {
	data := protobufList(t, configMaps(200, 50_000), "") // 10 MB
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	n := 0
	if _, err := testList.Read(bytes.NewReader(data), func([]byte) error { n++; return nil }); err != nil || n != 200 {
		t.Fatalf("read %d items, %v; want 200", n, err)
	}
	runtime.ReadMemStats(&after)
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 1<<20 {
		t.Errorf("reading a list of %d bytes allocated %d bytes; want about one item's (50 KB) and the reader's buffer", len(data), allocated)
	}
}

// A list with fields the generated decoders skip (unknown fields of every wire type, groups,
// the envelope's content type) is read as they read it.
func TestReadSkipsWhatTheGeneratedDecodersSkip(t *testing.T) {
	want := configMaps(3, 10)
	var unknown []byte
	unknown = protowire.AppendVarint(protowire.AppendTag(unknown, 9, protowire.VarintType), 1<<40)
	unknown = protowire.AppendFixed32(protowire.AppendTag(unknown, 10, protowire.Fixed32Type), 7)
	unknown = protowire.AppendFixed64(protowire.AppendTag(unknown, 11, protowire.Fixed64Type), 7)
	unknown = protowire.AppendBytes(protowire.AppendTag(unknown, 12, protowire.BytesType), []byte("skip"))
	unknown = protowire.AppendTag(unknown, 13, protowire.StartGroupType)
	unknown = protowire.AppendBytes(protowire.AppendTag(unknown, 1, protowire.BytesType), []byte("in a group"))
	unknown = protowire.AppendTag(unknown, 2, protowire.StartGroupType)
	unknown = protowire.AppendTag(unknown, 2, protowire.EndGroupType)
	unknown = protowire.AppendTag(unknown, 13, protowire.EndGroupType)

	list := unknown
	list = protowire.AppendBytes(protowire.AppendTag(list, ListMetadata, protowire.BytesType), mustMarshal(t, &metav1.ListMeta{Continue: "c"}))
	for i, cm := range want {
		list = protowire.AppendBytes(protowire.AppendTag(list, ListItems, protowire.BytesType), mustMarshal(t, &cm))
		if i == 1 {
			list = append(list, unknown...)
		}
	}
	data := append(bytes.Clone(ProtobufMagic), unknown...)
	data = protowire.AppendBytes(protowire.AppendTag(data, unknownRaw, protowire.BytesType), list)
	data = protowire.AppendBytes(protowire.AppendTag(data, 4, protowire.BytesType), []byte(ContentType)) // Unknown.contentType

	var generatedUnknown k8sruntime.Unknown
	var generatedList corev1.ConfigMapList
	if err := generatedUnknown.Unmarshal(data[len(ProtobufMagic):]); err != nil {
		t.Fatalf("the generated decoder refuses the envelope: %v", err)
	}
	if err := generatedList.Unmarshal(generatedUnknown.Raw); err != nil || len(generatedList.Items) != len(want) {
		t.Fatalf("the generated decoder reads %d items, %v", len(generatedList.Items), err)
	}
	meta, got, err := readAll(data)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Continue != "c" {
		t.Errorf("list metadata %+v; want continue c", meta)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("items (-encoded +read):\n%s", diff)
	}
}

func mustMarshal(t testing.TB, m interface{ Marshal() ([]byte, error) }) []byte {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// envelope wraps a list message as the API server does.
func envelope(list []byte) []byte {
	b := protowire.AppendTag(bytes.Clone(ProtobufMagic), unknownRaw, protowire.BytesType)
	return protowire.AppendBytes(b, list)
}

// What is not a complete protobuf list is an error, and a size that a broken or hostile
// endpoint claims is never allocated.
func TestReadRejectsWhatIsNotACompleteProtobufList(t *testing.T) {
	full := protobufList(t, configMaps(8, 100), "")
	claimedItem := func(size uint64) []byte {
		return envelope(protowire.AppendVarint(protowire.AppendTag(nil, ListItems, protowire.BytesType), size))
	}
	claimedList := func(size []byte) []byte {
		return append(protowire.AppendTag(bytes.Clone(ProtobufMagic), unknownRaw, protowire.BytesType), size...)
	}
	for name, data := range map[string][]byte{
		"JSON":                         []byte(`{"kind":"ConfigMapList","apiVersion":"v1","items":[]}`),
		"empty":                        nil,
		"half the magic":               ProtobufMagic[:2],
		"truncated in an item":         full[:len(full)-100],
		"truncated near the end":       full[:len(full)-40],
		"an item of 1 TiB":             claimedItem(1 << 40),
		"an item of 16 GiB":            claimedItem(1 << 34),
		"an item one byte too large":   claimedItem(uint64(testList.MaxItemBytes) + 1),
		"a list of 2^63+5 bytes":       claimedList(protowire.AppendVarint(nil, 1<<63+5)),
		"a list of 2^64 bytes":         claimedList([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}),
		"a list longer than the data":  claimedList([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}),
		"an eleven-byte varint":        claimedList([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}),
		"field number zero":            envelope([]byte{0x02, 0x00}),
		"an end group without start":   envelope([]byte{0x0c}),
		"an invalid wire type":         envelope([]byte{0x0e}),
		"a group without end":          envelope([]byte{0x0b, 0x08, 0x01}),
		"malformed list metadata":      envelope([]byte{0x0a, 0x02, 0x0a, 0x05}),
		"an item running past the end": envelope([]byte{0x12, 0x05, 0x0a}),
		"an envelope field past end":   append(bytes.Clone(ProtobufMagic), 0x22, 0x05, 0x0a),
	} {
		items := 0
		if _, err := testList.Read(bytes.NewReader(data), func([]byte) error { items++; return nil }); err == nil {
			t.Errorf("%s: no error (%d items)", name, items)
		}
	}
	if _, err := testList.Read(bytes.NewReader(claimedItem(1<<34)), func([]byte) error { return nil }); !errors.Is(err, ErrTooLarge) {
		t.Errorf("an item of 16 GiB: %v; want ErrTooLarge", err)
	}
	if _, err := testList.Read(bytes.NewReader(claimedItem(uint64(testList.MaxItemBytes))), func([]byte) error { return nil }); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("an item of the largest size with nothing behind: %v; want io.ErrUnexpectedEOF", err)
	}
	meta, err := testList.Read(bytes.NewReader(protobufList(t, nil, "more")), func([]byte) error {
		t.Error("an item in an empty list")
		return nil
	})
	if err != nil || meta.Continue != "more" || meta.ResourceVersion != "42" {
		t.Errorf("empty list: %+v, %v", meta, err)
	}
}

// An error of item stops the reading and is returned as it is.
func TestReadReturnsTheItemsError(t *testing.T) {
	stop := errors.New("enough")
	calls := 0
	_, err := testList.Read(bytes.NewReader(protobufList(t, configMaps(5, 10), "")), func([]byte) error {
		calls++
		if calls == 2 {
			return stop
		}
		return nil
	})
	if err != stop || calls != 2 {
		t.Errorf("Read = %v after %d items; want the item's error after 2", err, calls)
	}
}

// Decoded hands what decode returns to fn, skips nil, names the item that decode refuses and
// returns fn's error as it is.
func TestDecoded(t *testing.T) {
	decode := func(raw []byte) (*string, error) {
		switch s := string(raw); s {
		case "skip":
			return nil, nil
		case "bad":
			return nil, errors.New("unreadable")
		default:
			return &s, nil
		}
	}
	stop := errors.New("enough")
	var got []string
	item := Decoded("widget", decode, func(s *string) error {
		got = append(got, *s)
		if *s == "stop" {
			return stop
		}
		return nil
	})
	for _, raw := range []string{"a", "skip", "b"} {
		if err := item([]byte(raw)); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
	}
	if err := item([]byte("bad")); err == nil || err.Error() != "decode widget 4 of the list: unreadable" {
		t.Errorf("the fourth item unreadable: %v; want it named", err)
	}
	if err := item([]byte("stop")); err != stop {
		t.Errorf("fn's error came back as %v", err)
	}
	if diff := cmp.Diff([]string{"a", "b", "stop"}, got); diff != "" {
		t.Errorf("fn saw (-want +got):\n%s", diff)
	}
}

// DecodeList walks a list held whole as Read walks a stream.
func TestDecodeList(t *testing.T) {
	want := configMaps(7, 100)
	_, _, raw, err := Envelope(protobufList(t, want, "next"))
	if err != nil {
		t.Fatal(err)
	}
	var meta metav1.ListMeta
	var got []corev1.ConfigMap
	err = DecodeList(raw, &meta, func(item []byte) error {
		var cm corev1.ConfigMap
		err := cm.Unmarshal(item)
		got = append(got, cm)
		return err
	})
	if err != nil || meta.Continue != "next" || meta.ResourceVersion != "42" {
		t.Errorf("DecodeList: %+v, %v", meta, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("items (-encoded +decoded):\n%s", diff)
	}
	stop := errors.New("enough")
	if err := DecodeList(raw, &meta, func([]byte) error { return stop }); err != stop {
		t.Errorf("DecodeList with a failing item = %v; want the item's error", err)
	}
	if err := DecodeList(raw[:len(raw)-3], &meta, func([]byte) error { return nil }); err == nil {
		t.Error("DecodeList of a truncated list: no error")
	}
}

// newServer is a fake API server holding n ConfigMaps labelled team=ml, in namespaces a, b
// and c; it serves pods too, whose changes move the resourceVersion.
func newServer(t *testing.T, n int, opts prototest.Options) *prototest.Server {
	t.Helper()
	server := prototest.NewServer(t, opts, prototest.ConfigMaps, prototest.Pods)
	for _, cm := range configMaps(n, 10) {
		cm.Labels = map[string]string{"team": "ml"}
		server.Set(&cm)
	}
	return server
}

// coreClient is the core group's client of server, without client-side throttling.
func coreClient(t *testing.T, server *prototest.Server) rest.Interface {
	t.Helper()
	cfg := server.Config()
	cfg.QPS = -1
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client.CoreV1().RESTClient()
}

// requested is each request's path?query; it fails t for a request that does not ask for
// protobuf alone.
func requested(t *testing.T, server *prototest.Server) []string {
	t.Helper()
	var out []string
	for _, r := range server.Requests() {
		if r.Accept != ContentType {
			t.Errorf("%s accepts %q; want %s only", r, r.Accept, ContentType)
		}
		out = append(out, r.String())
	}
	return out
}

// Stream asks for every page of the list in protobuf, opts.Limit at a time with the
// continue tokens, and hands over every item in order, of all namespaces or one.
func TestStreamReadsEveryPage(t *testing.T) {
	for _, namespace := range []string{"", "b"} {
		t.Run("namespace "+namespace, func(t *testing.T) {
			server := newServer(t, 1234, prototest.Options{})
			client := coreClient(t, server)
			var want, got []string
			for _, cm := range prototest.Stored[corev1.ConfigMap](server, namespace) {
				want = append(want, cm.Name)
			}
			err := testList.Stream(context.Background(), client, namespace, metav1.ListOptions{Limit: 100, LabelSelector: "team=ml", Continue: "ignored"}, func(raw []byte) error {
				var cm corev1.ConfigMap
				if err := cm.Unmarshal(raw); err != nil {
					return err
				}
				got = append(got, cm.Name)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("streamed items (-listed +streamed):\n%s", diff)
			}
			path := "/api/v1/configmaps"
			if namespace != "" {
				path = "/api/v1/namespaces/" + namespace + "/configmaps"
			}
			var wantRequests []string
			for from := 0; from == 0 || from < len(want); from += 100 {
				cont := ""
				if from > 0 {
					cont = "continue=" + strconv.Itoa(from) + "&"
				}
				wantRequests = append(wantRequests, path+"?"+cont+"labelSelector=team%3Dml&limit=100")
			}
			if diff := cmp.Diff(wantRequests, requested(t, server)); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

// StreamVersion asks for the first page at the resourceVersion given, for the others with
// the continue token alone (the API server refuses both), and returns the first page's
// resourceVersion (a pod changes after each page, so that every page's differs).
func TestStreamVersion(t *testing.T) {
	var server *prototest.Server
	pods := 0
	changeAfterEachPage := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r)
			pods++
			server.Apply(watch.Added, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: fmt.Sprint("pod-", pods)}})
		})
	}
	server = newServer(t, 250, prototest.Options{Wrap: changeAfterEachPage})
	client := coreClient(t, server)
	first := server.ResourceVersion()
	n := 0
	opts := metav1.ListOptions{Limit: 100, ResourceVersion: "0", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}
	rv, err := testList.StreamVersion(context.Background(), client, "", opts, func([]byte) error { n++; return nil })
	if err != nil || rv != first || n != 250 {
		t.Errorf("StreamVersion = %q, %v after %d items; want the first page's %s after 250 items", rv, err, n, first)
	}
	if last := server.ResourceVersion(); last == first {
		t.Errorf("the pages' resourceVersion never changed from %s", first)
	}
	want := []string{
		"/api/v1/configmaps?limit=100&resourceVersion=0&resourceVersionMatch=NotOlderThan",
		"/api/v1/configmaps?continue=100&limit=100",
		"/api/v1/configmaps?continue=200&limit=100",
	}
	if diff := cmp.Diff(want, requested(t, server)); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// An error of item ends the listing at once and is returned as it is; the server's errors and
// unreadable pages are errors that name the resource.
func TestStreamErrors(t *testing.T) {
	server := newServer(t, 300, prototest.Options{})
	client := coreClient(t, server)
	stop := errors.New("enough")
	calls := 0
	err := testList.Stream(context.Background(), client, "", metav1.ListOptions{Limit: 100}, func([]byte) error {
		calls++
		if calls == 150 {
			return stop
		}
		return nil
	})
	if err != stop || calls != 150 || len(server.Requests()) != 2 {
		t.Errorf("Stream = %v after %d items and %d requests; want the item's error after 150 items, 2 requests", err, calls, len(server.Requests()))
	}

	missing := List{Resource: "widgets", MaxItemBytes: 1 << 20}
	err = missing.Stream(context.Background(), client, "", metav1.ListOptions{Limit: 100}, func([]byte) error { return nil })
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "widgets") {
		t.Errorf("Stream of a resource the server does not serve = %v; want NotFound naming widgets", err)
	}

	truncated := coreClient(t, newServer(t, 300, prototest.Options{Wrap: truncate}))
	err = testList.Stream(context.Background(), truncated, "", metav1.ListOptions{Limit: 100}, func([]byte) error { return nil })
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "configmaps") {
		t.Errorf("Stream of a truncated page = %v; want io.ErrUnexpectedEOF naming configmaps", err)
	}
}

// truncate cuts the last 5 bytes of every answer.
func truncate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer := httptest.NewRecorder()
		next.ServeHTTP(answer, r)
		maps.Copy(w.Header(), answer.Header())
		w.WriteHeader(answer.Code)
		_, _ = w.Write(answer.Body.Bytes()[:max(0, answer.Body.Len()-5)])
	})
}

// Whatever bytes arrive, Read returns or fails and never panics; and whenever the generated
// decoders accept the bytes as one list, Read gives the same metadata and items.
func FuzzReadList(f *testing.F) {
	f.Add(protobufList(f, configMaps(4, 20), "next"))
	f.Add([]byte("k8s\x00\x12\xff\xff\xff\xff\xff\xff\xff\xff\x7f"))
	f.Add(envelope([]byte{0x6b, 0x08, 0x01, 0x6c, 0x12, 0x00})) // a group (field 13) and an empty item
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		meta, got, err := readAll(data)
		if !bytes.HasPrefix(data, ProtobufMagic) {
			return
		}
		var unknown k8sruntime.Unknown
		var list corev1.ConfigMapList
		if !generated(func() error { return unknown.Unmarshal(data[len(ProtobufMagic):]) }) ||
			rawFields(data[len(ProtobufMagic):]) != 1 ||
			!generated(func() error { return list.Unmarshal(unknown.Raw) }) {
			return
		}
		if err != nil {
			t.Fatalf("Read fails (%v) where the generated decoders do not", err)
		}
		if diff := cmp.Diff(list.ListMeta, meta); diff != "" {
			t.Errorf("list metadata (-generated +Read):\n%s", diff)
		}
		if diff := cmp.Diff(list.Items, got); diff != "" {
			t.Errorf("items (-generated +Read):\n%s", diff)
		}
	})
}

// generated runs a generated decoder: false when it fails or panics (it slices with
// unchecked lengths).
func generated(unmarshal func() error) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return unmarshal() == nil
}

// rawFields counts the raw fields of a runtime.Unknown (Read reads each as a list, the
// generated decoder keeps the last).
func rawFields(b []byte) int {
	n := 0
	for m := NewMessage(b); m.Next(); {
		if m.Tag() == Bytes(unknownRaw) {
			n++
		}
	}
	return n
}
