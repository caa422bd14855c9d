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

package topology

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const (
	h100  = "NVIDIA H100 80GB HBM3"
	gb200 = "NVIDIA GB200"
	mig   = "NVIDIA A100 MIG 1g.5gb"
	l4    = "NVIDIA L4"
)

// node is a GPU node in zone z and rack r (either may be "" for none).
func node(name, z, r, model string, gpus, free int64, schedulable bool) Node {
	labels := map[string]string{Hostname: name}
	if z != "" {
		labels[Zone] = z
	}
	if r != "" {
		labels[Rack] = r
	}
	return Node{Name: name, Labels: labels, Model: model, GPUs: gpus, Free: free, Schedulable: schedulable}
}

// summary is what a test reads of one domain and model.
type summary struct {
	Domain  string
	Nodes   int
	Free    int64
	Unsched int64
	Slots   []int64
	Largest int64
}

func summarize(t *Tree, level int, model string) []summary {
	var out []summary
	for _, d := range t.Domains[level] {
		for _, st := range d.Models {
			if st.Model == model {
				out = append(out, summary{d.Value, st.Nodes, st.Free, st.FreeUnschedulable, st.Slots, st.LargestGang})
			}
		}
	}
	return out
}

func TestBuildCountsPerDomain(t *testing.T) {
	racks := []Node{
		node("a1", "z1", "r1", h100, 8, 8, true),
		node("a2", "z1", "r1", h100, 8, 8, true),
		node("a3", "z1", "r1", h100, 8, 4, true),
		node("a4", "z1", "r1", h100, 8, 8, false), // cordoned: free apart
		node("b1", "z1", "r2", h100, 8, 2, true),
		node("b2", "z1", "r2", h100, 8, 8, false), // NotReady
		node("c1", "z2", "r3", h100, 8, 8, true),
		node("c2", "z2", "r3", h100, 8, 8, true),
		node("c3", "z2", "r3", h100, 8, 8, true),
		node("c4", "z2", "r3", h100, 8, 8, true),
		node("cpu", "z2", "r3", "", 0, 0, true),
	}
	sixes := []Node{
		node("s1", "z1", "r1", l4, 6, 6, true),
		node("s2", "z1", "r1", l4, 6, 6, true),
		node("s3", "z1", "r1", l4, 6, 4, true),
	}
	mixed := []Node{
		node("w1", "z1", "r1", h100, 8, 8, true),
		node("m1", "z1", "r1", mig, 56, 56, true),
		node("t1", "z1", "r1", "NVIDIA A10G (time-sliced x4)", 16, 12, true),
	}
	tests := []struct {
		name   string
		nodes  []Node
		sizes  []int64
		level  int
		model  string
		want   []summary
		podGPU []int64
	}{{
		name:  "racks with different free GPUs, a cordoned and a NotReady node",
		nodes: racks, level: 1, model: h100, podGPU: []int64{8, 8, 8, 8, 8},
		want: []summary{
			{"r1", 4, 20, 8, []int64{2, 1, 0, 0, 0}, 16},
			{"r2", 2, 2, 8, []int64{0, 0, 0, 0, 0}, 0},
			{"r3", 4, 32, 0, []int64{4, 2, 1, 0, 0}, 32},
		},
	}, {
		name: "zones sum their racks", nodes: racks, level: 0, model: h100,
		podGPU: []int64{8, 8, 8, 8, 8},
		want: []summary{
			{"z1", 6, 22, 16, []int64{2, 1, 0, 0, 0}, 16},
			{"z2", 4, 32, 0, []int64{4, 2, 1, 0, 0}, 32},
		},
	}, {
		// 6-GPU nodes: a gang of 8 is 4 pods of gcd(8,6)=2 GPUs, a gang of 12 two pods
		// of 6, a gang of 3 one pod of 3; a node with 4 free holds two 2-GPU pods.
		name: "nodes whose GPU count does not divide the gang size", nodes: sixes, sizes: []int64{12, 8, 3},
		level: 1, model: l4, podGPU: []int64{3, 2, 6},
		want: []summary{{"r1", 3, 16, 0, []int64{5, 2, 1}, 12}},
	}, {
		name: "MIG and time-sliced nodes are models of their own", nodes: mixed, level: 1, model: mig,
		podGPU: []int64{8, 8, 8, 8, 8},
		want:   []summary{{"r1", 1, 56, 0, []int64{7, 3, 1, 0, 0}, 56}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tree, err := Build([]string{Zone, Rack}, tc.nodes, Options{GangSizes: tc.sizes})
			if err != nil {
				t.Fatal(err)
			}
			if got := summarize(tree, tc.level, tc.model); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("domains:\n got %+v\nwant %+v", got, tc.want)
			}
			m, _ := slices.BinarySearch(tree.Models, tc.model)
			if got := tree.PodGPUs[m]; !reflect.DeepEqual(got, tc.podGPU) {
				t.Errorf("pod GPUs per gang size %v = %v, want %v", tree.GangSizes, got, tc.podGPU)
			}
			if len(tree.Problems) != 0 {
				t.Errorf("problems: %+v", tree.Problems)
			}
		})
	}
}

