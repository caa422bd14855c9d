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
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
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
	older := embedded(t)
	older.Spec.Versions[0].AdditionalPrinterColumns = nil // as an earlier release shipped it
	older.ResourceVersion = "7"

	cases := []struct {
		name     string
		existing []runtime.Object
		want     Result
		verbs    []string
	}{
		{"absent: created", nil, Created, []string{"get", "create"}},
		{"older: updated", []runtime.Object{older}, Updated, []string{"get", "update"}},
		{"current: left alone", []runtime.Object{embedded(t)}, Current, []string{"get"}},
	}
	gpuNode, err := GpuNode()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(append(tc.existing, gpuNode.DeepCopy())...) // the GpuNode CRD is current
			got, err := Ensure(context.Background(), client)
			if err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			want := []Outcome{{homelabv1.CustomResourceDefinitionName, tc.want}, {homelabv1.GpuNodeCRDName, Current}}
			if !slices.Equal(got, want) {
				t.Errorf("Ensure = %v, want %v", got, want)
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
			if n := len(stored.Spec.Versions[0].AdditionalPrinterColumns); n != 7 {
				t.Errorf("stored CRD has %d printer columns, want the current 7", n)
			}
		})
	}
}

func TestEnsureForbiddenSaysWhatToDo(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "customresourcedefinitions", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(apiextensionsv1.Resource("customresourcedefinitions"), homelabv1.CustomResourceDefinitionName, nil)
	})
	_, err := Ensure(context.Background(), client)
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
	if got, err := Ensure(context.Background(), client); err != nil || got[0].Result != Updated {
		t.Fatalf("Ensure = %v, %v; want %q after one conflict", got, err, Updated)
	}
}

// Both CRDs are installed on an empty cluster: the GpuNode records have a kind to be.
func TestEnsureInstallsTheGpuNodeCRD(t *testing.T) {
	client := fake.NewClientset()
	got, err := Ensure(context.Background(), client)
	if err != nil {
		t.Fatal(err)
	}
	want := []Outcome{{homelabv1.CustomResourceDefinitionName, Created}, {homelabv1.GpuNodeCRDName, Created}}
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
