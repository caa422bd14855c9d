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

package inventory

import (
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// compactEntry is a GpuNodeEntry as the EntryCache keeps it: the descriptive strings, which
// most nodes of a fleet share, interned together as one handle, and the fields that are
// rarely set behind one pointer. expand gives the entry back, field for field.
type compactEntry struct {
	name         string
	shared       unique.Handle[sharedFields]
	free         []homelabv1.ResourceFree
	rare         *rareFields // nil: none of them set
	gpuMemoryMiB int64
	gpuCount, capacity, allocatable, unhealthyGpus, allocatedGpus, freeGpus,
	unschedulableFreeGpus, gpuPods int32
	ready, labelsMissing bool
}

// sharedFields are the strings that nodes of one model, driver and NVLink domain share.
type sharedFields struct {
	product, workloadConfig, family, computeCapability, driverVersion, cudaVersion, source, clique string
}

// rareFields are what a healthy, untainted node without sharing or MIG leaves unset.
type rareFields struct {
	sharing                      *homelabv1.GpuSharing
	mig                          *homelabv1.MigInfo
	labelsMissingSince           *metav1.Time
	taints, conditions, warnings []string
}

func compact(e *homelabv1.GpuNodeEntry) compactEntry {
	c := compactEntry{
		name: e.Name,
		shared: unique.Make(sharedFields{e.Product, e.WorkloadConfig, e.Family, e.ComputeCapability,
			e.DriverVersion, e.CudaVersion, e.Source, e.Clique}),
		free: e.Free, gpuMemoryMiB: e.GpuMemoryMiB,
		gpuCount: e.GpuCount, capacity: e.Capacity, allocatable: e.Allocatable, unhealthyGpus: e.UnhealthyGpus,
		allocatedGpus: e.AllocatedGpus, freeGpus: e.FreeGpus, unschedulableFreeGpus: e.UnschedulableFreeGpus,
		gpuPods: e.GpuPods, ready: e.Ready, labelsMissing: e.LabelsMissing,
	}
	if r := (rareFields{e.Sharing, e.MIG, e.LabelsMissingSince, e.Taints, e.Conditions, e.Warnings}); r.sharing != nil ||
		r.mig != nil || r.labelsMissingSince != nil || r.taints != nil || r.conditions != nil || r.warnings != nil {
		c.rare = &r
	}
	return c
}

// expand writes the entry c was made from into e.
func (c *compactEntry) expand(e *homelabv1.GpuNodeEntry) {
	s := c.shared.Value()
	*e = homelabv1.GpuNodeEntry{
		Name: c.name, Ready: c.ready, Product: s.product, GpuCount: c.gpuCount, GpuMemoryMiB: c.gpuMemoryMiB,
		WorkloadConfig: s.workloadConfig, Family: s.family, ComputeCapability: s.computeCapability,
		DriverVersion: s.driverVersion, CudaVersion: s.cudaVersion, Capacity: c.capacity,
		Allocatable: c.allocatable, UnhealthyGpus: c.unhealthyGpus, LabelsMissing: c.labelsMissing,
		AllocatedGpus: c.allocatedGpus, FreeGpus: c.freeGpus, UnschedulableFreeGpus: c.unschedulableFreeGpus,
		Free: c.free, GpuPods: c.gpuPods, Source: s.source, Clique: s.clique,
	}
	if r := c.rare; r != nil {
		e.Sharing, e.MIG, e.LabelsMissingSince = r.sharing, r.mig, r.labelsMissingSince
		e.Taints, e.Conditions, e.Warnings = r.taints, r.conditions, r.warnings
	}
}
