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

package topologycache

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/topology"
)

// Topology is what the cache keeps of a Kueue Topology: its name and its levels' node
// labels, broadest first, or why they cannot be used.
type Topology struct {
	kubeproto.Compact
	Levels []string
	// Problem says why the levels cannot be used (a label named twice, none, too many).
	Problem string
}

// DeepCopyObject copies the topology (the store never modifies it).
func (t *Topology) DeepCopyObject() runtime.Object {
	out := *t
	out.Levels = slices.Clone(t.Levels)
	return &out
}

// keep is the informer's transform: a Topology of its spec.levels[].nodeLabel. A field of
// the wrong type reads as absent, so that a malformed object never makes the informer list
// again and again.
func keep(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	t := &Topology{Compact: kubeproto.Compact{Name: u.GetName(), ResourceVersion: u.GetResourceVersion()}}
	spec, _ := u.Object["spec"].(map[string]any)
	levels, _ := spec["levels"].([]any)
	for i, l := range levels {
		if i >= topology.MaxLevels+1 {
			break
		}
		level, _ := l.(map[string]any)
		key, _ := level["nodeLabel"].(string)
		t.Levels = append(t.Levels, key)
	}
	if err := topology.CheckLevels(t.Levels); err != nil {
		t.Problem = fmt.Sprintf("Kueue Topology %s: %v", t.Name, err)
	}
	return t, nil
}
