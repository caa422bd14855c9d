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

package gang

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/topology"
)

var (
	byHost = []string{zone, rack, topology.Hostname}
	byRack = []string{zone, rack}
)

// hosts is an assignment at the hostname level.
func hosts(counts ...any) []DomainCount {
	var out []DomainCount
	for i := 0; i < len(counts); i += 2 {
		out = append(out, DomainCount{Values: []string{counts[i].(string)}, Count: int32(counts[i+1].(int))})
	}
	return out
}

// tasHeld is a running pod of a TAS workload: its usage is the workload's.
func tasHeld(name, node string, n int64) *corev1.Pod {
	p := bound(name, node, n, 0)
	p.Annotations = map[string]string{"kueue.x-k8s.io/podset-required-topology": rack}
	return p
}

func TestPlaceAsKueue(t *testing.T) {
	full := racks()
	full.Pods = append(full.Pods, bound("first-0", "a1", 8, 0), bound("first-1", "a2", 8, 0))
	tasFull := capacity.Cluster{
		Nodes: []*corev1.Node{gpuNode("a1", "z1", "rack-a", gpus("8")), gpuNode("a2", "z1", "rack-a", gpus("8")),
			gpuNode("a3", "z1", "rack-a", gpus("8")), gpuNode("b1", "z1", "rack-b", gpus("8")), gpuNode("b2", "z1", "rack-b", gpus("8"))},
		Pods: []*corev1.Pod{tasHeld("w-0", "a1", 8), tasHeld("w-1", "a2", 8), tasHeld("w-2", "a3", 8)},
	}
	unready := capacity.Cluster{Nodes: []*corev1.Node{
		gpuNode("a1", "z1", "rack-a", gpus("8"), cordoned), gpuNode("a2", "z1", "rack-a", gpus("8"), notReady),
		gpuNode("a3", "z1", "rack-a", gpus("8")), gpuNode("a4", "z1", "rack-a", gpus("8")),
		gpuNode("b1", "z1", "rack-b", gpus("8")), gpuNode("b2", "z1", "rack-b", gpus("8")), gpuNode("b3", "z1", "rack-b", gpus("8"))}}
	uneven := capacity.Cluster{
		Nodes: []*corev1.Node{gpuNode("a1", "z1", "rack-a", gpus("8")), gpuNode("a2", "z1", "rack-a", gpus("8")), gpuNode("a3", "z1", "rack-a", gpus("8")),
			gpuNode("b1", "z1", "rack-b", gpus("8")), gpuNode("b2", "z1", "rack-b", gpus("8")),
			gpuNode("c1", "z1", "rack-c", gpus("8")), gpuNode("c2", "z1", "rack-c", gpus("8"))},
		Pods: []*corev1.Pod{bound("busy", "b2", 8, 0)},
	}
	halves := capacity.Cluster{
		Nodes: []*corev1.Node{gpuNode("x1", "z1", "rack-x", gpus("8")), gpuNode("x2", "z1", "rack-x", gpus("8")),
			gpuNode("y1", "z1", "rack-y", gpus("8"), func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "gpu", Value: "broken", Effect: corev1.TaintEffectNoSchedule}}
			}), gpuNode("y2", "z1", "rack-y", gpus("8"))},
		Pods: []*corev1.Pod{bound("h1", "x1", 4, 0), bound("h2", "x2", 4, 0), bound("h3", "y1", 8, 0), bound("h4", "y2", 8, 0)},
	}
	sizes := capacity.Cluster{Nodes: []*corev1.Node{
		gpuNode("n16", "z1", "rack-a", gpus("16")), gpuNode("n24", "z1", "rack-a", gpus("24")), gpuNode("n8", "z1", "rack-a", gpus("8"))}}
	tests := []struct {
		name     string
		cluster  capacity.Cluster
		gang     Gang
		levels   []string
		mode     string
		domain   string
		level    string
		assigned []DomainCount
		nodes    []string
		message  string
		rooms    []Domain
	}{{
		name: "2 x 8 GPUs into the rack with room", cluster: racks(),
		gang: Gang{Templates: []Template{replicas("train", 8, 2)}, Topology: Topology{Key: rack}}, levels: byHost,
		mode: KueueFit, domain: "rack-a", level: rack, assigned: hosts("a1", 1, "a2", 1), nodes: []string{"a1", "a2"},
		rooms: []Domain{{Value: "rack-a", Nodes: 2, Pods: 2},
			{Value: "rack-b", Nodes: 2, Pods: 1, Held: `Total nodes: 2; excluded: resource "nvidia.com/gpu": 1`}},
	}, {
		name: "3 x 8 GPUs that no rack holds", cluster: full,
		gang: Gang{Templates: []Template{replicas("train", 8, 3)}, Topology: Topology{Key: rack}}, levels: byHost,
		mode: KueueNoFit, nodes: []string{"", "", ""},
		message: `couldn't assign flavors to pod set main: topology "default" allows to fit only 1 out of 3 pod(s). Total nodes: 4; excluded: resource "nvidia.com/gpu": 3`,
		rooms: []Domain{{Value: "rack-a", Nodes: 2, Held: `Total nodes: 2; excluded: resource "nvidia.com/gpu": 2`},
			{Value: "rack-b", Nodes: 2, Pods: 1, Held: `Total nodes: 2; excluded: resource "nvidia.com/gpu": 1`}},
	}, {
		name: "fits only with the TAS workloads' pods gone: Preempt", cluster: tasFull,
		gang: Gang{Templates: []Template{replicas("train", 8, 3)}, Topology: Topology{Key: rack}}, levels: byHost,
		mode: KueuePreempt, nodes: []string{"", "", ""},
		message: `couldn't assign flavors to pod set main: topology "default" allows to fit only 2 out of 3 pod(s). Total nodes: 5; excluded: resource "nvidia.com/gpu": 3`,
		rooms: []Domain{{Value: "rack-a", Nodes: 3, Held: `Total nodes: 3; excluded: resource "nvidia.com/gpu": 3`},
			{Value: "rack-b", Nodes: 2, Pods: 2, Held: "Total nodes: 2; excluded: none"}},
	}, {
		name: "cordoned and NotReady nodes are not in Kueue's topology at all", cluster: unready,
		gang: Gang{Templates: []Template{replicas("train", 8, 4)}, Topology: Topology{Key: rack}}, levels: byHost,
		mode: KueueNoFit, nodes: []string{"", "", "", ""},
		message: `couldn't assign flavors to pod set main: topology "default" allows to fit only 3 out of 4 pod(s)`,
		rooms: []Domain{{Value: "rack-a", Nodes: 2, Pods: 2, Held: "Total nodes: 2; excluded: none"},
			{Value: "rack-b", Nodes: 3, Pods: 3, Held: "Total nodes: 3; excluded: none"}},
	}, {
		name: "preferred: no rack holds 4, the zone does", cluster: capacity.Cluster{Nodes: racks().Nodes},
		gang: Gang{Templates: []Template{replicas("train", 8, 4)}, Topology: Topology{Key: rack, Preferred: true}}, levels: byHost,
		mode: KueueFit, domain: "z1", level: zone, assigned: hosts("a1", 1, "a2", 1, "b1", 1, "b2", 1), nodes: []string{"a1", "a2", "b1", "b2"},
		rooms: []Domain{{Value: "rack-a", Nodes: 2, Pods: 2, Held: "Total nodes: 2; excluded: none"},
			{Value: "rack-b", Nodes: 2, Pods: 2, Held: "Total nodes: 2; excluded: none"}},
	}, {
		name: "required zone, best fit down the racks", cluster: uneven,
		gang: Gang{Templates: []Template{replicas("train", 8, 4)}, Topology: Topology{Key: zone}}, levels: byHost,
		mode: KueueFit, domain: "z1", level: zone, assigned: hosts("a1", 1, "a2", 1, "a3", 1, "b1", 1), nodes: []string{"a1", "a2", "a3", "b1"},
		rooms: []Domain{{Value: "z1", Nodes: 7, Pods: 4}},
	}, {
		name: "slices of 2 pods, each slice in one rack", cluster: uneven,
		gang: Gang{Templates: []Template{replicas("train", 8, 4)}, Topology: Topology{Key: zone, SliceKey: rack, SliceSize: 2}}, levels: byHost,
		mode: KueueFit, domain: "z1", level: zone, assigned: hosts("a1", 1, "a2", 1, "c1", 1, "c2", 1), nodes: []string{"a1", "a2", "c1", "c2"},
		rooms: []Domain{{Value: "z1", Nodes: 7, Pods: 4}},
	}, {
		// Kueue does not check that the slice size divides the count: it assigns
		// count/size slices, and the last pod gets no domain.
		name: "a slice size that does not divide the count", cluster: capacity.Cluster{Nodes: racks().Nodes},
		gang: Gang{Templates: []Template{replicas("train", 1, 5)}, Topology: Topology{Key: zone, SliceKey: rack, SliceSize: 2}}, levels: byHost,
		mode: KueueFit, domain: "z1", level: zone, assigned: hosts("a1", 4), nodes: []string{"a1", "a1", "a1", "a1", ""},
		rooms: []Domain{{Value: "z1", Nodes: 4, Pods: 5}},
	}, {
		name: "unconstrained: the node with the least room that holds the gang", cluster: sizes,
		gang: Gang{Templates: []Template{replicas("train", 8, 2)}, Topology: Topology{Unconstrained: true}}, levels: byHost,
		mode: KueueFit, domain: "n16", level: topology.Hostname, assigned: hosts("n16", 2), nodes: []string{"n16", "n16"},
		rooms: []Domain{{Value: "z1", Nodes: 3, Pods: 2}},
	}, {
		name: "no topology: implied, as in a ClusterQueue of TAS flavors only", cluster: sizes,
		gang: Gang{Templates: []Template{replicas("train", 8, 2)}}, levels: byHost,
		mode: KueueFit, domain: "n16", level: topology.Hostname, assigned: hosts("n16", 2), nodes: []string{"n16", "n16"},
		rooms: []Domain{{Value: "z1", Nodes: 3, Pods: 2}},
	}, {
		name: "DRA claims are not counted: Kueue sends the gang to the rack without DRA GPUs", cluster: draRack(t),
		gang: Gang{Templates: []Template{draReplicas("train", 8, 2)}, Topology: Topology{Key: rack}}, levels: byHost,
		mode: KueueFit, domain: "rack-p", level: rack, assigned: hosts("p1", 2), nodes: []string{"p1", "p1"},
		rooms: []Domain{{Value: "rack-d", Nodes: 2, Pods: 2}, {Value: "rack-p", Nodes: 1, Pods: 2}},
	}, {
		name: "device-plugin GPUs on DRA nodes: Kueue finds no nvidia.com/gpu there", cluster: draRack(t),
		gang: Gang{Templates: []Template{replicas("train", 8, 2)}, Topology: Topology{Key: rack}}, levels: byHost,
		mode: KueueNoFit, nodes: []string{"", ""},
		message: `couldn't assign flavors to pod set main: topology "default" allows to fit only 1 out of 2 pod(s). Total nodes: 3; excluded: resource "nvidia.com/gpu": 2`,
		rooms: []Domain{{Value: "rack-d", Nodes: 2, Held: `Total nodes: 2; excluded: resource "nvidia.com/gpu": 2`},
			{Value: "rack-p", Nodes: 1, Pods: 1, Held: "Total nodes: 1; excluded: none"}},
	}, {
		name: "MIG and time-sliced nodes: the best fit is the time-sliced node", cluster: sharedRack(),
		gang: Gang{Templates: []Template{replicas("train", 8, 3)}, Topology: Topology{Key: rack}}, levels: byHost,
		mode: KueueFit, domain: "rack-m", level: rack, assigned: hosts("m-ts", 3), nodes: []string{"m-ts", "m-ts", "m-ts"},
		rooms: []Domain{{Value: "rack-m", Nodes: 3, Pods: 3}},
	}, {
		// Without the hostname level a leaf is a rack: its nodes' room is summed (two
		// halves make one 8-GPU pod), taints are not read, and a rack is one "node".
		name: "lowest level not the hostname", cluster: halves,
		gang: Gang{Templates: []Template{replicas("train", 8, 2)}, Topology: Topology{Key: rack}}, levels: byRack,
		mode: KueueNoFit, nodes: []string{"", ""},
		message: `couldn't assign flavors to pod set main: topology "default" allows to fit only 1 out of 2 pod(s). Total nodes: 2; excluded: resource "nvidia.com/gpu": 1`,
		rooms: []Domain{{Value: "rack-x", Nodes: 2, Pods: 1, Held: "Total nodes: 1; excluded: none"},
			{Value: "rack-y", Nodes: 2, Held: `Total nodes: 1; excluded: resource "nvidia.com/gpu": 1`}},
	}, {
		name: "a key in the levels that no node carries", cluster: capacity.Cluster{Nodes: []*corev1.Node{gpuNode("a1", "z1", "", gpus("8"))}},
		gang: Gang{Templates: []Template{replicas("train", 8, 1)}, Topology: Topology{Key: rack}}, levels: byHost,
		mode: KueueNoFit, nodes: []string{""},
		message: "couldn't assign flavors to pod set main: no topology domains at level: topology.kubernetes.io/rack",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := capacity.NewSnapshot(tc.cluster)
			res, err := PlaceAsKueue(s, tc.gang, Kueue{Levels: tc.levels})
			if err != nil {
				t.Fatal(err)
			}
			checkKueue(t, res, tc.mode, tc.domain, tc.message)
			if res.Fits {
				ta := res.Kueue.Assignments[0]
				if ta.Level != tc.level || !reflect.DeepEqual(ta.Domains, tc.assigned) {
					t.Errorf("assignment at %s: %+v, want at %s: %+v", ta.Level, ta.Domains, tc.level, tc.assigned)
				}
			}
			if got := nodesOf(res.Pods); !reflect.DeepEqual(got, tc.nodes) {
				t.Errorf("nodes %q, want %q", got, tc.nodes)
			}
			if !reflect.DeepEqual(res.Domains, tc.rooms) {
				t.Errorf("domains:\n got %+v\nwant %+v", res.Domains, tc.rooms)
			}
		})
	}
}

