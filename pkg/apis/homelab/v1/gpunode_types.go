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

package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Values of GpuNodeSpec.Source, and the annotation with the hash of a record's identity.
const (
	SourceGPUFeatureDiscovery = "gpu-feature-discovery"
	SourceSeeded              = "seeded"            // copied at upgrade from a stored status or ConfigMap
	SourceDRA                 = "dra"               // the gpu.nvidia.com DRA driver's ResourceSlices
	SourceGKE                 = "gke"               // GKE's cloud.google.com/gke-accelerator labels
	SourceAcceleratorLabel    = "accelerator-label" // the cluster-autoscaler's k8s.amazonaws.com/accelerator
	SourceDevicePlugin        = "device-plugin"     // nvidia.com/gpu capacity alone

	IdentityHashAnnotation = GroupName + "/identity-hash"
	GpuNodeCRDName         = "gpunodes." + GroupName
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=gpun,singular=gpunode
// +kubebuilder:metadata:annotations="homelab.youngju.dev/schema-revision=1"
// +kubebuilder:printcolumn:name="PRODUCT",type=string,JSONPath=`.spec.product`
// +kubebuilder:printcolumn:name="GPUS",type=integer,JSONPath=`.spec.gpuCount`
// +kubebuilder:printcolumn:name="MEMORY-MIB",type=integer,JSONPath=`.spec.gpuMemoryMiB`
// +kubebuilder:printcolumn:name="MIG",type=string,JSONPath=`.spec.mig.strategy`
// +kubebuilder:printcolumn:name="SHARING",type=string,JSONPath=`.spec.sharing.strategy`
// +kubebuilder:printcolumn:name="DRIVER",type=string,JSONPath=`.spec.driverVersion`
// +kubebuilder:printcolumn:name="SOURCE",type=string,JSONPath=`.spec.source`
// +kubebuilder:printcolumn:name="MISSING-SINCE",type=date,JSONPath=`.spec.missingSince`
// +kubebuilder:printcolumn:name="FAMILY",type=string,JSONPath=`.spec.family`,priority=1
// +kubebuilder:printcolumn:name="CLIQUE",type=string,JSONPath=`.spec.clique`,priority=1
// +kubebuilder:printcolumn:name="CUDA",type=string,JSONPath=`.spec.cudaVersion`,priority=1
// +kubebuilder:printcolumn:name="LAST-SEEN",type=date,JSONPath=`.spec.lastSeen`,priority=1
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// GpuNode is one node's GPU identity as last discovered, kept by the operator so that a
// node whose discovery labels vanish is still counted as what it was. It is named after the
// node and owned by it: deleting the Node deletes the record. Readiness and allocation are
// not here: they change often and live on the Node and in the inventory.
type GpuNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec GpuNodeSpec `json:"spec"`
}

// GpuNodeSpec is the GPU identity of a node.
type GpuNodeSpec struct {
	// Product is the GPU product (nvidia.com/gpu.product); empty when unknown.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Product string `json:"product,omitempty"`
	// GpuCount is the physical GPU count (nvidia.com/gpu.count).
	// +optional
	GpuCount int32 `json:"gpuCount,omitempty"`
	// GpuMemoryMiB is the memory of one GPU (nvidia.com/gpu.memory).
	// +optional
	GpuMemoryMiB int64 `json:"gpuMemoryMiB,omitempty"`
	// Family is the GPU architecture, e.g. hopper.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Family string `json:"family,omitempty"`
	// ComputeCapability is major.minor, e.g. 9.0.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ComputeCapability string `json:"computeCapability,omitempty"`
	// DriverVersion is the NVIDIA driver version.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	DriverVersion string `json:"driverVersion,omitempty"`
	// CudaVersion is the CUDA runtime version the driver supports.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	CudaVersion string `json:"cudaVersion,omitempty"`
	// WorkloadConfig is nvidia.com/gpu.workload.config.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	WorkloadConfig string `json:"workloadConfig,omitempty"`
	// Sharing is set when GPUs are shared (time-slicing or MPS).
	// +optional
	Sharing *GpuSharing `json:"sharing,omitempty"`
	// MIG is the MIG layout (its transient configState is not kept).
	// +optional
	MIG *MigInfo `json:"mig,omitempty"`

	// Clique is the multi-node NVLink domain the node belongs to (nvidia.com/gpu.clique).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Clique string `json:"clique,omitempty"`
	// Devices lists the GPUs (and MIG or passthrough devices) a DRA driver published, at
	// most 64, sorted by name.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Devices []GpuDevice `json:"devices,omitempty"`
	// Conditions are the health reports of the monitors beside the driver, in the same
	// short vocabulary as an inventory's status.nodes[].conditions.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Conditions []string `json:"conditions,omitempty"`
	// Warnings say where the sources disagree, and which one said what.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Warnings []string `json:"warnings,omitempty"`

	// Source says where these facts came from, comma-separated when several agree:
	// gpu-feature-discovery, dra, gke, accelerator-label, device-plugin, or seeded (copied
	// from an inventory's stored status or the ConfigMap when the operator was upgraded).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Source string `json:"source,omitempty"`
	// LastSeen is when the operator last saw the sources state these facts, as of the
	// record's last write (a record is written only when the facts change or vanish).
	// +optional
	LastSeen *metav1.Time `json:"lastSeen,omitempty"`
	// MissingSince is set while the sources are gone: the facts are then the last-known ones.
	// +optional
	MissingSince *metav1.Time `json:"missingSince,omitempty"`
}

// GpuDevice is one device a DRA driver published for the node.
type GpuDevice struct {
	// Name is the device's name in its ResourceSlice, e.g. gpu-0.
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name"`
	// Type is the driver's type attribute: gpu, mig or vfio.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Type string `json:"type,omitempty"`
	// UUID is the device's UUID (GPU-... or MIG-...).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	UUID string `json:"uuid,omitempty"`
	// PCIBusID is resource.kubernetes.io/pciBusID.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	PCIBusID string `json:"pciBusID,omitempty"`
	// Profile is a MIG device's profile, e.g. 1g.10gb.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Profile string `json:"profile,omitempty"`
	// ParentUUID is the UUID of a MIG device's GPU.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ParentUUID string `json:"parentUUID,omitempty"`
	// MemoryMiB is the device's memory.
	// +optional
	MemoryMiB int64 `json:"memoryMiB,omitempty"`
	// Taints are the device's taints as key:effect, e.g. gpu.nvidia.com/xid:NoSchedule.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Taints []string `json:"taints,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// GpuNodeList is a list of GpuNode records.
type GpuNodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []GpuNode `json:"items"`
}
