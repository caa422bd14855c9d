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

package kubeproto_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
)

// keys is a compact ConfigMap: its metadata and the names of its data keys.
type keys struct {
	kubeproto.Compact
	Keys []string
}

func (k *keys) DeepCopyObject() runtime.Object {
	c := *k
	c.Keys = append([]string(nil), k.Keys...)
	return &c
}

type keysList struct {
	metav1.ListMeta
	Items []keys
}

func (l *keysList) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (l *keysList) DeepCopyObject() runtime.Object {
	c := *l
	c.Items = append([]keys(nil), l.Items...)
	return &c
}

const configMapData = 2 // ConfigMap.data

func decodeKeys(raw []byte) (*keys, error) {
	out := &keys{}
	var meta kubeproto.ObjectMeta
	m := kubeproto.NewMessage(raw)
	for m.Next() {
		switch m.Tag() {
		case kubeproto.Bytes(1):
			if err := kubeproto.ReadObjectMeta(m.Value(), nil, &meta); err != nil {
				return nil, err
			}
			out.Compact = kubeproto.CompactOf(&meta)
		case kubeproto.Bytes(configMapData):
			key, _, err := kubeproto.MapEntry(m.Value())
			if err != nil {
				return nil, err
			}
			out.Keys = append(out.Keys, string(key))
		}
	}
	return out, m.Err()
}

func keysOf(cm *corev1.ConfigMap) keys {
	k := keys{Compact: kubeproto.CompactOfMeta(&cm.ObjectMeta)}
	for key := range cm.Data {
		k.Keys = append(k.Keys, key)
	}
	return k
}

var configMapCodec = kubeproto.Codec[keys, keysList]{
	GroupVersion: corev1.SchemeGroupVersion, Kind: "ConfigMap", ListKind: "ConfigMapList",
	Object: decodeKeys,
	List: func(raw []byte) (*keysList, error) {
		list := &keysList{}
		err := kubeproto.DecodeList(raw, &list.ListMeta, func(item []byte) error {
			k, err := decodeKeys(item)
			if err == nil {
				list.Items = append(list.Items, *k)
			}
			return err
		})
		return list, err
	},
	Reduce: func(obj runtime.Object) runtime.Object {
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			k := keysOf(o)
			return &k
		case *corev1.ConfigMapList:
			list := &keysList{ListMeta: o.ListMeta}
			for i := range o.Items {
				list.Items = append(list.Items, keysOf(&o.Items[i]))
			}
			return list
		}
		return obj
	},
}

// A codec's client decodes its resource into the codec's types, with or without a target,
// from protobuf and from JSON alike; into any other type the wrapped serializer decodes as
// it would without the codec. Every request carries a User-Agent.
func TestCodecClient(t *testing.T) {
	for _, json := range []bool{false, true} {
		var mu sync.Mutex
		var agents []string
		srv := prototest.NewServer(t, prototest.Options{JSON: json, Wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				agents = append(agents, r.UserAgent())
				mu.Unlock()
				h.ServeHTTP(w, r)
			})
		}}, prototest.ConfigMaps)
		srv.Set(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}, Data: map[string]string{"k": "v"}})
		config := srv.Config()
		config.UserAgent = ""
		client, err := kubeproto.NewClient(config, configMapCodec)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		get := func() rest.Result { return client.Get().Namespace("ns").Resource("configmaps").Do(ctx) }
		want := keys{Compact: kubeproto.Compact{Namespace: "ns", Name: "a"}, Keys: []string{"k"}}
		ignoreVersion := cmp.Transformer("noVersion", func(c kubeproto.Compact) kubeproto.Compact { c.ResourceVersion = ""; return c })

		obj, err := get().Get()
		if list, ok := obj.(*keysList); err != nil || !ok || len(list.Items) != 1 {
			t.Fatalf("json=%v: Get = %T %v; want a keysList of one", json, obj, err)
		} else if diff := cmp.Diff(want, list.Items[0], ignoreVersion); diff != "" {
			t.Errorf("json=%v: Get (-want +got):\n%s", json, diff)
		}
		var into keysList
		if err := get().Into(&into); err != nil || len(into.Items) != 1 || into.Items[0].Name != "a" {
			t.Errorf("json=%v: Into(keysList) = %+v, %v", json, into, err)
		}
		var full corev1.ConfigMapList
		if err := get().Into(&full); err != nil || len(full.Items) != 1 || full.Items[0].Data["k"] != "v" {
			t.Errorf("json=%v: Into(ConfigMapList) = %+v, %v; want the full list", json, full, err)
		}
		var wrong keys
		if err := get().Into(&wrong); err == nil || !strings.Contains(err.Error(), "cannot decode") {
			t.Errorf("json=%v: a list into one object: %v; want an error", json, err)
		}
		mu.Lock()
		for _, agent := range agents {
			if agent == "" || strings.HasPrefix(agent, "Go-http-client") {
				t.Errorf("json=%v: a request with User-Agent %q", json, agent)
			}
		}
		mu.Unlock()
	}
}

// A message the codec cannot read is an error that names the kind.
func TestCodecNamesTheKindOfABadMessage(t *testing.T) {
	srv := prototest.NewServer(t, prototest.Options{Wrap: func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", kubeproto.ContentType)
			_, _ = w.Write(append(append([]byte{}, kubeproto.ProtobufMagic...), 0x0a, 0x0f, 0x0a, 0x02, 'v', '1', 0x12, 0x09,
				'C', 'o', 'n', 'f', 'i', 'g', 'M', 'a', 'p', 0x12, 0x02, 0x0a, 0x05))
		})
	}}, prototest.ConfigMaps)
	client, err := kubeproto.NewClient(srv.Config(), configMapCodec)
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Get().Namespace("ns").Resource("configmaps").Name("a").Do(context.Background()).Get()
	if err == nil || !strings.Contains(err.Error(), "decode ConfigMap") {
		t.Errorf("error %v; want one naming ConfigMap", err)
	}
}
