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

// Condition types and reasons that the operator sets on a GpuInventory.
const (
	// ConditionDegraded is True when a covered GPU node is not Ready, has unhealthy GPUs
	// (a health monitor's GPU fault counts) or failed its GPU driver upgrade, or when the
	// inventory cannot be computed at all (an invalid node selector).
	ConditionDegraded = "Degraded"
	// ConditionLabelsMissing is True when GPU nodes lost their GPU Feature Discovery labels
	// and are reported from their last-known values.
	ConditionLabelsMissing = "LabelsMissing"
	// ConditionTruncated is True when status.nodes lists only part of the covered GPU nodes.
	ConditionTruncated = "Truncated"
	// ConditionFragmented is True when a model has at least spec.fragmentationGpus free GPUs
	// but no node has that many free: a job of that size waits although the GPUs are there.
	ConditionFragmented = "Fragmented"
	// ConditionQuotaOvercommitted is True when a cohort (or a ResourceQuota'd namespace set)
	// can hand out more of a model's GPUs than the Ready GPUs its flavors reach; the message
	// names the cohorts and their queues.
	ConditionQuotaOvercommitted = "QuotaOvercommitted"
	// ConditionQuotaStranded is True when Ready GPU nodes are selected by no ResourceFlavor of
	// any ClusterQueue, or when quota is given in flavors that reach no node with the resource.
	ConditionQuotaStranded = "QuotaStranded"
	// ConditionQuotaUnknown is True when the operator may not read Kueue's objects or the
	// ResourceQuotas (RBAC), or cannot read them; status.quota then holds what it could read.
	ConditionQuotaUnknown = "QuotaUnknown"
	// ConditionUsageUnknown is True when the operator reads GPU utilisation from Prometheus
	// (--prometheus-url) and its last query failed: Prometheus unreachable or too slow, an
	// error answer, or no DCGM exporter series. status.usage then keeps the last good answer.
	ConditionUsageUnknown = "UsageUnknown"
	// ConditionTopologyFragmented is True when a model has at least spec.fragmentationGpus
	// free GPUs but no domain of the required topology level can take a gang of that many.
	ConditionTopologyFragmented = "TopologyFragmented"

	ReasonAllGPUNodesReady       = "AllGPUNodesReady"
	ReasonNoGPUNodes             = "NoGPUNodes"
	ReasonGPUNodesNotReady       = "GPUNodesNotReady"
	ReasonInvalidNodeSelector    = "InvalidNodeSelector"
	ReasonGPUsUnhealthy          = "GPUsUnhealthy"
	ReasonLabelsMissing          = "GPUFeatureDiscoveryLabelsMissing"
	ReasonAllLabelsPresent       = "AllLabelsPresent"
	ReasonNodesOmitted           = "NodesOmitted"
	ReasonAllNodesListed         = "AllNodesListed"
	ReasonFreeGPUsFragmented     = "FreeGPUsFragmented"
	ReasonNotFragmented          = "NotFragmented"
	ReasonAllocationUnknown      = "AllocationUnknown"
	ReasonQuotaOvercommitted     = "QuotaExceedsHardware"
	ReasonQuotaWithinHardware    = "QuotaWithinHardware"
	ReasonQuotaStranded          = "GPUsOrQuotaStranded"
	ReasonNothingStranded        = "NothingStranded"
	ReasonQuotaForbidden         = "Forbidden"
	ReasonQuotaReadError         = "ReadError"
	ReasonQuotaRead              = "QuotaRead"
	ReasonPrometheusUnreachable  = "PrometheusUnreachable"
	ReasonPrometheusError        = "PrometheusError"
	ReasonNoDCGMSeries           = "NoDCGMSeries"
	ReasonUsageRead              = "UsageRead"
	ReasonGangsFragmented        = "FreeGPUsSpreadOverDomains"
	ReasonGangsFit               = "GangsFit"
	DefaultWorkloadConfig        = "container"
	FieldManager                 = "gpu-inventory-operator"
	DefaultInventoryName         = "cluster"
	NodeStatusConfigMapName      = "gpu-node-status"
	CustomResourceDefinitionName = "gpuinventories." + GroupName
)

