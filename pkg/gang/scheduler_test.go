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
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
)

const insufficient2 = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."

func TestPlaceAsScheduler(t *testing.T) {
	afterFirst := racks()
	afterFirst.Pods = append(afterFirst.Pods, bound("first-0", "a1", 6, 0), bound("first-1", "a2", 6, 0))
	tests := []struct {
		name    string
		cluster capacity.Cluster
		gang    Gang
		fits    bool
		domain  string
		nodes   []string
		domains []Domain
		message string
		podMsgs []string
	}{{
		name: "2 x 6 GPUs bind into the one rack with room", cluster: racks(),
		gang: Gang{Templates: []Template{replicas("train", 6, 2)}, Topology: Topology{Key: rack}},
		fits: true, domain: "rack-a", nodes: []string{"a1", "a2"},
		domains: []Domain{{Value: "rack-a", Nodes: 2, Pods: 2},
			{Value: "rack-b", Nodes: 2, Pods: 1, Held: insufficient2, Status: "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining"}},
	}, {
		name: "3 x 6 GPUs that no rack holds stay pending, all three", cluster: afterFirst,
		gang:  Gang{Templates: []Template{replicas("train", 6, 3)}, Topology: Topology{Key: rack}},
		nodes: []string{"", "", ""},
		domains: []Domain{
			{Value: "rack-a", Nodes: 2, Held: insufficient2, Status: "minCount (3) cannot be satisfied: 0 scheduled, 2 remaining"},
			{Value: "rack-b", Nodes: 2, Pods: 1, Held: insufficient2, Status: "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining"}},
		message: "pod group is unschedulable, 0/2 placements are available, first placement status: minCount (3) cannot be satisfied: 0 scheduled, 2 remaining, pod group preemption: No preemption victims found for incoming preemptor",
		podMsgs: []string{insufficient2,
			"pod group is unschedulable, 0/2 placements are available, first placement status: minCount (3) cannot be satisfied: 0 scheduled, 2 remaining",
			"pod group is unschedulable, 0/2 placements are available, first placement status: minCount (3) cannot be satisfied: 0 scheduled, 2 remaining"},
	}, {
		name: "a cordoned and a NotReady node inside a rack hold nothing",
		cluster: capacity.Cluster{Nodes: []*corev1.Node{
			gpuNode("a1", "z1", "rack-a", gpus("8"), cordoned), gpuNode("a2", "z1", "rack-a", gpus("8"), notReady),
			gpuNode("a3", "z1", "rack-a", gpus("8")), gpuNode("a4", "z1", "rack-a", gpus("8")),
			gpuNode("b1", "z1", "rack-b", gpus("8")), gpuNode("b2", "z1", "rack-b", gpus("8")), gpuNode("b3", "z1", "rack-b", gpus("8"))}},
		gang: Gang{Templates: []Template{replicas("train", 8, 3)}, Topology: Topology{Key: rack}},
		fits: true, domain: "rack-b", nodes: []string{"b1", "b2", "b3"},
		domains: []Domain{
			{Value: "rack-a", Nodes: 4, Pods: 2, Status: "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining",
				Held: "0/4 nodes are available: 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, 2 Insufficient nvidia.com/gpu."},
			{Value: "rack-b", Nodes: 3, Pods: 3}},
	}, {
		name: "16 x 4 GPUs in the NVLink clique of 18 nodes that has 16 free", cluster: cliques(6, 1),
		gang: Gang{Templates: []Template{replicas("train", 4, 16)}, Topology: Topology{Key: clique}},
		fits: true, domain: "uuid.c2",
		nodes: []string{"c2-01", "c2-02", "c2-03", "c2-04", "c2-05", "c2-06", "c2-07", "c2-08", "c2-09", "c2-10", "c2-11", "c2-12", "c2-13", "c2-14", "c2-15", "c2-16"},
		domains: []Domain{
			{Value: "uuid.c1", Nodes: 18, Pods: 12, Held: "0/18 nodes are available: 18 Insufficient nvidia.com/gpu.", Status: "minCount (16) cannot be satisfied: 12 scheduled, 3 remaining"},
			{Value: "uuid.c2", Nodes: 18, Pods: 16}},
	}, {
		// Both cliques reach minCount 12; the one holding more of the gang wins
		// (PodGroupPodsCount), and the pod beyond its room stays pending alone.
		name: "pods beyond minCount: the clique holding more of them wins", cluster: cliques(6, 1),
		gang: Gang{Templates: []Template{replicas("train", 4, 18)}, MinCount: 12, Topology: Topology{Key: clique}},
		fits: true, domain: "uuid.c2",
		nodes: []string{"c2-01", "c2-02", "c2-03", "c2-04", "c2-05", "c2-06", "c2-07", "c2-08", "c2-09", "c2-10", "c2-11", "c2-12", "c2-13", "c2-14", "c2-15", "c2-16", "c2-17", ""},
		domains: []Domain{
			{Value: "uuid.c1", Nodes: 18, Pods: 12, Held: "0/18 nodes are available: 18 Insufficient nvidia.com/gpu."},
			{Value: "uuid.c2", Nodes: 18, Pods: 17, Held: "0/18 nodes are available: 18 Insufficient nvidia.com/gpu."}},
	}, {
		name: "DRA nodes in a rack take pods that claim whole GPUs", cluster: draRack(t),
		gang: Gang{Templates: []Template{draReplicas("train", 8, 2)}, Topology: Topology{Key: rack}},
		fits: true, domain: "rack-d", nodes: []string{"dra-h100-1", "dra-h100-2"},
		domains: []Domain{{Value: "rack-d", Nodes: 2, Pods: 2},
			{Value: "rack-p", Nodes: 1, Held: "0/1 nodes are available: 1 cannot allocate all claims.", Status: "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining"}},
	}, {
		// The time-sliced node's 32 replicas take 8-GPU pods as the scheduler counts
		// them; the MIG node's 4 whole GPUs take none.
		name: "MIG and time-sliced nodes beside whole-GPU ones", cluster: sharedRack(),
		gang: Gang{Templates: []Template{replicas("train", 8, 3)}, Topology: Topology{Key: rack}},
		fits: true, domain: "rack-m", nodes: []string{"m-ts", "m-whole", "m-ts"},
		domains: []Domain{{Value: "rack-m", Nodes: 3, Pods: 3}},
	}, {
		name: "no topology key: one placement of every node", cluster: racks(),
		gang: Gang{Templates: []Template{replicas("train", 8, 3)}},
		fits: true, nodes: []string{"a1", "a2", "b1"},
		domains: []Domain{{Nodes: 4, Pods: 3}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := capacity.NewSnapshot(tc.cluster)
			res, err := PlaceAsScheduler(s, tc.gang)
			if err != nil {
				t.Fatal(err)
			}
			if res.Fits != tc.fits || res.Domain != tc.domain {
				t.Errorf("fits %v in %q, want %v in %q (message %q)", res.Fits, res.Domain, tc.fits, tc.domain, res.Message)
			}
			if got := nodesOf(res.Pods); !reflect.DeepEqual(got, tc.nodes) {
				t.Errorf("nodes %q, want %q", got, tc.nodes)
			}
			if !reflect.DeepEqual(res.Domains, tc.domains) {
				t.Errorf("domains:\n got %+v\nwant %+v", res.Domains, tc.domains)
			}
			if res.Message != tc.message {
				t.Errorf("message:\n got %q\nwant %q", res.Message, tc.message)
			}
			if tc.podMsgs != nil {
				for i, p := range res.Pods {
					if p.Message != tc.podMsgs[i] {
						t.Errorf("pod %s's FailedScheduling:\n got %q\nwant %q", p.Name, p.Message, tc.podMsgs[i])
					}
				}
			}
			again, _ := PlaceAsScheduler(s, tc.gang)
			if !reflect.DeepEqual(again, res) {
				t.Error("a second run on the same snapshot answers differently: the first changed it")
			}
		})
	}
}

