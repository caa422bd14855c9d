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

package inventory

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func draSlices(t testing.TB, name string) []*resourcev1.ResourceSlice {
	t.Helper()
	s, err := dra.Slices(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func deviceNames(f *DeviceFacts) []string {
	var names []string
	for _, d := range f.Devices {
		names = append(names, d.Name)
	}
	return names
}

func TestDeviceFactsOfFixtures(t *testing.T) {
	h100 := DeviceFacts{
		Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8, GpuMemoryMiB: 81559, Family: "hopper",
		ComputeCapability: "9.0", DriverVersion: "570.124.6", CudaVersion: "12.8", WholeGPUs: 0xff,
	}
	cases := []struct {
		fixture     string
		want        DeviceFacts // Devices compared by name only
		devices     []string
		wantTainted map[string][]string
	}{
		{fixture: dra.H100, want: h100,
			devices: []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"}},
		{fixture: dra.H100Tainted, want: func() DeviceFacts { f := h100; f.UnhealthyGpus, f.Tainted, f.TaintedGPUs = 1, true, 1<<3; return f }(),
			devices: []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"},
			wantTainted: map[string][]string{
				"gpu-3": {"gpu.nvidia.com/xid:NoSchedule"},
				"gpu-5": {"gpu.nvidia.com/xid:None"},
			}},
		{fixture: dra.A100StaticMIG,
			// gpu-0 is counted through its MIG devices' parentUUID: the driver does not publish it whole.
			want: DeviceFacts{
				Product: "NVIDIA-A100-SXM4-40GB", GpuCount: 2, GpuMemoryMiB: 40960, Family: "ampere",
				ComputeCapability: "8.0", DriverVersion: "570.124.6", CudaVersion: "12.8",
				WholeGPUs: 1 << 1, // gpu-1 only: gpu-0 is in MIG mode
				MIG: []homelabv1.MigDevice{
					{Profile: "1g.5gb", Count: 2, MemoryMiB: 4864},
					{Profile: "2g.10gb", Count: 1, MemoryMiB: 9856},
					{Profile: "3g.20gb", Count: 1, MemoryMiB: 19968},
				},
			},
			devices: []string{"gpu-0-mig-1g5gb-19-0", "gpu-0-mig-1g5gb-19-1", "gpu-0-mig-2g10gb-14-2", "gpu-0-mig-3g20gb-9-4", "gpu-1"}},
		{fixture: dra.H100DynMIG,
			// Partitions that could be made are neither MIG devices nor GPUs; the full GPUs'
			// memory is the largest profile's, as the driver announces it in this mode.
			want:    func() DeviceFacts { f := h100; f.GpuCount, f.GpuMemoryMiB, f.WholeGPUs = 2, 81152, 0b11; return f }(),
			devices: []string{"gpu-0", "gpu-1"}},
		{fixture: dra.H100VFIO,
			// gpu-N and gpu-vfio-N are the same GPU (same PCI bus ID); gpu-vfio-2 is a third.
			want:    func() DeviceFacts { f := h100; f.GpuCount, f.WholeGPUs = 3, 0b11; return f }(),
			devices: []string{"gpu-0", "gpu-1", "gpu-vfio-0", "gpu-vfio-1", "gpu-vfio-2"}},
		{fixture: dra.PoolMidUpdate, want: DeviceFacts{Pending: true}},
	}
	for _, tc := range cases {
		t.Run(tc.fixture, func(t *testing.T) {
			got := DeviceFactsOf(draSlices(t, tc.fixture))
			if got == nil {
				t.Fatal("nil facts")
			}
			if names := deviceNames(got); !reflect.DeepEqual(names, tc.devices) {
				t.Errorf("devices %v, want %v", names, tc.devices)
			}
			for _, d := range got.Devices {
				if want := tc.wantTainted[d.Name]; !reflect.DeepEqual(d.Taints, want) {
					t.Errorf("device %s taints %v, want %v", d.Name, d.Taints, want)
				}
			}
			summary := *got
			summary.Devices = nil
			summary.Counters = nil // TestDynamicMIGPartitionsFree
			if !reflect.DeepEqual(summary, tc.want) {
				t.Errorf("facts\n got %+v\nwant %+v", summary, tc.want)
			}
		})
	}
}

func TestDeviceFactsOfDeviceDetail(t *testing.T) {
	f := DeviceFactsOf(draSlices(t, dra.A100StaticMIG))
	want := homelabv1.GpuDevice{
		Name: "gpu-0-mig-3g20gb-9-4", Type: "mig", UUID: f.Devices[3].UUID, PCIBusID: "0000:07:00.0",
		Profile: "3g.20gb", ParentUUID: f.Devices[3].ParentUUID, MemoryMiB: 19968,
	}
	if got := f.Devices[3]; !reflect.DeepEqual(got, want) || !strings.HasPrefix(got.UUID, "MIG-") || !strings.HasPrefix(got.ParentUUID, "GPU-") {
		t.Errorf("MIG device %+v, want %+v with MIG- and GPU- UUIDs", got, want)
	}
	if got := f.Devices[4]; got.Type != "gpu" || got.MemoryMiB != 40960 || got.PCIBusID != "0000:0f:00.0" || !strings.HasPrefix(got.UUID, "GPU-") {
		t.Errorf("GPU device %+v", got)
	}
	v := DeviceFactsOf(draSlices(t, dra.H100VFIO))
	if got := v.Devices[4]; got.Type != "vfio" || got.PCIBusID != "0000:3a:00.0" || got.MemoryMiB != 0 {
		t.Errorf("VFIO device %+v: want type vfio, its PCI bus ID, no memory (addressable memory is not GPU memory)", got)
	}
}

// A DynamicMIG GPU whose MIG mode cannot be toggled (Ampere with MIG on) is published only
// through its partitions; it still counts as a GPU.
func TestDeviceFactsOfDynamicMIGWithoutFullGPU(t *testing.T) {
	s := draSlices(t, dra.H100DynMIG)
	for _, sl := range s {
		sl.Spec.Devices = removeDevice(sl.Spec.Devices, "gpu-1")
	}
	f := DeviceFactsOf(s)
	if f.GpuCount != 2 || f.MIG != nil || !reflect.DeepEqual(deviceNames(f), []string{"gpu-0"}) {
		t.Errorf("got count %d, MIG %v, devices %v; want 2 GPUs, no MIG, only gpu-0 listed", f.GpuCount, f.MIG, deviceNames(f))
	}
}

func removeDevice(devs []resourcev1.Device, name string) []resourcev1.Device {
	out := devs[:0]
	for _, d := range devs {
		if d.Name != name {
			out = append(out, d)
		}
	}
	return out
}

func TestDeviceFactsOfMIGTaintMarksParent(t *testing.T) {
	s := draSlices(t, dra.A100StaticMIG)
	devs := s[0].Spec.Devices
	for i := range devs {
		if devs[i].Name == "gpu-0-mig-1g5gb-19-1" {
			devs[i].Taints = []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/gpu-lost", Effect: resourcev1.DeviceTaintEffectNoExecute}}
		}
		if devs[i].Name == "gpu-0-mig-2g10gb-14-2" {
			devs[i].Taints = []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/xid", Value: "43", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
		}
	}
	f := DeviceFactsOf(s)
	if f.UnhealthyGpus != 1 || !f.Tainted {
		t.Errorf("unhealthy %d tainted %v; want 1 (two MIG devices of one GPU) and true", f.UnhealthyGpus, f.Tainted)
	}
}

func TestDeviceFactsOfOrderIndependent(t *testing.T) {
	for _, name := range []string{dra.H100, dra.H100Tainted, dra.A100StaticMIG, dra.H100DynMIG, dra.H100VFIO, dra.PoolMidUpdate} {
		want := DeviceFactsOf(draSlices(t, name))
		rng := rand.New(rand.NewPCG(1, uint64(len(name))))
		for range 20 {
			s := draSlices(t, name)
			rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
			for _, sl := range s {
				d := sl.Spec.Devices
				rng.Shuffle(len(d), func(i, j int) { d[i], d[j] = d[j], d[i] })
			}
			if got := DeviceFactsOf(s); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: shuffled slices give\n%+v\nwant\n%+v", name, got, want)
			}
		}
	}
}

func TestDeviceFactsOfPools(t *testing.T) {
	if f := DeviceFactsOf(nil); f != nil {
		t.Errorf("no slices: %+v, want nil", f)
	}
	other := draSlices(t, dra.H100)
	other[0].Spec.Driver = "gpu.example.com"
	if f := DeviceFactsOf(append(other, nil)); f != nil {
		t.Errorf("only another driver's slices: %+v, want nil", f)
	}

	dyn := draSlices(t, dra.H100DynMIG)
	if f := DeviceFactsOf(dyn[:2]); !reflect.DeepEqual(f, &DeviceFacts{Pending: true}) {
		t.Errorf("2 of 3 slices: %+v, want pending", f)
	}

	// The new generation completes: the old one is ignored.
	upd := draSlices(t, dra.PoolMidUpdate)
	for _, s := range dyn {
		s.Spec.Pool = upd[1].Spec.Pool
		s.Spec.NodeName = upd[1].Spec.NodeName
	}
	f := DeviceFactsOf(append(upd[:1], dyn...))
	if f.Pending || f.GpuCount != 2 || f.GpuMemoryMiB != 81152 || len(f.Devices) != 2 {
		t.Errorf("complete generation 2: %+v, want its 2 GPUs at 81152 MiB", f)
	}

	// An older generation arriving late changes nothing.
	h := draSlices(t, dra.H100Tainted)
	old := draSlices(t, dra.H100)
	old[0].Spec.Devices = old[0].Spec.Devices[:2]
	if got, want := DeviceFactsOf(append(h, old...)), DeviceFactsOf(h); !reflect.DeepEqual(got, want) {
		t.Errorf("with a stale generation: %+v, want %+v", got, want)
	}
}

func TestDeviceFactsOfProducts(t *testing.T) {
	s := draSlices(t, dra.H100)
	devs := s[0].Spec.Devices
	for i := range 3 {
		devs[i].Attributes["productName"] = resourcev1.DeviceAttribute{StringValue: ptr.To("NVIDIA H200")}
		devs[i].Capacity["memory"] = resourcev1.DeviceCapacity{Value: resource.MustParse("143771Mi")}
	}
	f := DeviceFactsOf(s)
	if f.Product != "NVIDIA-H100-80GB-HBM3" || f.GpuMemoryMiB != 143771 || f.GpuCount != 8 {
		t.Errorf("mixed node: %+v; want the most common product, the largest memory", f)
	}
	if len(f.Warnings) != 2 || !strings.Contains(f.Warnings[0], "memory differs") || !strings.Contains(f.Warnings[1], "2 products") {
		t.Errorf("warnings %q, want one on memory and one on products", f.Warnings)
	}
}

func TestDeviceFactsOfProductTie(t *testing.T) {
	s := draSlices(t, dra.H100)
	devs := s[0].Spec.Devices[:4]
	s[0].Spec.Devices = devs
	for i := range 2 {
		devs[i].Attributes["productName"] = resourcev1.DeviceAttribute{StringValue: ptr.To("NVIDIA H200")}
	}
	if f := DeviceFactsOf(s); f.Product != "NVIDIA-H100-80GB-HBM3" {
		t.Errorf("2 H100 and 2 H200: product %q, want the smaller name", f.Product)
	}
}

func TestNormalizeProduct(t *testing.T) {
	for in, want := range map[string]string{
		"NVIDIA H100 80GB HBM3":     "NVIDIA-H100-80GB-HBM3",
		"NVIDIA A100-SXM4-40GB":     "NVIDIA-A100-SXM4-40GB",
		" NVIDIA GeForce RTX 4090 ": "NVIDIA-GeForce-RTX-4090",
		"Tesla T4":                  "Tesla-T4",
		"":                          "",
	} {
		if got := NormalizeProduct(in); got != want {
			t.Errorf("NormalizeProduct(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDeviceFactsOfMalformed(t *testing.T) {
	node := "broken-1"
	mk := func(name string, attrs map[resourcev1.QualifiedName]resourcev1.DeviceAttribute, mem string) resourcev1.Device {
		d := resourcev1.Device{Name: name, Attributes: attrs}
		if mem != "" {
			d.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse(mem)}}
		}
		return d
	}
	str := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }
	ver := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{VersionValue: &s} }
	s := &resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{
		Driver: DRADriver, NodeName: &node,
		Pool: resourcev1.ResourcePool{Name: node, Generation: -4, ResourceSliceCount: -1},
		Devices: []resourcev1.Device{
			mk("gpu-0", nil, ""),
			mk("gpu-1", map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"type": str("gpu"), "uuid": str("GPU-1"), "cudaComputeCapability": ver("abc"), "gpu.nvidia.com/cudaDriverVersion": ver("12.x")}, "-1Gi"),
			mk("gpu-2", map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"type": str("gpu"), "uuid": {}, "productName": {IntValue: ptr.To[int64](3)}}, ""),
			mk("gpu-3", map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"gpu.nvidia.com/type": str("gpu"), "gpu.nvidia.com/uuid": str("GPU-3"), "productName": str("NVIDIA L4"), "architecture": str("Ada Lovelace")}, "23034Mi"),
			mk("gpu-0-mig-x", map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"type": str("mig"), "uuid": str("MIG-9")}, ""),
		},
	}}
	f := DeviceFactsOf([]*resourcev1.ResourceSlice{nil, s})
	if f == nil || f.Pending {
		t.Fatalf("facts %+v, want facts with warnings", f)
	}
	// gpu-1, gpu-2 (keyed by its name) and gpu-3; gpu-0 has no type, the MIG device no parent.
	if f.GpuCount != 3 || f.Product != "NVIDIA-L4" || f.GpuMemoryMiB != 23034 || f.Family != "ada-lovelace" || f.ComputeCapability != "" || f.CudaVersion != "" {
		t.Errorf("facts %+v", f)
	}
	joined := strings.Join(f.Warnings, "\n")
	for _, w := range []string{"resourceSliceCount -1", "not gpu, mig or vfio", "out of range", "not a version", "neither uuid", "parentUUID", "no profile"} {
		if !strings.Contains(joined, w) {
			t.Errorf("no warning saying %q in %q", w, f.Warnings)
		}
	}
}

