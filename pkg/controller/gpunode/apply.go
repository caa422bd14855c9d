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
	corev1 "k8s.io/api/core/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	applyv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/generated/applyconfiguration/homelab/v1"
)

// applyConfiguration is the whole record of a node as this controller owns it: no labels, the
// identity hash annotation, the Node as owner (so that the garbage collector deletes the
// record with the node) and the spec. Empty fields are left out, so that an apply removes
// what this manager set before and the identity no longer has.
func applyConfiguration(node *corev1.Node, spec homelabv1.GpuNodeSpec, hash string) *applyv1.GpuNodeApplyConfiguration {
	return applyv1.GpuNode(node.Name).
		WithAnnotations(map[string]string{homelabv1.IdentityHashAnnotation: hash}).
		WithOwnerReferences(metav1apply.OwnerReference().
			WithAPIVersion("v1").WithKind("Node").WithName(node.Name).WithUID(node.UID)).
		WithSpec(specConfiguration(spec))
}

func specConfiguration(spec homelabv1.GpuNodeSpec) *applyv1.GpuNodeSpecApplyConfiguration {
	s := applyv1.GpuNodeSpec()
	setString(spec.Product, s.WithProduct)
	setString(spec.Family, s.WithFamily)
	setString(spec.ComputeCapability, s.WithComputeCapability)
	setString(spec.DriverVersion, s.WithDriverVersion)
	setString(spec.CudaVersion, s.WithCudaVersion)
	setString(spec.WorkloadConfig, s.WithWorkloadConfig)
	setString(spec.Source, s.WithSource)
	setString(spec.Clique, s.WithClique)
	if len(spec.Conditions) > 0 {
		s.WithConditions(spec.Conditions...)
	}
	if len(spec.Warnings) > 0 {
		s.WithWarnings(spec.Warnings...)
	}
	for _, d := range spec.Devices {
		s.WithDevices(deviceConfiguration(d))
	}
	if spec.GpuCount != 0 {
		s.WithGpuCount(spec.GpuCount)
	}
	if spec.GpuMemoryMiB != 0 {
		s.WithGpuMemoryMiB(spec.GpuMemoryMiB)
	}
	if sh := spec.Sharing; sh != nil {
		c := applyv1.GpuSharing()
		setString(sh.Strategy, c.WithStrategy)
		if sh.Replicas != 0 {
			c.WithReplicas(sh.Replicas)
		}
		s.WithSharing(c)
	}
	if m := spec.MIG; m != nil {
		c := applyv1.MigInfo()
		if m.Capable {
			c.WithCapable(true)
		}
		setString(m.Strategy, c.WithStrategy)
		setString(m.Config, c.WithConfig)
		setString(m.ConfigState, c.WithConfigState)
		for _, d := range m.Devices {
			dc := applyv1.MigDevice().WithProfile(d.Profile).WithCount(d.Count)
			if d.MemoryMiB != 0 {
				dc.WithMemoryMiB(d.MemoryMiB)
			}
			c.WithDevices(dc)
		}
		s.WithMIG(c)
	}
	if spec.LastSeen != nil {
		s.WithLastSeen(*spec.LastSeen)
	}
	if spec.MissingSince != nil {
		s.WithMissingSince(*spec.MissingSince)
	}
	return s
}

func deviceConfiguration(d homelabv1.GpuDevice) *applyv1.GpuDeviceApplyConfiguration {
	c := applyv1.GpuDevice().WithName(d.Name)
	setString(d.Type, c.WithType)
	setString(d.UUID, c.WithUUID)
	setString(d.PCIBusID, c.WithPCIBusID)
	setString(d.Profile, c.WithProfile)
	setString(d.ParentUUID, c.WithParentUUID)
	if d.MemoryMiB != 0 {
		c.WithMemoryMiB(d.MemoryMiB)
	}
	if len(d.Taints) > 0 {
		c.WithTaints(d.Taints...)
	}
	return c
}

func setString[T any](v string, with func(string) T) {
	if v != "" {
		with(v)
	}
}
