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

package crd

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	core "k8s.io/client-go/testing"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
)

func embedded(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd, err := GpuInventory()
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

func TestEmbeddedCRDDescribesGpuInventory(t *testing.T) {
	crd := embedded(t)
	if crd.Name != homelabv1.CustomResourceDefinitionName || crd.Spec.Group != homelabv1.GroupName ||
		crd.Spec.Scope != apiextensionsv1.ClusterScoped || crd.Spec.Names.Plural != "gpuinventories" ||
		len(crd.Spec.Names.ShortNames) != 1 || crd.Spec.Names.ShortNames[0] != "gpuinv" {
		t.Errorf("CRD names/scope = %s %s %s %+v", crd.Name, crd.Spec.Group, crd.Spec.Scope, crd.Spec.Names)
	}
	v := crd.Spec.Versions[0]
	if v.Name != "v1" || !v.Served || !v.Storage || v.Subresources == nil || v.Subresources.Status == nil {
		t.Errorf("version v1 must be served, stored and have a status subresource: %+v", v)
	}
	var columns []string
	for _, c := range v.AdditionalPrinterColumns {
		columns = append(columns, c.Name)
	}
	if want := "GPU-NODES,READY,GPUS,READY-GPUS,DEGRADED,MODELS,AGE"; strings.Join(columns, ",") != want {
		t.Errorf("printer columns = %s, want %s", strings.Join(columns, ","), want)
	}
}

func TestEnsure(t *testing.T) {
	revised := func(revision string, edit func(*apiextensionsv1.CustomResourceDefinition)) *apiextensionsv1.CustomResourceDefinition {
		crd := embedded(t)
		if revision == "" {
			delete(crd.Annotations, SchemaRevisionAnnotation)
		} else {
			crd.Annotations[SchemaRevisionAnnotation] = revision
		}
		if edit != nil {
			edit(crd)
		}
		crd.ResourceVersion = "7"
		return crd
	}
	columns := func(n int) func(*apiextensionsv1.CustomResourceDefinition) {
		return func(crd *apiextensionsv1.CustomResourceDefinition) {
			v := &crd.Spec.Versions[0]
			for len(v.AdditionalPrinterColumns) < n {
				v.AdditionalPrinterColumns = append(v.AdditionalPrinterColumns, apiextensionsv1.CustomResourceColumnDefinition{
					Name: fmt.Sprintf("NEW-%d", len(v.AdditionalPrinterColumns)), Type: "string", JSONPath: ".status.new"})
			}
			v.AdditionalPrinterColumns = v.AdditionalPrinterColumns[:n]
		}
	}
	own := SchemaRevision(embedded(t))
	if own < 1 {
		t.Fatalf("the embedded CRD's schema revision is %d, want at least 1", own)
	}
	next := strconv.Itoa(own + 1)

	cases := []struct {
		name        string
		existing    []runtime.Object
		want        Result
		installed   int
		verbs       []string
		wantColumns int // in the stored CRD
	}{
		{"absent: created", nil, Created, 0, []string{"get", "create"}, 7},
		{"older, before revisions: updated", []runtime.Object{revised("", columns(5))}, Updated, 0, []string{"get", "update"}, 7},
		{"older revision: updated", []runtime.Object{revised(strconv.Itoa(own-1), columns(5))}, Updated, own - 1, []string{"get", "update"}, 7},
		{"same revision, edited by hand: updated", []runtime.Object{revised(strconv.Itoa(own), columns(6))}, Updated, own, []string{"get", "update"}, 7},
		{"malformed revision: updated", []runtime.Object{revised("two", columns(5))}, Updated, 0, []string{"get", "update"}, 7},
		{"current: left alone", []runtime.Object{embedded(t)}, Current, own, []string{"get"}, 7},
		{"newer revision (a rollback): left alone", []runtime.Object{revised(next, columns(9))}, Newer, own + 1, []string{"get"}, 9},
		{"newer revision, same spec: left alone", []runtime.Object{revised(next, nil)}, Newer, own + 1, []string{"get"}, 7},
	}
	gpuNode, err := GpuNode()
	if err != nil {
		t.Fatal(err)
	}
	nodeRevision := SchemaRevision(gpuNode)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(append(tc.existing, gpuNode.DeepCopy())...) // the GpuNode CRD is current
			got, err := Ensure(context.Background(), client.ApiextensionsV1().CustomResourceDefinitions())
			if err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			want := []Outcome{
				{Name: homelabv1.CustomResourceDefinitionName, Result: tc.want, Installed: tc.installed, Embedded: own},
				{Name: homelabv1.GpuNodeCRDName, Result: Current, Installed: nodeRevision, Embedded: nodeRevision},
			}
			if !slices.Equal(got, want) {
				t.Errorf("Ensure = %+v, want %+v", got, want)
			}
			var verbs []string
			for _, a := range client.Actions() {
				verbs = append(verbs, a.GetVerb())
			}
			if want := append(tc.verbs, "get"); strings.Join(verbs, ",") != strings.Join(want, ",") {
				t.Errorf("actions = %v, want %v", verbs, want)
			}
			stored, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), homelabv1.CustomResourceDefinitionName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(stored.Spec.Versions[0].AdditionalPrinterColumns); n != tc.wantColumns {
				t.Errorf("stored CRD has %d printer columns, want %d", n, tc.wantColumns)
			}
			if tc.want == Updated || tc.want == Created {
				if got := SchemaRevision(stored); got != own {
					t.Errorf("stored CRD's schema revision = %d, want the operator's %d", got, own)
				}
			}
		})
	}
}

