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

package gpunode

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	core "k8s.io/client-go/testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// The apply configuration carries every field of a record's spec: a field left out would
// never reach the server, and the record would never match its identity hash.
func TestApplyConfigurationCarriesEveryField(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	spec := homelabv1.GpuNodeSpec{
		Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8, GpuMemoryMiB: 81559, Family: "hopper", ComputeCapability: "9.0",
		DriverVersion: "570.124.6", CudaVersion: "12.8", WorkloadConfig: "container",
		Sharing: &homelabv1.GpuSharing{Strategy: "mps", Replicas: 2},
		MIG: &homelabv1.MigInfo{Capable: true, Strategy: "mixed", Config: "all-balanced", ConfigState: "success",
			Devices: []homelabv1.MigDevice{{Profile: "1g.10gb", Count: 7, MemoryMiB: 9856}}},
		Clique: "uuid.1",
		Devices: []homelabv1.GpuDevice{{Name: "gpu-0", Type: "gpu", UUID: "GPU-1", PCIBusID: "0000:1a:00.0", Profile: "p",
			ParentUUID: "GPU-0", MemoryMiB: 81559, Taints: []string{"gpu.nvidia.com/xid:NoSchedule"}}},
		Conditions: []string{"XIDError"}, Warnings: []string{"w"}, Source: "gpu-feature-discovery,dra",
		LastSeen: &at, MissingSince: &at,
	}
	for _, v := range []reflect.Value{reflect.ValueOf(spec), reflect.ValueOf(spec.Devices[0]), reflect.ValueOf(*spec.MIG)} {
		for i := range v.NumField() {
			if v.Field(i).IsZero() {
				t.Fatalf("test data leaves %s.%s empty: set it, so that the check covers it", v.Type().Name(), v.Type().Field(i).Name)
			}
		}
	}
	b, err := json.Marshal(specConfiguration(spec))
	if err != nil {
		t.Fatal(err)
	}
	var got homelabv1.GpuNodeSpec
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(spec, got); diff != "" {
		t.Errorf("apply configuration of a spec (-spec +sent):\n%s", diff)
	}
}

// A GpuNode CRD older than the operator prunes the fields it lacks: the record is written
// anew once, then kept as the server holds it, instead of being deleted and written forever.
func TestRecordThatTheServerPrunesIsNotRewrittenForever(t *testing.T) {
	node := gpuNode("dgx-1", "NVIDIA-H100-80GB-HBM3", 8)
	node.Labels[inventory.LabelClique] = "uuid.1"
	f := newFixture(t, []*corev1.Node{node})
	gvr := homelabv1.SchemeGroupVersion.WithResource("gpunodes")
	f.client.PrependReactor("patch", "gpunodes", func(a core.Action) (bool, runtime.Object, error) {
		var r homelabv1.GpuNode
		if err := json.Unmarshal(a.(core.PatchAction).GetPatch(), &r); err != nil {
			return true, nil, err
		}
		r.Spec.Clique = "" // an older schema has no clique
		r.UID = "uid-record"
		err := f.client.Tracker().Update(gvr, &r, "")
		if apierrors.IsNotFound(err) {
			err = f.client.Tracker().Add(&r)
		}
		return true, &r, err
	})
	wantWrites(t, "first sync", f.sync("dgx-1"), "patch", "delete", "patch")
	r := f.record("dgx-1")
	f.c.recordUpdated(r, r) // the echo of the write
	if n := f.c.queue.Len(); n != 0 {
		t.Errorf("the echo of a pruned record queued %d keys", n)
	}
	wantWrites(t, "second sync", f.sync("dgx-1"))
}
