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

package podcache

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// Listing the pods namespace by namespace, Listers lists at a time, lets the API server
// encode them on several cores, where one list of all pods is encoded on one. Beyond
// MaxSplitNamespaces namespaces each list's fixed cost outweighs that, and the pods are
// listed at once.
const (
	Listers            = 3
	MaxSplitNamespaces = 256
)

// SplitNamespaces lists the namespaces to list pods by, at resourceVersion (as a list's
// option), and returns them with the namespace list's resourceVersion; no namespaces when
// the pods are better listed at once (fewer than two, or more than MaxSplitNamespaces). The
// error is the namespace list's: forbidden without "list" on namespaces.
func SplitNamespaces(ctx context.Context, core rest.Interface, resourceVersion string) ([]string, string, error) {
	list, err := kubeclient.Namespaces(core).List(ctx, metav1.ListOptions{ResourceVersion: resourceVersion, Limit: MaxSplitNamespaces + 1})
	if err != nil {
		return nil, "", fmt.Errorf("list namespaces: %w", err)
	}
	if len(list.Items) < 2 || len(list.Items) > MaxSplitNamespaces || list.Continue != "" {
		return nil, list.ResourceVersion, nil
	}
	names := make([]string, len(list.Items))
	for i := range list.Items {
		names[i] = list.Items[i].Name
	}
	return names, list.ResourceVersion, nil
}

// StreamPodsEach is StreamPods over each of namespaces, Listers at a time; fn is called from
// several goroutines at once.
func StreamPodsEach(ctx context.Context, client rest.Interface, namespaces []string, fn func(*allocation.Pod) error) error {
	_, err := podList.StreamEach(ctx, client, namespaces, Listers, metav1.ListOptions{Limit: PageSize}, func(string) func(raw []byte) error {
		return kubeproto.Decoded("pod", DecodePod, fn)
	})
	return err
}

// listedVersions are, after a list by namespace, each namespace's list resourceVersion. The
// watch starts at the oldest of them, so it replays events that the newer lists already hold.
type listedVersions map[string]string

// holds reports whether o, a GPU pod (or one that could not be read) from the watch, is no
// newer than its namespace's list: applied after that list, it would show the pod as it was
// before. Pods of namespaces created after the namespace list have no entry, and a
// resourceVersion that cannot be compared is taken as newer.
func (v listedVersions) holds(o *Object) bool {
	listed, ok := v[o.Namespace]
	if !ok || o.Namespace == "" {
		return false
	}
	cmp, err := resourceversion.CompareResourceVersion(o.ResourceVersion, listed)
	return err == nil && cmp <= 0
}

// listByNamespace is the first list (resourceVersion 0) namespace by namespace, when the
// operator may list namespaces. It returns nil, and no error, when the pods are better
// listed at once: too few or too many namespaces, namespaces that cannot be listed, or
// resourceVersions that cannot be compared (the watch must start at the oldest list's).
func (c *Cache) listByNamespace(ctx context.Context) (*ObjectList, listedVersions, error) {
	logger := klog.FromContext(ctx)
	names, namespacesVersion, err := SplitNamespaces(ctx, c.namespaces, "0")
	if err != nil {
		logger.Info("Listing pods at once", "reason", err.Error())
		return nil, nil, nil
	}
	if names == nil {
		logger.Info("Listing pods at once", "reason", fmt.Sprintf("fewer than two or more than %d namespaces", MaxSplitNamespaces))
		return nil, nil, nil
	}
	start := time.Now()
	list := &ObjectList{}
	var (
		mu    sync.Mutex
		count int
	)
	versions, err := podList.StreamEach(ctx, c.client, names, Listers, metav1.ListOptions{ResourceVersion: "0", Limit: PageSize}, func(ns string) func(raw []byte) error {
		n := 0
		return func(raw []byte) error {
			n++
			obj, err := listItem(raw, n)
			mu.Lock()
			defer mu.Unlock()
			count++
			if obj != nil {
				list.Items = append(list.Items, obj)
			}
			return err
		}
	})
	if err != nil {
		return nil, nil, err
	}
	oldest := namespacesVersion
	for ns, rv := range versions {
		cmp, err := resourceversion.CompareResourceVersion(rv, oldest)
		if err != nil {
			logger.Info("Listing pods at once", "reason", fmt.Sprintf("resourceVersion %q of namespace %s's list cannot be compared with %q: %v", rv, ns, oldest, err))
			return nil, nil, nil
		}
		if cmp < 0 {
			oldest = rv
		}
	}
	list.ResourceVersion = oldest
	logger.V(2).Info("Listed pods", "pods", count, "kept", len(list.Items), "namespaces", len(names), "resourceVersion", oldest, "duration", time.Since(start))
	return list, versions, nil
}
