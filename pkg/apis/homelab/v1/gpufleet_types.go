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

// Names, states, reasons and conditions of a GpuFleet (docs/design/hub.md).
const (
	GpuFleetCRDName = "gpufleets." + GroupName
	// FleetFieldManager is the field manager of the hub's writes.
	FleetFieldManager = "gpu-fleet-hub"
	// MultiKueueDispatcherName is the value of Kueue's multiKueue.dispatcherName that leaves
	// the choice of worker clusters to the hub's GPU-aware dispatcher.
	MultiKueueDispatcherName = GroupName + "/gpu-fit"
	// DefaultKueueNamespace is where Kueue runs unless spec.multiKueue.namespace says otherwise.
	DefaultKueueNamespace = "kueue-system"

	// ConditionMembersUnreachable is True when a member cannot be reached or read now; the
	// message names them with their reasons.
	ConditionMembersUnreachable = "MembersUnreachable"
	// ConditionMembersStale is True when a member has been unreachable for longer than
	// spec.staleAfter: its last-known figures are out of the fleet's totals.
	ConditionMembersStale = "MembersStale"
	// ConditionDuplicateMembers is True when two sources name the same cluster: one member
	// counts, the others are listed as Duplicate.
	ConditionDuplicateMembers = "DuplicateMembers"

	// Member states.
	MemberConnecting  = "Connecting"
	MemberReachable   = "Reachable"
	MemberUnreachable = "Unreachable"
	MemberStale       = "Stale"
	MemberDuplicate   = "Duplicate"

	// Why a member is not reachable (FleetMember.Reason).
	ReasonNoUsableAccessProvider  = "NoUsableAccessProvider"
	ReasonBadAccessProvider       = "BadAccessProvider"
	ReasonClusterProfileNotFound  = "ClusterProfileNotFound"
	ReasonKubeconfigSecretMissing = "KubeconfigSecretMissing"
	ReasonKubeconfigNotReadable   = "KubeconfigNotReadable"
	ReasonMalformedKubeconfig     = "MalformedKubeconfig"
	ReasonInsecureKubeconfig      = "InsecureKubeconfig"
	ReasonUnauthorized            = "Unauthorized"
	ReasonForbidden               = "Forbidden"
	ReasonInventoryNotFound       = "InventoryNotFound"
	ReasonAnswerTooLarge          = "AnswerTooLarge"
	ReasonConnectionFailed        = "ConnectionFailed"
	ReasonSameCluster             = "SameClusterAsAnotherMember"
	ReasonMembersReachable        = "AllMembersReachable"
	ReasonMembersFresh            = "NoMemberStale"
	ReasonNoDuplicates            = "NoDuplicateMembers"
	ReasonMembersOmitted          = "MembersOmitted"
	ReasonAllMembersListed        = "AllMembersListed"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=gpufleet,singular=gpufleet
// +kubebuilder:metadata:annotations="homelab.youngju.dev/schema-revision=1"
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="MEMBERS",type=integer,JSONPath=`.status.totalMembers`
// +kubebuilder:printcolumn:name="REACHABLE",type=integer,JSONPath=`.status.reachableMembers`
// +kubebuilder:printcolumn:name="GPUS",type=integer,JSONPath=`.status.totalGpus`
// +kubebuilder:printcolumn:name="READY-GPUS",type=integer,JSONPath=`.status.readyGpus`
// +kubebuilder:printcolumn:name="FREE-GPUS",type=integer,JSONPath=`.status.freeGpus`
// +kubebuilder:printcolumn:name="UNREACHABLE",type=string,JSONPath=`.status.conditions[?(@.type=="MembersUnreachable")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// GpuFleet is the GPUs of many clusters, kept by the fleet hub: which member clusters it
// reads (from ClusterProfiles and MultiKueueClusters on the hub), whether each can be
// reached, and what each one's GpuInventory says, with totals per model across them.
type GpuFleet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec GpuFleetSpec `json:"spec"`
	// +optional
	Status GpuFleetStatus `json:"status,omitempty"`
}

