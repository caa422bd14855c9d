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