func TestSchedulerGangPreemption(t *testing.T) {
	cluster := capacity.Cluster{
		Nodes: []*corev1.Node{gpuNode("a1", "z1", "rack-a", gpus("8")), gpuNode("a2", "z1", "rack-a", gpus("8")),
			gpuNode("b1", "z1", "rack-b", gpus("8")), gpuNode("b2", "z1", "rack-b", gpus("8"))},
		Pods: []*corev1.Pod{bound("low-a1", "a1", 8, 0), bound("low-a2", "a2", 8, 0),
			bound("low-b1", "b1", 4, 0), bound("high-b2", "b2", 8, 1000)},
	}
	train := replicas("train", 8, 2)
	train.Pod.Spec.Priority = ptr.To[int32](100)
	group := "pod group is unschedulable, 0/2 placements are available, first placement status: minCount (2) cannot be satisfied: 0 scheduled, 1 remaining"
	s := capacity.NewSnapshot(cluster)
	res, err := PlaceAsScheduler(s, Gang{Templates: []Template{train}, Topology: Topology{Key: rack}})
	if err != nil {
		t.Fatal(err)
	}
	p := res.Preemption
	if res.Fits || p == nil || p.Domain != "rack-a" {
		t.Fatalf("want a gang waiting on preemption into rack-a, got %+v", res)
	}
	var victims []string
	for _, v := range p.Victims {
		victims = append(victims, v.Name)
	}
	// low-b1 is reprieved: no pod of the gang goes to b1.
	if !reflect.DeepEqual(victims, []string{"low-a1", "low-a2"}) {
		t.Errorf("victims %q, want low-a1 and low-a2", victims)
	}
	if want := group + ", pod group preemption: found a placement for podgroup, preempting 2 victims"; res.Message != want {
		t.Errorf("message:\n got %q\nwant %q", res.Message, want)
	}
	wantPods := []Pod{
		{Name: "train-0", Message: insufficient2, Messages: []string{insufficient2}, Nominated: "a1"},
		{Name: "train-1", Message: group, Messages: []string{group}, Nominated: "a2"},
	}
	if !reflect.DeepEqual(res.Pods, wantPods) {
		t.Errorf("pods:\n got %+v\nwant %+v", res.Pods, wantPods)
	}
	if got := s.PodsOn("a1"); len(got) != 1 {
		t.Errorf("the caller's snapshot lost its pods: %v", got)
	}

	never := train
	never.Pod = train.Pod.DeepCopy()
	never.Pod.Spec.PreemptionPolicy = ptr.To(corev1.PreemptNever)
	res, _ = PlaceAsScheduler(s, Gang{Templates: []Template{never}, Topology: Topology{Key: rack}})
	if want := group + ", pod group preemption: not eligible due to preemptionPolicy=Never."; res.Message != want {
		t.Errorf("message with preemptionPolicy Never:\n got %q\nwant %q", res.Message, want)
	}

	big := replicas("train", 8, 3)
	big.Pod.Spec.Priority = ptr.To[int32](100)
	res, _ = PlaceAsScheduler(s, Gang{Templates: []Template{big}, Topology: Topology{Key: rack}})
	want := "pod group is unschedulable, 0/2 placements are available, first placement status: minCount (3) cannot be satisfied: 0 scheduled, 2 remaining" +
		", pod group preemption: pod group is unschedulable, 0/2 placements are available, first placement status: minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"
	if res.Message != want || len(res.Preemption.Victims) != 0 {
		t.Errorf("a gang no rack holds even with every victim gone:\n got %q\nwant %q", res.Message, want)
	}
}

