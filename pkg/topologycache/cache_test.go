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
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

func kueueTopology(name string, labels ...string) *unstructured.Unstructured {
	var levels []any
	for _, l := range labels {
		levels = append(levels, map[string]any{"nodeLabel": l})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
		"metadata": map[string]any{"name": name, "resourceVersion": "1"},
		"spec":     map[string]any{"levels": levels},
	}}
}

func fakeDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{Resource: "TopologyList"}, objs...)
}

// poll waits for cond, looking every few milliseconds.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// The cache reads the Topologies while Kueue serves them, and none before or after; it tells
// of each change; a Topology naming a label twice is kept with its problem.
func TestCacheFollowsKueue(t *testing.T) {
	dyn := fakeDynamic(kueueTopology("default", "topology.kubernetes.io/rack", "kubernetes.io/hostname"),
		kueueTopology("twice", "a", "a"))
	var served atomic.Bool
	c := newCache(dyn, func(context.Context) (bool, error) { return served.Load(), nil }, Options{})
	c.every = 20 * time.Millisecond
	var changes atomic.Int32
	c.OnChange(func(key string) {
		if key == "" {
			changes.Add(1)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	poll(t, "synced without Kueue", c.HasSynced)
	if got, problem := c.Topologies(); got != nil || problem != "" {
		t.Errorf("without Kueue: %v %q", got, problem)
	}
	served.Store(true)
	poll(t, "Topologies read once Kueue serves them", func() bool { got, _ := c.Topologies(); return len(got) == 2 })
	got, _ := c.Topologies()
	if got[0].Name != "default" || !slices.Equal(got[0].Levels, []string{"topology.kubernetes.io/rack", "kubernetes.io/hostname"}) ||
		got[0].Problem != "" || !strings.Contains(got[1].Problem, "repeats") {
		t.Errorf("topologies = %+v", got)
	}
	if changes.Load() == 0 {
		t.Error("no change told")
	}
	served.Store(false)
	poll(t, "Topologies forgotten once Kueue is gone", func() bool { got, _ := c.Topologies(); return got == nil })
}

// A Topology read the operator may not make is a problem the section shows, and the cache
// counts as synced, so that the inventory is not held back.
func TestCacheForbiddenIsAProblem(t *testing.T) {
	dyn := fakeDynamic()
	dyn.PrependReactor("list", "topologies", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(Resource.GroupResource(), "", nil)
	})
	c := newCache(dyn, func(context.Context) (bool, error) { return true, nil }, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	poll(t, "synced although forbidden", c.HasSynced)
	if _, problem := c.Topologies(); !strings.Contains(problem, "grant get/list/watch on topologies.kueue.x-k8s.io") {
		t.Errorf("problem = %q", problem)
	}
}