func TestDeviceFactsOfWarningsBounded(t *testing.T) {
	s := draSlices(t, dra.H100)
	for i := range s[0].Spec.Devices {
		d := &s[0].Spec.Devices[i]
		d.Attributes["type"] = resourcev1.DeviceAttribute{StringValue: ptr.To("fpga")}
	}
	s[0].Spec.Pool.ResourceSliceCount = 0
	f := DeviceFactsOf(s)
	if f.GpuCount != 0 || len(f.Warnings) != maxFactWarnings || f.Warnings[maxFactWarnings-1] != "2 more warnings" {
		t.Errorf("8 devices of an unknown type: count %d, warnings %q; want 0 GPUs and 8 warnings, the last one counting the rest", f.GpuCount, f.Warnings)
	}
}

func TestDeviceFactsOfMemoryOutOfRange(t *testing.T) {
	s := draSlices(t, dra.H100)
	s[0].Spec.Devices[0].Capacity["memory"] = resourcev1.DeviceCapacity{Value: resource.MustParse("1e400")}
	s[0].Spec.Devices[1].Capacity["memory"] = resourcev1.DeviceCapacity{Value: resource.MustParse("-80Gi")}
	f := DeviceFactsOf(s)
	if f.GpuCount != 8 || f.GpuMemoryMiB != 81559 || len(f.Warnings) != 2 || f.Devices[0].MemoryMiB != 0 {
		t.Errorf("facts %+v; want 8 GPUs of 81559 MiB and a warning for each bad capacity", f)
	}
}