// clique is 18 GB200 nodes of 4 GPUs in one NVLink clique of block b.
func clique(b, c string, free func(i int) int64) []Node {
	var out []Node
	for i := range 18 {
		name := fmt.Sprintf("%s-%s-%d", b, c, i)
		out = append(out, Node{Name: name, Model: gb200, GPUs: 4, Free: free(i), Schedulable: true,
			Labels: map[string]string{GKEBlock: b, NVLinkClique: "cluster-uuid." + c, Hostname: name}})
	}
	return out
}

func TestNVLinkCliquesAndFragmentation(t *testing.T) {
	// Two cliques of 18 nodes: one whole, one with every other node full. Together they
	// hold 72+36 free GPUs; a gang of 128 fits neither the block nor a clique, a gang of
	// 64 fits the block but no clique.
	nodes := append(clique("b1", "c1", func(int) int64 { return 4 }),
		clique("b1", "c2", func(i int) int64 { return int64(4 * (i % 2)) })...)
	tree, err := Build([]string{GKEBlock, NVLinkClique}, nodes, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []summary{
		{"cluster-uuid.c1", 18, 72, 0, []int64{9, 4, 2, 1, 0}, 72},
		{"cluster-uuid.c2", 18, 36, 0, []int64{4, 2, 1, 0, 0}, 36},
	}
	if got := summarize(tree, 1, gb200); !reflect.DeepEqual(got, want) {
		t.Errorf("cliques:\n got %+v\nwant %+v", got, want)
	}
	largest := tree.Largest()
	wantLargest := []Largest{
		{Level: GKEBlock, Model: gb200, GPUs: 108, Domain: "b1", GangSize: 64},
		{Level: NVLinkClique, Model: gb200, GPUs: 72, Domain: "cluster-uuid.c1", GangSize: 64},
	}
	if !reflect.DeepEqual(largest, wantLargest) {
		t.Errorf("largest:\n got %+v\nwant %+v", largest, wantLargest)
	}
	frag := tree.Fragmentation([]string{NVLinkClique})
	if len(frag) != 0 {
		t.Errorf("a gang of 64 fits clique c1, yet: %+v", frag)
	}
	// Take c1 down to 12 free nodes: 48 + 36 free, a gang of 64 fits the block only.
	for i := range 6 {
		nodes[i].Free = 0
	}
	tree, _ = Build([]string{GKEBlock, NVLinkClique}, nodes, Options{})
	frag = tree.Fragmentation([]string{NVLinkClique, "not-a-level"})
	wantFrag := []Fragmentation{{Level: NVLinkClique, Model: gb200, Free: 84, GangGPUs: 64, Largest: 48,
		Message: `topology fragmentation: 84 free "NVIDIA GB200" GPUs could take a gang of 64, but no "nvidia.com/gpu.clique" domain can (the largest gang in one: 48 GPUs)`}}
	if !reflect.DeepEqual(frag, wantFrag) {
		t.Errorf("fragmentation:\n got %+v\nwant %+v", frag, wantFrag)
	}
}

func TestLevelsRefused(t *testing.T) {
	tests := []struct {
		levels []string
		sizes  []int64
		want   string
	}{
		{nil, nil, "topology has no levels"},
		{[]string{Zone, Rack, Zone}, nil, `topology levels[2] repeats levels[0]: label "topology.kubernetes.io/zone"`},
		{[]string{Zone, ""}, nil, "topology levels[1] names no label"},
		{slices.Repeat([]string{"k"}, 17), nil, "topology has 17 levels; at most 16 are allowed"},
		{[]string{Zone}, []int64{8, 0}, "gang size 0 is not a positive number of GPUs"},
	}
	for _, tc := range tests {
		_, err := Build(tc.levels, nil, Options{GangSizes: tc.sizes})
		if err == nil || err.Error() != tc.want {
			t.Errorf("Build(%q, sizes %v) = %v, want %q", tc.levels, tc.sizes, err, tc.want)
		}
	}
}

func TestProblems(t *testing.T) {
	var many []Node
	for i := range 500 {
		many = append(many, node(fmt.Sprintf("n%03d", i), "z1", fmt.Sprintf("r%03d", i), h100, 8, 8, true))
	}
	tests := []struct {
		name   string
		levels []string
		nodes  []Node
		want   []Problem
	}{{
		name: "a key no node carries", levels: []string{Zone, AWSNetworkLayer1},
		nodes: []Node{node("a", "z1", "", h100, 8, 8, true), node("b", "z1", "", h100, 8, 8, true)},
		want: []Problem{{Kind: NoNodeCarries, Level: AWSNetworkLayer1, Count: 2,
			Message: `topology level "topology.k8s.aws/network-node-layer-1": none of the 2 nodes carries this label`}},
	}, {
		name: "nodes lacking a level's label", levels: []string{Zone, Rack},
		nodes: []Node{node("a", "z1", "r1", h100, 8, 8, true), node("b", "z1", "r1", h100, 8, 8, true),
			node("c", "z1", "", h100, 8, 8, true), node("d", "", "", h100, 8, 8, true)},
		want: []Problem{
			{Kind: MissingLabel, Level: Zone, Count: 1, Examples: []string{"d"},
				Message: `topology level "topology.kubernetes.io/zone": 1 of 4 nodes lack this label and belong to no domain (e.g. d)`},
			{Kind: MissingLabel, Level: Rack, Count: 2, Examples: []string{"c", "d"},
				Message: `topology level "topology.kubernetes.io/rack": 2 of 4 nodes lack this label and belong to no domain (e.g. c, d)`},
		},
	}, {
		name: "racks that do not nest in zones", levels: []string{Zone, Rack},
		nodes: []Node{node("a", "z1", "r1", h100, 8, 8, true), node("b", "z2", "r1", h100, 8, 8, true),
			node("c", "z1", "r2", h100, 8, 8, true), node("d", "z2", "r2", h100, 8, 8, true),
			node("e", "z2", "r3", h100, 8, 8, true), node("f", "z3", "r1", h100, 8, 8, true)},
		want: []Problem{{Kind: NotNested, Level: Rack, Count: 2, Examples: []string{`"r1" in "z1" and "z2"`, `"r2" in "z1" and "z2"`},
			Message: `topology level "topology.kubernetes.io/rack" does not nest in "topology.kubernetes.io/zone": 2 values lie in more than one domain above (e.g. "r1" in "z1" and "z2", "r2" in "z1" and "z2")`}},
	}, {
		name: "a label with a distinct value on every node", levels: []string{Zone, Rack, Hostname}, nodes: many,
		want: []Problem{{Kind: DistinctPerNode, Level: Rack, Count: 500,
			Message: `topology level "topology.kubernetes.io/rack" has a distinct value on each of its 500 nodes: every domain is one node`}},
	}, {
		name: "many nodes lacking a label: exact total, few names", levels: []string{Zone, GKEBlock},
		nodes: append(many[:4:4], Node{Name: "x", Labels: map[string]string{Zone: "z1", GKEBlock: "b"}, Model: h100, GPUs: 8}),
		want: []Problem{{Kind: MissingLabel, Level: GKEBlock, Count: 4, Examples: []string{"n000", "n001", "n002"},
			Message: `topology level "cloud.google.com/gce-topology-block": 4 of 5 nodes lack this label and belong to no domain (e.g. n000, n001, n002 and 1 more)`}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tree, err := Build(tc.levels, tc.nodes, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(tree.Problems, tc.want) {
				t.Errorf("problems:\n got %+v\nwant %+v", tree.Problems, tc.want)
			}
		})
	}
}

func TestBuildIgnoresNodeOrder(t *testing.T) {
	nodes := fleet(2000, 7)
	levels := Present(DefaultLevels, nodes)
	if want := []string{Zone, Rack, NVLinkClique}; !reflect.DeepEqual(levels, want) {
		t.Fatalf("Present = %q, want %q", levels, want)
	}
	a, err := Build(levels, nodes, Options{})
	if err != nil {
		t.Fatal(err)
	}
	shuffled := slices.Clone(nodes)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	b, _ := Build(levels, shuffled, Options{})
	if !reflect.DeepEqual(a, b) {
		t.Error("the tree depends on the order of the nodes")
	}
	var free int64
	for _, n := range nodes {
		if n.Schedulable && n.Model == h100 {
			free += n.Free
		}
	}
	for l := range levels {
		var sum int64
		for _, d := range a.Domains[l] {
			for _, st := range d.Models {
				if st.Model == h100 {
					sum += st.Free
				}
			}
		}
		if sum != free {
			t.Errorf("level %s: domains hold %d free H100 GPUs, the nodes %d", levels[l], sum, free)
		}
	}
}

// fleet is n GPU nodes in zones of racks of cliques, one in ten unschedulable.
func fleet(n int, seed uint64) []Node {
	r := rand.New(rand.NewPCG(seed, seed))
	models := []string{h100, gb200, mig, l4}
	out := make([]Node, n)
	for i := range out {
		name := fmt.Sprintf("node-%05d", i)
		rack := i / 16
		out[i] = Node{
			Name: name,
			Labels: map[string]string{
				Hostname: name, Zone: fmt.Sprintf("zone-%d", rack/100), Rack: fmt.Sprintf("rack-%04d", rack),
				NVLinkClique: fmt.Sprintf("uuid.%d", i/8), "nvidia.com/gpu.product": "x",
			},
			Model: models[rack%len(models)], GPUs: 8, Free: int64(r.IntN(9)), Schedulable: i%10 != 0,
		}
	}
	return out
}

func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{5000, 20000} {
		nodes := fleet(n, 1)
		levels := Present(DefaultLevels, nodes)
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tree, err := Build(levels, nodes, Options{})
				if err != nil {
					b.Fatal(err)
				}
				tree.Fragmentation(levels)
			}
		})
	}
}

