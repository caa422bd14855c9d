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

package plugin

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	resourcev1client "k8s.io/client-go/kubernetes/typed/resource/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/capacity"
)

// unfinishedPods is the field selector of the scheduler's pod informer: finished pods hold
// nothing.
const unfinishedPods = "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)

// listChunk is the page size of the cluster's lists, kubectl's.
const listChunk = 500

var (
	listSlices  = request{verb: "list", resource: "resourceslices", group: resourcev1.GroupName}
	listClasses = request{verb: "list", resource: "deviceclasses", group: resourcev1.GroupName}
)

// typed returns the typed clients of the core and resource.k8s.io/v1 groups, over the
// plugin's protobuf REST clients (or the test's fake clientset).
func (c *clients) typed() (corev1client.CoreV1Interface, resourcev1client.ResourceV1Interface, error) {
	if c.kube != nil {
		return c.kube.CoreV1(), c.kube.ResourceV1(), nil
	}
	core, err := c.Core()
	if err != nil {
		return nil, nil, err
	}
	resource, err := c.Resource()
	if err != nil {
		return nil, nil, err
	}
	return corev1client.New(core), resourcev1client.New(resource), nil
}

// loadCluster reads what kube-scheduler decides on: the Nodes, the unfinished Pods of every
// namespace, and DRA's ResourceSlices, ResourceClaims and DeviceClasses (none where
// resource.k8s.io/v1 is not served). Each object is trimmed as it is listed (trimObject).
func loadCluster(ctx context.Context, c *clients) (capacity.Cluster, error) {
	var cl capacity.Cluster
	core, resource, err := c.typed()
	if err != nil {
		return cl, err
	}
	err = listAll(ctx, core.Nodes().List, metav1.ListOptions{}, func(l *corev1.NodeList) string {
		cl.Nodes = appendTrimmed(cl.Nodes, l.Items, func(n *corev1.Node) bool { n.Status.Images = nil; return true })
		return l.Continue
	})
	if err != nil {
		return cl, c.explainList(err, listNodes)
	}
	err = listAll(ctx, core.Pods("").List, metav1.ListOptions{FieldSelector: unfinishedPods}, func(l *corev1.PodList) string {
		cl.Pods = appendTrimmed(cl.Pods, l.Items, func(p *corev1.Pod) bool {
			delete(p.Annotations, corev1.LastAppliedConfigAnnotation)
			return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
		})
		return l.Continue
	})
	if err != nil {
		return cl, c.explainList(err, listPods(""))
	}
	err = listAll(ctx, resource.ResourceSlices().List, metav1.ListOptions{}, func(l *resourcev1.ResourceSliceList) string {
		cl.Slices = appendTrimmed(cl.Slices, l.Items, always[*resourcev1.ResourceSlice])
		return l.Continue
	})
	if apierrors.IsNotFound(err) {
		return cl, nil // DRA is not served: no slices, claims or classes
	}
	if err != nil {
		return cl, c.explainList(err, listSlices)
	}
	err = listAll(ctx, resource.ResourceClaims("").List, metav1.ListOptions{}, func(l *resourcev1.ResourceClaimList) string {
		cl.Claims = appendTrimmed(cl.Claims, l.Items, always[*resourcev1.ResourceClaim])
		return l.Continue
	})
	if err != nil {
		return cl, c.explainList(err, listClaims(""))
	}
	err = listAll(ctx, resource.DeviceClasses().List, metav1.ListOptions{}, func(l *resourcev1.DeviceClassList) string {
		cl.Classes = appendTrimmed(cl.Classes, l.Items, always[*resourcev1.DeviceClass])
		return l.Continue
	})
	if err != nil {
		return cl, c.explainList(err, listClasses)
	}
	return cl, nil
}

// listAll lists in pages of listChunk, handing each page to page, which returns its continue
// token.
func listAll[L any](ctx context.Context, list func(context.Context, metav1.ListOptions) (L, error), opts metav1.ListOptions, page func(L) string) error {
	opts.Limit = listChunk
	for {
		l, err := list(ctx, opts)
		if err != nil {
			return err
		}
		if opts.Continue = page(l); opts.Continue == "" {
			return nil
		}
	}
}

// metaObject is a listed object: a pointer to a Kubernetes type.
type metaObject[T any] interface {
	*T
	metav1.Object
}

// appendTrimmed appends pointers to the items that keep accepts, their managed fields dropped
// (keep may drop more): the questions never read them, and they are often the larger part.
func appendTrimmed[T any, P metaObject[T]](out []P, items []T, keep func(P) bool) []P {
	for i := range items {
		p := P(&items[i])
		p.SetManagedFields(nil)
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

func always[P any](P) bool { return true }
