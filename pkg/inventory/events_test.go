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
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

func TestDiff(t *testing.T) {
	prev := []homelabv1.GpuNodeEntry{
		{Name: "a", Ready: true, Product: "NVIDIA-L4", GpuCount: 1},
		{Name: "b", Ready: false, GpuCount: 8, Capacity: 8, Allocatable: 8},
		{Name: "c", Ready: true, Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8},
		{Name: "gone", Ready: true, Product: "Tesla-T4", GpuCount: 4},
	}
	cur := []homelabv1.GpuNodeEntry{
		{Name: "a", Ready: false, Product: "NVIDIA-L4", GpuCount: 1},
		{Name: "b", Ready: true, GpuCount: 8, Capacity: 8, Allocatable: 6, UnhealthyGpus: 2},
		{Name: "c", Ready: true, Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8, LabelsMissing: true},
		{Name: "new", Ready: true, Product: "NVIDIA-L4", GpuCount: 1},
	}
	var got []string
	for _, e := range Diff(prev, cur, true) {
		got = append(got, e.Type+" "+e.Reason+": "+e.Message)
	}
	want := []string{
		corev1.EventTypeWarning + " GPUNodeNotReady: GPU node a is not Ready (1 GPUs unavailable)",
		corev1.EventTypeNormal + " GPUNodeReady: GPU node b is Ready",
		corev1.EventTypeWarning + " GPUsUnhealthy: 2 of 8 GPUs on node b are unhealthy (allocatable 6 < capacity 8)",
		corev1.EventTypeWarning + " LabelsMissing: GPU Feature Discovery labels vanished from node c; keeping last-known NVIDIA-H100-80GB-HBM3 x8",
		corev1.EventTypeNormal + " GPUNodeJoined: GPU node new joined (NVIDIA-L4, 1 GPUs, ready=true)",
		corev1.EventTypeWarning + " GPUNodeLeft: GPU node gone left the inventory (Tesla-T4, 4 GPUs)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if again := Diff(cur, cur, true); len(again) != 0 {
		t.Errorf("no change must make no event, got %v", again)
	}
	for _, e := range Diff(prev[:1], cur[:1], false) {
		if e.Reason == EventNodeJoined {
			t.Errorf("a truncated previous status cannot tell who joined: %v", e)
		}
	}
}
