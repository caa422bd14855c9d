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

package live

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
)

// A scan counts a DRA node's GPUs from its slices, as the operator does.
func TestScanReadsDRASlices(t *testing.T) {
	slices, err := dra.Slices(dra.H100)
	if err != nil {
		t.Fatal(err)
	}
	var objs []runtime.Object
	for _, s := range slices {
		s = s.DeepCopy()
		node := "dra-1"
		s.Spec.NodeName, s.Spec.Pool.Name = &node, node
		objs = append(objs, s)
	}
	client := fake.NewClientset(objs...)
	devices, note, err := deviceFacts(context.Background(), client.ResourceV1().ResourceSlices(), 500)
	if err != nil || note != "" {
		t.Fatalf("deviceFacts: %v (note %q)", err, note)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "dra-1", Labels: map[string]string{"nvidia.com/gpu.deploy.dra-driver": "true"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	status := InventoryStatus([]*corev1.Node{n}, devices, nil, 0, 1, time.Now())
	if status.TotalGpus != 8 || len(status.Nodes) != 1 || status.Nodes[0].Source != homelabv1.SourceDRA {
		t.Errorf("scan of a DRA node: %d GPUs, nodes %+v; want 8 from dra", status.TotalGpus, status.Nodes)
	}
}

// Without the resource.k8s.io API, or the right to list it, a scan goes on from the labels.
func TestScanWithoutSlicesGoesOn(t *testing.T) {
	gr := schema.GroupResource{Group: resourcev1.GroupName, Resource: "resourceslices"}
	for name, answer := range map[string]error{
		"not served": apierrors.NewNotFound(gr, ""),
		"forbidden":  apierrors.NewForbidden(gr, "", nil),
	} {
		client := fake.NewClientset()
		client.PrependReactor("list", "resourceslices", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, answer })
		devices, note, err := deviceFacts(context.Background(), client.ResourceV1().ResourceSlices(), 500)
		if err != nil || devices != nil {
			t.Errorf("%s: devices %v, error %v; want none and no error", name, devices != nil, err)
		}
		if (name == "forbidden") != strings.Contains(note, "forbidden") {
			t.Errorf("%s: note %q", name, note)
		}
	}
}
