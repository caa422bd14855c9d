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

package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/podcache"
)

// listFloor is how long the API server takes to hand every pod to a client that only
// decodes them as the operator does: the part of the operator's first complete status that
// no operator code can shorten. Its lists are taken in turn with the operator's starts, so
// that both meet the API server in the same state.
type listFloor struct {
	core         rest.Interface
	names        []string
	pods         int64
	one          []time.Duration // one list of all pods, as the operator's first list
	perNamespace []time.Duration // one list per namespace, podcache.Listers at a time
}

// newListFloor makes the floor's client as the operator's pod client is made (protobuf over
// HTTP/1.1, no gzip, no client-side rate limit) and reads the namespaces' names.
func newListFloor(ctx context.Context, config *rest.Config) (*listFloor, error) {
	cfg := kubeproto.StreamConfig(config)
	cfg.QPS = -1
	cfg.DisableCompression = true // the operator's default (--kube-api-compression=false)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	namespaces, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	f := &listFloor{core: kube.CoreV1().RESTClient()}
	for i := range namespaces.Items {
		f.names = append(f.names, namespaces.Items[i].Name)
	}
	return f, nil
}

// listAtOnce times one list of all pods.
func (f *listFloor) listAtOnce(ctx context.Context) error {
	start := time.Now()
	n, err := listAllPods(ctx, f.core, []string{""}, 1)
	if err != nil {
		return fmt.Errorf("the floor's list of all pods: %w", err)
	}
	f.one, f.pods = append(f.one, time.Since(start)), n
	return nil
}

// listByNamespace times the lists of every namespace's pods, podcache.Listers at a time.
func (f *listFloor) listByNamespace(ctx context.Context) error {
	start := time.Now()
	n, err := listAllPods(ctx, f.core, f.names, podcache.Listers)
	if err != nil {
		return fmt.Errorf("the floor's lists by namespace: %w", err)
	}
	if f.pods != 0 && n != f.pods {
		return fmt.Errorf("the floor's lists by namespace read %d pods, its list of all pods %d", n, f.pods)
	}
	f.perNamespace = append(f.perNamespace, time.Since(start))
	return nil
}

// listAllPods lists the pods of namespaces ("" for all), listers at a time, at
// resourceVersion 0 (the watch cache's answer, whole) and decodes each as the pod cache
// does; it returns how many pods it read.
func listAllPods(ctx context.Context, core rest.Interface, namespaces []string, listers int) (int64, error) {
	list := kubeproto.List{Resource: "pods", MaxItemBytes: podcache.MaxPodBytes}
	var pods atomic.Int64
	_, err := list.StreamEach(ctx, core, namespaces, listers, metav1.ListOptions{ResourceVersion: "0", Limit: podcache.PageSize}, func(string) func(raw []byte) error {
		return func(raw []byte) error {
			pods.Add(1)
			_, err := podcache.DecodePod(raw)
			return err
		}
	})
	return pods.Load(), err
}

// floorResult is the allocation phase's starts with all pods listed at once (the first
// after the pods were created, then the restarts) and the floor's lists taken in turn with
// them.
type floorResult struct {
	pods              int64
	namespaces        int
	one, perNamespace []time.Duration
	starts            []time.Duration
}

// floorPhase sets the allocation phase's starts against its floor.
func floorPhase(_ context.Context, h *harness) (result, error) {
	a := h.alloc
	return &floorResult{pods: a.floor.pods, namespaces: len(a.floor.names), one: a.floor.one, perNamespace: a.floor.perNamespace,
		starts: append([]time.Duration{a.firstStatus}, a.atOnce...)}, nil
}
