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

	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	applyv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/applyconfiguration/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// The apply request carries every field of a record's spec: a field left out would
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
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "dgx-1", UID: "uid-dgx-1"}}
	b, err := applyBody(node, spec, inventory.IdentityHash(spec))
	if err != nil {
		t.Fatal(err)
	}
	var got homelabv1.GpuNode
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(spec, got.Spec); diff != "" {
		t.Errorf("apply configuration of a spec (-spec +sent):\n%s", diff)
	}
}

// The apply request means what the generated apply configuration meant: the same fields
// set, empty ones left out, for records of every shape.
func TestApplyBodyMeansTheApplyConfiguration(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	later := metav1.NewTime(at.Add(90 * time.Minute))
	specs := map[string]homelabv1.GpuNodeSpec{
		"empty": {},
		"labels": {Product: "NVIDIA-L4", GpuCount: 1, GpuMemoryMiB: 23034, Family: "ada-lovelace", ComputeCapability: "8.9",
			DriverVersion: "550.54.15", CudaVersion: "12.4", Source: "gpu-feature-discovery", LastSeen: &at},
		"missing": {Product: "NVIDIA-T4", GpuCount: 1, LastSeen: &at, MissingSince: &later},
		"empty sharing and MIG": {Product: "NVIDIA-A100-SXM4-40GB", GpuCount: 8, Sharing: &homelabv1.GpuSharing{},
			MIG: &homelabv1.MigInfo{Devices: []homelabv1.MigDevice{{}, {Profile: "1g.5gb", Count: 7}}}},
		"MIG and sharing": {Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8, WorkloadConfig: "container",
			Sharing: &homelabv1.GpuSharing{Strategy: "time-slicing", Replicas: 4},
			MIG: &homelabv1.MigInfo{Capable: true, Strategy: "single", Config: "all-1g.10gb", ConfigState: "success",
				Devices: []homelabv1.MigDevice{{Profile: "1g.10gb", Count: 7, MemoryMiB: 9856}}}},
		"DRA devices": {Product: "NVIDIA-B200", GpuCount: 8, Source: "dra", Clique: "uuid.1", Conditions: []string{"XIDError"},
			Warnings: []string{"w"}, Devices: []homelabv1.GpuDevice{{Name: "gpu-0"}, {Name: "gpu-1", Type: "mig", UUID: "MIG-1",
				PCIBusID: "0000:1a:00.0", Profile: "1g.23gb", ParentUUID: "GPU-1", MemoryMiB: 23552, Taints: []string{"t:NoSchedule"}}}},
		"empty lists": {Product: "NVIDIA-L4", Conditions: []string{}, Warnings: []string{}, Devices: []homelabv1.GpuDevice{{Name: "gpu-0", Taints: []string{}}}},
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "dgx-1", UID: "uid-dgx-1"}}
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			hash := inventory.IdentityHash(spec)
			body, err := applyBody(node, spec, hash)
			if err != nil {
				t.Fatal(err)
			}
			reference, err := json.Marshal(applyConfiguration(node, spec, hash))
			if err != nil {
				t.Fatal(err)
			}
			var got, want any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(reference, &want); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("apply body (-apply configuration +body):\n%s", diff)
			}
		})
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

// applyConfiguration is the record as the controller applied it through the generated apply
// configuration, before it sent its own body: the reference applyBody must mean the same.
func applyConfiguration(node *corev1.Node, spec homelabv1.GpuNodeSpec, hash string) *applyv1.GpuNodeApplyConfiguration {
	return applyv1.GpuNode(node.Name).
		WithAnnotations(map[string]string{homelabv1.IdentityHashAnnotation: hash}).
		WithOwnerReferences(metav1apply.OwnerReference().
			WithAPIVersion("v1").WithKind("Node").WithName(node.Name).WithUID(node.UID)).
		WithSpec(specConfiguration(spec))
}

func specConfiguration(spec homelabv1.GpuNodeSpec) *applyv1.GpuNodeSpecApplyConfiguration {
	s := applyv1.GpuNodeSpec()
	setString(spec.Product, s.WithProduct)
	setString(spec.Family, s.WithFamily)
	setString(spec.ComputeCapability, s.WithComputeCapability)
	setString(spec.DriverVersion, s.WithDriverVersion)
	setString(spec.CudaVersion, s.WithCudaVersion)
	setString(spec.WorkloadConfig, s.WithWorkloadConfig)
	setString(spec.Source, s.WithSource)
	setString(spec.Clique, s.WithClique)
	if len(spec.Conditions) > 0 {
		s.WithConditions(spec.Conditions...)
	}
	if len(spec.Warnings) > 0 {
		s.WithWarnings(spec.Warnings...)
	}
	for _, d := range spec.Devices {
		s.WithDevices(deviceConfiguration(d))
	}
	if spec.GpuCount != 0 {
		s.WithGpuCount(spec.GpuCount)
	}
	if spec.GpuMemoryMiB != 0 {
		s.WithGpuMemoryMiB(spec.GpuMemoryMiB)
	}
	if sh := spec.Sharing; sh != nil {
		c := applyv1.GpuSharing()
		setString(sh.Strategy, c.WithStrategy)
		if sh.Replicas != 0 {
			c.WithReplicas(sh.Replicas)
		}
		s.WithSharing(c)
	}
	if m := spec.MIG; m != nil {
		c := applyv1.MigInfo()
		if m.Capable {
			c.WithCapable(true)
		}
		setString(m.Strategy, c.WithStrategy)
		setString(m.Config, c.WithConfig)
		setString(m.ConfigState, c.WithConfigState)
		for _, d := range m.Devices {
			dc := applyv1.MigDevice().WithProfile(d.Profile).WithCount(d.Count)
			if d.MemoryMiB != 0 {
				dc.WithMemoryMiB(d.MemoryMiB)
			}
			c.WithDevices(dc)
		}
		s.WithMIG(c)
	}
	if spec.LastSeen != nil {
		s.WithLastSeen(*spec.LastSeen)
	}
	if spec.MissingSince != nil {
		s.WithMissingSince(*spec.MissingSince)
	}
	return s
}

func deviceConfiguration(d homelabv1.GpuDevice) *applyv1.GpuDeviceApplyConfiguration {
	c := applyv1.GpuDevice().WithName(d.Name)
	setString(d.Type, c.WithType)
	setString(d.UUID, c.WithUUID)
	setString(d.PCIBusID, c.WithPCIBusID)
	setString(d.Profile, c.WithProfile)
	setString(d.ParentUUID, c.WithParentUUID)
	if d.MemoryMiB != 0 {
		c.WithMemoryMiB(d.MemoryMiB)
	}
	if len(d.Taints) > 0 {
		c.WithTaints(d.Taints...)
	}
	return c
}

func setString[T any](v string, with func(string) T) {
	if v != "" {
		with(v)
	}
}
