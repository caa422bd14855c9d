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

package app

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/controller/nodestatus"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
)

// seeder holds, for an upgrade from a version without GpuNode records, the last-known values
// that the stored statuses and the ConfigMap kept, so that a node whose labels are gone when
// the upgrade happens gets a record all the same. It reads them once, when first asked: a
// cluster whose GPU nodes all have their labels never pays for it.
type seeder struct {
	homelab   rest.Interface // homelab.youngju.dev/v1
	core      rest.Interface // core/v1
	namespace string
	ctx       context.Context

	once    sync.Once
	entries map[string]homelabv1.GpuNodeEntry
}

// seedPageSize bounds one page of whole inventories (each up to a few hundred KiB).
const seedPageSize = 20

// lookup returns the last-known entry of a node that knows its GPUs.
func (s *seeder) lookup(name string) (homelabv1.GpuNodeEntry, bool) {
	s.once.Do(s.load)
	e, ok := s.entries[name]
	return e, ok
}

func (s *seeder) load() {
	logger := klog.FromContext(s.ctx)
	s.entries = map[string]homelabv1.GpuNodeEntry{}
	keep := func(e homelabv1.GpuNodeEntry) {
		if !inventory.EntryKnowsGPUs(&e) {
			return
		}
		// Several places may list a node: the one that saw its labels go first tells since when.
		if old, ok := s.entries[e.Name]; !ok || missingEarlier(e, old) {
			s.entries[e.Name] = e
		}
	}
	opts := metav1.ListOptions{Limit: seedPageSize}
	for {
		list, err := kubeclient.GpuInventories(s.homelab).List(s.ctx, opts)
		if err != nil {
			logger.Error(err, "Cannot read stored inventories to seed GpuNode records; nodes without labels get records once their labels are back")
			break
		}
		for _, gi := range list.Items {
			for _, e := range gi.Status.Nodes {
				keep(e)
			}
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	cm, err := kubeclient.ConfigMaps(s.core, s.namespace).Get(s.ctx, homelabv1.NodeStatusConfigMapName, metav1.GetOptions{})
	switch {
	case err == nil:
		for _, e := range nodestatus.Entries(cm) {
			keep(e)
		}
	case !apierrors.IsNotFound(err):
		logger.Error(err, "Cannot read the ConfigMap to seed GpuNode records", "configMap", homelabv1.NodeStatusConfigMapName)
	}
	logger.Info("Read last-known GPU identities to seed GpuNode records", "nodes", len(s.entries))
}

// missingEarlier reports whether a says the labels went missing before b does.
func missingEarlier(a, b homelabv1.GpuNodeEntry) bool {
	if !a.LabelsMissing || a.LabelsMissingSince == nil {
		return false
	}
	return !b.LabelsMissing || b.LabelsMissingSince == nil || a.LabelsMissingSince.Before(b.LabelsMissingSince)
}
