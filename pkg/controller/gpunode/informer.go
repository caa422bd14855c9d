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

package gpunode

import (
	"time"

	"k8s.io/client-go/tools/cache"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset/versioned"
	informersv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/informers/externalversions/homelab/v1"
	listersv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/listers/homelab/v1"
)

// NewRecordInformer returns an informer for the GpuNode records whose cache keeps no
// managedFields: they are as large as the rest of a record and nothing reads them. It is not
// part of an informer factory: run it with Informer().RunWithContext.
func NewRecordInformer(client versioned.Interface, resync time.Duration) informersv1.GpuNodeInformer {
	informer := informersv1.NewGpuNodeInformer(client, resync, cache.Indexers{})
	_ = informer.SetTransform(StripManagedFields) // fails only once the informer has started
	return recordInformer{informer}
}

// StripManagedFields is the record informer's transform: it drops a record's managedFields.
// Anything else passes untouched.
func StripManagedFields(obj any) (any, error) {
	if r, ok := obj.(*homelabv1.GpuNode); ok {
		r.ManagedFields = nil
	}
	return obj, nil
}

type recordInformer struct{ informer cache.SharedIndexInformer }

func (r recordInformer) Informer() cache.SharedIndexInformer { return r.informer }
func (r recordInformer) Lister() listersv1.GpuNodeLister {
	return listersv1.NewGpuNodeLister(r.informer.GetIndexer())
}