// DefaultFragmentationGpus is the job size Fragmented is judged for when
// spec.fragmentationGpus is unset.
const DefaultFragmentationGpus = 8

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=gpuinv,singular=gpuinventory
// +kubebuilder:metadata:annotations="homelab.youngju.dev/schema-revision=9"
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="GPU-NODES",type=integer,JSONPath=`.status.totalGpuNodes`
// +kubebuilder:printcolumn:name="READY",type=integer,JSONPath=`.status.readyGpuNodes`
// +kubebuilder:printcolumn:name="GPUS",type=integer,JSONPath=`.status.totalGpus`
// +kubebuilder:printcolumn:name="READY-GPUS",type=integer,JSONPath=`.status.readyGpus`
// +kubebuilder:printcolumn:name="DEGRADED",type=string,JSONPath=`.status.conditions[?(@.type=="Degraded")].status`
// +kubebuilder:printcolumn:name="MODELS",type=integer,JSONPath=`.status.totalModels`,priority=1
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
	// Note is free text for the humans who read the inventory, at most 4096 characters.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Note string `json:"note,omitempty"`

	// NodeSelector limits the inventory to matching nodes (for example one node pool).
	// Absent means every node in the cluster.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// FragmentationGpus is the job size, in whole GPUs, the Fragmented condition is judged
	// for: True when a model has at least this many free GPUs but no node that many. Unset
	// means 8.
	// +optional
	// +kubebuilder:validation:Minimum=1
	FragmentationGpus int32 `json:"fragmentationGpus,omitempty"`

	// Topology sets how status.topology groups the GPU nodes into topology domains.
	// +optional
	Topology *TopologySpec `json:"topology,omitempty"`
}