// GpuFleetSpec says which clusters are members and what is read on each.
// +kubebuilder:validation:XValidation:rule="has(self.clusterProfiles) || has(self.multiKueue)",message="name a source of members: clusterProfiles, multiKueue or both"
type GpuFleetSpec struct {
	// Note is free text for the humans who read the fleet, at most 4096 characters.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Note string `json:"note,omitempty"`
	// ClusterProfiles selects members among the hub's ClusterProfiles
	// (multicluster.x-k8s.io/v1alpha1), each reached through its access providers.
	// +optional
	ClusterProfiles *FleetClusterProfiles `json:"clusterProfiles,omitempty"`
	// MultiKueue makes every MultiKueueCluster on the hub a member, reached as MultiKueue
	// reaches it: its kubeconfig Secret, or the ClusterProfile it names.
	// +optional
	MultiKueue *FleetMultiKueue `json:"multiKueue,omitempty"`
	// InventoryName is the GpuInventory read on every member. Unset: "cluster".
	// +optional
	// +kubebuilder:validation:MaxLength=253
	InventoryName string `json:"inventoryName,omitempty"`
	// StaleAfter is how long a member may stay unreachable before its last-known figures
	// leave the fleet's totals (it is then Stale). Unset: 5m. At least 30s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s')",message="staleAfter must be at least 30s"
	StaleAfter *metav1.Duration `json:"staleAfter,omitempty"`
}

// InventoryNameOrDefault is spec.inventoryName, or DefaultInventoryName when unset.
func (s *GpuFleetSpec) InventoryNameOrDefault() string {
	if s.InventoryName == "" {
		return DefaultInventoryName
	}
	return s.InventoryName
}