// A CRD's schema revision must change with its schema, or a rollback would replace a newer
// schema that carries the same number. testdata/schema-revisions.txt records, per CRD, the
// revision and a digest of the spec it names.
func TestSchemaRevisionFollowsTheSchema(t *testing.T) {
	data, err := os.ReadFile("testdata/schema-revisions.txt")
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]string{}
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) == 3 && !strings.HasPrefix(line, "#") {
			recorded[f[0]] = f[1] + " " + f[2]
		}
	}
	for _, get := range append(slices.Clone(embeddedCRDs), GpuFleet) {
		crd, err := get()
		if err != nil {
			t.Fatal(err)
		}
		spec, err := json.Marshal(crd.Spec)
		if err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprintf("%d %x", SchemaRevision(crd), sha256.Sum256(spec))
		if recorded[crd.Name] != got {
			t.Errorf("CRD %s: revision and spec digest %q, recorded %q. When its schema changes, raise its "+
				"schema-revision marker in pkg/apis/homelab/v1, run make generate and record the new line "+
				"in pkg/crd/testdata/schema-revisions.txt:\n%s %s", crd.Name, got, recorded[crd.Name], crd.Name, got)
		}
	}
}

func TestEnsureForbiddenSaysWhatToDo(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "customresourcedefinitions", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(apiextensionsv1.Resource("customresourcedefinitions"), homelabv1.CustomResourceDefinitionName, nil)
	})
	_, err := Ensure(context.Background(), client.ApiextensionsV1().CustomResourceDefinitions())
	if err == nil {
		t.Fatal("want an error when creating the CRD is forbidden")
	}
	for _, want := range []string{"may not create customresourcedefinitions.apiextensions.k8s.io", "--install-crd=false", "kubectl apply -f manifests/crd/"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestEnsureRetriesAConflict(t *testing.T) {
	older := embedded(t)
	older.Spec.Versions[0].AdditionalPrinterColumns = nil
	client := fake.NewClientset(older)
	conflicts := 0
	client.PrependReactor("update", "customresourcedefinitions", func(core.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			conflicts++ // the API server updated the CRD's status between our get and update
			return true, nil, apierrors.NewConflict(apiextensionsv1.Resource("customresourcedefinitions"), older.Name, nil)
		}
		return false, nil, nil
	})
	if got, err := Ensure(context.Background(), client.ApiextensionsV1().CustomResourceDefinitions()); err != nil || got[0].Result != Updated {
		t.Fatalf("Ensure = %v, %v; want %q after one conflict", got, err, Updated)
	}
}

