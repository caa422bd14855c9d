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
	"github.com/youngju-dev/gpu-inventory-operator/pkg/intern"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// NewRecordInformer returns an informer for the GpuNode records whose cache keeps no
// managedFields (they are as large as the rest of a record and nothing reads them), no
// devices where the node's slices list them (DevicesElided), and one copy of each string that
// many records repeat. It is not part of an informer factory: run it with
// Informer().RunWithContext.
func NewRecordInformer(client versioned.Interface, resync time.Duration) informersv1.GpuNodeInformer {
	informer := informersv1.NewGpuNodeInformer(client, resync, cache.Indexers{})
	_ = informer.SetTransform(TrimRecord) // fails only once the informer has started
	return recordInformer{informer}
}

// devicesElided marks, in the cache only, a record whose spec.devices TrimRecord dropped.
const devicesElided = homelabv1.GroupName + "/cache-devices-elided"

// TrimRecord is the record informer's transform: it drops a record's managedFields, drops
// the devices of a record as this controller writes it whose node is not missing (its DRA
// slices list the same devices, and nothing reads them from the cache; DevicesElided), and
// makes the strings that many records repeat (type, owner's kind, model, versions, device
// types and names, profiles, conditions) share one copy (sharedStrings). Anything else passes
// untouched.
func TrimRecord(obj any) (any, error) {
	r, ok := obj.(*homelabv1.GpuNode)
	if !ok {
		return obj, nil
	}
	r.ManagedFields = nil
	share(&r.APIVersion, &r.Kind)
	if hash, ok := r.Annotations[homelabv1.IdentityHashAnnotation]; ok && len(r.Annotations) == 1 {
		r.Annotations = map[string]string{homelabv1.IdentityHashAnnotation: hash} // the constant key
		if len(r.Spec.Devices) > 0 && r.Spec.MissingSince == nil && inventory.IdentityHash(r.Spec) == hash {
			r.Spec.Devices = nil
			r.Annotations[devicesElided] = ""
		}
	}
	for i := range r.OwnerReferences {
		share(&r.OwnerReferences[i].APIVersion, &r.OwnerReferences[i].Kind)
	}
	spec := &r.Spec
	share(&spec.Product, &spec.Family, &spec.ComputeCapability, &spec.DriverVersion, &spec.CudaVersion,
		&spec.WorkloadConfig, &spec.Clique, &spec.Source)
	if spec.Sharing != nil {
		share(&spec.Sharing.Strategy)
	}
	if m := spec.MIG; m != nil {
		share(&m.Strategy, &m.Config, &m.ConfigState)
		for i := range m.Devices {
			share(&m.Devices[i].Profile)
		}
	}
	for i := range spec.Devices {
		d := &spec.Devices[i]
		share(&d.Name, &d.Type, &d.Profile)
		shareAll(d.Taints)
	}
	shareAll(spec.Conditions)
	shareAll(spec.Warnings)
	return obj, nil
}

// DevicesElided reports whether the cache dropped a record's devices: the record held, when
// decoded, exactly the identity its hash annotation names, devices included. A reader that
// needs the devices gets the record from the API server.
func DevicesElided(r *homelabv1.GpuNode) bool {
	_, ok := r.Annotations[devicesElided]
	return ok
}

// sharedStrings holds one copy of each short string records repeat.
var sharedStrings intern.Strings

func share(strs ...*string) {
	for _, s := range strs {
		*s = sharedStrings.Intern(*s)
	}
}

func shareAll(strs []string) {
	for i := range strs {
		strs[i] = sharedStrings.Intern(strs[i])
	}
}

type recordInformer struct{ informer cache.SharedIndexInformer }

func (r recordInformer) Informer() cache.SharedIndexInformer { return r.informer }
func (r recordInformer) Lister() listersv1.GpuNodeLister {
	return listersv1.NewGpuNodeLister(r.informer.GetIndexer())
}
