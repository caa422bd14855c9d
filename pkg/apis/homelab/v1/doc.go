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

// Package v1 is the v1 version of the homelab.youngju.dev API: the GpuInventory kind, a
// cluster-scoped summary of the GPU nodes that a node selector covers.
//
// +k8s:deepcopy-gen=package
// +k8s:openapi-gen=true
// +groupName=homelab.youngju.dev
// +kubebuilder:object:generate=false
package v1