// Both CRDs are installed on an empty cluster: the GpuNode records have a kind to be.
func TestEnsureInstallsTheGpuNodeCRD(t *testing.T) {
	client := fake.NewClientset()
	got, err := Ensure(context.Background(), client.ApiextensionsV1().CustomResourceDefinitions())
	if err != nil {
		t.Fatal(err)
	}
	gpuNode, err := GpuNode()
	if err != nil {
		t.Fatal(err)
	}
	want := []Outcome{
		{Name: homelabv1.CustomResourceDefinitionName, Result: Created, Embedded: SchemaRevision(embedded(t))},
		{Name: homelabv1.GpuNodeCRDName, Result: Created, Embedded: SchemaRevision(gpuNode)},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Ensure = %v, want %v", got, want)
	}
	crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), homelabv1.GpuNodeCRDName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var columns []string
	for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
		if c.Priority == 0 {
			columns = append(columns, c.Name)
		}
	}
	if crd.Spec.Scope != apiextensionsv1.ClusterScoped || crd.Spec.Names.Kind != "GpuNode" || crd.Spec.Names.Plural != "gpunodes" ||
		strings.Join(columns, " ") != "PRODUCT GPUS MEMORY-MIB MIG SHARING DRIVER SOURCE MISSING-SINCE AGE" {
		t.Errorf("GpuNode CRD: scope %s, names %+v, columns %v", crd.Spec.Scope, crd.Spec.Names, columns)
	}
}

// The operator waits through kubeclient's CRD client: Established is seen, and a CRD that
// stays unaccepted is reported with its conditions.
func TestWaitEstablishedThroughTheRESTClient(t *testing.T) {
	conditions := map[string][]apiextensionsv1.CustomResourceDefinitionCondition{
		homelabv1.CustomResourceDefinitionName: {{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}},
		homelabv1.GpuNodeCRDName: {{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionFalse,
			Reason: "PluralConflict", Message: "gpunodes is taken"}},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := path.Base(r.URL.Path)
		if r.Method != http.MethodGet || path.Dir(r.URL.Path) != "/apis/apiextensions.k8s.io/v1/customresourcedefinitions" || conditions[name] == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&apiextensionsv1.CustomResourceDefinition{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Status:     apiextensionsv1.CustomResourceDefinitionStatus{Conditions: conditions[name]},
		})
	}))
	defer srv.Close()
	rc, err := kubeclient.New(&rest.Config{Host: srv.URL}, apiextensionsv1.SchemeGroupVersion, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := WaitEstablished(ctx, kubeclient.CRDs(rc), homelabv1.CustomResourceDefinitionName, 5*time.Second); err != nil {
		t.Errorf("an Established CRD: %v", err)
	}
	err = WaitAllEstablished(ctx, kubeclient.CRDs(rc), 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "NamesAccepted=False (PluralConflict: gpunodes is taken)") {
		t.Errorf("a CRD whose names are not accepted: got %v; want its conditions", err)
	}
}

// The fleet hub installs the GpuFleet CRD, and only it, under its own field manager.
func TestEnsureFleetInstallsTheGpuFleetCRD(t *testing.T) {
	client := fake.NewClientset()
	got, err := EnsureFleet(context.Background(), client.ApiextensionsV1().CustomResourceDefinitions())
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != homelabv1.GpuFleetCRDName || got.Result != Created {
		t.Fatalf("EnsureFleet = %+v", got)
	}
	list, err := client.ApiextensionsV1().CustomResourceDefinitions().List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.Items[0].Spec.Names.Kind != "GpuFleet" || list.Items[0].Spec.Scope != apiextensionsv1.ClusterScoped {
		t.Fatalf("CRDs after EnsureFleet: %v, %v", list, err)
	}
	if again, err := EnsureFleet(context.Background(), client.ApiextensionsV1().CustomResourceDefinitions()); err != nil || again.Result != Current {
		t.Errorf("EnsureFleet again = %+v, %v; want %q", again, err, Current)
	}
}
