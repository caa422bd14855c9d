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

// TopologySpec says how an inventory groups its GPU nodes into topology domains for
// status.topology: by which node labels, counting gangs of which sizes, and which level a
// gang must fit inside.
type TopologySpec struct {
	// Levels are node label keys, broadest first, that name topology domains (a zone, a
	// network block, a rack, an NVLink clique). Unset: one topology per Kueue Topology where
	// Kueue serves them, else the well-known keys some node carries (docs/api.md#topology).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=317
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, y == x))",message="levels must not name a label key twice"
	Levels []string `json:"levels,omitempty"`
	// GangSizes are the gang sizes, in GPUs, whose slots are counted per domain: gangs of
	// pods of one node's worth of GPUs each. Unset: 8, 16, 32, 64, 128.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=65536
	GangSizes []int32 `json:"gangSizes,omitempty"`
	// RequiredLevel is the level a gang must fit inside one domain of: TopologyFragmented is
	// True when a model has at least spec.fragmentationGpus free GPUs but no domain of this
	// level can take a gang of that many. Unset: the narrowest level of each topology.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	RequiredLevel string `json:"requiredLevel,omitempty"`
}

// GpuTopology is how the GPU nodes group into topology domains, and how many gangs fit in
// each now.
type GpuTopology struct {
	// Topologies are the hierarchies the nodes are grouped by: one per Kueue Topology, or one
	// of spec.topology.levels or the well-known labels; at most 8.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Topologies []TopologyTree `json:"topologies,omitempty"`
}

// TopologyTree is one hierarchy of domains.
type TopologyTree struct {
	// Name is the Kueue Topology's name, or "labels" for spec.topology.levels or the
	// well-known labels.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Levels are the hierarchy's levels, broadest first, with their domain counts.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Levels []TopologyLevel `json:"levels"`
	// RequiredLevel is the level TopologyFragmented is judged at.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	RequiredLevel string `json:"requiredLevel,omitempty"`
	// GangSizes are the gang sizes whose slots the domains count, in GPUs.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	GangSizes []int32 `json:"gangSizes"`
	// OutsideNodes counts the GPU nodes that lack the top level's label, so belong to no
	// domain.
	// +optional
	OutsideNodes int32 `json:"outsideNodes,omitempty"`
	// Largest is, per model and level, the largest gang that fits in one domain now.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	Largest []TopologyLargest `json:"largest,omitempty"`
	// Domains lists domains of every level: those with unschedulable nodes first, then the
	// most free GPUs; at most 64 (the levels' domain counts are exact).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Domains []TopologyDomain `json:"domains,omitempty"`
	// Problems say what the nodes' labels get wrong for this hierarchy (a level no node
	// carries, levels that do not nest, a label with a distinct value on every node); at
	// most 8.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=1024
	Problems []string `json:"problems,omitempty"`
}

// TopologyLevel is one level of a hierarchy.
type TopologyLevel struct {
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`
	// Domains counts the level's domains.
	Domains int32 `json:"domains"`
}

// TopologyLargest is the largest gang of one model that fits in one domain of a level now.
type TopologyLargest struct {
	// +kubebuilder:validation:MaxLength=128
	Model string `json:"model"`
	// +kubebuilder:validation:MaxLength=317
	Level string `json:"level"`
	// Gpus is the gang's size: pods of one node's worth of GPUs on free nodes, and one more
	// pod of what the next node has free.
	Gpus int32 `json:"gpus"`
	// Domain is the domain it fits in ("" when none can take a GPU).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Domain string `json:"domain,omitempty"`
}

// TopologyDomain is one domain and what its GPU nodes hold.
type TopologyDomain struct {
	// +kubebuilder:validation:MaxLength=317
	Level string `json:"level"`
	// Name is the level label's value.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Parent is the domain above it ("" on the top level).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Parent string `json:"parent,omitempty"`
	Nodes  int32  `json:"nodes"`
	// UnschedulableNodes counts the nodes no new pod can land on (NotReady, cordoned).
	// +optional
	UnschedulableNodes int32 `json:"unschedulableNodes,omitempty"`
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Models []TopologyModel `json:"models"`
}

// TopologyModel is what one GPU model's nodes in a domain hold.
type TopologyModel struct {
	// +kubebuilder:validation:MaxLength=128
	Model    string `json:"model"`
	Nodes    int32  `json:"nodes"`
	Gpus     int32  `json:"gpus"`
	FreeGpus int32  `json:"freeGpus"`
	// UnschedulableFreeGpus are free on nodes no new pod can land on.
	// +optional
	UnschedulableFreeGpus int32 `json:"unschedulableFreeGpus,omitempty"`
	// GangSlots is, per gang size (in the topology's order), how many such gangs fit here
	// at once now.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	GangSlots []int32 `json:"gangSlots"`
	// LargestGang is the largest gang, in GPUs, that fits here now.
	LargestGang int32 `json:"largestGang"`
	// FreeNodes counts the domain's schedulable nodes of the model by their free whole GPUs,
	// as the model's freeNodes in status.models; a node with more than 16 free as 16.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	FreeNodes []int32 `json:"freeNodes,omitempty"`
}
