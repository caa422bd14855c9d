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
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
)

// realSlices reads the ResourceSlices of a file of testdata.
func realSlices(t *testing.T, file string) []*resourcev1.ResourceSlice {
	t.Helper()
	data, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var out []*resourcev1.ResourceSlice
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var kind metav1.TypeMeta
		if yaml.Unmarshal(doc, &kind) != nil || kind.Kind != "ResourceSlice" {
			continue
		}
		s := &resourcev1.ResourceSlice{}
		if err := yaml.UnmarshalStrict(doc, s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
}

// draFree is what a Ready DRA node of these slices offers with the devices held.
func draFree(slices []*resourcev1.ResourceSlice, devices ...string) (whole int32, units []homelabv1.ResourceFree) {
	facts := DeviceFactsOf(slices)
	e := &homelabv1.GpuNodeEntry{Ready: true, GpuCount: facts.GpuCount, Product: facts.Product}
	held := &allocation.Held{Pods: 1, Namespaces: []allocation.NamespaceHeld{{Namespace: "ml", Pods: 1, Devices: devices}}}
	applyHeld(e, held, &corev1.Node{}, facts)
	return e.FreeGpus, e.Free
}

func partitions(kv ...any) []homelabv1.ResourceFree {
	var out []homelabv1.ResourceFree
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, homelabv1.ResourceFree{Resource: DRAPartitionPrefix + kv[i].(string), Free: int32(kv[i+1].(int))})
	}
	return out
}

// A DynamicMIG node offers, per profile, the partitions that its counters still allow one
// after the other, and whole GPUs only where no partition took a counter.
func TestDynamicMIGPartitionsFree(t *testing.T) {
	h100 := draSlices(t, dra.H100DynMIG)
	cases := []struct {
		name  string
		held  []string
		whole int32
		free  []homelabv1.ResourceFree
	}{
		{"nothing held", nil, 2, partitions("1g.10gb", 14, "3g.40gb", 4, "7g.80gb", 2)},
		// The 1g.10gb partition takes memory slice 0 of gpu-0: gpu-0 is no longer whole, nor
		// can it take a 7g.80gb or the 3g.40gb placed on slices 0-3.
		{"a 1g.10gb partition", []string{"gpu-0-mig-1g10gb-19-0"}, 1, partitions("1g.10gb", 13, "3g.40gb", 3, "7g.80gb", 1)},
		// A 3g.40gb takes 60 of 132 multiprocessors and slices 4-7: four 1g.10gb are left.
		{"a 3g.40gb partition", []string{"gpu-0-mig-3g40gb-9-4"}, 1, partitions("1g.10gb", 11, "3g.40gb", 3, "7g.80gb", 1)},
		{"a whole GPU", []string{"gpu-1"}, 1, partitions("1g.10gb", 7, "3g.40gb", 2, "7g.80gb", 1)},
		{"both GPUs", []string{"gpu-0", "gpu-1-mig-7g80gb-0-0"}, 0, partitions("1g.10gb", 0, "3g.40gb", 0, "7g.80gb", 0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			whole, free := draFree(h100, tc.held...)
			if whole != tc.whole || !reflect.DeepEqual(free, tc.free) {
				t.Errorf("free GPUs %d, units %v; want %d, %v", whole, free, tc.whole, tc.free)
			}
		})
	}
}

// The real A100 layout (testdata/08, the driver's on Ampere): no whole GPU is published; seven
// 1g.5gb or one 7g.40gb can be carved, not both.
func TestDynamicMIGAmpere(t *testing.T) {
	a100 := realSlices(t, "08-dra-a100-dynamic-mig-reconstructed.yaml")
	if whole, free := draFree(a100); whole != 0 || !reflect.DeepEqual(free, partitions("1g.5gb", 7, "7g.40gb", 1)) {
		t.Errorf("nothing held: free GPUs %d, units %v; want 0, 7 1g.5gb and 1 7g.40gb", whole, free)
	}
	if whole, free := draFree(a100, "gpu-0-mig-1g5gb-19-3"); whole != 0 || !reflect.DeepEqual(free, partitions("1g.5gb", 6, "7g.40gb", 0)) {
		t.Errorf("a 1g.5gb held: free GPUs %d, units %v; want 0, 6 1g.5gb and no 7g.40gb", whole, free)
	}
}

