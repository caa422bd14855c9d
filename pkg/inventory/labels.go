// Package inventory turns Nodes into a GPU inventory: which nodes are GPU nodes, what each
// carries, the totals, a deterministic hash and the conditions. It is pure: no API calls, no
// clocks, no goroutines, so everything here is tested with plain values.
package inventory

import (
	corev1 "k8s.io/api/core/v1"
)

// Labels written by NVIDIA GPU Feature Discovery and the GPU Operator, and by Node Feature
// Discovery for NVIDIA's PCI vendor ID (10de).
const (
	LabelGPUPresent     = "nvidia.com/gpu.present"
	LabelGPUPrefix      = "nvidia.com/gpu."
	LabelProduct        = "nvidia.com/gpu.product"
	LabelCount          = "nvidia.com/gpu.count"
	LabelMemory         = "nvidia.com/gpu.memory"
	LabelWorkloadConfig = "nvidia.com/gpu.workload.config"

	// ResourceGPU is the extended resource the NVIDIA device plugin advertises.
	ResourceGPU corev1.ResourceName = "nvidia.com/gpu"
)

// nfdNVIDIAPCILabels mark a node on which Node Feature Discovery found an NVIDIA PCI device
// (any class, display controller, 3D controller).
var nfdNVIDIAPCILabels = []string{
	"feature.node.kubernetes.io/pci-10de.present",
	"feature.node.kubernetes.io/pci-0300_10de.present",
	"feature.node.kubernetes.io/pci-0302_10de.present",
}