func TestMessagesNameTheLevel(t *testing.T) {
	tree, _ := Build([]string{Zone}, []Node{node("a", "", "", h100, 8, 8, true)}, Options{})
	if len(tree.Problems) != 1 || !strings.Contains(tree.Problems[0].Message, Zone) {
		t.Errorf("problems %+v", tree.Problems)
	}
	if tree.Outside != 1 || len(tree.Domains[0]) != 0 {
		t.Errorf("a node without the label is outside the tree: outside %d, domains %+v", tree.Outside, tree.Domains[0])
	}
}

func TestPartialKeepsNodesWithoutLowerLevels(t *testing.T) {
	// H100 nodes in racks without NVLink cliques beside GB200 nodes in one clique.
	nodes := []Node{node("h1", "z1", "r1", h100, 8, 8, true), node("h2", "z1", "r1", h100, 8, 8, true)}
	for i := range 4 {
		n := node(fmt.Sprintf("g%d", i), "z1", "r2", gb200, 4, 4, true)
		n.Labels[NVLinkClique] = "uuid.1"
		nodes = append(nodes, n)
	}
	levels := []string{Zone, Rack, NVLinkClique}
	kueue, _ := Build(levels, nodes, Options{})
	partial, _ := Build(levels, nodes, Options{Partial: true})
	if kueue.Outside != 2 || partial.Outside != 0 {
		t.Errorf("outside: %d without Partial (want 2), %d with (want 0)", kueue.Outside, partial.Outside)
	}
	if got := summarize(partial, 1, h100); !reflect.DeepEqual(got, []summary{{"r1", 2, 16, 0, []int64{2, 1, 0, 0, 0}, 16}}) {
		t.Errorf("H100 racks with Partial: %+v", got)
	}
	if got := summarize(partial, 2, gb200); !reflect.DeepEqual(got, []summary{{"uuid.1", 4, 16, 0, []int64{2, 1, 0, 0, 0}, 16}}) {
		t.Errorf("GB200 cliques with Partial: %+v", got)
	}
	if got := partial.Domains[0][0].Nodes; got != 6 {
		t.Errorf("zone z1 has %d nodes with Partial, want 6", got)
	}
	want := `topology level "nvidia.com/gpu.clique": 2 of 6 nodes lack this label and count only in the levels above (e.g. h1, h2)`
	if len(partial.Problems) != 1 || partial.Problems[0].Message != want {
		t.Errorf("problems with Partial: %+v", partial.Problems)
	}
}

