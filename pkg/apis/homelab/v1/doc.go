// Package v1 is the v1 version of the homelab.youngju.dev API: the GpuInventory kind, a
// cluster-scoped summary of the GPU nodes that a node selector covers.
//
// +k8s:deepcopy-gen=package
// +k8s:openapi-gen=true
// +groupName=homelab.youngju.dev
// +kubebuilder:object:generate=false
package v1