// A tainted partition is not offered; a partition that names a counter its pool does not
// publish cannot be allocated and is not offered either (with a warning).
func TestPartitionsNotOffered(t *testing.T) {
	h100 := draSlices(t, dra.H100DynMIG)
	for _, s := range h100 {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			switch d.Name {
			case "gpu-0-mig-1g10gb-19-0":
				d.Taints = []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/xid", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
			case "gpu-1-mig-1g10gb-19-0":
				d.ConsumesCounters[0].Counters["no-such-counter"] = resourcev1.Counter{Value: resource.MustParse("1")}
			}
		}
	}
	if _, free := draFree(h100); !reflect.DeepEqual(free, partitions("1g.10gb", 12, "3g.40gb", 4, "7g.80gb", 2)) {
		t.Errorf("units %v, want 12 1g.10gb (one tainted, one broken)", free)
	}
	if f := DeviceFactsOf(h100); len(f.Warnings) != 1 {
		t.Errorf("warnings %q, want one for the broken partition", f.Warnings)
	}
}

// A model's pool counts DRA partitions as it counts device-plugin MIG devices.
func TestPoolCountsDRAPartitions(t *testing.T) {
	var p pooler
	p.add(&homelabv1.GpuNodeEntry{Ready: true, GpuCount: 2, Free: partitions("1g.10gb", 13, "7g.80gb", 1)})
	p.add(&homelabv1.GpuNodeEntry{Ready: true, GpuCount: 8, Free: []homelabv1.ResourceFree{{Resource: "nvidia.com/mig-1g.10gb", Free: 2}}})
	want := []homelabv1.GpuPartition{{Profile: "1g.10gb", Free: 15}, {Profile: "7g.80gb", Free: 1}}
	if got := p.result().Partitions; !reflect.DeepEqual(got, want) {
		t.Errorf("partitions %v, want %v", got, want)
	}
}

// Whatever the counters say (absurd, negative, fractional, missing), the free count neither
// fails nor offers more partitions of a profile than the node publishes, nor more whole GPUs
// than it has.
func FuzzPartitionsFree(f *testing.F) {
	f.Add("gpu-0-mig-1g10gb-19-3", "memory", "-5", "gpu-0-counter-set", "multiprocessors", "8e18", "gpu-1")
	f.Add("gpu-1", "memory-slice-9", "1.5", "gpu-1-counter-set", "memory", "0", "gpu-0-mig-7g80gb-0-0")
	f.Add("gpu-0", "copy-engines", "1e400", "gpu-0-counter-set", "decoders", "0.001", "")
	f.Fuzz(func(t *testing.T, device, counter, value, set, setCounter, setValue, held string) {
		s := draSlices(t, dra.H100DynMIG)
		profiles := map[string]int32{}
		for _, sl := range s {
			for i := range sl.Spec.SharedCounters {
				if cs := &sl.Spec.SharedCounters[i]; cs.Name == set {
					if q, err := resource.ParseQuantity(setValue); err == nil {
						cs.Counters[setCounter] = resourcev1.Counter{Value: q}
					}
				}
			}
			for i := range sl.Spec.Devices {
				d := &sl.Spec.Devices[i]
				if p := AttrProfile.Value(d); p != "" {
					profiles[DRAPartitionPrefix+p]++
				}
				if d.Name != device || len(d.ConsumesCounters) == 0 {
					continue
				}
				if q, err := resource.ParseQuantity(value); err == nil {
					d.ConsumesCounters[0].Counters[counter] = resourcev1.Counter{Value: q}
				}
			}
		}
		whole, free := draFree(s, held)
		if whole < 0 || whole > 2 {
			t.Fatalf("%d whole GPUs free of 2", whole)
		}
		for _, u := range free {
			if u.Free < 0 || u.Free > profiles[u.Resource] {
				t.Fatalf("%s: %d free of %d published", u.Resource, u.Free, profiles[u.Resource])
			}
		}
	})
}
