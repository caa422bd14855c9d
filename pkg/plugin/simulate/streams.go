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

package simulate

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/nodecache"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin/factory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/podcache"
)

// The reads of why and fit: from an API server, protobuf streams decoded one object at a
// time by the caches' decoders (placing.go, slicing.go); in unit tests, the fake clientset's
// lists.

// listNodes reads the Nodes, decoded for p, and hands each to fn. From an API server they
// come, through a client of cfg, from a watch that sends the Nodes that exist first
// (WatchList; one list is sent a little sooner but takes the plugin more memory); where the
// watch is refused (the feature off, an older server, no right to watch) from a list read
// as a protobuf stream. In unit tests they come from the fake clientset.
func listNodes(ctx context.Context, c *factory.Factory, cfg *rest.Config, p *placing, fn func(*corev1.Node)) error {
	if !c.Streams() {
		api, err := c.Typed()
		if err != nil {
			return err
		}
		return factory.ListAll(ctx, api.Nodes().List, metav1.ListOptions{}, func(l *corev1.NodeList) string {
			for i := range l.Items {
				fn(&l.Items[i])
			}
			return l.Continue
		})
	}
	client, err := kubeproto.NewClient(cfg, p.codec())
	if err != nil {
		return err
	}
	w, err := kubeclient.Nodes(client).Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
	if err != nil {
		return nodeStream.Stream(ctx, client, "", metav1.ListOptions{Limit: nodeChunk}, kubeproto.Decoded("node", p.decodeNode, func(n *corev1.Node) error {
			fn(n)
			return nil
		}))
	}
	defer w.Stop()
	return initialEvents(ctx, w, fn)
}

// initialEvents hands the Nodes a WatchList sends to fn, until its bookmark says that all
// that exist were sent.
func initialEvents(ctx context.Context, w watch.Interface, fn func(*corev1.Node)) error {
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Error:
			return apierrors.FromObject(ev.Object)
		case watch.Added:
			if n, ok := ev.Object.(*corev1.Node); ok {
				fn(n)
			}
		case watch.Bookmark:
			if n, ok := ev.Object.(*corev1.Node); ok && n.Annotations[metav1.InitialEventsAnnotationKey] == "true" {
				return nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("the watch of the Nodes ended before it sent them all")
}

// nodeStream reads Node lists as protobuf streams; a Node's message is at most 64 MiB.
var nodeStream = kubeproto.List{Resource: "nodes", MaxItemBytes: nodecache.MaxNodeBytes}

// smallListsClient returns a core REST client of cfg for many small lists at once (a
// node's pods): protobuf over HTTP/2, where they share one connection, without the client's
// rate limit (the caller bounds how many run at once).
func smallListsClient(cfg *rest.Config) (rest.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType, cfg.AcceptContentTypes = kubeproto.ContentType, kubeproto.ContentType+",application/json"
	cfg.QPS = -1
	return kubeclient.New(cfg, corev1.SchemeGroupVersion, nil)
}

// listPods lists the pods of every namespace and hands each to fn: from an API server as a
// protobuf stream, one pod's bytes at a time, through client (nil: a client of cfg for one
// large list); in unit tests, from the fake clientset.
func listPods(ctx context.Context, c *factory.Factory, cfg *rest.Config, client rest.Interface, stream kubeproto.List, opts metav1.ListOptions, fn func(*corev1.Pod)) error {
	if !c.Streams() {
		api, err := c.Typed()
		if err != nil {
			return err
		}
		return factory.ListAll(ctx, api.Pods("").List, opts, func(l *corev1.PodList) string {
			for i := range l.Items {
				fn(&l.Items[i])
			}
			return l.Continue
		})
	}
	if client == nil {
		var err error
		if client, err = streamClient(cfg); err != nil {
			return err
		}
	}
	return stream.Stream(ctx, client, "", opts, kubeproto.Decoded("pod", podcache.DecodeSchedulingPod, func(p *corev1.Pod) error {
		fn(p)
		return nil
	}))
}

// streamClient is a core REST client of cfg for large lists read as protobuf streams.
func streamClient(cfg *rest.Config) (rest.Interface, error) {
	return kubeclient.New(kubeproto.StreamConfig(cfg), corev1.SchemeGroupVersion, nil)
}

// listSlices lists the ResourceSlices and hands each to fn: from an API server as a protobuf
// stream, one slice's bytes at a time, decoded by decode; in unit tests, from the fake
// clientset.
func listSlices(ctx context.Context, c *factory.Factory, decode func([]byte) (*resourcev1.ResourceSlice, error), fn func(*resourcev1.ResourceSlice)) error {
	if !c.Streams() {
		api, err := c.Typed()
		if err != nil {
			return err
		}
		return factory.ListAll(ctx, api.ResourceSlices().List, metav1.ListOptions{}, func(l *resourcev1.ResourceSliceList) string {
			for i := range l.Items {
				fn(&l.Items[i])
			}
			return l.Continue
		})
	}
	client, err := c.Resource()
	if err != nil {
		return err
	}
	return sliceStream.Stream(ctx, client, "", metav1.ListOptions{Limit: factory.ListChunk}, kubeproto.Decoded("resourceslice", decode, func(s *resourcev1.ResourceSlice) error {
		fn(s)
		return nil
	}))
}

// sliceStream reads ResourceSlice lists as protobuf streams; a slice's message is at most
// 16 MiB.
var sliceStream = kubeproto.List{Resource: "resourceslices", MaxItemBytes: 16 << 20}

// podStream reads pod lists as protobuf streams, smallPodStream a node's (a few pods, with
// a small buffer); a pod's message is at most 16 MiB.
var (
	podStream      = kubeproto.List{Resource: "pods", MaxItemBytes: 16 << 20}
	smallPodStream = kubeproto.List{Resource: "pods", MaxItemBytes: 16 << 20, ReadBufferBytes: 8 << 10}
)
