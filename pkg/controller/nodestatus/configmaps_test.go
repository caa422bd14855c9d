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

package nodestatus

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto/prototest"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/metrics"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/statuswriter"
)

// The informer lists and watches the one ConfigMap of its namespace, by a field selector.
func TestConfigMapInformerWatchesTheOneConfigMap(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := k8sfake.NewClientset(configMap(map[string]string{}))
	watched := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor("configmaps", func(core.Action) (bool, watch.Interface, error) {
		once.Do(func() { close(watched) })
		return false, nil, nil // the tracker answers
	})
	informer := NewConfigMapInformer(prototest.ListOnly[*corev1.ConfigMapList]{ListWatcher: client.CoreV1().ConfigMaps(namespace)}, key.Name)
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the informer never synced")
	}
	<-watched
	if _, exists, err := informer.GetIndexer().GetByKey(key.String()); !exists || err != nil {
		t.Errorf("the ConfigMap is not cached (%v)", err)
	}
	want := "metadata.name=" + homelabv1.NodeStatusConfigMapName
	verbs := map[string]bool{}
	for _, a := range client.Actions() {
		var got string
		switch a := a.(type) {
		case core.ListAction:
			got = a.GetListRestrictions().Fields.String()
		case core.WatchAction:
			got = a.GetWatchRestrictions().Fields.String()
		default:
			continue
		}
		verbs[a.GetVerb()] = true
		if a.GetNamespace() != namespace || got != want {
			t.Errorf("%s in namespace %q with field selector %q; want %q in %q", a.GetVerb(), a.GetNamespace(), got, want, namespace)
		}
	}
	if !verbs["list"] || !verbs["watch"] {
		t.Errorf("the informer made %v; want a list and a watch", verbs)
	}
}

// Against an API server, an update of the ConfigMap goes through the REST client asking
// for metadata only, and the resourceVersion in that answer is remembered: the next sync
// does not decode the ConfigMap again.
func TestUpdateThroughRESTAsksForMetadataOnly(t *testing.T) {
	var mu sync.Mutex
	var accepts, bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		accepts, bodies = append(accepts, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+" "+r.Header.Get("Accept")), append(bodies, string(body))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
			ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: namespace, ResourceVersion: "8"}})
	}))
	defer srv.Close()
	rc, err := kubeclient.New(&rest.Config{Host: srv.URL}, corev1.SchemeGroupVersion, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	factory := kubeinformers.NewSharedInformerFactory(k8sfake.NewClientset(), 0)
	cc := &controller.Context{Nodes: factory.Core().V1().Nodes().Informer(), Metrics: metrics.New()}
	configMaps := NewConfigMapInformer(kubeclient.ConfigMaps(rc, namespace), key.Name)
	c, _, err := NewController(ctx, cc, Options{Namespace: namespace, Client: kubeclient.ConfigMaps(rc, namespace), REST: rc, ConfigMaps: configMaps})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range fixtures.HomeLab() {
		if err := factory.Core().V1().Nodes().Informer().GetIndexer().Add(n); err != nil {
			t.Fatal(err)
		}
	}
	existing := configMap(map[string]string{})
	existing.ResourceVersion = "7"
	if err := configMaps.GetIndexer().Add(existing); err != nil {
		t.Fatal(err)
	}
	if err := c.syncHandler(ctx, key); err != nil {
		t.Fatal(err)
	}
	wantRequest := "PUT /api/v1/namespaces/" + namespace + "/configmaps/" + key.Name + "?fieldManager=" + homelabv1.FieldManager + " " + statuswriter.MetadataOnly
	if len(accepts) != 1 || accepts[0] != wantRequest {
		t.Fatalf("requests %q; want one %q", accepts, wantRequest)
	}
	var sent corev1.ConfigMap
	if err := json.Unmarshal([]byte(bodies[0]), &sent); err != nil || len(sent.Data) != 4 || sent.ResourceVersion != "7" {
		t.Errorf("sent %d data keys at resourceVersion %q (%v); want the four GPU nodes at 7", len(sent.Data), sent.ResourceVersion, err)
	}
	if c.last == nil || c.last.resourceVersion != "8" || len(c.last.entries) != 4 {
		t.Errorf("remembered %+v; want the four entries at resourceVersion 8", c.last)
	}
	if !strings.Contains(bodies[0], `"kind":"ConfigMap"`) {
		t.Errorf("the body has no kind: %s", bodies[0])
	}
}
