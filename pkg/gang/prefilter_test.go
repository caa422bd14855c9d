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
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
)

// TestPrefilterRejectsOnlyWhatTheFiltersReject: on random nodes (GPUs, MIG devices, few pod
// slots, DRA-served GPUs) and pods, every node the prefilter rejects is one Snapshot.Fit
// rejects too, also after assuming pods.
func TestPrefilterRejectsOnlyWhatTheFiltersReject(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	dra := draRack(t)
	for round := range 50 {
		c := capacity.Cluster{Slices: dra.Slices, Classes: dra.Classes, Nodes: dra.Nodes[:2]}
		for i := range 6 {
			extra := map[corev1.ResourceName]string{}
			if g := r.IntN(3); g > 0 {
				extra[gpu] = fmt.Sprint(4 * g)
			}
			if r.IntN(3) == 0 {
				extra[migRes] = "7"
			}
			name := fmt.Sprintf("n%d", i)
			n := gpuNode(name, "z1", "r1", extra)
			if r.IntN(4) == 0 {
				n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("1")
			}
			c.Nodes = append(c.Nodes, n)
			if held := int64(r.IntN(5)); held > 0 && extra[gpu] != "" {
				c.Pods = append(c.Pods, bound("held-"+name, name, held, 0))
			}
		}
		s := capacity.NewSnapshot(c)
		st := newState(s.Clone())
		for k := range 8 {
			res := []corev1.ResourceName{gpu, migRes, corev1.ResourceCPU}[r.IntN(3)]
			m := member{pod: podAsking(fmt.Sprintf("p%d-%d", round, k), res, int64(1+r.IntN(8))), template: k}
			for _, n := range s.Nodes() {
				fit, err := st.s.Fit(m.pod, nil, n)
				if err != nil {
					t.Fatal(err)
				}
				if !st.pf.mayFit(n, m) && fit.Fits() {
					t.Fatalf("round %d: the prefilter rejects %s on %s, the filters accept it", round, m.pod.Name, n)
				}
				if fit.Fits() && r.IntN(2) == 0 {
					st.assume(n, m, fit, 1)
					break
				}
			}
		}
	}
}
