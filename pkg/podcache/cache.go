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

// Package podcache is where Pods are seen for allocation: each Pod is decoded straight from
// protobuf into what allocation keeps of it (DecodePod), a pod that names no GPU resource is
// dropped as soon as that is known, and a reflector feeds the GPU pods that are not finished
// to an allocation tracker. The same decoder reads the pod lists of `kubectl gpuinv who`
// (StreamPods). docs/design/pod-cache.md says why it is not an informer.
package podcache

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// Cache follows the pods of all namespaces and tells tracker of the GPU pods.
type Cache struct {
	reflector *cache.Reflector
	store     *store

	client     rest.Interface // the pod client
	namespaces rest.Interface // nil: the first list is one list of all pods
}

// Options change how the cache lists.
type Options struct {
	// ByNamespace makes the first list one list per namespace, Listers at a time
	// (listByNamespace), where the operator may list namespaces.
	ByNamespace bool
}

// New returns a cache of the pods of the cluster config reaches, reading them as protobuf.
func New(config *rest.Config, tracker Tracker, opts Options) (*Cache, error) {
	client, err := kubeproto.NewClient(config, podCodec)
	if err != nil {
		return nil, err
	}
	c := &Cache{store: newStore(tracker), client: client}
	if opts.ByNamespace {
		c.namespaces = client // its codec leaves Namespaces to the generated decoders
	}
	lw := listWatch{&cache.ListWatch{
		ListWithContextFunc: c.list,
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			req := client.Get().Resource("pods").VersionedParams(&opts, kubeclient.ParameterCodec)
			if opts.TimeoutSeconds != nil {
				req = req.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
			}
			return req.Watch(ctx)
		},
	}}
	c.reflector = cache.NewReflectorWithOptions(lw, &Object{}, c.store, cache.ReflectorOptions{
		Name:            "pod cache",
		TypeDescription: "*v1.Pod", // in the reflector's log lines
	})
	return c, nil
}

// listWatch lists pods as a stream (listPods), never as a streaming list of watch events:
// docs/design/pod-cache.md says why.
type listWatch struct {
	*cache.ListWatch
}

// IsWatchListSemanticsUnSupported tells the reflector to list and then watch.
func (listWatch) IsWatchListSemanticsUnSupported() bool { return true }

// list is the reflector's list: by namespace the first time (resourceVersion 0) where the
// cache may, else listPods.
func (c *Cache) list(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if c.namespaces != nil && opts.ResourceVersion == "0" && opts.Continue == "" {
		list, versions, err := c.listByNamespace(ctx)
		if err != nil {
			return nil, err
		}
		if list != nil {
			c.store.setListed(versions)
			return list, nil
		}
	}
	c.store.setListed(nil)
	return listPods(ctx, c.client, opts)
}

// listPods lists the pods as the reflector asks, with pages of at least PageSize, and
// returns the GPU pods and the pods it could not read. The answer is read as a stream, one
// Pod's bytes at a time, so that a list served whole (the watch cache's) is never in memory.
func listPods(ctx context.Context, client rest.Interface, opts metav1.ListOptions) (*ObjectList, error) {
	if opts.Limit > 0 {
		opts.Limit = max(opts.Limit, PageSize)
	}
	start := time.Now()
	list := &ObjectList{}
	count := 0
	resourceVersion, err := podList.StreamVersion(ctx, client, "", opts, func(raw []byte) error {
		count++
		return list.add(raw, count)
	})
	if err != nil {
		return nil, err
	}
	list.ResourceVersion = resourceVersion
	klog.FromContext(ctx).V(2).Info("Listed pods", "pods", count, "kept", len(list.Items), "resourceVersion", resourceVersion, "duration", time.Since(start))
	return list, nil
}

// Run lists and watches the pods until ctx is done, listing again after a watch expires.
func (c *Cache) Run(ctx context.Context) {
	c.reflector.RunWithContext(ctx)
}

// HasSynced reports whether the tracker has had the first complete list of GPU pods.
func (c *Cache) HasSynced() bool {
	return c.store.synced.Load()
}

// Skipped is how many times the cache has seen a pod whose GPU resources it could not read
// (a malformed or absurd quantity): such a pod is not counted.
func (c *Cache) Skipped() int64 {
	return c.store.skipped.Load()
}