// The scheduler breaks ties between placements at random and reports the status of a
// placement chosen at random when none fits: the project names every domain it may choose
// and every text it may write.
func TestSchedulerChoicesAndMessages(t *testing.T) {
	twins := capacity.Cluster{Nodes: []*corev1.Node{gpuNode("a1", "z1", "rack-a", gpus("8")), gpuNode("a2", "z1", "rack-a", gpus("8")),
		gpuNode("b1", "z1", "rack-b", gpus("8")), gpuNode("b2", "z1", "rack-b", gpus("8"))}}
	res, err := PlaceAsScheduler(capacity.NewSnapshot(twins), Gang{Templates: []Template{replicas("train", 8, 2)}, Topology: Topology{Key: rack}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Domain != "rack-a" || !reflect.DeepEqual(res.Choices, []string{"rack-a", "rack-b"}) {
		t.Errorf("two racks alike: domain %q of %q, want rack-a of both", res.Domain, res.Choices)
	}

	res, err = PlaceAsScheduler(capacity.NewSnapshot(racks()), Gang{Templates: []Template{replicas("train", 8, 3)}, Topology: Topology{Key: rack}})
	if err != nil {
		t.Fatal(err)
	}
	group := "pod group is unschedulable, 0/2 placements are available, first placement status: "
	preemption := ", pod group preemption: No preemption victims found for incoming preemptor"
	wantMessages := []string{
		group + "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining" + preemption,
		group + "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining" + preemption,
	}
	if res.Choices != nil || res.Message != wantMessages[0] || !reflect.DeepEqual(res.Messages, wantMessages) {
		t.Errorf("a gang no rack holds: choices %q, message %q, messages\n %q\nwant\n %q", res.Choices, res.Message, res.Messages, wantMessages)
	}
	// rack-a places two pods and the third finds no node; rack-b places one, and the
	// second pod finds none, which ends it: the third is never tried.
	wantPods := [][]string{
		{"pod group is unschedulable, " + wantMessages[0], "pod group is unschedulable, " + wantMessages[1]},
		{"pod group is unschedulable, " + wantMessages[0], insufficient2},
		{insufficient2, group + "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining"},
	}
	for i, p := range res.Pods {
		if !reflect.DeepEqual(p.Messages, wantPods[i]) {
			t.Errorf("pod %s may say\n %q\nwant\n %q", p.Name, p.Messages, wantPods[i])
		}
	}
}

func TestSchedulerBadInput(t *testing.T) {
	s := capacity.NewSnapshot(racks())
	other := replicas("eval", 1, 1)
	other.Pod.Spec.Priority = ptr.To[int32](5)
	missing := draReplicas("train", 8, 1)
	missing.ClaimTemplates = nil
	tests := []struct {
		name string
		gang Gang
		is   error
		want string
	}{
		{"minCount above the pods", Gang{Templates: []Template{replicas("t", 8, 3)}, MinCount: 5}, ErrInput,
			`minCount 5 is more than the gang's 3 pods: kube-scheduler keeps them out of its queue ("waiting for minCount pods from a gang to appear in scheduling queue")`},
		{"a topology key no node carries", Gang{Templates: []Template{replicas("t", 8, 1)}, Topology: Topology{Key: "example.com/pod"}}, ErrNoDomain,
			`no topology domain: no node carries the label "example.com/pod" (kube-scheduler: "no feasible placements found")`},
		{"10,000 replicas", Gang{Templates: []Template{replicas("t", 1, 10000)}}, ErrInput,
			"the gang asks for more than 2048 pods; this simulation places at most 2048"},
		{"no pods", Gang{Templates: []Template{replicas("t", 1, 0)}}, ErrInput, "the gang has no pods"},
		{"a preferred topology", Gang{Templates: []Template{replicas("t", 8, 1)}, Topology: Topology{Key: rack, Preferred: true}}, ErrInput,
			"kube-scheduler's PodGroup has only a required topology key: preferred, unconstrained and slices are Kueue's"},
		{"pods of two priorities", Gang{Templates: []Template{replicas("t", 8, 1), other}}, ErrInput,
			"all pods in a single pod group should have the same priority as the pod group's priority, got 5 and 0"},
		{"a claim template that does not exist", Gang{Templates: []Template{missing}}, ErrInput,
			"pod ml/train-0: resource claim template ml/eight-gpus does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := PlaceAsScheduler(s, tc.gang)
			if !errors.Is(err, tc.is) || !strings.HasSuffix(err.Error(), tc.want) {
				t.Errorf("error %v, want %v ending %q", err, tc.is, tc.want)
			}
		})
	}
}