// FreeNodes counts each domain's schedulable nodes by their free GPUs, sums them up the
// levels and in the cluster, caps a node's count at MaxFreeNodes and leaves the rest out.
func TestBuildCountsNodesByFreeGPUs(t *testing.T) {
	nodes := []Node{
		node("a1", "z", "a", h100, 8, 8, true), node("a2", "z", "a", h100, 8, 8, true),
		node("a3", "z", "a", h100, 8, 3, true), node("a4", "z", "a", h100, 8, 0, true),
		node("a5", "z", "a", h100, 8, 8, false), // cordoned: its free GPUs count apart
		node("b1", "z", "b", h100, 32, 20, true),
	}
	tree, err := Build([]string{Zone, Rack}, nodes, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int64{
		"a": {0, 0, 1, 0, 0, 0, 0, 2},
		"b": {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
		"z": {0, 0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1},
	}
	for l := range tree.Levels {
		for _, d := range tree.Domains[l] {
			if got := d.Models[0].FreeNodes; !slices.Equal(got, want[d.Value]) {
				t.Errorf("domain %s: FreeNodes %v, want %v", d.Value, got, want[d.Value])
			}
		}
	}
	if got := tree.Cluster[0].FreeNodes; !slices.Equal(got, want["z"]) {
		t.Errorf("cluster: FreeNodes %v, want %v", got, want["z"])
	}
	none, _ := Build([]string{Rack}, []Node{node("c1", "", "c", h100, 8, 0, true)}, Options{})
	if got := none.Domains[0][0].Models[0].FreeNodes; got != nil {
		t.Errorf("a domain without free GPUs: FreeNodes %v, want none", got)
	}
}

// A node's labels held apart (Levels, as the node cache holds racks) place it as its Labels
// would: the same tree, and Present finds the keys there.
func TestLevelsPlaceNodesAsLabels(t *testing.T) {
	nodes := []Node{node("a", "z1", "r1", h100, 8, 8, true), node("b", "z1", "r2", h100, 8, 4, true)}
	apart := make([]Node, len(nodes))
	for i, n := range nodes {
		apart[i] = n
		apart[i].Labels = map[string]string{Zone: n.Labels[Zone]}
		apart[i].Levels = map[string]string{Rack: n.Labels[Rack]}
	}
	if got := Present([]string{Zone, Rack, NVLinkClique}, apart); !slices.Equal(got, []string{Zone, Rack}) {
		t.Errorf("Present = %v, want the zone and the rack", got)
	}
	want, _ := Build([]string{Zone, Rack}, nodes, Options{})
	got, err := Build([]string{Zone, Rack}, apart, Options{})
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("tree from levels held apart = %+v (%v), want %+v", got, err, want)
	}
}
