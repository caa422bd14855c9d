package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types and reasons that the operator sets on a GpuInventory.
const (
	// ConditionDegraded is True when a covered GPU node is not Ready, or when the inventory
	// cannot be computed at all (an invalid node selector).
	ConditionDegraded = "Degraded"

	ReasonAllGPUNodesReady       = "AllGPUNodesReady"
	ReasonNoGPUNodes             = "NoGPUNodes"
	ReasonGPUNodesNotReady       = "GPUNodesNotReady"
	ReasonInvalidNodeSelector    = "InvalidNodeSelector"
	DefaultWorkloadConfig        = "container"
	FieldManager                 = "gpu-inventory-operator"
	DefaultInventoryName         = "cluster"
	NodeStatusConfigMapName      = "gpu-node-status"
	CustomResourceDefinitionName = "gpuinventories." + GroupName
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=gpuinv,singular=gpuinventory
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="GPU-NODES",type=integer,JSONPath=`.status.totalGpuNodes`
// +kubebuilder:printcolumn:name="READY",type=integer,JSONPath=`.status.readyGpuNodes`
// +kubebuilder:printcolumn:name="GPUS",type=integer,JSONPath=`.status.totalGpus`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// GpuInventory is a live summary of the GPU nodes that its node selector covers: how many
// there are, how many are Ready, and what each one carries.
type GpuInventory struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec GpuInventorySpec `json:"spec,omitempty"`
	// +optional
	Status GpuInventoryStatus `json:"status,omitempty"`
}

// GpuInventorySpec says which nodes an inventory covers.
type GpuInventorySpec struct {
	// Note is free text for the humans who read the inventory.
	// +optional
	Note string `json:"note,omitempty"`

	// NodeSelector limits the inventory to matching nodes (for example one node pool).
	// Absent means every node in the cluster.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
}

// GpuInventoryStatus is what the operator last found.
type GpuInventoryStatus struct {
	// ObservedGeneration is the spec generation this status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// ObservedAt is when the inventory's content last changed. A scan that finds nothing
	// new does not move it.
	// +optional
	ObservedAt *metav1.Time `json:"observedAt,omitempty"`

	// InventoryHash identifies the content: equal content gives an equal hash, whatever the
	// order in which nodes were seen.
	// +optional
	InventoryHash string `json:"inventoryHash,omitempty"`

	// TotalGpuNodes counts the covered GPU nodes.
	// +optional
	TotalGpuNodes int32 `json:"totalGpuNodes"`
	// ReadyGpuNodes counts the covered GPU nodes whose Ready condition is True.
	// +optional
	ReadyGpuNodes int32 `json:"readyGpuNodes"`
	// TotalGpus sums the physical GPU count (nvidia.com/gpu.count) of the covered nodes.
	// +optional
	TotalGpus int32 `json:"totalGpus"`
	// ReadyGpus sums the physical GPU count of the Ready nodes.
	// +optional
	ReadyGpus int32 `json:"readyGpus"`

	// Nodes lists every covered GPU node, sorted by name.
	// +optional
	// +listType=atomic
	Nodes []GpuNode `json:"nodes,omitempty"`

	// Conditions: Degraded is True when a covered GPU node is not Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// GpuNode is what one GPU node carries.
type GpuNode struct {
	// Name is the Node's name.
	Name string `json:"name"`
	// Ready is true when the node's Ready condition is True (False, Unknown or absent: false).
	Ready bool `json:"ready"`
	// Product is the nvidia.com/gpu.product label; empty when unknown.
	// +optional
	Product string `json:"product,omitempty"`
	// GpuCount is the physical GPU count (nvidia.com/gpu.count).
	// +optional
	GpuCount int32 `json:"gpuCount"`
	// GpuMemoryMiB is the memory of one GPU (nvidia.com/gpu.memory).
	// +optional
	GpuMemoryMiB int64 `json:"gpuMemoryMiB,omitempty"`
	// WorkloadConfig is nvidia.com/gpu.workload.config: container, vm-passthrough or vm-vgpu.
	// +optional
	WorkloadConfig string `json:"workloadConfig,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// GpuInventoryList is a list of GpuInventory objects.
type GpuInventoryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []GpuInventory `json:"items"`
}
