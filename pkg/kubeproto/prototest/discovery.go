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

package prototest

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
)

// DiscoveryClient is a REST client of an API server that serves only discovery: each of lists
// at its group version's path, NotFound for any other, and with fail an internal error for
// every request.
func DiscoveryClient(t testing.TB, fail bool, lists ...*metav1.APIResourceList) rest.Interface {
	byPath := map[string]*metav1.APIResourceList{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		p := "/apis/" + gv.String()
		if gv.Group == "" {
			p = "/api/" + gv.Version
		}
		byPath[p] = l
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l, ok := byPath[r.URL.Path]
		switch {
		case fail:
			WriteStatus(w, apierrors.NewInternalError(errors.New("discovery failed")))
		case !ok:
			WriteStatus(w, apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path))
		default:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(l)
		}
	}))
	t.Cleanup(ts.Close)
	c, err := kubeclient.New(&rest.Config{Host: ts.URL}, schema.GroupVersion{Version: "v1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