// FleetClusterProfiles selects ClusterProfiles.
type FleetClusterProfiles struct {
	// Namespace is where the ClusterProfiles are read; unset: every namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// Selector selects ClusterProfiles by their labels; unset: all of them.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// FleetMultiKueue says where Kueue keeps what its MultiKueueClusters name.
type FleetMultiKueue struct {
	// Namespace is Kueue's namespace on the hub, where MultiKueue reads the kubeconfig
	// Secrets and the ClusterProfiles its MultiKueueClusters name. Unset: kueue-system.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// GpuFleetStatus is what the hub last found on the members.
type GpuFleetStatus struct {
	// ObservedGeneration is the spec generation this status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// FleetHash identifies the content: equal content gives an equal hash.
	// +optional
	FleetHash string `json:"fleetHash,omitempty"`

	// TotalMembers counts the members, duplicates included.
	// +optional
	TotalMembers int32 `json:"totalMembers"`
	// ReachableMembers counts the members whose GpuInventory the hub is watching now.
	// +optional
	ReachableMembers int32 `json:"reachableMembers"`
	// UnreachableMembers counts those it cannot reach or read now, stale ones included.
	// +optional
	UnreachableMembers int32 `json:"unreachableMembers,omitempty"`
	// StaleMembers counts those unreachable for longer than spec.staleAfter.
	// +optional
	StaleMembers int32 `json:"staleMembers,omitempty"`

	// TotalGpus, ReadyGpus and FreeGpus sum the members' inventories: the reachable ones
	// and, from their last-known figures, the unreachable ones not yet stale.
	// +optional
	TotalGpus int32 `json:"totalGpus"`
	// +optional
	ReadyGpus int32 `json:"readyGpus"`
	// +optional
	FreeGpus int32 `json:"freeGpus"`

	// Models is per GPU model across the members counted in the totals: exact, at most 64
	// (the smallest counted together under "<other models>").
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Models []FleetModel `json:"models,omitempty"`

	// ListedMembers counts the entries of Members; less than TotalMembers when the list was
	// cut to keep the object small (problem members are listed first).
	// +optional
	ListedMembers int32 `json:"listedMembers,omitempty"`
	// Members is one row per member: problem members first, then by name; at most 100.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Members []FleetMember `json:"members,omitempty"`

	// Conditions: MembersUnreachable, MembersStale, DuplicateMembers and Truncated.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// FleetModel is one GPU model across the members.
type FleetModel struct {
	// +kubebuilder:validation:MaxLength=128
	Model string `json:"model"`
	// Members counts the members with GPUs of this model.
	Members   int32 `json:"members"`
	Gpus      int32 `json:"gpus"`
	ReadyGpus int32 `json:"readyGpus"`
	FreeGpus  int32 `json:"freeGpus"`
	// LargestFit is the most free GPUs of this model on one node of any member, and
	// LargestFitMember the member.
	// +optional
	LargestFit int32 `json:"largestFit,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=317
	LargestFitMember string `json:"largestFitMember,omitempty"`
}

// FleetMember is one member cluster: how it is reached, whether it is, and what its
// GpuInventory says.
type FleetMember struct {
	// Name is the ClusterProfile's namespace/name for a member found through one, else
	// the MultiKueueCluster's name.
	// +kubebuilder:validation:MaxLength=317
	Name string `json:"name"`
	// ClusterProfile is the namespace/name of the ClusterProfile that names this cluster.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	ClusterProfile string `json:"clusterProfile,omitempty"`
	// MultiKueueCluster is the name of the MultiKueueCluster that names this cluster: the
	// name MultiKueue and the dispatcher know it by.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	MultiKueueCluster string `json:"multiKueueCluster,omitempty"`
	// Server is the member's API server URL.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Server string `json:"server,omitempty"`
	// State is Connecting, Reachable, Unreachable, Stale or Duplicate.
	// +kubebuilder:validation:Enum=Connecting;Reachable;Unreachable;Stale;Duplicate
	State string `json:"state"`
	// Reason says in one word why a member is not Reachable.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`
	// Message says it for a human: what failed and what to do.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// Since is when the member entered its state.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// The member inventory's totals (last-known while Unreachable or Stale).
	// +optional
	GpuNodes int32 `json:"gpuNodes,omitempty"`
	// +optional
	ReadyGpuNodes int32 `json:"readyGpuNodes,omitempty"`
	// +optional
	Gpus int32 `json:"gpus,omitempty"`
	// +optional
	ReadyGpus int32 `json:"readyGpus,omitempty"`
	// +optional
	FreeGpus int32 `json:"freeGpus,omitempty"`
	// Models is per model: the most GPUs first, at most 8 (the rest under "<other models>").
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Models []FleetMemberModel `json:"models,omitempty"`
	// Gangs is, per model and topology level, the largest gang one domain takes now and how
	// many gangs of each size fit at once: at most 8, the largest gangs first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Gangs []FleetMemberGang `json:"gangs,omitempty"`
	// Quota is what the member's status.quota finds.
	// +optional
	Quota *FleetMemberQuota `json:"quota,omitempty"`
	// Problems are the types of the member inventory's conditions that are True (Degraded,
	// Fragmented, QuotaOvercommitted, ...): at most 12.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=12
	// +kubebuilder:validation:items:MaxLength=64
	Problems []string `json:"problems,omitempty"`
}

// FleetMemberModel is one model on one member.
type FleetMemberModel struct {
	// +kubebuilder:validation:MaxLength=128
	Model     string `json:"model"`
	Gpus      int32  `json:"gpus"`
	ReadyGpus int32  `json:"readyGpus"`
	FreeGpus  int32  `json:"freeGpus"`
	// LargestFit is the most free GPUs on one node of the model.
	// +optional
	LargestFit int32 `json:"largestFit,omitempty"`
	// PendingGpus is what the member's waiting pods that pin this model ask for.
	// +optional
	PendingGpus int32 `json:"pendingGpus,omitempty"`
}

// FleetMemberGang is the gangs one model's nodes take in the domains of one topology level.
type FleetMemberGang struct {
	// +kubebuilder:validation:MaxLength=128
	Model string `json:"model"`
	// Topology is the member's topology (a Kueue Topology's name, or "labels").
	// +kubebuilder:validation:MaxLength=253
	Topology string `json:"topology"`
	// +kubebuilder:validation:MaxLength=317
	Level string `json:"level"`
	// LargestGang is the largest gang, in GPUs, one domain of the level takes now, and
	// Domain which.
	LargestGang int32 `json:"largestGang"`
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Domain string `json:"domain,omitempty"`
	// Slots is, per gang size, how many such gangs fit at once, each inside one domain.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Slots []GangSlots `json:"slots,omitempty"`
	// Partial is true when the member's inventory lists only some of the level's domains:
	// Slots then count those listed (a lower bound).
	// +optional
	Partial bool `json:"partial,omitempty"`
}

// GangSlots is how many gangs of one size fit at once.
type GangSlots struct {
	Gpus  int32 `json:"gpus"`
	Gangs int32 `json:"gangs"`
}

// FleetMemberQuota is what a member's quota section finds.
type FleetMemberQuota struct {
	// +optional
	ClusterQueues int32 `json:"clusterQueues,omitempty"`
	// +optional
	Cohorts int32 `json:"cohorts,omitempty"`
	// StrandedNodes counts the Ready GPU nodes no ResourceFlavor selects.
	// +optional
	StrandedNodes int32 `json:"strandedNodes,omitempty"`
	// Findings are the member's overcommitted and stranded quota per model and resource:
	// at most 4, the largest quota first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	Findings []FleetQuotaFinding `json:"findings,omitempty"`
}

// FleetQuotaFinding is one model's quota against its hardware on a member.
type FleetQuotaFinding struct {
	// +kubebuilder:validation:MaxLength=128
	Model string `json:"model"`
	// +kubebuilder:validation:MaxLength=317
	Resource string `json:"resource"`
	// +kubebuilder:validation:Enum=Overcommitted;Stranded
	Finding string `json:"finding"`
	Nominal int64  `json:"nominal"`
	Ready   int64  `json:"ready"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// GpuFleetList is a list of GpuFleet objects.
type GpuFleetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []GpuFleet `json:"items"`
}