func TestDeviceFactsOfHugeList(t *testing.T) {
	node := "huge-1"
	var slices []*resourcev1.ResourceSlice
	const perSlice, count = 128, 40
	for i := range count {
		s := &resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{
			Driver: DRADriver, NodeName: &node,
			Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: count},
		}}
		for j := range perSlice {
			n := i*perSlice + j
			pci, uuid, prod := fmt.Sprintf("0000:%02x:%02x.0", n/256, n%256), fmt.Sprintf("GPU-%d", n), fmt.Sprintf("P%d", n%50)
			taints := make([]resourcev1.DeviceTaint, 12)
			for k := range taints {
				taints[k] = resourcev1.DeviceTaint{Key: fmt.Sprintf("t%d", k), Effect: resourcev1.DeviceTaintEffectNone}
			}
			s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
				Name: fmt.Sprintf("gpu-%d", n), Taints: taints,
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
					"type": {StringValue: ptr.To("gpu")}, "uuid": {StringValue: &uuid}, "productName": {StringValue: &prod},
					"resource.kubernetes.io/pciBusID": {StringValue: &pci}, "profile": {StringValue: ptr.To(strings.Repeat("x", 500))},
				},
				Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: *resource.NewQuantity(int64(n)<<20, resource.BinarySI)}},
			})
		}
		slices = append(slices, s)
	}
	f := DeviceFactsOf(slices)
	if f.GpuCount != perSlice*count || len(f.Devices) != maxListedDevices || !f.Tainted || f.UnhealthyGpus != 0 {
		t.Fatalf("count %d devices %d tainted %v unhealthy %d", f.GpuCount, len(f.Devices), f.Tainted, f.UnhealthyGpus)
	}
	if len(f.Warnings) > maxFactWarnings || !strings.Contains(strings.Join(f.Warnings, "\n"), fmt.Sprintf("%d more devices not listed", perSlice*count-maxListedDevices)) {
		t.Errorf("warnings %q", f.Warnings)
	}
	for _, d := range f.Devices {
		if len(d.Taints) != maxDeviceTaints || len(d.Profile) > 64 {
			t.Fatalf("device %s: %d taints, profile of %d bytes", d.Name, len(d.Taints), len(d.Profile))
		}
	}
}

