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

package quotacache

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/quota"
)

// keptQuota is what the cache keeps of a ResourceQuota: its GPU limits, none when it has no
// GPU key (such quotas are stored, to follow their changes, but left out of the snapshot).
type keptQuota = kept[quota.NamespaceQuota]

// keptQuotaList is a ResourceQuotaList as the codec decodes it.
type keptQuotaList struct {
	metav1.ListMeta
	Items []keptQuota
}

func (l *keptQuotaList) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (l *keptQuotaList) DeepCopyObject() runtime.Object {
	out := *l
	out.Items = append([]keptQuota(nil), l.Items...)
	return &out
}

// quotaOf keeps the GPU keys of a ResourceQuota's spec.hard and status.used.
func quotaOf(rq *corev1.ResourceQuota) *keptQuota {
	return &keptQuota{
		Compact: kubeproto.CompactOfMeta(&rq.ObjectMeta),
		Value: quota.NamespaceQuota{Namespace: rq.Namespace, Name: rq.Name,
			Hard: gpuKeys(rq.Spec.Hard), Used: gpuKeys(rq.Status.Used)},
	}
}

func gpuKeys(list corev1.ResourceList) map[corev1.ResourceName]int64 {
	var out map[corev1.ResourceName]int64
	for k, q := range list {
		if !KeepQuotaKey(k) {
			continue
		}
		if out == nil {
			out = map[corev1.ResourceName]int64{}
		}
		out[k] = saturated(q)
	}
	return out
}

// quotaCodec decodes ResourceQuotas with the generated decoder, then keeps their GPU keys: a
// cluster has few ResourceQuotas, so a hand decoder would not pay.
var quotaCodec = kubeproto.Codec[keptQuota, keptQuotaList]{
	GroupVersion: corev1.SchemeGroupVersion, Kind: "ResourceQuota", ListKind: "ResourceQuotaList",
	Object: func(raw []byte) (*keptQuota, error) {
		var rq corev1.ResourceQuota
		if err := rq.Unmarshal(raw); err != nil {
			return nil, err
		}
		return quotaOf(&rq), nil
	},
	List: func(raw []byte) (*keptQuotaList, error) {
		list := &keptQuotaList{}
		err := kubeproto.DecodeList(raw, &list.ListMeta, func(item []byte) error {
			var rq corev1.ResourceQuota
			if err := rq.Unmarshal(item); err != nil {
				return err
			}
			list.Items = append(list.Items, *quotaOf(&rq))
			return nil
		})
		return list, err
	},
	Reduce: func(obj runtime.Object) runtime.Object {
		switch o := obj.(type) {
		case *corev1.ResourceQuota:
			return quotaOf(o)
		case *corev1.ResourceQuotaList:
			list := &keptQuotaList{ListMeta: o.ListMeta, Items: make([]keptQuota, 0, len(o.Items))}
			for i := range o.Items {
				list.Items = append(list.Items, *quotaOf(&o.Items[i]))
			}
			return list
		}
		return obj
	},
}

// quotaListWatch lists and watches the ResourceQuotas of all namespaces on the project's
// client (protobuf, a connection of its own, the User-Agent set).
func quotaListWatch(config *rest.Config) (cache.ListerWatcher, error) {
	client, err := kubeproto.NewClient(config, quotaCodec)
	if err != nil {
		return nil, err
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return client.Get().Resource("resourcequotas").VersionedParams(&opts, kubeclient.ParameterCodec).Do(ctx).Get()
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			req := client.Get().Resource("resourcequotas").VersionedParams(&opts, kubeclient.ParameterCodec)
			if opts.TimeoutSeconds != nil {
				req = req.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
			}
			return req.Watch(ctx)
		},
	}, nil
}
