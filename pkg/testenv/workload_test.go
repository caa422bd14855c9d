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

package testenv

import (
	"reflect"
	"testing"
)

// Workload-aware scheduling needs its gates on both components and the v1beta1 API served;
// the caller's own arguments stay, first, and its slices are not written to.
func TestWithWorkloadSchedulingTurnsOnBothComponents(t *testing.T) {
	api := make([]string, 1, 4)
	api[0] = "--v=2"
	in := Options{APIServerArgs: api, SchedulerArgs: []string{"--pod-max-in-unschedulable-pods-duration=1s"}}
	out := WithWorkloadScheduling(in)
	gates := "--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
	if want := []string{"--v=2", gates, "--runtime-config=scheduling.k8s.io/v1beta1=true"}; !reflect.DeepEqual(out.APIServerArgs, want) {
		t.Errorf("kube-apiserver args %q, want %q", out.APIServerArgs, want)
	}
	if want := []string{"--pod-max-in-unschedulable-pods-duration=1s", gates}; !reflect.DeepEqual(out.SchedulerArgs, want) {
		t.Errorf("kube-scheduler args %q, want %q", out.SchedulerArgs, want)
	}
	if extra := api[:2][1]; extra != "" {
		t.Errorf("the caller's slice was written to: %q", extra)
	}
}

// A topology flavor is a ResourceFlavor naming its Topology; the Topology lists its levels.
func TestKueueTopologyAndItsFlavor(t *testing.T) {
	assertJSON(t, KueueTopology("racks", "topology.kubernetes.io/rack", "kubernetes.io/hostname"),
		`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"Topology","metadata":{"name":"racks"},"spec":{"levels":[`+
			`{"nodeLabel":"topology.kubernetes.io/rack"},{"nodeLabel":"kubernetes.io/hostname"}]}}`)
	assertJSON(t, KueueTopologyFlavor("racks", "racks", map[string]string{"example.com/fleet": "racks"}),
		`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ResourceFlavor","metadata":{"name":"racks"},"spec":{`+
			`"nodeLabels":{"example.com/fleet":"racks"},"topologyName":"racks"}}`)
}
