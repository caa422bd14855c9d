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

package app

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned/fake"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned/scheme"
)

func TestEnsureDefaultInventory(t *testing.T) {
	existing := &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}, Spec: homelabv1.GpuInventorySpec{Note: "mine"}}
	cases := []struct {
		name     string
		inv      string
		objects  []runtime.Object
		reactErr error
		wantErr  string
		wantNote string
	}{
		{name: "created when missing", inv: "cluster", wantNote: "Created by gpu-inventory-operator: every GPU node in the cluster."},
		{name: "an existing one is left alone", inv: "cluster", objects: []runtime.Object{existing}, wantNote: "mine"},
		{name: "empty name creates none", inv: ""},
		{name: "CRD missing", inv: "cluster", reactErr: apierrors.NewNotFound(homelabv1.Resource("gpuinventories"), ""), wantErr: "the GpuInventory CRD is not installed"},
		{name: "forbidden", inv: "cluster", reactErr: apierrors.NewForbidden(homelabv1.Resource("gpuinventories"), "cluster", nil), wantErr: "may not create gpuinventories.homelab.youngju.dev"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := newClientset(t, tc.objects...)
			if tc.reactErr != nil {
				client.PrependReactor("create", "gpuinventories", func(core.Action) (bool, runtime.Object, error) { return true, nil, tc.reactErr })
			}
			err := createDefaultInventory(context.Background(), client.HomelabV1().GpuInventories(), tc.inv, false)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			list, _ := client.HomelabV1().GpuInventories().List(context.Background(), metav1.ListOptions{})
			if tc.inv == "" {
				if len(list.Items) != 0 {
					t.Errorf("want no inventory, got %d", len(list.Items))
				}
				return
			}
			if len(list.Items) != 1 || list.Items[0].Spec.Note != tc.wantNote {
				t.Errorf("inventories = %+v, want one with note %q", list.Items, tc.wantNote)
			}
		})
	}
}

// On a CRD created just now the default inventory is created by server-side apply, which the
// API server does not hold for 2 s as it holds a create of a new kind; a conflict (an
// inventory of that name that someone else owns) leaves it alone.
func TestEnsureDefaultInventoryAppliesOnAFreshCRD(t *testing.T) {
	for _, conflict := range []bool{false, true} {
		client := newClientset(t)
		var applied []string
		client.PrependReactor("patch", "gpuinventories", func(a core.Action) (bool, runtime.Object, error) {
			p := a.(core.PatchAction)
			applied = append(applied, string(p.GetPatchType())+" "+p.GetName()+" "+string(p.GetPatch()))
			if conflict {
				return true, nil, apierrors.NewConflict(homelabv1.Resource("gpuinventories"), p.GetName(), errors.New("spec.note is someone else's"))
			}
			return true, &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: p.GetName()}}, nil
		})
		client.PrependReactor("create", "gpuinventories", func(core.Action) (bool, runtime.Object, error) {
			t.Error("a create was sent")
			return true, nil, nil
		})
		if err := createDefaultInventory(context.Background(), client.HomelabV1().GpuInventories(), NewOptions().DefaultInventory, true); err != nil {
			t.Fatalf("conflict %v: %v", conflict, err)
		}
		if len(applied) != 1 || !strings.HasPrefix(applied[0], "application/apply-patch+yaml cluster ") || !strings.Contains(applied[0], defaultInventoryNote) {
			t.Errorf("conflict %v: patches %q, want one apply of the default inventory with its note", conflict, applied)
		}
	}
}

func TestEnsureDefaultInventoryNamesTheApplysVerbWhenForbidden(t *testing.T) {
	client := newClientset(t)
	client.PrependReactor("patch", "gpuinventories", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(homelabv1.Resource("gpuinventories"), "cluster", nil)
	})
	err := createDefaultInventory(context.Background(), client.HomelabV1().GpuInventories(), NewOptions().DefaultInventory, true)
	if err == nil || !strings.Contains(err.Error(), "may not patch (server-side apply) gpuinventories.homelab.youngju.dev") {
		t.Errorf("error = %v, want one naming the patch the apply needs", err)
	}
}

// newClientset is the generated fake on a plain object tracker: fake.NewClientset's
// field-managed tracker refuses GpuInventory creates, having no OpenAPI schema for the type.
func newClientset(t *testing.T, objects ...runtime.Object) *fake.Clientset {
	t.Helper()
	tracker := core.NewObjectTracker(scheme.Scheme, scheme.Codecs.UniversalDecoder())
	for _, obj := range objects {
		if err := tracker.Add(obj); err != nil {
			t.Fatalf("seed %T: %v", obj, err)
		}
	}
	client := &fake.Clientset{}
	client.AddReactor("*", "*", core.ObjectReaction(tracker))
	return client
}
