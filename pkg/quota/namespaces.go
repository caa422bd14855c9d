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

package quota

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

// draQuotaSuffix ends the ResourceQuota key of a DRA device class's devices.
const draQuotaSuffix = ".deviceclass.resource.k8s.io/devices"

// namespaceModel is the ResourceQuotas' GPU limits, per namespace and summed per resource.
type namespaceModel struct {
	namespaces    int
	rows          []homelabv1.QuotaNamespace // sorted, all
	models        []*row
	overcommitted []string
	stranded      []string
}

// quotaResource is the node resource a ResourceQuota key limits, if a GPU resource:
// requests.nvidia.com/gpu limits nvidia.com/gpu; a device class's key is its own name.
func (r *reader) quotaResource(key corev1.ResourceName) (corev1.ResourceName, bool) {
	name := strings.TrimPrefix(string(key), "requests.")
	if strings.HasSuffix(name, draQuotaSuffix) && len(name) > len(draQuotaSuffix) {
		return corev1.ResourceName(name), true
	}
	return corev1.ResourceName(name), r.isGPU(name)
}

type nsKey struct {
	namespace string
	resource  corev1.ResourceName
}

// hardUsed is a namespace's limit of one resource: of several ResourceQuotas the smallest
// hard limit binds; each counts the same pods, so the largest used is the truest.
type hardUsed struct{ hard, used int64 }

func (r *reader) namespaceModel(in []NamespaceQuota, h *hardware) *namespaceModel {
	quotas := slices.Clone(in)
	slices.SortStableFunc(quotas, func(a, b NamespaceQuota) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	byKey := map[nsKey]hardUsed{}      // per namespace and key as written
	byResource := map[nsKey]hardUsed{} // per namespace and node resource
	for _, q := range quotas {
		for _, key := range slices.Sorted(maps.Keys(q.Hard)) {
			res, ok := r.quotaResource(key)
			if !ok {
				continue
			}
			what := func() string { return fmt.Sprintf("ResourceQuota %s/%s, %s", q.Namespace, q.Name, key) }
			v := hardUsed{r.count(what, "hard", q.Hard[key]), r.count(what, "used", q.Used[key])}
			merge(byKey, nsKey{q.Namespace, key}, v)
			merge(byResource, nsKey{q.Namespace, res}, v)
		}
	}
	m := &namespaceModel{}
	namespaces := map[string]bool{}
	for k, v := range byKey {
		namespaces[k.namespace] = true
		m.rows = append(m.rows, homelabv1.QuotaNamespace{Namespace: k.namespace, Resource: string(k.resource), Hard: v.hard, Used: v.used})
	}
	m.namespaces = len(namespaces)
	slices.SortFunc(m.rows, func(a, b homelabv1.QuotaNamespace) int {
		return cmp.Or(cmp.Compare(b.Hard, a.Hard), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Resource, b.Resource))
	})
	m.judge(byResource, h)
	return m
}

func merge(m map[nsKey]hardUsed, k nsKey, v hardUsed) {
	if old, ok := m[k]; ok {
		v = hardUsed{min(old.hard, v.hard), max(old.used, v.used)}
	}
	m[k] = v
}

// judge sums the namespaces' limits per resource and holds them against every node with
// the resource: a ResourceQuota does not say where its pods run.
func (m *namespaceModel) judge(byResource map[nsKey]hardUsed, h *hardware) {
	keys := slices.SortedFunc(maps.Keys(byResource), func(a, b nsKey) int {
		return cmp.Or(cmp.Compare(a.resource, b.resource), cmp.Compare(a.namespace, b.namespace))
	})
	every := h.everyNode()
	for i := 0; i < len(keys); {
		res := keys[i].resource
		rw := &row{resource: res}
		var names []string
		for ; i < len(keys) && keys[i].resource == res; i++ {
			v := byResource[keys[i]]
			rw.nominal = saturating.Add(rw.nominal, v.hard)
			rw.used = saturating.Add(rw.used, v.used)
			names = append(names, keys[i].namespace)
		}
		rw.reserved = rw.used
		rw.hw = h.sum(every, res)
		rw.model = rw.hw.model
		switch {
		case rw.model == "" && rw.nominal > 0:
			rw.finding = homelabv1.QuotaFindingStranded
			m.stranded = append(m.stranded, fmt.Sprintf("ResourceQuotas of namespaces %s: hard %d %s in all, which no node offers",
				listNames(names, 8), rw.nominal, res))
		case rw.model != "" && rw.nominal > rw.hw.ready:
			rw.finding = homelabv1.QuotaFindingOvercommitted
			m.overcommitted = append(m.overcommitted, fmt.Sprintf("ResourceQuotas of namespaces %s: hard %d %s in all, more than the %d Ready in the cluster (%s)",
				listNames(names, 8), rw.nominal, res, rw.hw.ready, rw.model))
		}
		m.models = append(m.models, rw)
	}
	sortRows(m.models)
}
