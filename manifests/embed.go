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

// Package manifests embeds the deployable manifests that the binaries need at run time, so
// that the CRD the operator installs is byte for byte the one in manifests/crd.
package manifests

import _ "embed"

// GpuInventoryCRD is manifests/crd/homelab.youngju.dev_gpuinventories.yaml, generated from the
// Go types by controller-gen.
//
//go:embed crd/homelab.youngju.dev_gpuinventories.yaml
var GpuInventoryCRD []byte

// GpuNodeCRD is manifests/crd/homelab.youngju.dev_gpunodes.yaml, generated as GpuInventoryCRD.
//
//go:embed crd/homelab.youngju.dev_gpunodes.yaml
var GpuNodeCRD []byte

// GpuFleetCRD is manifests/crd/homelab.youngju.dev_gpufleets.yaml, generated as GpuInventoryCRD:
// the fleet hub installs it.
//
//go:embed crd/homelab.youngju.dev_gpufleets.yaml
var GpuFleetCRD []byte
