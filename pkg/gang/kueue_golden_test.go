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
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
)

// golden is one scenario of testdata/kueue-golden.json.gz, written by hack/kueue-golden.sh
// with Kueue's own code: nodes (labels, allocatable, what their non-TAS pods request, a
// NoSchedule taint), PodSets sharing one topology request, and Kueue's assignments or the
// PodSet it failed and why.
type golden struct {
	Levels []string
	Nodes  []struct {
		Name        string
		Labels      map[string]string
		Allocatable map[string]int64
		Usage       map[string]int64
		Taint       bool
	}
	PodSets []struct {
		Name     string
		Count    int32
		Requests map[string]int64
	}
	Topology struct {
		Key           string
		Preferred     bool
		Unconstrained bool
		SliceKey      string
		SliceSize     int32
	}
	Assignments []struct {
		Levels  []string
		Domains []DomainCount
	}
	Failed string
	Reason string
}

// resourceList makes quantities of Kueue's values (CPU in millicores).
func resourceList(m map[string]int64) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range m {
		if k == string(corev1.ResourceCPU) {
			out[corev1.ResourceName(k)] = *resource.NewMilliQuantity(v, resource.DecimalSI)
			continue
		}
		out[corev1.ResourceName(k)] = *resource.NewQuantity(v, resource.DecimalSI)
	}
	return out
}

// cluster is the scenario's nodes, each with one bound pod requesting its usage.
func (g *golden) cluster() capacity.Cluster {
	var c capacity.Cluster
	for _, n := range g.Nodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}}
		node.Status.Allocatable = resourceList(n.Allocatable)
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		if n.Taint {
			node.Spec.Taints = []corev1.Taint{{Key: "gpu", Value: "broken", Effect: corev1.TaintEffectNoSchedule}}
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "usage-" + n.Name}}
		p.Spec.NodeName = n.Name
		p.Spec.Containers = []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: resourceList(n.Usage)}}}
		c.Nodes, c.Pods = append(c.Nodes, node), append(c.Pods, p)
	}
	return c
}

func (g *golden) gang() (Gang, []string) {
	t := g.Topology
	out := Gang{Topology: Topology{Key: t.Key, Preferred: t.Preferred, Unconstrained: t.Unconstrained, SliceKey: t.SliceKey, SliceSize: int(t.SliceSize)}}
	var names []string
	for _, ps := range g.PodSets {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: ps.Name}}
		p.Spec.Containers = []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: resourceList(ps.Requests)}}}
		out.Templates = append(out.Templates, Template{Pod: p, Count: int(ps.Count)})
		names = append(names, ps.Name)
	}
	return out, names
}

func TestKueueGolden(t *testing.T) {
	f, err := os.Open("testdata/kueue-golden.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var all []golden
	if err := json.NewDecoder(z).Decode(&all); err != nil {
		t.Fatal(err)
	}
	if len(all) < 100 {
		t.Fatalf("only %d scenarios", len(all))
	}
	for i, g := range all {
		gang, names := g.gang()
		res, err := PlaceAsKueue(capacity.NewSnapshot(g.cluster()), gang, Kueue{Levels: g.Levels, PodSets: names})
		if err != nil {
			t.Errorf("scenario %d: %v", i, err)
			continue
		}
		if g.Reason != "" {
			if want := fmt.Sprintf(kueueCouldNotAssign, g.Failed, g.Reason); res.Message != want {
				t.Errorf("scenario %d (%+v): message\n got %q\nwant %q", i, g.Topology, res.Message, want)
			}
			continue
		}
		if !res.Fits {
			t.Errorf("scenario %d (%+v): Kueue assigns it, PlaceAsKueue says %q", i, g.Topology, res.Message)
			continue
		}
		for j, want := range g.Assignments {
			got := res.Kueue.Assignments[j]
			if !reflect.DeepEqual(got.Levels, want.Levels) || len(got.Domains)+len(want.Domains) > 0 && !reflect.DeepEqual(got.Domains, want.Domains) {
				t.Errorf("scenario %d (%+v), PodSet %d:\n got %v %+v\nwant %v %+v", i, g.Topology, j, got.Levels, got.Domains, want.Levels, want.Domains)
			}
		}
	}
}