func checkKueue(t *testing.T, res Result, mode, domain, message string) {
	t.Helper()
	if res.Kueue.Mode != mode || res.Fits != (mode == KueueFit) {
		t.Errorf("mode %s (fits %v), want %s", res.Kueue.Mode, res.Fits, mode)
	}
	if res.Domain != domain {
		t.Errorf("domain %q, want %q", res.Domain, domain)
	}
	if res.Message != message {
		t.Errorf("message:\n got %q\nwant %q", res.Message, message)
	}
}

func TestKueueFlavorAndPodSets(t *testing.T) {
	tainted := racks()
	tainted.Nodes[0].Spec.Taints = []corev1.Taint{{Key: "gpu", Value: "broken", Effect: corev1.TaintEffectNoSchedule}}
	s := capacity.NewSnapshot(tainted)
	gang := Gang{Templates: []Template{replicas("train", 8, 2)}, Topology: Topology{Key: rack}}
	res, _ := PlaceAsKueue(s, gang, Kueue{Levels: byHost, Topology: "gpu-topology"})
	want := `couldn't assign flavors to pod set main: topology "gpu-topology" allows to fit only 1 out of 2 pod(s). Total nodes: 4; excluded: resource "nvidia.com/gpu": 1, taint "gpu=broken:NoSchedule": 1`
	checkKueue(t, res, KueueNoFit, "", want)
	tolerate := []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
	res, _ = PlaceAsKueue(s, gang, Kueue{Levels: byHost, Tolerations: tolerate})
	checkKueue(t, res, KueueFit, "rack-a", "")

	// The flavor's nodeLabels leave rack-a out; the pod's nodeSelector leaves out b2.
	flavored := racks()
	flavored.Pods = nil
	for _, n := range flavored.Nodes[2:] {
		n.Labels["pool"] = "b"
	}
	selective := replicas("train", 8, 2)
	selective.Pod.Spec.NodeSelector = map[string]string{topology.Hostname: "b1"}
	res, _ = PlaceAsKueue(capacity.NewSnapshot(flavored), Gang{Templates: []Template{selective}, Topology: Topology{Key: rack}},
		Kueue{Levels: byHost, NodeLabels: map[string]string{"pool": "b"}})
	checkKueue(t, res, KueueNoFit, "", `couldn't assign flavors to pod set main: topology "default" allows to fit only 1 out of 2 pod(s). Total nodes: 2; excluded: nodeSelector: 1`)

	// Two PodSets are assigned one after the other, each seeing the first's pods.
	two := Gang{Templates: []Template{replicas("launcher", 8, 1), replicas("worker", 8, 2)}, Topology: Topology{Key: rack}}
	res, err := PlaceAsKueue(capacity.NewSnapshot(racks()), two, Kueue{Levels: byHost, PodSets: []string{"launcher", "worker"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := nodesOf(res.Pods); !reflect.DeepEqual(got, []string{"b1", "a1", "a2"}) {
		t.Errorf("launcher and workers on %q, want the launcher in rack-b's best fit and the workers in rack-a", got)
	}
	if got := res.Kueue.Assignments[1]; got.PodSet != "worker" || got.Chosen[0] != "rack-a" {
		t.Errorf("second PodSet %+v", got)
	}
}

func TestKueueBadInput(t *testing.T) {
	s := capacity.NewSnapshot(racks())
	one := []Template{replicas("t", 8, 3)}
	tests := []struct {
		name   string
		gang   Gang
		levels []string
		is     error
		want   string
	}{
		{"a key not among the levels", Gang{Templates: one, Topology: Topology{Key: topology.NVLinkClique}}, byHost, ErrNoDomain,
			`no topology domain: "nvidia.com/gpu.clique" is not a level of topology "default" (Kueue: "Flavor \"default\" does not contain the requested level")`},
		{"the hostname above the lowest level", Gang{Templates: one}, []string{topology.Hostname, rack}, ErrInput,
			"topology levels: the kubernetes.io/hostname label can only be used at the lowest level of topology"},
		{"a level named twice", Gang{Templates: one}, []string{rack, rack}, ErrInput,
			`topology levels[1] repeats levels[0]: label "topology.kubernetes.io/rack"`},
		{"a slice without its size", Gang{Templates: one, Topology: Topology{Key: zone, SliceKey: rack}}, byHost, ErrInput,
			`slice topology requested, but slice size not provided ("kueue.x-k8s.io/podset-slice-size" must be set when "kueue.x-k8s.io/podset-slice-required-topology" is specified)`},
		{"a slice larger than the PodSet", Gang{Templates: one, Topology: Topology{Key: zone, SliceKey: rack, SliceSize: 4}}, byHost, ErrInput,
			`"kueue.x-k8s.io/podset-slice-size" of pod set main must not be greater than pod set count 3`},
		{"required and unconstrained at once", Gang{Templates: one, Topology: Topology{Key: rack, Unconstrained: true}}, byHost, ErrInput,
			`podset annotations must not contain more than one topology annotation`},
		{"a minCount below the count", Gang{Templates: one, MinCount: 2}, byHost, ErrInput,
			"Kueue admits a PodSet's whole count; minCount 2 is kube-scheduler's"},
		{"10,000 replicas", Gang{Templates: []Template{replicas("t", 1, 10000)}}, byHost, ErrInput,
			"the gang asks for more than 2048 pods; this simulation places at most 2048"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := PlaceAsKueue(s, tc.gang, Kueue{Levels: tc.levels})
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %v with %q", err, tc.is, tc.want)
			}
		})
	}
}
