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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Property: the incremental path (an EntryCache kept across syncs, and the previous status
// as the memory of last-known labels) gives exactly what a full recompute gives, after every
// step of a random sequence of node adds, updates, deletes, relabels and selector changes.
func TestIncrementalEqualsFullRecompute(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 99))
		nodes := map[string]*corev1.Node{}
		cache := NewEntryCache()
		var previous []homelabv1.GpuNodeEntry
		rv := 0
		pools := []string{"a", "b", "c"}
		selector := labels.Everything()
		now := t0
		products := []string{"NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "Tesla-T4-SHARED", ""}
		newNode := func(name string) *corev1.Node {
			rv++
			lbl := map[string]string{"pool": pools[rng.IntN(len(pools))], "nvidia.com/gpu.deploy.driver": "true"}
			if p := products[rng.IntN(len(products))]; p != "" {
				lbl[LabelProduct], lbl[LabelCount], lbl[LabelMemory] = p, fmt.Sprint(rng.IntN(9)), "40960"
			}
			n := node(name, []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown}[rng.IntN(3)], lbl)
			n.ResourceVersion = fmt.Sprint(rv)
			return n
		}
		for step := range 300 {
			now = now.Add(time.Duration(rng.IntN(120)) * time.Second)
			name := fmt.Sprintf("n%02d", rng.IntN(25))
			var what string
			switch op := rng.IntN(6); {
			case op == 0:
				what = "delete " + name
				delete(nodes, name)
				cache.Forget(name)
			case op == 1 && nodes[name] != nil:
				what = "labels vanish on " + name
				n := nodes[name].DeepCopy()
				delete(n.Labels, LabelProduct)
				delete(n.Labels, LabelCount)
				delete(n.Labels, LabelMemory)
				rv++
				n.ResourceVersion = fmt.Sprint(rv)
				nodes[name] = n
			case op == 2:
				pool := pools[rng.IntN(len(pools))]
				what = "selector pool=" + pool
				selector, _ = Selector(&metav1.LabelSelector{MatchLabels: map[string]string{"pool": pool}})
			case op == 3:
				what = "selector everything"
				selector = labels.Everything()
			default:
				what = "add or update " + name
				nodes[name] = newNode(name)
			}
			var selected []*corev1.Node
			for _, n := range nodes {
				if selector.Matches(labels.Set(n.Labels)) {
					selected = append(selected, n)
				}
			}
			incremental, _ := cache.Compute(selected, previous, now)
			full, _ := Compute(selected, previous, now)
			if diff := cmp.Diff(full, incremental, cmpopts.IgnoreUnexported(Inventory{})); diff != "" {
				t.Fatalf("seed %d step %d (%s): incremental differs from full recompute (-full +incremental):\n%s", seed, step, what, diff)
			}
			if incremental.Hash != full.Hash {
				t.Fatalf("seed %d step %d (%s): hash differs", seed, step, what)
			}
			previous = incremental.Nodes // the stored status
		}
	}
}