// FragmentationThreshold is spec.fragmentationGpus, or DefaultFragmentationGpus when unset.
func (s *GpuInventorySpec) FragmentationThreshold() int32 {
	if s.FragmentationGpus <= 0 {
		return DefaultFragmentationGpus
	}
	return s.FragmentationGpus
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
	// UnlabeledGpus is the part of TotalGpus known only from last-known labels: nodes whose
	// GPU Feature Discovery labels vanished keep counting instead of shrinking the fleet.
	// +optional
	UnlabeledGpus int32 `json:"unlabeledGpus,omitempty"`
	// UnhealthyGpus sums, over all nodes, the GPUs that are unusable: those the device
	// plugin stopped advertising (capacity minus allocatable), DRA devices tainted
	// NoSchedule or NoExecute, and at least one per node whose health monitor reports a
	// GPU fault (docs/api.md).
	// +optional
	UnhealthyGpus int32 `json:"unhealthyGpus,omitempty"`
	// LabelsMissingNodes counts the nodes reported from last-known labels.
	// +optional
	LabelsMissingNodes int32 `json:"labelsMissingNodes,omitempty"`
	// TotalModels counts the entries of Models.
	// +optional
	TotalModels int32 `json:"totalModels,omitempty"`
	// ListedNodes is the number of entries in Nodes; less than TotalGpuNodes when the list
	// was truncated to keep the object small (see the Truncated condition).
	// +optional
	ListedNodes int32 `json:"listedNodes,omitempty"`

	// Models summarises the fleet per GPU model. MIG and time-sliced (-SHARED) variants are
	// grouped under their base model. Always exact, whatever the size of the cluster.
	// +optional
	// +listType=atomic
	Models []GpuModel `json:"models,omitempty"`

	// Cliques counts nodes and GPUs per multi-node NVLink domain (nvidia.com/gpu.clique):
	// the 32 largest, the rest counted under "<other cliques>".
	// +optional
	// +listType=atomic
	Cliques []GpuClique `json:"cliques,omitempty"`

	// Nodes lists the covered GPU nodes, sorted by name: all of them, or at most
	// --max-status-nodes (problem nodes chosen first) when the cluster is large.
	// +optional
	// +listType=atomic
	Nodes []GpuNodeEntry `json:"nodes,omitempty"`

	// Allocation says which GPUs pods hold, which are free and what waiting pods ask for;
	// absent when the operator does not read pods.
	// +optional
	Allocation *GpuAllocation `json:"allocation,omitempty"`
	// Quota is what Kueue and ResourceQuotas promise of the GPUs, beside the hardware that
	// quota reaches. Only on an inventory without a node selector (quota is the cluster's),
	// and only when some quota names a GPU resource.
	// +optional
	Quota *GpuQuota `json:"quota,omitempty"`
	// Usage is how much of the GPUs pods hold they use, from DCGM exporter's utilisation
	// series in Prometheus; absent unless the operator reads Prometheus (--prometheus-url)
	// and pods on the inventory's nodes hold GPUs DCGM exporter reports on.
	// +optional
	Usage *GpuUsage `json:"usage,omitempty"`
	// Topology is how the GPU nodes group into topology domains (zones, network blocks,
	// racks, NVLink cliques) and how many gangs of each size fit in each now; absent when no
	// GPU node carries a topology label.
	// +optional
	Topology *GpuTopology `json:"topology,omitempty"`

	// Conditions: Degraded, LabelsMissing, Truncated and Fragmented (and the Quota*,
	// UsageUnknown and TopologyFragmented conditions where quota, usage or topology is read).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// GpuNodeEntry is what one GPU node carries.
type GpuNodeEntry struct {
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

	// Family is the GPU architecture (nvidia.com/gpu.family), e.g. hopper.
	// +optional
	Family string `json:"family,omitempty"`
	// ComputeCapability is major.minor (nvidia.com/gpu.compute.major/minor), e.g. 9.0.
	// +optional
	ComputeCapability string `json:"computeCapability,omitempty"`
	// DriverVersion is the NVIDIA driver version, e.g. 570.124.06.
	// +optional
	DriverVersion string `json:"driverVersion,omitempty"`
	// CudaVersion is the CUDA runtime version the driver supports, e.g. 12.8.
	// +optional
	CudaVersion string `json:"cudaVersion,omitempty"`
	// Sharing is set when GPUs are shared (time-slicing or MPS).
	// +optional
	Sharing *GpuSharing `json:"sharing,omitempty"`
	// MIG is set when the node's GPUs are MIG-capable or partitioned.
	// +optional
	MIG *MigInfo `json:"mig,omitempty"`
	// Capacity is the node's nvidia.com/gpu (or nvidia.com/gpu.shared) capacity: with
	// sharing, count x replicas.
	// +optional
	Capacity int32 `json:"capacity,omitempty"`
	// Allocatable is the allocatable amount of the same resource.
	// +optional
	Allocatable int32 `json:"allocatable,omitempty"`
	// UnhealthyGpus counts the node's unusable GPUs: capacity minus allocatable, DRA
	// devices tainted NoSchedule or NoExecute, at least one under a health monitor's GPU fault.
	// +optional
	UnhealthyGpus int32 `json:"unhealthyGpus,omitempty"`
	// LabelsMissing is true when GPU Feature Discovery's labels vanished; product, count and
	// memory are then the last-known values.
	// +optional
	LabelsMissing bool `json:"labelsMissing,omitempty"`
	// LabelsMissingSince is when the labels were first seen missing.
	// +optional
	LabelsMissingSince *metav1.Time `json:"labelsMissingSince,omitempty"`
	// AllocatedGpus counts the GPUs of which pods hold any part (device-plugin resources
	// or DRA claims); a GPU partly held (a MIG device, a shared replica) counts as one.
	// +optional
	AllocatedGpus int32 `json:"allocatedGpus,omitempty"`
	// FreeGpus counts the whole GPUs the scheduler could give a pod here now, on a Ready
	// node that is not cordoned: for the device plugin's nvidia.com/gpu (when its unit is a
	// whole GPU) its allocatable minus what the node's bound pods request; for DRA the
	// published whole GPUs that are neither allocated (admin access aside), tainted
	// NoSchedule or NoExecute, nor partly allocated as MIG devices.
	// +optional
	FreeGpus int32 `json:"freeGpus,omitempty"`
	// UnschedulableFreeGpus counts what freeGpus would be on a node that cannot take pods
	// now (NotReady or cordoned): counted apart and never offered as a fit.
	// +optional
	UnschedulableFreeGpus int32 `json:"unschedulableFreeGpus,omitempty"`
	// Free is what a pod could still get of each device-plugin GPU resource the node
	// allocates, in the resource's own unit (a GPU, a MIG device, a shared replica):
	// allocatable minus what the node's bound pods request, as the scheduler counts it; per
	// DRA partition profile (mig.nvidia.com/<profile>), the partitions the node's shared
	// counters still allow once the allocated devices took theirs; and as
	// gpu.nvidia.com/shared, the DRA devices allowing several allocations on which a share
	// of the smallest size is left.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Free []ResourceFree `json:"free,omitempty"`
	// Taints are the node's NoSchedule and NoExecute taints, as key=value:Effect (at most
	// 8): its free GPUs are only for pods that tolerate them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Taints []string `json:"taints,omitempty"`
	// GpuPods counts the pods that hold GPUs on the node.
	// +optional
	GpuPods int32 `json:"gpuPods,omitempty"`
	// Source says where the GPU facts came from (see GpuNode's spec.source); empty for
	// GPU Feature Discovery's labels alone, the common case, to keep the list small.
	// +optional
	Source string `json:"source,omitempty"`
	// Clique is the multi-node NVLink domain the node belongs to (nvidia.com/gpu.clique).
	// +optional
	Clique string `json:"clique,omitempty"`
	// Conditions worth a human's attention: NotReady, Unreachable, LabelsMissing,
	// UnhealthyGPUs, MIGConfigFailed, Cordoned, DevicesPending, and the health monitors'
	// GPUFallenOff, XIDError, SXIDError, GPUMemoryError, GPUThermal, GPUPCIeError,
	// NVLinkError, GPUHealthWarning, Quarantined, DriverUpgrading, DriverUpgradeFailed and
	// DeviceTainted (docs/api.md says what sets each).
	// +optional
	// +listType=atomic
	Conditions []string `json:"conditions,omitempty"`
	// Warnings name labels that could not be read or contradict each other.
	// +optional
	// +listType=atomic
	Warnings []string `json:"warnings,omitempty"`
}

// ResourceFree is what a pod could still get of one resource on a node, in its unit.
type ResourceFree struct {
	// Resource is the extended resource's name, e.g. nvidia.com/mig-1g.10gb.
	Resource string `json:"resource"`
	Free     int32  `json:"free"`
}

// GpuSharing describes GPU sharing on a node.
type GpuSharing struct {
	// Strategy is nvidia.com/gpu.sharing-strategy: time-slicing or mps.
	// +optional
	Strategy string `json:"strategy,omitempty"`
	// Replicas is nvidia.com/gpu.replicas: how many pods share one GPU.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
}

// MigInfo describes Multi-Instance GPU on a node.
type MigInfo struct {
	// Capable is nvidia.com/mig.capable.
	// +optional
	Capable bool `json:"capable,omitempty"`
	// Strategy is nvidia.com/mig.strategy: single or mixed (empty when MIG is off).
	// +optional
	Strategy string `json:"strategy,omitempty"`
	// Config is nvidia.com/mig.config, the requested MIG layout.
	// +optional
	Config string `json:"config,omitempty"`
	// ConfigState is nvidia.com/mig.config.state: pending, rebooting, success or failed.
	// +optional
	ConfigState string `json:"configState,omitempty"`
	// Devices lists, with the mixed strategy, the MIG devices per profile, sorted by profile.
	// +optional
	// +listType=atomic
	Devices []MigDevice `json:"devices,omitempty"`
}

// MigDevice is the number of MIG devices of one profile.
type MigDevice struct {
	// Profile is the MIG profile, e.g. 1g.5gb.
	Profile string `json:"profile"`
	// Count is the number of devices of this profile.
	Count int32 `json:"count"`
	// MemoryMiB is the memory of one device.
	// +optional
	MemoryMiB int64 `json:"memoryMiB,omitempty"`
}

// GpuModel summarises the nodes of one GPU model.
type GpuModel struct {
	// Product is the base model (MIG and -SHARED suffixes removed); empty for nodes whose
	// product is unknown.
	Product string `json:"product"`
	// Variants lists the product labels seen for this model besides the base one, such as
	// MIG-1g.5gb or SHARED.
	// +optional
	// +listType=atomic
	Variants   []string `json:"variants,omitempty"`
	Nodes      int32    `json:"nodes"`
	ReadyNodes int32    `json:"readyNodes"`
	Gpus       int32    `json:"gpus"`
	ReadyGpus  int32    `json:"readyGpus"`
	// +optional
	AllocatableGpus int32 `json:"allocatableGpus,omitempty"`
	// +optional
	UnhealthyGpus int32 `json:"unhealthyGpus,omitempty"`
	// MemoryMiB is the memory of one GPU (of one MIG slice for single-strategy MIG); the
	// largest seen when nodes disagree.
	// +optional
	MemoryMiB int64 `json:"memoryMiB,omitempty"`
	// AllocatedGpus, FreeGpus: as on the nodes, summed (present when pods are read).
	// +optional
	AllocatedGpus int32 `json:"allocatedGpus,omitempty"`
	// +optional
	FreeGpus int32 `json:"freeGpus,omitempty"`
	// UnschedulableFreeGpus sums the nodes' unschedulableFreeGpus.
	// +optional
	UnschedulableFreeGpus int32 `json:"unschedulableFreeGpus,omitempty"`
	// PendingGpus is what waiting pods that pin this model ask for.
	// +optional
	PendingGpus int32 `json:"pendingGpus,omitempty"`
	// Fit says where a job of this model fits now.
	// +optional
	Fit *GpuFit `json:"fit,omitempty"`
	// LargestFit is the most free GPUs on one node of the model (the largest of the nodes'
	// freeGpus): the largest job that fits on one node now.
	// +optional
	LargestFit int32 `json:"largestFit,omitempty"`
	// Pool counts the model's GPUs as KEP-5677's ResourcePoolStatus counts a pool's devices
	// (present when pods are read).
	// +optional
	Pool *GpuPool `json:"pool,omitempty"`
	// FreeNodes counts the model's nodes a pod can land on (Ready, not cordoned) by their
	// free whole GPUs: FreeNodes[k-1] those with exactly k free (as freeGpus counts), a node
	// with more than 32 free as 32; nodes with none are not counted. Whether N pods of G GPUs
	// fit on the model's nodes follows from it exactly (present when pods are read).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	FreeNodes []int32 `json:"freeNodes,omitempty"`
	// Taints are the NoSchedule and NoExecute taints of the model's nodes a pod can land on,
	// as key=value:Effect, each with how many of those nodes carry it: the most common first,
	// at most 8. A taint on every such node decides for a pod exactly; one on some does not.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Taints []TaintCount `json:"taints,omitempty"`
}

// TaintCount is a taint and how many nodes carry it.
type TaintCount struct {
	// +kubebuilder:validation:MaxLength=400
	Taint string `json:"taint"`
	Nodes int32  `json:"nodes"`
}

// GpuPool counts a model's GPUs the way KEP-5677's ResourcePoolStatus counts a DRA pool's
// devices: total = allocated + available + unavailable. A device here is a physical GPU.
type GpuPool struct {
	// TotalDevices is the model's GPUs.
	TotalDevices int32 `json:"totalDevices"`
	// AllocatedDevices is the GPUs of which pods hold any part (allocatedGpus).
	AllocatedDevices int32 `json:"allocatedDevices"`
	// AvailableDevices is totalDevices minus allocatedDevices and unavailableDevices: GPUs
	// not held and usable, whole or as parts (MIG devices, shared replicas).
	AvailableDevices int32 `json:"availableDevices"`
	// UnavailableDevices is the GPUs not held that no pod can get now: unhealthy ones
	// (withdrawn by the device plugin, DRA devices tainted NoSchedule or NoExecute, a health
	// monitor's fault) and every GPU not held on a NotReady or cordoned node.
	UnavailableDevices int32 `json:"unavailableDevices"`
	// Partitions is, per MIG profile, how many MIG devices a pod could get now on the
	// model's Ready, uncordoned nodes (device-plugin MIG devices and DRA partitions), sorted
	// by profile, at most 16.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Partitions []GpuPartition `json:"partitions,omitempty"`
}

// GpuPartition is how many MIG devices of one profile a pod could still get.
type GpuPartition struct {
	// Profile is the MIG profile, e.g. 1g.10gb.
	// +kubebuilder:validation:MaxLength=16
	Profile string `json:"profile"`
	// Free is the MIG devices of this profile a pod could still get: device-plugin units not
	// requested by bound pods, and DRA partitions the shared counters still allow.
	Free int32 `json:"free"`
}

// GpuFit counts the nodes of one model by free GPUs: where a job of 1, 2, 4 or 8 GPUs can
// start now.
type GpuFit struct {
	// +optional
	NodesWith1Free int32 `json:"nodesWith1Free,omitempty"`
	// +optional
	NodesWith2Free int32 `json:"nodesWith2Free,omitempty"`
	// +optional
	NodesWith4Free int32 `json:"nodesWith4Free,omitempty"`
	// +optional
	NodesWith8Free int32 `json:"nodesWith8Free,omitempty"`
	// Most lists the nodes with the most free GPUs (at most 3, most first).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=3
	Most []NodeFree `json:"most,omitempty"`
}

// NodeFree is a node and its free GPUs.
type NodeFree struct {
	Name     string `json:"name"`
	FreeGpus int32  `json:"freeGpus"`
}

// GpuAllocation is who holds the covered GPUs and who waits for GPUs.
type GpuAllocation struct {
	// AllocatedGpus sums the nodes' allocatedGpus.
	AllocatedGpus int32 `json:"allocatedGpus"`
	// AllocatedMilliGpus is what pods hold in thousandths of a GPU: a MIG device or a
	// shared replica counts as its part (docs/api.md says how parts count).
	// +optional
	AllocatedMilliGpus int64 `json:"allocatedMilliGpus,omitempty"`
	// FreeGpus sums the nodes' freeGpus.
	FreeGpus int32 `json:"freeGpus"`
	// GpuPods counts the pods holding GPUs on covered nodes.
	GpuPods int32 `json:"gpuPods"`
	// PendingPods and PendingGpus count pods (and DRA claims) waiting to be scheduled that
	// ask for GPUs, and what they ask for: those the scheduler will try to place (not gated,
	// not being deleted).
	PendingPods int32 `json:"pendingPods"`
	PendingGpus int32 `json:"pendingGpus"`
	// QueuedPods and QueuedGpus count the pods that ask for GPUs behind scheduling gates
	// (spec.schedulingGates, e.g. Kueue's admission): the scheduler does not try them yet.
	// +optional
	QueuedPods int32 `json:"queuedPods,omitempty"`
	// +optional
	QueuedGpus int32 `json:"queuedGpus,omitempty"`
	// Pending is the waiting demand per requested model ("" for pods that take any model):
	// at most 32, the rest under "<other models>".
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Pending []GpuDemand `json:"pending,omitempty"`
	// Namespaces is the usage of the namespaces holding the most GPUs: at most 10, the
	// rest under "<other namespaces>".
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=11
	Namespaces []NamespaceUsage `json:"namespaces,omitempty"`
}

// GpuDemand is what waiting pods ask of one model.
type GpuDemand struct {
	// Model is the base model the pods pin; empty for any model.
	Model string `json:"model"`
	Pods  int32  `json:"pods"`
	Gpus  int32  `json:"gpus"`
	// Since is when the oldest of these pods was created.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
}

// NamespaceUsage is what one namespace's pods hold.
type NamespaceUsage struct {
	Namespace string `json:"namespace"`
	Pods      int32  `json:"pods"`
	// Gpus counts GPUs held, a partly held GPU as one.
	Gpus int32 `json:"gpus"`
	// MilliGpus is the exact share in thousandths of a GPU.
	// +optional
	MilliGpus int64 `json:"milliGpus,omitempty"`
}

// GpuQuota is what quota promises of the GPUs (Kueue's ClusterQueues and Cohorts, and
// ResourceQuotas), beside the hardware that quota can reach. Every figure is in the unit of
// its resource: GPUs for nvidia.com/gpu, MIG devices for a MIG resource, replicas for a
// shared resource, devices for a DRA device class.
type GpuQuota struct {
	// Kueue is the kueue.x-k8s.io version read ("v1beta2", "v1beta1"); empty when the API
	// server serves no Kueue.
	// +optional
	Kueue string `json:"kueue,omitempty"`
	// ClusterQueues counts the ClusterQueues with quota for a GPU resource.
	// +optional
	ClusterQueues int32 `json:"clusterQueues,omitempty"`
	// Cohorts counts the cohorts (trees of Cohorts and ClusterQueues sharing quota; a
	// ClusterQueue in none is its own) with quota for a GPU resource.
	// +optional
	Cohorts int32 `json:"cohorts,omitempty"`
	// Namespaces counts the namespaces whose ResourceQuotas limit a GPU resource.
	// +optional
	Namespaces int32 `json:"namespaces,omitempty"`
	// StrandedNodes counts the Ready GPU nodes that no ResourceFlavor of any ClusterQueue
	// selects (only while some ClusterQueue has GPU quota).
	// +optional
	StrandedNodes int32 `json:"strandedNodes,omitempty"`
	// Models is quota against hardware per model and resource, for the whole cluster: exact.
	// Kueue's rows first, then the ResourceQuotas' (see source); the largest quota first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Models []QuotaModel `json:"models,omitempty"`
	// CohortModels is the same per cohort, model and resource: the largest quotas first, at
	// most 32.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	CohortModels []QuotaCohort `json:"cohortModels,omitempty"`
	// Queues is per ClusterQueue, model and resource: the largest quotas first, at most 32.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Queues []QuotaQueue `json:"queues,omitempty"`
	// NamespaceQuotas is the ResourceQuotas' GPU limits per namespace and resource: the
	// largest first, at most 32.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	NamespaceQuotas []QuotaNamespace `json:"namespaceQuotas,omitempty"`
}

// QuotaFigures are one resource's quota and the hardware it can reach.
type QuotaFigures struct {
	// Resource is the resource quota is given in (nvidia.com/gpu, nvidia.com/mig-1g.10gb,
	// a DRA device class's resource).
	Resource string `json:"resource"`
	// Capacity, Ready and Free are the units of Resource on the nodes the quota's flavors
	// select: all of them, those on nodes that can take pods, and those the scheduler could
	// grant now.
	Capacity int64 `json:"capacity"`
	Ready    int64 `json:"ready"`
	Free     int64 `json:"free"`
	// Nominal is the nominal quota; Borrowable what can be borrowed on top of it from the
	// cohort (bounded by borrowingLimit; absent when nothing can be).
	Nominal int64 `json:"nominal"`
	// +optional
	Borrowable int64 `json:"borrowable,omitempty"`
	// Reserved and Used are Kueue's own status.flavorsReservation and status.flavorsUsage
	// (for a ResourceQuota, used).
	Reserved int64 `json:"reserved"`
	Used     int64 `json:"used"`
	// PendingWorkloads counts the workloads Kueue holds waiting for this quota.
	// +optional
	PendingWorkloads int32 `json:"pendingWorkloads,omitempty"`
	// AdmittedWorkloads counts the workloads Kueue admitted.
	// +optional
	AdmittedWorkloads int32 `json:"admittedWorkloads,omitempty"`
	// Finding is Overcommitted (quota larger than the Ready hardware it reaches), Stranded
	// (quota no node can serve, or Ready hardware no quota covers) or empty.
	// +optional
	Finding string `json:"finding,omitempty"`
}

// Values of QuotaFigures.Finding and QuotaModel.Source.
const (
	QuotaFindingOvercommitted = "Overcommitted"
	QuotaFindingStranded      = "Stranded"
	QuotaSourceKueue          = "Kueue"
	QuotaSourceResourceQuota  = "ResourceQuota"
)

// QuotaModel is quota against hardware for one model (the products of the nodes the
// flavors select, joined with "+" when a flavor selects several; empty when they select no
// GPU node).
type QuotaModel struct {
	Model string `json:"model"`
	// Source is Kueue (ClusterQueues' and Cohorts' quota against the nodes their flavors
	// select, and the nodes of this model no flavor selects) or ResourceQuota (the
	// namespaces' hard limits summed, against every node with the resource).
	// +kubebuilder:validation:Enum=Kueue;ResourceQuota
	Source       string `json:"source"`
	QuotaFigures `json:",inline"`
	// StrandedReady is the Ready hardware of this model and resource that no flavor of a
	// ClusterQueue with GPU quota selects (counted in Capacity, Ready and Free too).
	// +optional
	StrandedReady int64 `json:"strandedReady,omitempty"`
}

// QuotaCohort is one cohort's quota for one model and resource.
type QuotaCohort struct {
	// Cohort is the root of the cohort tree, or the ClusterQueue's name when it is in none.
	Cohort string `json:"cohort"`
	Model  string `json:"model"`
	// Queues names the cohort's ClusterQueues with this quota (at most 8).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Queues       []string `json:"queues,omitempty"`
	QuotaFigures `json:",inline"`
}

// QuotaQueue is one ClusterQueue's quota for one model and resource.
type QuotaQueue struct {
	Name string `json:"name"`
	// Cohort is the root of the queue's cohort tree; empty when it is in none.
	// +optional
	Cohort string `json:"cohort,omitempty"`
	Model  string `json:"model"`
	// Flavors names the ResourceFlavors this quota is given in (at most 8).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Flavors      []string `json:"flavors,omitempty"`
	QuotaFigures `json:",inline"`
}

// QuotaNamespace is one namespace's ResourceQuota limit of one GPU resource.
type QuotaNamespace struct {
	Namespace string `json:"namespace"`
	Resource  string `json:"resource"`
	Hard      int64  `json:"hard"`
	Used      int64  `json:"used"`
}

// GpuUsage is what the pods that hold GPUs use of them, over a window. Hours are rounded
// down to whole hours, so that the status changes when a figure does, not every minute.
type GpuUsage struct {
	// Window is the span the hours are counted over (--idle-window), e.g. 24h0m0s.
	// +kubebuilder:validation:MaxLength=32
	Window string `json:"window"`
	// IdleAfter is how long a holder must be idle to count in idleGpus (--idle-after).
	// +kubebuilder:validation:MaxLength=32
	IdleAfter string `json:"idleAfter"`
	// Metric is the DCGM exporter series read: DCGM_FI_PROF_GR_ENGINE_ACTIVE where every
	// GPU has it, else DCGM_FI_DEV_GPU_UTIL (each GPU is read by the first it has).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Metric string `json:"metric,omitempty"`
	// HeldGpus counts the GPUs (a MIG device counts as one) pods hold now that DCGM exporter
	// reports on.
	HeldGpus int32 `json:"heldGpus"`
	// IdleGpus counts those of them held by pods idle for longer than idleAfter.
	IdleGpus int32 `json:"idleGpus"`
	// Namespaces is per namespace and model: the most idle GPU-hours first, at most 32.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Namespaces []UsageNamespace `json:"namespaces,omitempty"`
	// IdleHolders are the pods idle now: the longest idle first, at most 20.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	IdleHolders []IdleHolder `json:"idleHolders,omitempty"`
}

// UsageNamespace is what one namespace's pods hold of one model and use, over the window.
type UsageNamespace struct {
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// Model is the product as GPU Feature Discovery writes it (NVIDIA-H100-80GB-HBM3).
	// +kubebuilder:validation:MaxLength=128
	Model string `json:"model"`
	// HeldGpus counts the GPUs (MIG devices) the namespace's pods hold now.
	HeldGpus int32 `json:"heldGpus"`
	// HeldGpuHours and IdleGpuHours are GPU-hours held, and held below --idle-below
	// utilisation, over the window by the pods holding now; rounded down.
	HeldGpuHours int64 `json:"heldGpuHours"`
	IdleGpuHours int64 `json:"idleGpuHours"`
}

// IdleHolder is a pod that holds GPUs and has not used them since IdleSince.
type IdleHolder struct {
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MaxLength=253
	Pod string `json:"pod"`
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`
	// +kubebuilder:validation:MaxLength=128
	Model string `json:"model"`
	// Gpus counts the GPUs (MIG devices) the pod holds there.
	Gpus int32 `json:"gpus"`
	// IdleSince is when its GPUs were last busy (or when DCGM exporter first reported them
	// held, within the window).
	IdleSince metav1.Time `json:"idleSince"`
}

// GpuClique counts the nodes of one multi-node NVLink domain.
type GpuClique struct {
	// Name is the clique label's value (<cluster UUID>.<clique ID>).
	Name      string `json:"name"`
	Nodes     int32  `json:"nodes"`
	Gpus      int32  `json:"gpus"`
	ReadyGpus int32  `json:"readyGpus"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// GpuInventoryList is a list of GpuInventory objects.
type GpuInventoryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []GpuInventory `json:"items"`
}