func FuzzDeviceFactsOf(f *testing.F) {
	f.Add(dra.H100, "gpu-3", "type", "mig", "memory", "-5", int64(2), int64(0), "NoExecute")
	f.Add(dra.A100StaticMIG, "gpu-1", "parentUUID", "", "memory", "1e400", int64(1), int64(-3), "None")
	f.Add(dra.H100DynMIG, "gpu-0-mig-1g10gb-19-3", "uuid", "MIG-x", "multiprocessors", "abc", int64(9), int64(1), "")
	f.Add(dra.H100VFIO, "gpu-vfio-2", "resource.kubernetes.io/pciBusID", "0000:18:00.0", "addressableMemory", "0", int64(-1), int64(1<<40), "NoSchedule")
	f.Add(dra.PoolMidUpdate, "gpu-0", "cudaDriverVersion", "..", "memory", "8e18", int64(3), int64(2), "Bogus")
	f.Fuzz(func(t *testing.T, fixture, device, attr, value, capKey, capValue string, count, gen int64, effect string) {
		s, err := dra.Slices(fixture)
		if err != nil {
			return
		}
		for _, sl := range s {
			sl.Spec.Pool.ResourceSliceCount = count
			sl.Spec.Pool.Generation += gen % 2
			for i := range sl.Spec.Devices {
				d := &sl.Spec.Devices[i]
				if d.Name != device {
					continue
				}
				if d.Attributes == nil {
					d.Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{}
				}
				d.Attributes[resourcev1.QualifiedName(attr)] = resourcev1.DeviceAttribute{StringValue: &value}
				if q, err := resource.ParseQuantity(capValue); err == nil {
					if d.Capacity == nil {
						d.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{}
					}
					d.Capacity[resourcev1.QualifiedName(capKey)] = resourcev1.DeviceCapacity{Value: q}
				}
				d.Taints = append(d.Taints, resourcev1.DeviceTaint{Key: attr, Value: value, Effect: resourcev1.DeviceTaintEffect(effect)})
			}
		}
		facts := DeviceFactsOf(s)
		if facts == nil {
			t.Fatal("nil facts for a fixture")
		}
		if facts.GpuCount < 0 || facts.GpuMemoryMiB < 0 || facts.UnhealthyGpus < 0 || facts.UnhealthyGpus > facts.GpuCount {
			t.Fatalf("bad counts %+v", facts)
		}
		if len(facts.Devices) > maxListedDevices || len(facts.Warnings) > maxFactWarnings || len(facts.MIG) > maxMigProfiles {
			t.Fatalf("unbounded facts %+v", facts)
		}
		for _, d := range facts.Devices {
			if len(d.Name) > 128 || len(d.UUID) > 128 || len(d.PCIBusID) > 64 || len(d.Profile) > 64 || len(d.ParentUUID) > 128 || len(d.Taints) > maxDeviceTaints || d.MemoryMiB < 0 {
				t.Fatalf("unbounded device %+v", d)
			}
		}
		if len(facts.Product) > 128 || len(facts.Family) > 128 || len(facts.DriverVersion) > 128 {
			t.Fatalf("unbounded strings %+v", facts)
		}
	})
}
